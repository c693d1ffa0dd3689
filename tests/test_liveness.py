"""Liveness under fairness: declarations are validated, fair cycles are lassos, bounds excuse.

Every check here is shown failing: an unfair cycle gives a lasso; the same cycle
excluded by a fairness constraint passes; a state stuck only because a model bound
stops it is reported apart, never as a violation; and each liveness mutant of a
declared machine is found as a lasso while every safety check (invariants, step
properties, deadlocks, traps) passes it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from settled.conformance._explore import explore, replay
from settled.conformance._itf import read_itf
from settled.conformance._liveness import (
    AT_BOUND,
    HOLDS,
    NOT_CHECKED,
    VIOLATED,
    LivenessResult,
    check_machine,
    check_protocol,
)
from settled.model import (
    APPROVAL,
    LEDGER,
    QUERY,
    DeclarationError,
    Effect,
    Guard,
    Protocol,
    State,
    Transition,
    Variable,
)
from settled.model._expr import V, minimum
from settled.model._liveness import (
    FINITE,
    NEVER,
    STRONG,
    WEAK,
    Cmp,
    Fairness,
    Pred,
    Progress,
    Steps,
    declare,
)
from settled.model.progress import (
    approval_liveness,
    ledger_liveness,
    liveness_of,
    query_liveness,
)


# --------------------------------------------------------------------------
# A hand-made machine: start -> waiting (a worker polls in a loop) -> done
# --------------------------------------------------------------------------
def waiter(*extra: Transition, count_bound: bool = False) -> Protocol:
    more = Guard("tries_left", V.tries < 2, bound=True)
    return Protocol(
        name="waiter", meaning="a hand-made machine",
        states=(State("start", "begins"), State("waiting", "waits for an answer"),
                State("done", "answered", terminal=True)),
        initial="start",
        variables=(Variable("tries", (0, 1, 2), 0, "answers asked for"),),
        transitions=(
            Transition("begin", ("start",), "waiting", "starts waiting", ("Q12",)),
            Transition("poll", ("waiting",), None, "asks again, no answer", ("Q15",),
                       actor="worker"),
            Transition("answer", ("waiting",), "done", "the answer arrives", ("Q15",),
                       actor="worker", guards=(more,) if count_bound else ()),
            *extra))


def waiter_liveness(p: Protocol, *fair: Fairness) -> object:
    return declare(p, fair, (Progress("answered", Pred(("waiting",)), Pred(("done",)),
                                      "a waiting run is answered", ("Q15",)),))


WORKER = Fairness("worker", WEAK, Steps(actors=("worker",)), "the worker acts", ("Q11",))
ANSWER = Fairness("answer", STRONG, Steps(triggers=("answer",)), "answers come", ("Q15",))


def verdict(result: LivenessResult, name: str = "answered") -> str:
    return next(v.verdict for v in result.verdicts if v.prop.name == name)


def test_an_unfair_polling_cycle_is_a_lasso() -> None:
    p = waiter()
    result = check_protocol(p, waiter_liveness(p, WORKER))  # type: ignore[arg-type]
    v = result.verdicts[0]
    assert v.verdict == VIOLATED and not result.ok
    assert v.lasso is not None
    assert v.lasso.steps_text() == ("1. q0 begin\nthen forever (steps 2-2 return to the state "
                                    "after step 1):\n2. q0 poll")


def test_the_same_cycle_excluded_by_strong_fairness_passes() -> None:
    p = waiter()
    result = check_protocol(p, waiter_liveness(p, WORKER, ANSWER))  # type: ignore[arg-type]
    assert verdict(result) == HOLDS and result.ok


def test_without_any_fairness_the_run_may_stop_waiting() -> None:
    p = waiter()
    result = check_protocol(p, waiter_liveness(p))  # type: ignore[arg-type]
    lasso = result.verdicts[0].lasso
    assert lasso is not None and lasso.cycle == () and "nothing happens" in lasso.steps_text()


def test_a_state_stuck_only_at_a_model_bound_is_not_a_violation() -> None:
    # answer needs tries < 2 (a bound); each poll counts a try, so after two polls only the
    # bound keeps the fair answer from being taken.
    p = waiter(count_bound=True)
    counting = dataclasses.replace(p, transitions=tuple(
        dataclasses.replace(t, effect=Effect({"tries": minimum(V.tries + 1, 2)}))
        if t.trigger == "poll" else t for t in p.transitions))
    result = check_protocol(counting, waiter_liveness(counting, WORKER, ANSWER))  # type: ignore[arg-type]
    v = result.verdicts[0]
    assert v.verdict == AT_BOUND and result.ok
    assert v.bounds == ("tries_left",) and v.lasso is None and v.at_bound is not None
    assert "stuck at a model bound (tries_left)" in result.text()


def test_a_finite_group_never_closes_a_cycle() -> None:
    p = waiter(Transition("restart", ("waiting",), "start", "restarts", ("L2",),
                          actor="environment"))
    restart = Fairness("restarts", FINITE, Steps(triggers=("restart",)), "stop", ("L2",))
    never = Fairness("restarts", NEVER, Steps(triggers=("restart",)), "may", ("L2",))
    # Weakly fair answers: a poll loop is unfair (the answer stays enabled), but a restart
    # loop disables the answer in `start` now and then, so only "finite" excludes it.
    weak = Fairness("answer", WEAK, Steps(triggers=("answer",)), "answers come", ("Q15",))
    held = check_protocol(p, waiter_liveness(p, WORKER, weak, restart))  # type: ignore[arg-type]
    assert verdict(held) == HOLDS
    looping = check_protocol(p, waiter_liveness(p, WORKER, weak, never))  # type: ignore[arg-type]
    lasso = looping.verdicts[0].lasso
    assert lasso is not None and {"restart", "begin"} <= {s.trigger for s in lasso.cycle}


def test_an_incomplete_exploration_gives_no_verdict() -> None:
    result = check_machine(explore(QUERY, max_states=100))
    assert {v.verdict for v in result.verdicts} == {NOT_CHECKED} and not result.ok


# --------------------------------------------------------------------------
# The declared machines
# --------------------------------------------------------------------------
@pytest.mark.parametrize("machine", [QUERY, APPROVAL, LEDGER], ids=lambda p: p.name)
def test_every_declared_machine_is_live_under_its_fairness(machine: Protocol) -> None:
    result = check_protocol(machine)
    assert result.ok, result.text()
    assert {v.verdict for v in result.verdicts} == {HOLDS}
    assert len(result.verdicts) >= 1 and all(v.prop.rules for v in result.verdicts)


@pytest.mark.rule("Q15")
def test_a_lookup_that_times_out_forever_is_a_lasso_without_strong_fairness() -> None:
    live = query_liveness()
    weaker = declare(QUERY, tuple(f for f in live.fairness if f.name != "answered_lookup"),
                     live.progress)
    result = check_protocol(QUERY, weaker)
    v = next(x for x in result.verdicts if x.prop.name == "unknown_resolved")
    assert v.verdict == VIOLATED and v.lasso is not None
    assert [s.trigger for s in v.lasso.cycle] == ["lookup_timeout"]


def test_the_fairness_worded_for_a_reviewer() -> None:
    words = [f.words() for f in query_liveness().fairness]
    assert words[2].startswith("strongly fair: if one of the steps `lookup_running`")
    assert words[3] == "never required: the `environment` steps may never happen"


# --------------------------------------------------------------------------
# Liveness mutants: found as lassos, by no safety check
# --------------------------------------------------------------------------
RUNNING = Guard("runtime_running", V.running)
LOOKUPS = {"lookup_found", "lookup_absent", "lookup_conflict", "lookup_failed"}

LIVENESS_MUTANTS = [
    pytest.param(
        dataclasses.replace(APPROVAL, transitions=tuple(
            t for t in APPROVAL.transitions if t.trigger != "expire")),
        "approval_decided_or_expired", ["propose", "deadline_passes"],
        marks=pytest.mark.rule("A2"), id="deadline-expiry-removed"),
    pytest.param(
        dataclasses.replace(QUERY, transitions=tuple(
            t for t in QUERY.transitions if not (t.trigger == "resubmit"
                                                 and t.dest == "submitting"))),
        "not_found_resubmitted", None, marks=pytest.mark.rule("Q16"),
        id="not-found-never-resubmitted"),
    pytest.param(
        dataclasses.replace(APPROVAL, transitions=tuple(
            dataclasses.replace(t, guards=(*t.guards, RUNNING)) if t.trigger in LOOKUPS else t
            for t in APPROVAL.transitions)),
        "uncertain_write_resolved", None, marks=pytest.mark.rule("A4"),
        id="recovery-guard-dead-after-crash"),
    # The model before it said what a cancel arriving after the write started means: nothing
    # the runtime does then is required, so the call rests in executing (or committed) for ever.
    pytest.param(
        dataclasses.replace(APPROVAL, transitions=tuple(
            t for t in APPROVAL.transitions if t.trigger != "resume_abandoned")),
        "started_write_settles", ["propose", "show", "approve", "execute", "cancel"],
        marks=pytest.mark.rule("A7"), id="late-cancel-strands-a-started-call"),
]


@pytest.mark.parametrize(("mutant", "prop", "prefix"), LIVENESS_MUTANTS)
def test_a_liveness_mutant_is_a_lasso_that_no_safety_check_finds(
        mutant: Protocol, prop: str, prefix: list[str] | None, tmp_path: Path) -> None:
    explored = explore(mutant)
    assert (explored.violations, explored.deadlocks, explored.traps) == ([], [], [])
    result = check_machine(explored)
    v = next(x for x in result.verdicts if x.prop.name == prop)
    assert v.verdict == VIOLATED and not result.ok
    lasso = v.lasso
    assert lasso is not None
    if prefix is not None:
        assert [s.trigger for s in lasso.prefix] == prefix
    # The lasso replays through the table and its cycle returns to where it started.
    states = replay(mutant, "\n".join(f"q0 {s.text()[3:]}" for s in (*lasso.prefix,
                                                                       *lasso.cycle)))
    assert states[len(lasso.prefix)] == states[-1]
    # ...and is written as ITF with loop set to the state after the prefix.
    [path] = [p for p in result.write_itf(tmp_path) if p.name == f"liveness-{prop}.itf.json"]
    trace = read_itf(path)
    assert trace["loop"] == len(lasso.prefix) and trace["#meta"]["property"] == prop
    assert len(trace["states"]) == len(lasso.prefix) + max(len(lasso.cycle), 1)
    assert json.loads(path.read_text())["loop"] == trace["loop"]


@pytest.mark.rule("A4")
def test_the_stuck_recovery_ends_in_recovering_with_no_runtime() -> None:
    mutant = LIVENESS_MUTANTS[2].values[0]
    v = next(x for x in check_protocol(mutant).verdicts
             if x.prop.name == "uncertain_write_resolved")
    assert v.lasso is not None
    last = v.lasso.states[v.lasso.loop]
    assert last["q0.state"] == "recovering" and last["q0.running"] is False


# --------------------------------------------------------------------------
# Declarations are validated when made
# --------------------------------------------------------------------------
def _progress(**kw: object) -> Progress:
    base: dict[str, object] = {"name": "p", "premise": Pred(("queued",)),
                               "goal": Pred(("succeeded",)), "text": "t", "rules": ("Q15",)}
    base.update(kw)
    return Progress(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(("fairness", "progress", "message"), [
    ((), _progress(premise=Pred(("queud",))), "unknown state ['queud']"),
    ((Fairness("f", WEAK, Steps(triggers=("lookup_tiemout",)), "x", ("Q15",)),), _progress(),
     "unknown trigger ['lookup_tiemout']"),
    ((Fairness("f", WEAK, Steps(actors=("robot",)), "x", ("Q15",)),), _progress(),
     "unknown actor ['robot']"),
    ((), _progress(rules=("Q99",)), "cites unknown rule 'Q99'"),
    ((), _progress(rules=()), "cites no rule"),
    ((Fairness("f", "eventually", Steps(actors=("worker",)), "x", ("Q15",)),), _progress(),
     "kind 'eventually'"),
    ((Fairness("f", WEAK, Steps(actors=("user",), triggers=("claim",)), "x", ("Q11",)),),
     _progress(), "matches no step"),
    ((Fairness("f", WEAK, Steps(params=(("worker", (7,)),)), "x", ("Q11",)),), _progress(),
     "never takes [7]"),
    ((), _progress(goal=Pred(("succeeded",), where=(Cmp("lease", "==", 1),))),
     "unknown variable 'lease'"),
    ((), _progress(goal=Pred(("succeeded",), where=(Cmp("cancel_state", "==", "maybe"),))),
     "outside the domain"),
    ((), _progress(goal=Pred(("succeeded",), instances="every")), "drop instances="),
])
def test_a_broken_declaration_names_the_fix(fairness: tuple[Fairness, ...], progress: Progress,
                                            message: str) -> None:
    with pytest.raises(DeclarationError, match=message.replace("[", r"\[").replace("]", r"\]")):
        declare(QUERY, fairness, (progress,))


def test_a_declaration_without_progress_is_refused() -> None:
    with pytest.raises(DeclarationError, match="declares no progress property"):
        declare(QUERY, (), ())


def test_every_machine_and_system_declares_progress_citing_rules() -> None:
    from settled.model.systems import SYSTEMS

    for live in (query_liveness(), approval_liveness(), ledger_liveness(),
                 *(liveness_of(s) for s in SYSTEMS.values())):
        assert live.progress and all(p.rules for p in live.progress)
        assert any(f.required for f in live.fairness)


# --------------------------------------------------------------------------
# The quiescence bound
# --------------------------------------------------------------------------
def test_the_quiescence_bound_is_the_longest_fault_free_fair_run_to_a_terminal_state() -> None:
    from settled.conformance._liveness import quiescence_bound

    queued = QUERY.config("queued", authorized_version=1)
    bound = quiescence_bound(QUERY, queued)
    assert bound.steps == len(bound.path) == 11 and bound.stuck == ()
    # The longest run replays through the table and ends in a terminal state, fault-free.
    config = queued
    for trigger, params in bound.path:
        assert "fault" not in dict(params) and "crash" not in trigger
        config = QUERY.fire(config, trigger, dict(params)).after
    assert config.state in QUERY.terminal_states
    assert quiescence_bound(QUERY, QUERY.config("succeeded")).steps == 0


def test_a_state_no_fair_step_leaves_is_stuck_unless_declared_resting() -> None:
    from settled.conformance._liveness import quiescence_bound

    waiting = quiescence_bound(QUERY, QUERY.initial_config())
    assert [c.state for c in waiting.stuck] == ["awaiting_confirmation"]
    resting = quiescence_bound(QUERY, QUERY.initial_config(), resting=("awaiting_confirmation",))
    assert resting.stuck == () and resting.steps == 1


def test_a_fault_free_fair_cycle_has_no_bound_and_is_returned() -> None:
    from settled.conformance._liveness import quiescence_bound

    p = waiter()
    bound = quiescence_bound(p, p.config("waiting"), waiter_liveness(p, WORKER))  # type: ignore[arg-type]
    assert bound.steps is None and bound.cycle == (("poll", ()),)
    # A poll that is a fault (it carries one) is not scheduled once faults stop.
    faulty = quiescence_bound(p, p.config("waiting"), waiter_liveness(p, WORKER),  # type: ignore[arg-type]
                              fault=lambda t, prm: t.trigger == "poll")
    assert faulty.steps == 1 and faulty.path == (("answer", ()),)


# --------------------------------------------------------------------------
# Systems: on the symmetry-reduced graph, lassos rebuilt on concrete configurations
# --------------------------------------------------------------------------
def test_the_approval_and_ledger_systems_are_live_under_their_fairness() -> None:
    from settled.conformance._liveness import explore_system_liveness
    from settled.model.systems import SYSTEMS

    for name in ("approval", "ledger"):
        explored, live = explore_system_liveness(SYSTEMS[name])
        assert explored.ok and live.ok, live.text()
        assert {v.verdict for v in live.verdicts} == {HOLDS}


@pytest.mark.rule("A8")
def test_a_person_resuming_lookups_for_ever_starves_an_expiry(tmp_path: Path) -> None:
    """Another call's recoveries, resumed by a person again and again, take and free the
    session's lock for ever; the weakly fair expiry waiting for it is never continuously
    enabled, so it never runs. Declaring that people stop resuming excludes the cycle."""
    from settled.conformance._explore._system import replay_system
    from settled.conformance._liveness import explore_system_liveness
    from settled.model.systems import SYSTEMS

    system = SYSTEMS["approval"]
    live = liveness_of(system)
    _explored, held = explore_system_liveness(system, live)
    assert held.ok and {v.verdict for v in held.verdicts} == {HOLDS}
    weaker = declare(system, tuple(f for f in live.fairness
                                   if f.name != "people_stop_resuming"), live.progress)
    _explored, result = explore_system_liveness(system, weaker)
    v = next(x for x in result.verdicts if x.prop.name == "every_pending_approval_settles")
    assert v.verdict == VIOLATED and v.lasso is not None
    lasso = v.lasso
    assert "expire" not in {s.trigger for s in lasso.cycle}
    assert "resume_lookup" in {s.trigger for s in lasso.cycle}
    # The concrete run replays, and its cycle returns to the very configuration it left.
    text = "\n".join(s.text() for s in (*lasso.prefix, *lasso.cycle))
    configs = replay_system(system, text)
    assert configs[len(lasso.prefix)] == configs[-1]
    assert "loop_up_to_renaming" not in lasso.meta
    paths = result.write_itf(tmp_path)
    [path] = [p for p in paths if p.name == "liveness-every_pending_approval_settles.itf.json"]
    assert read_itf(path)["loop"] == len(lasso.prefix)


def test_a_system_predicate_quantifies_over_instances() -> None:
    from settled.model.systems import SYSTEMS

    with pytest.raises(DeclarationError, match="instances='some' or 'every'"):
        declare(SYSTEMS["ledger"], (), (_progress(premise=Pred(("recovering",)),
                                                  goal=Pred(("paired",), instances="every"),
                                                  rules=("L4",)),))
    with pytest.raises(DeclarationError, match="symmetry renames"):
        declare(SYSTEMS["query"], (Fairness("w0", WEAK, Steps(params=(("worker", (0,)),)),
                                            "x", ("Q11",)),),
                (_progress(premise=Pred(("queued",), instances="some"),
                           goal=Pred(("succeeded",), instances="every")),))


# --------------------------------------------------------------------------
# The command line and verify
# --------------------------------------------------------------------------
def test_explore_prints_each_property_with_its_fairness_and_verdict(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "settled.cli", "explore", "approval", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    progress = json.loads(done.stdout)["progress"]
    assert progress["ok"] is True and progress["complete"] is True
    assert [p["verdict"] for p in progress["properties"]] == [HOLDS] * 4
    assert {f["kind"] for f in progress["fairness"]} == {WEAK, NEVER}
    assert progress["properties"][0]["formula"] == (
        "state in {pending_approval} ~> state not in {pending_approval}")


@pytest.mark.rule("A2")
def test_verify_fails_a_machine_that_is_safe_but_not_live() -> None:
    from settled._verify import check_explore

    mutant = LIVENESS_MUTANTS[0].values[0]
    report = check_explore(mutant)
    assert report["ok"] is False
    assert report["findings"] == ["liveness:approval_decided_or_expired"]
    assert report["progress"]["properties"]["approval_decided_or_expired"] == VIOLATED
    assert check_explore(APPROVAL)["ok"] is True
