"""The approval machine (A1–A8, R1–R6): stories through the oracle, properties by BFS.

A story the protocol allows is fired step by step through the ``transitions``
oracle; a twisted story (the mistake an implementation could make) is
refused at the step that makes it wrong. A twisted *machine* — the table with
one transition changed the way a buggy implementation would behave — must
break a declared property somewhere in its reachable configurations, which
shows that the properties can fail at all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from settled.conformance._explore import ExploreResult, explore, explore_via_transitions
from settled.model import DeclarationError, Effect, IllegalTransition, Protocol, Transition
from settled.model._oracle import Oracle
from settled.model.approval import APPROVAL, ApprovalState, build_approval_machine

S = ApprovalState


@pytest.fixture(scope="module")
def explored() -> ExploreResult:
    return explore(APPROVAL)


def fire(oracle: Oracle, *triggers: str | tuple[str, dict[str, Any]]) -> Oracle:
    for item in triggers:
        trigger, params = (item, {}) if isinstance(item, str) else item
        oracle.fire(trigger, **params)
    return oracle


def v(oracle: Oracle) -> dict[str, Any]:
    return dict(APPROVAL.view(oracle.config))


PROPOSED = (("propose", {"retry_safe": False}), "show")
APPROVED = (*PROPOSED, "approve")
EXECUTING = (*APPROVED, "execute")


# --- the whole machine, by BFS ---------------------------------------------------------------


def test_the_explorer_finds_nothing_wrong(explored: ExploreResult) -> None:
    """No violation, deadlock or trap (every configuration can still settle: unknown always
    has a person's way out), every state reached and every transition fired."""
    assert explored.complete and explored.findings == []


def test_the_transitions_oracle_agrees_with_the_table_on_every_edge() -> None:
    assert explore_via_transitions(APPROVAL).ok


@pytest.mark.rule("A6")
def test_the_handler_can_really_run_twice_while_the_business_commits_once(
        explored: ExploreResult) -> None:
    answered = [APPROVAL.view(c) for _, _, (c,) in explored.iter_steps() if c.state == S.ANSWERED]
    twice = [v for v in answered if v["handler_entries"] == 2]
    assert twice, "the A6 situation must be reachable, or the invariant proves nothing"
    assert all(v["commits"] == 1 for v in answered)


def test_more_automatic_retries_keep_every_property() -> None:
    assert explore(build_approval_machine(auto_retries=2)).ok


# --- stories the protocol allows ---------------------------------------------------------------


@pytest.mark.rule("A1")
def test_happy_path_commits_once_and_answers_the_first_result() -> None:
    oracle = fire(Oracle(APPROVAL), *EXECUTING, "commit", "save_result", "answer")
    assert oracle.config.state == S.ANSWERED
    assert (v(oracle)["commits"], v(oracle)["result"], v(oracle)["token_id"]) == (1, "first",
                                                                                   "original")


@pytest.mark.rule("R1")
def test_r1_crash_before_display_keeps_the_pending_call_and_shows_it_after_restart() -> None:
    oracle = fire(Oracle(APPROVAL), ("propose", {"retry_safe": False}), "crash_before_shown")
    assert oracle.config.state == S.PENDING and v(oracle)["token_id"] == "original"
    with pytest.raises(IllegalTransition, match="shown"):
        oracle.fire("approve")  # nobody can approve what was never shown
    fire(oracle, "show", "approve")
    assert oracle.config.state == S.APPROVED


@pytest.mark.rule("R2")
@pytest.mark.rule("A2")
def test_r2_restart_while_pending_then_the_deadline_passes_blocks_the_handler() -> None:
    oracle = fire(Oracle(APPROVAL), *PROPOSED, "restart_while_pending", "deadline_passes",
                  "restart_while_pending")
    assert v(oracle)["deadline_passed"] is True  # the restart did not extend it
    fire(oracle, "approve")
    assert oracle.config.state == S.EXPIRED
    with pytest.raises(IllegalTransition):
        oracle.fire("execute")
    assert v(oracle)["handler_entries"] == 0


@pytest.mark.rule("R3")
def test_r3_crash_after_approval_resumes_the_original_call() -> None:
    oracle = fire(Oracle(APPROVAL), *APPROVED, "crash_before_handler", "execute", "commit",
                  "save_result", "answer")
    assert (v(oracle)["token_id"], v(oracle)["handler_entries"], v(oracle)["commits"]) == (
        "original", 1, 1)


@pytest.mark.rule("R4")
@pytest.mark.rule("A5")
@pytest.mark.rule("A6")
def test_r4_crash_before_commit_reruns_once_with_retries_off() -> None:
    oracle = fire(Oracle(APPROVAL), *EXECUTING, "crash_before_commit", "lookup_absent")
    assert oracle.config.state == S.EXECUTING
    assert (v(oracle)["rerun"], v(oracle)["retries_allowed"]) == (True, False)
    fire(oracle, "commit", "save_result", "answer")
    assert (v(oracle)["handler_entries"], v(oracle)["commits"]) == (2, 1)


@pytest.mark.rule("R5")
@pytest.mark.rule("A4")
def test_r5_crash_after_commit_is_found_without_entering_the_handler() -> None:
    oracle = fire(Oracle(APPROVAL), *EXECUTING, "commit", "crash_after_commit")
    with pytest.raises(IllegalTransition, match="nothing_committed"):
        oracle.fire("lookup_absent")  # the store has the commit: absent is not an answer
    fire(oracle, "lookup_found", "answer")
    assert (v(oracle)["handler_entries"], v(oracle)["result"]) == (1, "first")


@pytest.mark.rule("R6")
def test_r6_crash_after_the_result_checkpoint_only_answers() -> None:
    oracle = fire(Oracle(APPROVAL), *EXECUTING, "commit", "save_result", "crash_before_answer")
    for trigger in ("execute", "retry", "lookup_found"):
        with pytest.raises(IllegalTransition):
            oracle.fire(trigger)
    fire(oracle, "answer")
    assert oracle.config.state == S.ANSWERED


@pytest.mark.rule("A3")
@pytest.mark.rule("A4")
def test_a_failed_lookup_is_unknown_and_only_a_person_leaves_it() -> None:
    oracle = fire(Oracle(APPROVAL), *EXECUTING, "crash_before_commit", "lookup_failed")
    assert oracle.config.state == S.UNKNOWN
    for trigger in ("execute", "lookup_absent", "retry", "commit", "answer"):
        with pytest.raises(IllegalTransition):
            oracle.fire(trigger)
    fire(oracle, "resume_lookup", "lookup_absent")  # a person asked again; the one re-run
    assert oracle.config.state == S.EXECUTING


@pytest.mark.rule("A5")
def test_the_rerun_being_uncertain_again_is_unknown() -> None:
    oracle = fire(Oracle(APPROVAL), *EXECUTING, "crash_before_commit", "lookup_absent",
                  "outcome_uncertain")
    assert oracle.config.state == S.UNKNOWN
    fire(oracle, "resume_lookup")
    fire(oracle, "lookup_absent")  # absent again, but the one re-run is used
    assert oracle.config.state == S.UNKNOWN


@pytest.mark.rule("A5")
def test_only_a_retry_safe_tool_retries_and_then_only_once() -> None:
    safe = fire(Oracle(APPROVAL), ("propose", {"retry_safe": True}), "show", "approve",
                "execute", "retry")
    assert v(safe)["handler_entries"] == 2
    with pytest.raises(IllegalTransition, match="retry_left"):
        safe.fire("retry")
    unsafe = fire(Oracle(APPROVAL), *EXECUTING)
    with pytest.raises(IllegalTransition, match="retry_left"):
        unsafe.fire("retry")


@pytest.mark.rule("A4")
def test_an_incompatible_contract_goes_to_unknown_without_a_lookup() -> None:
    oracle = fire(Oracle(APPROVAL), *EXECUTING, "crash_before_commit", "contract_changed")
    with pytest.raises(IllegalTransition, match="compatible"):
        oracle.fire("lookup_absent")
    fire(oracle, "contract_incompatible")
    with pytest.raises(IllegalTransition, match="compatible"):
        oracle.fire("resume_lookup")
    fire(oracle, "reconcile")
    assert oracle.config.state == S.RECONCILED


@pytest.mark.rule("A7")
def test_cancel_stops_what_has_not_started_and_only_asks_otherwise() -> None:
    assert fire(Oracle(APPROVAL), *PROPOSED, "cancel").config.state == S.CANCELLED
    assert fire(Oracle(APPROVAL), *APPROVED, "cancel").config.state == S.CANCELLED
    stopped = fire(Oracle(APPROVAL), *EXECUTING, "cancel", "crash_before_commit", "lookup_absent")
    assert (stopped.config.state, v(stopped)["commits"]) == (S.CANCELLED, 0)
    stands = fire(Oracle(APPROVAL), *EXECUTING, "commit", "cancel", "crash_after_commit",
                  "lookup_found", "answer")
    assert (stands.config.state, v(stands)["commits"]) == (S.ANSWERED, 1)  # not a rollback
    done = fire(Oracle(APPROVAL), *EXECUTING, "commit", "save_result")
    with pytest.raises(IllegalTransition):
        done.fire("cancel")


def test_an_illegal_step_leaves_the_oracle_untouched() -> None:
    oracle = fire(Oracle(APPROVAL), *PROPOSED)
    before = oracle.config
    with pytest.raises(IllegalTransition):
        oracle.fire("execute")
    assert oracle.config == before


# --- twisted machines: each breaks a property ------------------------------------------------


def twist(find: Callable[[Transition], bool],
          change: Callable[[Transition], Transition | None],
          add: Iterable[Transition] = ()) -> Protocol:
    """APPROVAL with the matching transitions changed (or dropped, for ``None``)."""
    changed = [change(t) if find(t) else t for t in APPROVAL.transitions]
    kept = tuple(t for t in changed if t is not None)
    return dataclasses.replace(APPROVAL, name="twisted", transitions=(*kept, *add))


def broken(p: Protocol) -> set[str]:
    # A twisted machine may count past its domains without end: bound the search.
    return {f.name for f in explore(p, max_states=5_000).violations}


def _is(trigger: str, dest: str | None = "any") -> Callable[[Transition], bool]:
    return lambda t: t.trigger == trigger and (dest == "any" or t.dest == dest)


def _effect(**values: Any) -> Effect:
    return Effect(values)


@pytest.mark.rule("A2")
@pytest.mark.rule("R2")
def test_twist_a_restart_that_recomputes_the_deadline_is_caught() -> None:
    p = twist(_is("restart_while_pending"),
              lambda t: dataclasses.replace(t, effect=_effect(deadline_passed=False)))
    assert {"deadline_never_extended", "crash_changes_no_fact"} <= broken(p)


@pytest.mark.rule("A3")
def test_twist_a_failed_lookup_read_as_absent_commits_twice() -> None:
    rerun = next(t for t in APPROVAL.transitions if _is("lookup_absent", S.EXECUTING)(t))
    p = twist(_is("lookup_failed"),
              lambda t: dataclasses.replace(t, dest=S.EXECUTING, effect=rerun.effect))
    assert "at_most_one_commit" in broken(p)


@pytest.mark.rule("A1")
def test_twist_recovery_minting_a_new_token_is_caught() -> None:
    p = twist(_is("lookup_absent", S.EXECUTING),
              lambda t: dataclasses.replace(t, effect=_effect(token_id="new", rerun=True)))
    assert {"one_token", "token_never_changes"} <= broken(p)


@pytest.mark.rule("A4")
def test_twist_a_result_rebuilt_from_current_rows_is_caught() -> None:
    p = twist(_is("lookup_found"), lambda t: dataclasses.replace(t, effect=_effect(result="rebuilt")))
    assert {"found_result_is_first", "no_rebuilt_result"} <= broken(p)


@pytest.mark.rule("W2")
def test_twist_a_store_without_token_dedup_commits_twice_on_retry() -> None:
    p = twist(_is("retry"), lambda t: dataclasses.replace(
        t, source=(S.EXECUTING,), dest=None), add=(dataclasses.replace(
            next(t for t in APPROVAL.transitions if t.trigger == "retry"),
            source=(S.COMMITTED,), dest=S.EXECUTING),))
    assert "at_most_one_commit" in broken(p)


@pytest.mark.rule("A4")
def test_twist_unknown_retrying_by_itself_is_caught() -> None:
    execute = next(t for t in APPROVAL.transitions if t.trigger == "execute")
    p = twist(lambda t: False, lambda t: t, add=(dataclasses.replace(
        execute, trigger="auto_resume", source=(S.UNKNOWN,)),))
    assert {"unknown_never_writes", "unknown_left_by_a_person"} <= broken(p)


@pytest.mark.rule("A2")
def test_twist_an_approval_that_ignores_the_deadline_is_caught() -> None:
    p = twist(_is("approve"), lambda t: None if t.dest == S.EXPIRED
              else dataclasses.replace(t, guards=t.guards[:1]))
    assert "approval_before_deadline" in broken(p)


@pytest.mark.rule("A7")
def test_twist_cancel_as_a_rollback_is_caught() -> None:
    cancel = next(t for t in APPROVAL.transitions if _is("cancel", S.CANCELLED)(t))
    p = twist(lambda t: False, lambda t: t, add=(dataclasses.replace(
        cancel, trigger="undo", source=(S.RESULT_CHECKPOINTED,)),))
    assert "cancel_is_not_a_rollback" in broken(p)


@pytest.mark.rule("W7")
def test_twist_a_resubmitted_draft_ordered_again_is_caught() -> None:
    p = twist(_is("draft_resubmitted"),
              lambda t: dataclasses.replace(t, effect=_effect(draft_order="duplicate")))
    assert broken(p) == {"draft_submitted_once"}


@pytest.mark.rule("W8")
def test_twist_retention_dropping_an_in_flight_record_is_caught() -> None:
    p = twist(_is("retention_purge"),
              lambda t: dataclasses.replace(t, effect=_effect(token_record="lost")))
    assert broken(p) == {"retention_keeps_in_flight_tokens"}


@pytest.mark.rule("W2")
def test_twist_a_replayed_token_applied_again_is_caught() -> None:
    p = twist(_is("token_replayed"),
              lambda t: dataclasses.replace(t, effect=_effect(replay="applied_again")))
    assert broken(p) == {"replay_returns_first"}


def test_an_ambiguous_lookup_answer_is_refused_when_declared() -> None:
    with pytest.raises(DeclarationError, match="ambiguous"):
        twist(_is("lookup_absent", S.UNKNOWN), lambda t: dataclasses.replace(t, guards=t.guards[:2]))
