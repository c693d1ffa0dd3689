"""The query machine accepts the protocol's stories and refuses their twisted versions.

Every refusal is an ``IllegalTransition`` that names the trigger, the state
and the failed guard, and leaves the oracle exactly where it was.
"""

from __future__ import annotations

import pytest

from settled.model import QUERY, IllegalTransition
from settled.model._oracle import Oracle
from settled.model.query import QueryState as S

WHOLE = dict(quote="whole", draft_version="current", condition_version="current",
             message="attributed")


def queued() -> Oracle:
    o = Oracle(QUERY)
    o.fire("check_passed")
    o.fire("confirm", **WHOLE)
    return o


def submitting(worker: int = 0) -> Oracle:
    o = queued()
    o.fire("claim", worker=worker)
    o.fire("begin_submit", worker=worker)
    return o


def var(o: Oracle, name: str):
    return QUERY.view(o.config)[name]


def refused(o: Oracle, trigger: str, **params) -> IllegalTransition:
    before = o.config
    with pytest.raises(IllegalTransition) as info:
        o.fire(trigger, **params)
    assert o.config == before, "a refused trigger must leave the oracle unchanged"
    return info.value


@pytest.mark.rule("Q14")
@pytest.mark.rule("Q15")
def test_lost_response_is_unknown_until_a_lookup_finds_it():
    o = submitting()
    assert o.fire("submit_response_lost", worker=0, fault="timeout").state == S.UNKNOWN
    assert var(o, "platform") == "running"
    o.fire("platform_succeeds")
    assert o.fire("lookup_succeeded", worker=0).state == S.SUCCEEDED


@pytest.mark.rule("Q14")
def test_lost_response_is_never_failed():
    o = submitting()
    o.fire("submit_response_lost", worker=0, fault="timeout")
    err = refused(o, "lookup_failed", worker=0)
    assert "platform_failed" in str(err)


@pytest.mark.rule("Q15")
def test_lookup_timeout_stays_unknown():
    o = submitting()
    o.fire("submit_undelivered", worker=0, fault="timeout")
    assert o.fire("lookup_timeout", worker=0, fault="timeout").state == S.UNKNOWN
    assert var(o, "submissions") == 1


@pytest.mark.rule("Q15")
def test_lookup_timeout_never_resubmits():
    o = submitting()
    o.fire("submit_undelivered", worker=0, fault="timeout")
    o.fire("lookup_timeout", worker=0, fault="timeout")
    err = refused(o, "resubmit", worker=0)
    assert "no 'resubmit' transition leaves state 'submission_unknown'" in str(err)


@pytest.mark.rule("Q1")
@pytest.mark.rule("Q16")
def test_not_found_allows_resubmission_and_a_fourth_is_refused():
    o = submitting()
    for attempt in (1, 2):
        o.fire("submit_undelivered", worker=0, fault="timeout")
        o.fire("lookup_not_found", worker=0)
        assert o.fire("resubmit", worker=0).state == S.SUBMITTING
        assert var(o, "submissions") == attempt + 1
    o.fire("submit_undelivered", worker=0, fault="timeout")
    o.fire("lookup_not_found", worker=0)
    # The same trigger now settles as exhausted: there is no fourth submission.
    assert o.fire("resubmit", worker=0).state == S.EXHAUSTED
    assert var(o, "submissions") == 3
    assert var(o, "ids_submitted") == 1


@pytest.mark.rule("Q16")
def test_not_found_with_a_cancel_request_does_not_resubmit():
    o = submitting()
    o.fire("submit_undelivered", worker=0, fault="timeout")
    o.fire("cancel")
    o.fire("lookup_not_found", worker=0)
    err = refused(o, "resubmit", worker=0)
    assert "no_cancel" in str(err)
    assert o.fire("confirm_cancel", worker=0).state == S.CANCELLED


@pytest.mark.rule("Q20")
def test_cancel_while_queued_cancels_locally():
    o = queued()
    assert o.fire("cancel").state == S.CANCELLED
    assert var(o, "submissions") == 0


@pytest.mark.rule("Q21")
def test_cancel_after_submission_only_requests_and_platform_success_stands():
    o = submitting()
    o.fire("submit_answered", worker=0)
    assert o.fire("cancel").state == S.RUNNING
    assert var(o, "cancel_state") == "requested"
    o.fire("platform_succeeds")
    refused(o, "cancel_confirmed", worker=0)
    assert o.fire("lookup_succeeded", worker=0).state == S.SUCCEEDED


@pytest.mark.rule("Q21")
def test_cancelled_only_on_platform_evidence():
    o = submitting()
    o.fire("submit_answered", worker=0)
    o.fire("cancel")
    assert o.fire("cancel_confirmed", worker=0).state == S.CANCELLED
    assert var(o, "platform") == "cancelled"


@pytest.mark.rule("Q21")
def test_a_second_cancel_request_is_refused():
    o = submitting()
    o.fire("cancel")
    assert "no_cancel" in str(refused(o, "cancel"))


@pytest.mark.rule("Q11")
def test_a_paused_worker_whose_lease_was_taken_over_changes_nothing():
    o = submitting(worker=0)
    o.fire("claim", worker=1)  # worker 0's lease expired; worker 1 takes over
    err = refused(o, "submit_answered", worker=0)
    assert "fresh_lease" in str(err)
    assert var(o, "lease_epoch") == 2


