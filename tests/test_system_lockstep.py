"""The lockstep of a system: queries of one task and session, in the real implementation."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from settled.conformance import AdapterError, lockstep
from settled.conformance._bundled._query_adapter import QueryAdapter
from settled.conformance._bundled._query_system_adapter import QuerySystemAdapter, query_system
from settled.conformance._bundled._suites import SYSTEM_SUITES, query_suite
from settled.conformance._lockstep import (
    SYSTEM,
    Runner,
    SystemAction,
    check_system_observation,
    history,
    load_steps,
    minimise_steps,
    plans_for,
    replay,
    system_tour,
    transition_label,
)
from settled.conformance._lockstep._shrink import Divergence, Invalid
from settled.conformance._profiles import profile
from settled.conformance.mutants._run import select_mutants
from settled.conformance.mutants.query import VersionCountsEveryTask
from settled.conformance.mutants.query_system import (
    NotificationTakesNewestClock,
    OlderPendingMessageIgnored,
    UpdateInvalidatesNewestDraftOnly,
)

CONFIRM = {"quote": "whole", "draft_version": "current", "condition_version": "current"}


def q(i: int, trigger: str, forbidden: bool = False, **params: Any) -> SystemAction:
    return SystemAction(i, trigger, params, forbidden, who=f"q{i}")


def every(trigger: str, **params: Any) -> SystemAction:
    return SystemAction(SYSTEM, trigger, params, who="all")


def own(trigger: str) -> SystemAction:
    return SystemAction(SYSTEM, trigger, {}, who="system")


@pytest.fixture(scope="module")
def system() -> Any:
    return query_system(2, 2)


def _replay(system: Any, cls: type, steps: list[SystemAction]) -> str | None:
    return replay(system, lambda: cls(2, 2), system.machine.refusable, steps)


def _adapter(store: type) -> type:
    return type("Mutated", (QuerySystemAdapter,), {"store_class": store})


# --------------------------------------------------------------------------- shared state, really
@pytest.mark.rule("T2")
def test_one_condition_update_invalidates_every_pending_draft_of_the_task(system: Any) -> None:
    steps = [q(0, "check_passed"), every("condition_updated")]
    assert _replay(system, QuerySystemAdapter, steps) is None
    run = Runner(system, lambda: QuerySystemAdapter(2, 2), system.machine.refusable)
    for a in steps:
        run.apply(a)
        run.check()
    assert [run.observe(i)["state"] for i in range(2)] == ["invalidated", "invalidated"]
    assert {run.observe(i)["task_version"] for i in range(2)} == {2}
    run.adapter.close()


@pytest.mark.rule("Q11", "Q13")
def test_a_worker_process_crash_drops_its_leases_on_both_queries_in_one_step(system: Any) -> None:
    held = [q(0, "check_passed"), q(0, "confirm", message="attributed", **CONFIRM),
            q(0, "claim", worker=0), q(1, "check_passed"),
            q(1, "confirm", message="attributed", **CONFIRM), q(1, "claim", worker=0)]
    run = Runner(system, lambda: QuerySystemAdapter(2, 2), system.machine.refusable)
    for a in held:
        run.apply(a)
        run.check()
    assert [run.observe(i)["held"] for i in range(2)] == [(1, 0), (1, 0)]
    run.apply(every("crash", worker=0))
    run.check()  # the model moved both instances; so did the implementation
    assert [run.observe(i)["held"] for i in range(2)] == [(0, 0), (0, 0)]
    run.finish()


@pytest.mark.rule("Q9")
def test_a_pending_message_of_the_session_blocks_every_draft_and_is_observed(system: Any) -> None:
    steps = [q(0, "check_passed"), own("message_received"), q(1, "check_passed"),
             q(0, "confirm", True, message="pending", **CONFIRM),
             q(1, "confirm", True, message="pending", **CONFIRM),
             own("message_attributed"), q(1, "confirm", message="attributed", **CONFIRM)]
    assert _replay(system, QuerySystemAdapter, steps) is None


# A query confirmed, a later message on a later day arrives and is attributed, then the
# query settles: its notification must carry the confirming message's clock (M2).
SETTLE_AFTER_LATER_MESSAGE = [
    q(0, "check_passed"), q(0, "confirm", message="attributed", **CONFIRM),
    own("message_received"), own("message_attributed"), q(0, "claim", worker=0),
    q(0, "begin_submit", worker=0), q(0, "submit_rejected", worker=0)]


@pytest.mark.rule("M2")
def test_a_later_message_between_confirmation_and_notification_is_observed(system: Any) -> None:
    assert _replay(system, QuerySystemAdapter, SETTLE_AFTER_LATER_MESSAGE) is None
    run = Runner(system, lambda: QuerySystemAdapter(2, 2), system.machine.refusable)
    for a in SETTLE_AFTER_LATER_MESSAGE:
        run.apply(a)
        run.check()
    assert run.adapter.observe(None) == {"message": "later", "other_task": "unchanged"}
    assert run.observe(0)["notice"] == "source"
    run.adapter.close()


@pytest.mark.rule("M2")
def test_a_notification_with_the_newest_message_s_clock_diverges_on_the_later_message(
        system: Any) -> None:
    """The check can fail: the mutant agrees until a later message exists, then its
    notification's clock is the later message's, and the replay diverges on notice."""
    mutant = type("Mutated", (QuerySystemAdapter,), {"worker_class": NotificationTakesNewestClock})
    without_later = [a for a in SETTLE_AFTER_LATER_MESSAGE if a.who != "system"]
    assert _replay(system, mutant, without_later) is None
    diverged = _replay(system, mutant, SETTLE_AFTER_LATER_MESSAGE)
    assert diverged is not None and "notice" in diverged


def test_the_tour_fires_the_settling_steps_after_a_later_message(system: Any) -> None:
    """Every run from the first configuration with a later, attributed message is a tour
    goal: so a settled query with a later message present is reached whatever the seed."""
    tour = system_tour(system, system.machine.refusable)
    texts = [[a.text() for a in path] for path in tour]
    later = [path for path in texts if "system message_attributed" in path
             and any(t.startswith(("q0 submit_rejected", "q1 submit_rejected")) for t in
                     path[path.index("system message_attributed"):])]
    assert later, "no tour run settles a query after a later message was attributed"


# Two tasks of one session: the other task's update moves nothing of this task's drafts (T1).
OTHER_TASK_THEN_UPDATE = [
    own("other_task_updated"), q(0, "check_passed"), every("condition_updated")]


@pytest.mark.rule("T1", "T2")
def test_the_session_s_other_task_moves_nothing_of_this_task(system: Any) -> None:
    assert _replay(system, QuerySystemAdapter, OTHER_TASK_THEN_UPDATE) is None
    run = Runner(system, lambda: QuerySystemAdapter(2, 2), system.machine.refusable)
    for a in OTHER_TASK_THEN_UPDATE[:2]:
        run.apply(a)
        run.check()
    assert run.adapter.observe(None)["other_task"] == "updated"
    assert run.adapter.store.task(run.adapter.task.task_id).condition_version == \
        run.adapter.task.condition_version
    run.adapter.close()


@pytest.mark.rule("T1")
def test_a_version_counted_over_the_session_diverges_on_the_other_task_s_update(
        system: Any) -> None:
    """The check can fail: counted over the session's two tasks, the other task's update
    jumps its version past one, and the kit sees it at that very step."""
    mutant = type("Mutated", (QuerySystemAdapter,), {"store_class": VersionCountsEveryTask})
    assert _replay(system, mutant, [q(0, "check_passed")]) is None
    diverged = _replay(system, mutant, OTHER_TASK_THEN_UPDATE)
    assert diverged is not None and "other_task='moved by" in diverged


@pytest.mark.rule("Q6", "Q22")
def test_a_stopped_run_hands_the_session_to_the_new_run_for_every_query(system: Any) -> None:
    """The queries share one session, so one run: after any query's run_stopped, every query
    is confirmed from the new run (found by the random phase: the adapter once moved only
    the stopped query's caller, and the store rightly refused the other's confirm, Q6)."""
    steps = [q(0, "check_passed"), q(0, "confirm", message="attributed", **CONFIRM),
             q(0, "run_stopped"), q(1, "check_passed"),
             q(1, "confirm", message="attributed", **{**CONFIRM, "quote": "padded"})]
    assert _replay(system, QuerySystemAdapter, steps) is None


def test_a_refusal_that_changes_another_instance_is_caught(system: Any) -> None:
    """A system's refusal is held against every instance and the system, observed afresh
    after it (the observations before it are the last check's): here q1's refused confirm
    confirms q0 behind the kit's back."""
    class LeakyRefusal(QuerySystemAdapter):
        def perform(self, instance: Any, trigger: str, params: Any) -> None:
            if instance == 1 and trigger == "confirm":
                super().perform(0, "confirm", {**CONFIRM, "message": "attributed"})
            super().perform(instance, trigger, params)

    steps = [q(0, "check_passed"), q(1, "confirm", True, message="attributed", **CONFIRM)]
    assert _replay(system, QuerySystemAdapter, steps) is None
    message = _replay(system, LeakyRefusal, steps)
    assert message is not None and message.startswith("refuse q1 confirm "), message
    assert (": the refusal changed the implementation (q0.authorized_version: 0 -> 1, q0.state: "
            "'awaiting_confirmation' -> 'queued')") in message, message


def test_a_refusal_probe_with_a_bound_parameter_the_state_contradicts_is_not_a_step(
        system: Any) -> None:
    """message=pending while the session's message is attributed: the model rejects the list
    (a minimiser candidate), it is not held against the implementation."""
    with pytest.raises(Invalid):
        _replay(system, QuerySystemAdapter,
                [q(0, "check_passed"), q(0, "confirm", True, message="pending", **CONFIRM)])


# --------------------------------------------------------------------------- the campaign
def test_the_query_system_campaign_passes_on_the_bundled_implementation(tmp_path: Path) -> None:
    report = lockstep(QuerySystemAdapter, profile="dev", seed=0, out=tmp_path)
    assert report.ok, report.text()
    assert report.system and report.machine == "query_system" and report.instances == 2
    assert report.trace_events > 0
    assert report.to_json()["system"] is True


def test_the_tour_reaches_every_sync_and_system_step_and_a_state_decided_refusal(
        system: Any) -> None:
    tour = system_tour(system, system.machine.refusable)
    texts = [[a.text() for a in path] for path in tour]
    flat = {t for path in texts for t in path}
    for step in ("all condition_updated", "all crash worker=0", "system message_received",
                 "system message_attributed"):
        assert step in flat
    assert ["system message_received", "q0 check_passed",
            "refuse q0 confirm quote=whole draft_version=current condition_version=current "
            "message=pending"] in texts


def test_the_tour_fires_every_machine_transition_in_the_system_deep_ones_included(
        system: Any) -> None:
    """A third not-found in a row lies beyond the bounded searches: the machine tour's run
    to it is taken by the system's first instance."""
    plans = plans_for(system)
    fired = set()
    for path in system_tour(system, system.machine.refusable):
        config = system.initial_config()
        for a in path:
            if a.forbidden:
                continue
            _, step = plans.enabled(config)[(a.who, a.trigger, tuple(sorted(a.params.items())))]
            fired |= {transition_label(m.transition) for _, m in step.moves}
            config = step.after
    assert fired == {transition_label(t) for t in system.machine.transitions}
    assert "resubmit: not_found -> submission_retry_exhausted" in fired


@pytest.mark.rule("T2", "Q9")
@pytest.mark.parametrize("store", [UpdateInvalidatesNewestDraftOnly, OlderPendingMessageIgnored])
def test_the_system_lockstep_can_fail_a_shared_state_mutant_is_caught(store: type,
                                                                      tmp_path: Path) -> None:
    report = lockstep(_adapter(store), profile="dev", seed=0, out=tmp_path)
    assert report.status == "diverged" and report.exit_code == 1, report.text()
    assert report.counterexample is not None and report.counterexample.exists()
    name, steps = load_steps(report.counterexample)
    assert name == "query_system" and steps == report.steps
    # The saved list replays: still a divergence on the mutant, none on the real store.
    system = query_system(2, 2)
    assert _replay(system, _adapter(store), steps) is not None
    assert _replay(system, QuerySystemAdapter, steps) is None


def test_a_system_counterexample_is_shrunk_by_the_machine_lockstep_s_minimiser(
        system: Any, tmp_path: Path) -> None:
    """Steps after the divergence go: the system's runs are shrunk by the same minimiser as
    a machine's (instances apart, cycles cut, ddmin, single steps)."""
    report = lockstep(_adapter(UpdateInvalidatesNewestDraftOnly), profile="dev", seed=0,
                      out=tmp_path)
    failing = list(report.steps)
    plans = plans_for(system)
    config = history(system, failing)
    assert config is not None
    padded, after = list(failing), config[-1]
    for _ in range(4):  # whatever the model enables next, after the divergence
        action, step = next(iter(plans.enabled(after).values()))
        padded.append(action)
        after = step.after
    assert history(system, padded) is not None
    shrunk = minimise_steps(system, lambda: _adapter(UpdateInvalidatesNewestDraftOnly)(2, 2),
                            system.machine.refusable, padded)
    assert len(shrunk) <= len(failing)
    assert _replay(system, _adapter(UpdateInvalidatesNewestDraftOnly), shrunk) is not None


def test_the_history_rejects_what_the_system_model_does_not_accept(system: Any) -> None:
    assert history(system, []) == [system.initial_config()]
    assert history(system, [q(0, "check_passed")]) is not None
    assert history(system, [q(0, "submit_answered", worker=0)]) is None  # not enabled
    assert history(system, [q(0, "check_passed", forbidden=True)]) is None  # allowed


def test_a_system_mutant_s_kill_is_credited_to_the_phase_that_found_it(tmp_path: Path) -> None:
    """The tour kills the T2 mutant; with the tour off it is the random phase's, or a
    survival: never a tour kill counted as random-only."""
    from settled.conformance._lockstep import make_lockstep, run_lockstep

    def campaign(tour: bool) -> Any:
        machine = make_lockstep(query_system(2, 2),
                                       lambda: _adapter(UpdateInvalidatesNewestDraftOnly)(2, 2),
                                       forbidden=query_system(2, 2).machine.refusable,
                                       name="credit")
        return run_lockstep(machine, profile("dev"), seed=1, out=tmp_path, tour=tour)

    with_tour = campaign(True)
    assert with_tour.failure is not None and with_tour.killed_by == "tour"
    alone = campaign(False)
    assert alone.killed_by == ("random" if alone.failure is not None else None)
    assert alone.examples <= profile("dev").max_examples  # no tour path was replayed


def test_the_mutants_are_in_the_catalogue_under_the_system_suite() -> None:
    names = {m.name: m for m in select_mutants(["T2-update-invalidates-newest-draft-only",
                                                "Q9-older-pending-message-ignored"])}
    assert {m.machine for m in names.values()} == {"query_system"}
    assert "query_system" in SYSTEM_SUITES


# --------------------------------------------------------------------------- the contract
class _NoSystemVariables(QuerySystemAdapter):
    def observe(self, instance: int | None) -> Mapping[str, Any]:
        return {} if instance is None else super().observe(instance)


def test_an_adapter_omitting_a_system_variable_is_an_adapter_error(tmp_path: Path) -> None:
    report = lockstep(_NoSystemVariables, profile="dev", seed=0, out=tmp_path)
    assert report.status == "adapter_error" and report.exit_code == 3
    assert "left out the system variable(s) ['message', 'other_task']" in (
        report.adapter_error or "")


def test_system_observations_are_held_to_the_contract(system: Any) -> None:
    ok = {"message": "pending", "other_task": "unchanged"}
    assert check_system_observation(system, ok) == ok
    for bad, says in (({}, "left out"), ({**ok, "x": 1}, "unknown key"),
                      ({**ok, "message": 3}, "not a value of its kind"),
                      (["message"], "not a mapping")):
        with pytest.raises(AdapterError, match=says):
            check_system_observation(system, bad)
    later = {"message": "later", "other_task": "updated"}
    assert check_system_observation(system, later) == later
    # A value of the right kind the model's domain does not hold is the implementation's.
    with pytest.raises(Divergence, match="message='lost' is outside its domain"):
        check_system_observation(system, {**ok, "message": "lost"})
    with pytest.raises(Divergence, match="other_task='moved by 2' is outside its domain"):
        check_system_observation(system, {**ok, "other_task": "moved by 2"})


def test_an_adapter_whose_instances_do_not_match_its_system_is_an_adapter_error() -> None:
    class Wrong(QuerySystemAdapter):
        def __init__(self) -> None:
            super().__init__(2, 2)
            self.instances = 3

    report = lockstep(Wrong, profile="dev", seed=0)
    assert report.status == "adapter_error" and "instances" in (report.adapter_error or "")


@pytest.mark.slow
def test_the_machine_path_is_unchanged_for_a_machine_adapter(tmp_path: Path) -> None:
    report = lockstep(lambda: QueryAdapter(1, 2), profile="dev", seed=0, out=tmp_path)
    assert report.ok and not report.system and report.machine == "query"


# --------------------------------------------------------------------------- longer campaigns
# The shared-state mutants (T1, T2, Q9, W6) and the notification clock mutant (M2) are in the
# catalogue: tests/test_mutants.py kills each (by the tour, which takes no seed) beside the
# systems' baselines, and holds that the tour kills M2 (it once died on 2 seeds of 10). A run
# of them here would repeat those campaigns, baselines included.
@pytest.mark.slow
def test_the_machine_lockstep_cannot_see_the_older_pending_message() -> None:
    """Each query alone in its task and session: no older message to ignore."""
    from settled.conformance._lockstep import run_lockstep

    cls = type("Single", (QueryAdapter,), {"store_class": OlderPendingMessageIgnored})
    record = run_lockstep(query_suite(cls).lockstep("single-older-message"), profile("ci"),
                          seed=1)
    assert record.failure is None and record.adapter_error is None


@pytest.mark.slow
def test_the_machine_lockstep_sees_the_newest_draft_bug_only_through_a_rerun() -> None:
    """Alone in its task, a query has a sibling draft only when the user re-runs its SQL
    (Q2: a new query record in the same task), and that is the one way the machine
    lockstep can see T2 broken across drafts: its counterexample goes through a rerun."""
    from settled.conformance._lockstep import run_lockstep

    cls = type("Single", (QueryAdapter,), {"store_class": UpdateInvalidatesNewestDraftOnly})
    record = run_lockstep(query_suite(cls).lockstep("single-newest-draft"), profile("dev"),
                          seed=1)
    assert record.failure is not None and "rerun" in record.failure.split("replayable")[-1]
    assert "condition_updated" in record.failure and "T2" in record.failure


@pytest.mark.slow
def test_the_machine_lockstep_cannot_see_the_unchecked_stock() -> None:
    """Each call alone with ample stock of its own products: nothing to oversell."""
    from settled.conformance._bundled._approval_adapter import ApprovalAdapter
    from settled.conformance._bundled._suites import approval_suite
    from settled.conformance._lockstep import run_lockstep
    from settled.conformance.mutants.approval_system import _Runtime

    cls = type("Single", (ApprovalAdapter,), {"runtime_class": _Runtime})
    record = run_lockstep(approval_suite(cls).lockstep("single-W6"), profile("ci"), seed=1)
    assert record.failure is None and record.adapter_error is None


# --------------------------------------------------------------------------- settled verify
def test_verify_checks_the_query_system_and_says_what_it_did_not_check(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from settled import _cmd_verify, _verify
    from settled.conformance._bundled import _suites

    passed = _verify.check_system_lockstep("query", "dev", 0)
    assert passed["checked"] and passed["ok"], passed
    assert passed["trace_check"]["events"] > 0 and passed["suite"] == "query_system"
    assert "runs" in _cmd_verify._system_lockstep_cell(passed)
    # A step the system's runs never fired is said, even when the campaign passed.
    never = {**passed, "unfired": ["resubmit: not_found -> submission_retry_exhausted"]}
    _cmd_verify.details({"machines": {"query": {
        "static": {}, "explore": {"findings": []}, "system": {}, "system_lockstep": never,
        "lockstep": {}}}, "views": {}})
    assert ("query: the system campaign never fired resubmit: not_found -> "
            "submission_retry_exhausted") in " ".join(capsys.readouterr().err.split())
    # Every cross-instance story the bounded search reaches was performed; the set is said
    # to be partial (the search is bounded), in the row and on stderr.
    stories = passed["interactions"]
    assert stories["missing"] == [] and stories["covered"] == stories["reachable"] > 0, stories
    assert _cmd_verify._interactions_cell(passed).endswith(
        f"{stories['covered']}/{stories['reachable']} (bounded search: partial)")
    # One never performed is named, and fails the system's row.
    story = ["confirm: awaiting_confirmation -> queued", "awaiting_confirmation"]
    unperformed = {**passed, "ok": False,
                   "interactions": {**stories, "covered": stories["covered"] - 1,
                                    "missing": [story]}}
    assert "✗" in _cmd_verify._interactions_cell(unperformed)
    _cmd_verify.details({"machines": {"query": {
        "static": {}, "explore": {"findings": []}, "system": {},
        "system_lockstep": unperformed, "lockstep": {}}}, "views": {}})
    err = " ".join(capsys.readouterr().err.split())
    assert ("query: the system campaign never performed confirm: awaiting_confirmation -> "
            "queued while another instance was awaiting_confirmation") in err
    assert "query: interactions PARTIAL" in err
    monkeypatch.delitem(_verify.SYSTEM_SUITES, "ledger_system")  # as if no adapter drove it
    missing = _verify.check_system_lockstep("ledger", "dev", 0)
    assert missing == {"checked": False, "ok": False,
                       "why": "no adapter drives the ledger system's shared state yet"}
    assert "NOT CHECKED" in _cmd_verify._system_lockstep_cell(missing)
    # A system campaign that diverges fails verify's line for the machine.
    mutated = _suites.SystemSuite("query_system", query_system(2, 2),
                                  lambda: _adapter(OlderPendingMessageIgnored)(2, 2),
                                  query_system(2, 2).machine.refusable)
    monkeypatch.setitem(_verify.SYSTEM_SUITES, "query_system", lambda: mutated)
    monkeypatch.setenv("SETTLED_COUNTEREXAMPLES", str(tmp_path))  # not into the checkout
    failed = _verify.check_system_lockstep("query", "dev", 0)
    assert failed["checked"] and not failed["ok"] and "did not refuse" in failed["failure"]
    report = _verify.MachineReport("query", system_lockstep=failed)
    assert not report.ok and report.to_json()["system_lockstep"] is failed


# --------------------------------------------------------------------------- the approval system
@pytest.mark.rule("W6")
def test_two_orders_on_the_last_unit_the_second_is_refused_by_the_business_store() -> None:
    from settled.conformance._bundled._approval_system_adapter import (
        ApprovalSystemAdapter,
        approval_system,
    )
    from settled.conformance.mutants.approval_system import MUTANTS as APPROVAL_MUTANTS

    system = approval_system(2, 1)

    def order(i: int) -> list[SystemAction]:
        return [q(i, "propose", retry_safe=False), q(i, "show"), q(i, "approve"),
                q(i, "execute")]

    # The calls share one session, so the second order starts once the first is answered.
    steps = [*order(0), q(0, "commit"), q(0, "save_result"), q(0, "answer"), *order(1),
             q(1, "business_rejected")]
    run = Runner(system, lambda: ApprovalSystemAdapter(2, 1), system.machine.refusable)
    for a in steps:
        run.apply(a)
        run.check()  # stock observed through observe(None) after every step
    assert run.observe_system() == {"stock": 0, "session": "free"}
    assert [run.observe(i)["state"] for i in range(2)] == ["answered", "failed"]
    run.finish()
    w6 = next(m for m in APPROVAL_MUTANTS if m.rule == "W6")
    message = replay(system, lambda: w6.adapter_class(2, 1), system.machine.refusable, steps)
    assert message is not None and "q1 differs" in message


@pytest.mark.rule("A8")
def test_one_session_runs_one_operation_at_a_time() -> None:
    """While the first call's handler runs, the second call of the session cannot be
    proposed, approved or cancelled: the model refuses them, and so does the runtime's
    session lock (SessionBusy changes nothing). A lock taken per call lets them in."""
    from settled.conformance._bundled._approval_system_adapter import (
        ApprovalSystemAdapter,
        approval_system,
    )
    from settled.conformance.mutants.approval_system import MUTANTS as APPROVAL_MUTANTS

    system = approval_system(2, 1)
    refusable = system.machine.refusable
    shown = [q(1, "propose", retry_safe=False), q(1, "show")]
    running = [q(0, "propose", retry_safe=False), q(0, "show"), q(0, "approve"),
               q(0, "execute")]
    steps = [*shown, *running, q(1, "approve", forbidden=True),
             q(1, "cancel", forbidden=True), q(0, "commit")]
    run = Runner(system, lambda: ApprovalSystemAdapter(2, 1), refusable)
    for a in steps:
        run.apply(a)
        run.check()
    assert run.observe_system()["session"] == "held"
    assert [run.observe(i)["state"] for i in range(2)] == ["committed", "pending_approval"]
    # The probes are the ones the system adds: the machine alone would allow both.
    probes = {a.trigger for a in run.system_probes(1)}
    assert {"approve", "cancel"} <= probes
    # A crash after the commit: the restarted runtime recovers at once, holding the session
    # again; the answer frees it, and the second call goes on.
    for a in [q(0, "crash_after_commit"), q(0, "lookup_found"), q(0, "answer"),
              q(1, "approve")]:
        run.apply(a)
        run.check()
    assert run.observe_system()["session"] == "free"
    run.finish()
    a8 = next(m for m in APPROVAL_MUTANTS if m.rule == "A8")
    message = replay(system, lambda: a8.adapter_class(2, 1), refusable, steps)
    assert message is not None and "session: implementation 'free', model 'held'" in message
    mutant = a8.adapter_class(2, 1)
    try:
        for a in [*shown, *running]:
            mutant.perform(a.instance, a.trigger, a.params)
        mutant.perform(1, "approve", {})  # let in while the first call's handler runs
        assert mutant.observe(1)["state"] == "approved"
    finally:
        mutant.close()


@pytest.mark.rule("A8")
def test_every_session_operation_is_probed_while_another_call_runs() -> None:
    """Not only a caller's refusable actions: a new call (propose), and a restarted call's
    show, take the session's lock too, so while another call's runtime holds it the kit
    probes them, and the runtime refuses each (SessionBusy), changing nothing."""
    from settled.conformance._bundled._approval_system_adapter import (
        ApprovalSystemAdapter,
        approval_system,
    )

    system = approval_system(2, 1)
    run = Runner(system, lambda: ApprovalSystemAdapter(2, 1), system.machine.refusable)
    for a in [q(0, "propose", retry_safe=False), q(0, "show"), q(0, "approve"),
              q(0, "execute")]:
        run.apply(a)
        run.check()
    probes = {a.trigger: a for a in run.system_probes(1)}
    assert "propose" in probes and "propose" not in system.machine.refusable
    run.apply(probes["propose"])  # refused by the lock, nothing changed anywhere
    run.check()
    for a in [q(0, "crash_before_commit"), q(0, "crash_while_recovering"),
              q(1, "propose", retry_safe=False), q(1, "crash_before_shown"),
              q(0, "lookup_absent")]:
        run.apply(a)
        run.check()
    assert run.observe_system()["session"] == "held"  # q0's re-run holds it; q1 waits
    probes = {a.trigger: a for a in run.system_probes(1)}
    assert {"show", "cancel"} <= set(probes)
    for trigger in ("show", "cancel"):
        run.apply(probes[trigger])
        run.check()
    run.finish()


@pytest.mark.rule("A8")
def test_a_lock_that_claims_a_step_the_runtime_does_not_lock_is_caught() -> None:
    """The declaration can be wrong the other way too: a mutex that also 'takes' a world
    change (resubmitting a draft) makes the kit probe it while another call runs, and the
    correct runtime, rightly, does not refuse it."""
    import dataclasses

    from settled.conformance._bundled._approval_system_adapter import ApprovalSystemAdapter
    from settled.conformance._lockstep._shrink import Divergence
    from settled.model.systems import build_approval_system

    right = build_approval_system(calls=2, stock=1)
    assert right.mutex is not None
    wrong = dataclasses.replace(right, mutex=dataclasses.replace(
        right.mutex, takes=right.mutex.takes | {"draft_resubmitted"}))
    run = Runner(wrong, lambda: ApprovalSystemAdapter(2, 1), wrong.machine.refusable)
    try:
        run.apply(q(0, "propose", retry_safe=False))  # q0's runtime holds the session at R1
        [probe] = [a for a in run.system_probes(1) if a.trigger == "draft_resubmitted"]
        with pytest.raises(Divergence, match="did not refuse q1 draft_resubmitted"):
            run.apply(probe)
    finally:
        run.adapter.close()
