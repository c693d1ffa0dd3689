"""Systems: instances that share state, explored as one space, reduced by symmetry."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from settled._memory import MEASURED
from settled.conformance._explore._system import explore_system, replay_system
from settled.model import DeclarationError, Invariant
from settled.model._core import Config, Step
from settled.model._expr import V
from settled.model._system import System
from settled.model._system_parts import Refinement
from settled.model.query import QueryState
from settled.model.systems import build_approval_system, build_ledger_system, build_query_system


def _with_old_invariant(system: System) -> System:
    """The query system, with Q24 stated the old way: as an invariant of every state."""
    old = Invariant("late_result_keeps_out_as_invariant",
                    "an outcome that moved the phase is at the task's current version",
                    ("Q24",), ~V.phase_moved
                    | ((V.authorized_version == V.task_version) & ~V.clarifying))
    machine = dataclasses.replace(system.machine, invariants=(*system.machine.invariants, old))
    return dataclasses.replace(system, machine=machine)


@pytest.fixture(scope="module")
def one_worker() -> System:
    return build_query_system(queries=2, workers=1)


@pytest.mark.rule("Q24")
def test_a_shared_version_breaks_the_old_invariant_in_six_steps_and_keeps_the_step_property() -> None:
    """Query 1 fails at version 1 (moving the phase), then a condition update on query 0,
    still a draft, moves the shared version to 2: nothing unsafe happened, but the
    invariant form of Q24 no longer holds. The step form does."""
    system = _with_old_invariant(build_query_system(queries=2, workers=1))
    result = explore_system(system, max_states=60_000)
    names = {(f.kind, f.name): f for f in result.findings}
    old = names[("invariant", "late_result_keeps_out_as_invariant")]
    assert old.counterexample is not None and len(old.counterexample) == 6
    assert ("step_property", "late_result_keeps_out") not in names
    assert old.counterexample.steps[-1].trigger == "condition_updated"
    final = old.counterexample.configs[-1]
    assert sorted(c.state for c in final.instances) == [QueryState.FAILED, QueryState.INVALIDATED]
    # The counterexample is replayable as printed.
    replayed = replay_system(system, old.counterexample.steps_text())
    assert replayed[-1] == final


@pytest.mark.slow
@pytest.mark.rule("Q24")
@pytest.mark.rule("T2")
@pytest.mark.rule("Q11")
def test_the_query_system_with_shared_state_has_no_findings(one_worker: System) -> None:
    result = explore_system(one_worker)
    assert result.complete and result.findings == []
    assert result.independent_product is False
    assert result.states < result.states_unreduced
    # The memory estimate's row for this system is the count reached here (settled._memory).
    assert result.states == MEASURED[("query", 2, 1)]


@pytest.mark.rule("Q11")
@pytest.mark.rule("Q13")
def test_a_worker_process_crash_drops_its_leases_on_both_queries_in_one_step() -> None:
    system = build_query_system(queries=2, workers=2)
    steps = "\n".join([
        "q0 check_passed", "q1 check_passed",
        *(f"{q} confirm condition_version=current draft_version=current message=attributed "
          "quote=whole" for q in ("q0", "q1")),
        "q0 claim worker=0", "q1 claim worker=0", "q0 begin_submit worker=0",
        "all crash worker=0",
    ])
    configs = replay_system(system, steps)
    before, after = configs[-2], configs[-1]
    assert [c.values[system.machine.variable_names.index("held")] for c in before.instances] == [
        (1, 0), (1, 0)]
    assert [c.values[system.machine.variable_names.index("held")] for c in after.instances] == [
        (0, 0), (0, 0)]
    # A crash on one query alone is not a step of the system.
    with pytest.raises(ValueError, match="not enabled"):
        replay_system(system, steps.replace("all crash", "q0 crash"))


@pytest.mark.rule("T2")
def test_one_condition_update_invalidates_every_pending_draft_of_the_task() -> None:
    system = build_query_system(queries=2, workers=1)
    configs = replay_system(system, "q0 check_passed\nall condition_updated")
    assert {c.state for c in configs[-1].instances} == {QueryState.INVALIDATED}
    version = system.machine.variable_names.index("task_version")
    assert {c.values[version] for c in configs[-1].instances} == {2}


@pytest.mark.rule("Q9")
@pytest.mark.rule("Q10")
def test_a_pending_message_of_the_session_blocks_the_first_confirmation_of_any_draft() -> None:
    system = build_query_system(queries=2, workers=1)
    confirm = ("q1 confirm condition_version=current draft_version=current message={m} "
               "quote=whole")
    with pytest.raises(ValueError, match="not enabled"):
        replay_system(system, "q1 check_passed\nsystem message_received\n"
                      + confirm.format(m="pending"))
    configs = replay_system(system, "q1 check_passed\nsystem message_received\n"
                            "system message_attributed\n" + confirm.format(m="attributed"))
    assert configs[-1].instances[1].state == QueryState.QUEUED


@pytest.mark.slow
def test_symmetry_reduction_gives_the_same_verdicts_and_shortest_lengths_as_the_full_search() -> None:
    system = _with_old_invariant(build_query_system(queries=2, workers=2, max_epoch=1,
                                                    max_task_version=2))
    reduced = explore_system(system)
    full = explore_system(system, symmetry=False)
    assert reduced.complete and full.complete
    assert reduced.states < full.states == reduced.states_unreduced
    assert ({(f.kind, f.name): len(f.counterexample or ()) for f in reduced.findings}
            == {(f.kind, f.name): len(f.counterexample or ()) for f in full.findings})
    assert reduced.findings  # the old invariant breaks, so the comparison is not vacuous


@pytest.mark.rule("W6")
def test_two_orders_on_one_unit_never_oversell_and_do_without_the_stock_check() -> None:
    system = build_approval_system(calls=2, stock=1)
    result = explore_system(system)
    assert result.complete and result.findings == []
    # The stock check removed: the commit still takes a unit, but does not ask for one.
    take = system.refinements[0].effect
    unchecked = dataclasses.replace(system, refinements=(Refinement("commit", ("W6",), effect=take),))
    broken = explore_system(unchecked)
    names = {(f.kind, f.name): f for f in broken.findings}
    oversell = names[("system_invariant", "no_oversell")]
    assert oversell.counterexample is not None
    assert [s.trigger for s in oversell.counterexample.steps].count("commit") == 2
    assert ("domain", "stock") in names  # and the stock went below zero


def test_symmetry_keeps_verdicts_and_lengths_on_the_approval_system_without_its_stock_check() -> None:
    system = build_approval_system(calls=2, stock=1)
    unchecked = dataclasses.replace(system, refinements=(Refinement("commit", ("W6",)),))
    reduced, full = explore_system(unchecked), explore_system(unchecked, symmetry=False)
    assert reduced.states < full.states == reduced.states_unreduced
    assert ({(f.kind, f.name): len(f.counterexample or ()) for f in reduced.findings}
            == {(f.kind, f.name): len(f.counterexample or ()) for f in full.findings})
    assert reduced.findings


def _naive(system: System) -> tuple[int, int, set[int], set[tuple[str, str]]]:
    """Breadth-first over ``System.enabled`` itself, on concrete configurations: states,
    labelled steps, the machine transitions fired (by id), and the (kind, name) of what
    breaks."""
    from collections import deque

    from settled.model._system_parts import SystemConfig

    start = system.initial_config()
    seen: set[SystemConfig] = {start}
    queue = deque([start])
    edges = 0
    fired: set[int] = set()
    broken: set[tuple[str, str]] = set()
    m = system.machine
    steps: dict[Config, tuple[Step, ...]] = {}
    props: dict[tuple[Any, ...], set[str]] = {}  # step properties broken, per instance step
    invariants: dict[Config, set[str]] = {}

    def local(c: Config) -> tuple[Step, ...]:  # machine.enabled, memoised
        if c not in steps:
            steps[c] = tuple(m.enabled(c))
        return steps[c]

    while queue:
        cfg = queue.popleft()
        for c in cfg.instances:
            if c not in invariants:
                invariants[c] = {i.name for i in m.broken_invariants(c)}
            broken.update(("invariant", name) for name in invariants[c])
        broken.update(("system_invariant", i.name) for i in system.broken_invariants(cfg))
        broken.update(("domain", var.name) for var, x in zip(system.variables, cfg.shared,
                                                              strict=True) if x not in var.domain)
        for step in system.enabled(cfg, local):
            edges += 1
            for i, s in step.moves:
                fired.add(id(s.transition))
                key = (cfg.instances[i], id(s.transition), tuple(s.params.items()), s.after)
                if key not in props:
                    props[key] = {p.name for p in m.broken_step_properties(cfg.instances[i], s)}
                broken.update(("step_property", name) for name in props[key])
            if step.after not in seen:
                seen.add(step.after)
                queue.append(step.after)
    return len(seen), edges, fired, broken


@pytest.mark.parametrize("make", [
    lambda: build_query_system(queries=1, workers=1),
    pytest.param(lambda: build_approval_system(calls=2, stock=1), marks=pytest.mark.slow),
    lambda: dataclasses.replace(build_approval_system(calls=2, stock=1),
                                refinements=(Refinement("commit", ("W6",)),)),
    lambda: build_ledger_system(calls=2),
    lambda: dataclasses.replace(build_approval_system(calls=2, stock=1), mutex=None),
    # the 2-query system (one worker, one epoch): its states, steps and triggers, and its
    # findings with one invariant more, which exploration checks but never steers by
    pytest.param(lambda: _with_old_invariant(build_query_system(
        queries=2, workers=1, max_epoch=1, max_task_version=2)), marks=pytest.mark.slow),
], ids=["query-1x1", "approval", "approval-unchecked", "ledger-2",
        "approval-no-lock", "query-old-invariant"])
def test_the_compiled_search_is_system_enabled_step_for_step(make: Any) -> None:
    """The explorer compiles each instance's steps once per shared value and deduplicates
    steps with one outcome; without symmetry it must still count exactly the states and
    labelled steps of a plain search over ``System.enabled``, fire the same triggers and
    break the same properties."""
    system = make()
    states, edges, fired, broken = _naive(system)
    result = explore_system(system, symmetry=False)
    assert result.complete
    assert (result.states, result.edges) == (states, edges)
    unfired = {f.name for f in result.findings if f.kind == "unfired_transition"}
    assert unfired == {t.trigger for t in system.machine.transitions if id(t) not in fired}
    assert {(f.kind, f.name) for f in result.findings
            if f.kind in ("invariant", "system_invariant", "step_property", "domain")} == broken


def test_a_system_is_validated_when_built() -> None:
    machine = build_query_system().machine
    with pytest.raises(DeclarationError, match="shared variable 'nope'"):
        System("s", "x", machine, 2, shared=("nope",))
    with pytest.raises(DeclarationError, match="sync trigger 'fly'"):
        System("s", "x", machine, 2, sync=("fly",))
    with pytest.raises(DeclarationError, match="at least one instance"):
        System("s", "x", machine, 0)
    with pytest.raises(DeclarationError, match="refinement of unknown trigger"):
        System("s", "x", machine, 2, refinements=(Refinement("fly", ("Q1",)),))


@pytest.mark.rule("A8")
def test_one_session_lets_one_runtime_in_and_the_explorer_catches_a_missing_lock() -> None:
    system = build_approval_system(calls=2, stock=1)
    start = [("propose", {"retry_safe": False}), ("show", {}), ("approve", {}), ("execute", {})]
    cfg = system.initial_config()
    for i in (1, 0):
        for trigger, params in start[:2] if i == 1 else start:
            [step] = [s for s in system.enabled(cfg)
                      if s.instance == i and s.trigger == trigger and dict(s.params) == params]
            cfg = step.after
    assert system.shared_view(cfg)["session"] == "held"
    theirs = {s.trigger for s in system.enabled(cfg) if s.instance == 1}
    # The machine alone would let the second call be approved, rejected or cancelled.
    assert {"approve", "reject", "cancel"} <= {s.transition.trigger for s in
                                               system.machine.enabled(cfg.instances[1])}
    assert not theirs & {"approve", "reject", "cancel", "expire"}
    assert "deadline_passes" in theirs  # the clock does not wait for the lock
    # A crash inside the handler: the restarted runtime recovers at once and holds the
    # session again; a crash during that recovery frees it.
    [crash] = [s for s in system.enabled(cfg) if s.trigger == "crash_before_commit"]
    assert system.shared_view(crash.after)["session"] == "held"
    [gone] = [s for s in system.enabled(crash.after) if s.trigger == "crash_while_recovering"]
    assert system.shared_view(gone.after)["session"] == "free"
    assert explore_system(system).findings == []
    # Without the lock the invariant that cross-checks it breaks, at the first propose.
    unlocked = explore_system(dataclasses.replace(system, mutex=None))
    [broken] = [f for f in unlocked.findings if f.name == "one_runtime_per_session"]
    assert broken.counterexample is not None
    assert [s.trigger for s in broken.counterexample.steps] == ["propose"]


def test_a_mutex_is_validated_when_built() -> None:
    system = build_approval_system(calls=2, stock=1)
    lock = system.mutex
    assert lock is not None
    with pytest.raises(DeclarationError, match="variable 'stock' must be a system variable"):
        dataclasses.replace(system, mutex=dataclasses.replace(lock, variable="stock"))
    with pytest.raises(DeclarationError, match="flag 'token_id' must be a boolean"):
        dataclasses.replace(system, mutex=dataclasses.replace(lock, flag="token_id"))
    with pytest.raises(DeclarationError, match=r"takes unknown triggers \['fly'\]"):
        dataclasses.replace(system, mutex=dataclasses.replace(lock, takes=frozenset({"fly"})))
    with pytest.raises(DeclarationError, match=r"sync triggers \['crash_before_shown'\] take"):
        dataclasses.replace(system, sync=("crash_before_shown",),
                            mutex=dataclasses.replace(lock, takes=frozenset({"crash_before_shown"})))
    with pytest.raises(DeclarationError, match="changes the mutex flag 'running'"):
        explore_system(dataclasses.replace(system, sync=("crash_before_shown",)))


def test_the_floor_loop_runs_over_exactly_the_graphs_successor_entries() -> None:
    """The bench's floor under the system explorer runs over every successor entry the
    search produced and numbers each configuration they reach once, as the search did."""
    from settled.conformance._explore._system_floor import search_floor

    system = build_query_system(queries=2, workers=1, max_epoch=1, max_task_version=1)
    assert explore_system(system).graph is None  # kept only when asked for
    result = explore_system(system, keep_graph=True)
    _sp, _keys, _parent, start, succ, masks, visited = result.graph
    assert visited == result.states and len(masks) == 0
    assert start[visited] == len(succ) > result.states
    floor = search_floor(result.graph)
    assert floor.entries == len(succ)
    assert floor.reached == len(set(succ))  # the configurations some step leads to
    assert floor.seconds > 0
    from settled.conformance._liveness import check_system

    with pytest.raises(ValueError, match="classify="):  # a graph kept without edge masks
        check_system(result)