@pytest.mark.rule("Q13")
def test_recovered_submitting_looks_up_before_it_may_resubmit():
    o = submitting(worker=0)
    o.fire("crash", worker=0)
    o.fire("claim", worker=1)
    assert "own_call" in str(refused(o, "submit_answered", worker=1))
    assert o.fire("lookup_not_found", worker=1).state == S.NOT_FOUND
    assert o.fire("resubmit", worker=1).state == S.SUBMITTING


@pytest.mark.rule("Q12")
def test_crash_after_platform_stored_is_found_by_lookup():
    o = submitting(worker=0)
    o.fire("crash_after_platform_stored", worker=0)
    o.fire("claim", worker=1)
    assert o.fire("lookup_running", worker=1).state == S.RUNNING


@pytest.mark.rule("Q17")
def test_explicit_rejection_fails():
    o = submitting()
    assert o.fire("submit_rejected", worker=0).state == S.FAILED


@pytest.mark.rule("Q5")
@pytest.mark.rule("Q25")
@pytest.mark.parametrize("quote", ["part", "notification"])
def test_only_the_whole_message_authorizes(quote):
    o = Oracle(QUERY)
    o.fire("check_passed")
    err = refused(o, "confirm", **{**WHOLE, "quote": quote})
    assert "quote_whole" in str(err)


@pytest.mark.rule("Q4")
@pytest.mark.parametrize("stale", ["draft_version", "condition_version"])
def test_stale_versions_do_not_authorize(stale):
    o = Oracle(QUERY)
    o.fire("check_passed")
    refused(o, "confirm", **{**WHOLE, stale: "stale"})


@pytest.mark.rule("Q9")
@pytest.mark.rule("Q10")
def test_an_undecided_message_blocks_first_confirmation():
    o = Oracle(QUERY)
    o.fire("check_passed")
    assert "message_settled" in str(refused(o, "confirm", **{**WHOLE, "message": "pending"}))


@pytest.mark.rule("Q8")
def test_reconfirmation_returns_the_current_state():
    o = submitting()
    before = o.config
    assert o.fire("confirm", **WHOLE) == before


@pytest.mark.rule("Q3")
def test_a_draft_that_failed_its_check_can_never_be_confirmed():
    o = Oracle(QUERY)
    o.fire("check_failed")
    refused(o, "confirm", **WHOLE)


@pytest.mark.rule("T2")
def test_a_condition_update_invalidates_a_pending_draft():
    o = Oracle(QUERY)
    o.fire("check_passed")
    assert o.fire("condition_updated").state == S.INVALIDATED
    refused(o, "confirm", **WHOLE)


@pytest.mark.rule("Q23")
@pytest.mark.rule("Q24")
def test_a_late_result_does_not_move_a_newer_task_version():
    o = submitting()
    o.fire("submit_answered", worker=0)
    o.fire("condition_updated")
    o.fire("condition_updated")
    assert var(o, "authorized_version") == 1
    o.fire("platform_succeeds")
    o.fire("lookup_succeeded", worker=0)
    assert var(o, "phase_moved") is False


@pytest.mark.rule("Q24")
def test_a_result_at_its_own_version_moves_the_phase():
    o = submitting()
    o.fire("submit_answered", worker=0)
    o.fire("platform_succeeds")
    o.fire("lookup_succeeded", worker=0)
    assert var(o, "phase_moved") is True


def test_terminal_states_absorb_every_trigger():
    o = queued()
    o.fire("cancel")
    for trigger in QUERY.triggers():
        for step_params in ({}, {"worker": 0}, WHOLE):
            with pytest.raises(IllegalTransition):
                o.fire(trigger, **step_params)


def test_an_unknown_trigger_is_named():
    with pytest.raises(IllegalTransition, match="no trigger named 'explode'"):
        Oracle(QUERY).fire("explode")


def test_the_oracle_and_the_table_agree_on_a_story():
    o = submitting()
    config = QUERY.fire(o.config, "submit_response_lost", {"worker": 0, "fault": "timeout"}).after
    assert o.fire("submit_response_lost", worker=0, fault="timeout") == config


@pytest.mark.rule("Q5")
def test_a_quote_padded_with_whitespace_authorizes_one_in_another_case_does_not():
    o = Oracle(QUERY)
    o.fire("check_passed")
    info = refused(o, "confirm", **{**WHOLE, "quote": "recased"})
    assert [g.name for g in info.failed_guards] == ["quote_whole"]
    assert o.fire("confirm", **{**WHOLE, "quote": "padded"}).state == S.QUEUED


@pytest.mark.rule("Q2")
@pytest.mark.rule("M1")
@pytest.mark.rule("Q22")
def test_a_rerun_a_redelivery_and_a_stopped_run_leave_the_query_as_it_was():
    o = queued()
    before = o.config
    for trigger in ("rerun", "message_redelivered", "run_stopped"):
        o.fire(trigger)
        assert o.config == before


@pytest.mark.rule("Q18")
@pytest.mark.rule("M2")
@pytest.mark.rule("Q26")
def test_content_follows_the_platform_the_budget_message_and_the_status_rule():
    o = submitting()
    assert var(o, "payload") == "none"
    o.fire("submit_answered", worker=0)
    assert var(o, "payload") == "confirmed"
    o.fire("platform_succeeds")
    assert (var(o, "result"), var(o, "notice"), var(o, "status_reply")) == ("none",) * 3
    o.fire("lookup_succeeded", worker=0)
    assert (var(o, "result"), var(o, "notice"), var(o, "status_reply")) == (
        "platform", "source", "withheld")
