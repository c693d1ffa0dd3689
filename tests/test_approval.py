"""The approval runtime (A1–A8, R1–R6, V1) against real SQLite files, in process.

A crash here is an exception the hook raises at a named point, after which
the test closes everything and opens a new runtime on the same files, as a
restarted process would; ``test_approval_crash.py`` does the same with real
hard exits. Every run's event log is also checked against the model: the
recorded triggers must be a path the approval machine allows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from settled._demo_approval import bench_approval, demo_approval
from settled.impl.approval._approval import (
    TOOL_SPECS,
    ApprovalExpired,
    ApprovalRuntime,
    Call,
    CallState,
    IllegalCallState,
    SessionBusy,
    ToolSpec,
)
from settled.impl.approval._business import BusinessStore
from settled.impl.approval._reconciler import LookupAnswer, LookupStatus, lookup
from settled.impl.shared._errors import Busy, CallerError, InvalidInput, LookupFailed, NotFound
from settled.model import Config
from settled.model.approval import APPROVAL

S = CallState
T0 = 1_000.0
ADJUST = {"sku": "A1001", "delta": 5}


class Crash(BaseException):
    """Stands in for a hard exit: no ``except Exception`` in the runtime catches it."""


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Hook:
    """Counts handler entries; raises ``fault`` once at ``point`` (or on every entry listed)."""

    def __init__(self) -> None:
        self.entries = 0
        self.faults: dict[str, list[BaseException]] = {}

    def at(self, point: str, *faults: BaseException) -> Hook:
        self.faults[point] = list(faults)
        return self

    def __call__(self, point: str) -> None:
        if point == "handler_entered":
            self.entries += 1
        pending = self.faults.get(point)
        if pending:
            raise pending.pop(0)


class Env:
    """The two files, and a way to (re)start a runtime on them."""

    def __init__(self, tmp: Path) -> None:
        self.checkpoint, self.business = tmp / "checkpoint.db", tmp / "business.db"
        BusinessStore.create(self.business).close()
        self.clock, self.hook = Clock(), Hook()
        self.runtime = self.start()

    def start(self, **kwargs: Any) -> ApprovalRuntime:
        kwargs = {"clock": self.clock, "hook": self.hook, **kwargs}
        return ApprovalRuntime(self.checkpoint, self.business, **kwargs)

    def restart(self, **kwargs: Any) -> ApprovalRuntime:
        self.runtime.close()
        self.runtime = self.start(**kwargs)
        return self.runtime

    def approved(self, tool: str = "adjust_stock", args: Mapping[str, Any] = ADJUST,
                 session: str = "s1") -> Call:
        call = self.runtime.propose(session, tool, args)
        return self.runtime.approve(call.call_id)

    def mutations(self) -> list[dict[str, Any]]:
        with BusinessStore.open(self.business) as store:
            return list(store.snapshot()["mutation_requests"])

    def stock(self, sku: str = "A1001") -> int:
        with BusinessStore.open(self.business) as store:
            return int(store.stock(sku))


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    opened = Env(tmp_path)
    yield opened
    opened.runtime.close()


def spy(calls: list[str], answer: LookupAnswer) -> Callable[..., LookupAnswer]:
    def lookup_fn(token: str, *rest: object) -> LookupAnswer:
        calls.append(token)
        return answer
    return lookup_fn


def crash_at(env: Env, point: str, action: Callable[[], object]) -> None:
    env.hook.at(point, Crash(point))
    with pytest.raises(Crash):
        action()


# --- the trace fits the model ----------------------------------------------------------------


def _closure(configs: set[Config]) -> set[Config]:
    """Add everything reachable by steps that leave no event (commits, crashes, the clock)."""
    frontier, seen = list(configs), set(configs)
    while frontier:
        for step in APPROVAL.enabled(frontier.pop()):
            if step.transition.observable is None and step.after not in seen:
                seen.add(step.after)
                frontier.append(step.after)
    return seen


def _seen_as(model_state: str) -> str:
    # The checkpoint cannot see the business commit: the model's committed is logged executing.
    return S.EXECUTING.value if model_state == "committed" else model_state


def assert_fits_model(runtime: ApprovalRuntime, call_id: str) -> None:
    """Each logged step is a step the approval machine allows, between the logged states."""
    configs = _closure({APPROVAL.initial_config()})
    for trigger, source, dest in runtime.trace(call_id):
        configs = _closure({s.after for c in configs if _seen_as(c.state) == source
                            for s in APPROVAL.enabled(c) if s.transition.observable == trigger
                            and _seen_as(s.after.state) == dest})
        assert configs, f"{trigger} {source}->{dest} is not a model step in {runtime.trace(call_id)}"
    assert runtime.get(call_id).state.value in {_seen_as(c.state) for c in configs}


def settle_and_check(env: Env, call_id: str) -> Call:
    call = env.runtime.get(call_id)
    assert_fits_model(env.runtime, call_id)
    return call


# --- proposal (A1, W5) and bad input ----------------------------------------------------------


@pytest.mark.rule("A1")
@pytest.mark.rule("V1")
def test_propose_checkpoints_token_args_fingerprint_and_deadline_before_showing(env: Env) -> None:
    call = env.runtime.propose("s1", "adjust_stock", ADJUST)
    assert call.state is S.PENDING and call.shown and call.deadline == T0 + 300
    assert call.client_token.startswith("tok-") and dict(call.args) == ADJUST
    assert call.schema_fingerprint == TOOL_SPECS["adjust_stock"].schema_fingerprint
    assert env.runtime.events(call.call_id) == ["propose", "show"]
    [shown] = env.runtime.events_since("s1")
    assert (shown.kind, shown.payload["args"]) == ("approval_requested", ADJUST)
    assert env.mutations() == []  # asking for approval writes no business data


@pytest.mark.rule("W5")
def test_propose_checkpoints_the_business_stores_normalized_arguments(env: Env) -> None:
    call = env.runtime.propose("s1", "create_order", {"customer": "  Ann ", "items": [
        {"sku": "A1002", "quantity": 1}, {"sku": "A1001", "quantity": 2},
        {"sku": "A1002", "quantity": 3}]})
    assert call.args == {"customer": "Ann", "draft_id": None, "items": [
        {"sku": "A1001", "quantity": 2}, {"sku": "A1002", "quantity": 4}]}


@pytest.mark.parametrize(("tool", "args", "match"), [
    ("drop_table", {}, "unknown tool 'drop_table'; use one of create_order"),
    ("adjust_stock", {"sku": "A1001", "delta": 0}, "delta is 0"),
    ("adjust_stock", {"sku": "A1001"}, "missing field"),
    ("create_order", {"customer": "Ann", "items": []}, "items is"),
    ("set_listing", {"sku": "A1001", "listed": "yes"}, "true or false"),
])
def test_bad_input_is_a_typed_error_that_writes_nothing(env: Env, tool: str, args: dict[str, Any],
                                                        match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        env.runtime.propose("s1", tool, args)
    assert env.runtime.checkpoints.calls() == [] and env.mutations() == []


@pytest.mark.parametrize("session", ["", "  ", None, "x" * 129])
def test_a_bad_session_id_is_refused(env: Env, session: Any) -> None:
    with pytest.raises(InvalidInput, match="session_id"):
        env.runtime.propose(session, "adjust_stock", ADJUST)


def test_an_unknown_call_id_names_the_fix(env: Env) -> None:
    with pytest.raises(NotFound, match="call_id that propose"):
        env.runtime.approve("call-nope")


# --- approval and its deadline (A2, R1, R2) -----------------------------------------------------


@pytest.mark.rule("A1")
def test_the_happy_path_answers_the_first_result_once(env: Env) -> None:
    call = env.runtime.execute(env.approved().call_id)
    assert call.state is S.ANSWERED and call.result is not None
    assert (call.result["stock_before"], call.result["stock_after"]) == (100, 105)
    [record] = env.mutations()
    assert record["client_token"] == call.client_token and env.hook.entries == 1
    assert env.runtime.events(call.call_id) == ["propose", "show", "approve", "execute",
                                                "save_result", "answer"]
    settle_and_check(env, call.call_id)


@pytest.mark.rule("A2")
@pytest.mark.rule("R2")
def test_an_expired_approval_never_reaches_the_handler_and_a_restart_does_not_extend_it(
        env: Env) -> None:
    call = env.runtime.propose("s1", "adjust_stock", ADJUST)
    env.clock.now = T0 + 301
    env.restart()
    assert env.runtime.get(call.call_id).deadline == call.deadline
    with pytest.raises(ApprovalExpired, match="expired"):
        env.runtime.approve(call.call_id)
    assert env.runtime.get(call.call_id).state is S.EXPIRED
    with pytest.raises(IllegalCallState, match="propose a new call"):
        env.runtime.execute(call.call_id)
    assert (env.hook.entries, env.mutations()) == (0, [])
    settle_and_check(env, call.call_id)


@pytest.mark.rule("A2")
def test_recovering_a_pending_call_past_its_deadline_expires_it(env: Env) -> None:
    call = env.runtime.propose("s1", "adjust_stock", ADJUST)
    env.clock.now = T0 + 300
    assert env.runtime.recover(call.call_id).state is S.EXPIRED
    settle_and_check(env, call.call_id)


@pytest.mark.rule("A2")
def test_a_rejected_call_never_runs_and_leaves_its_token_unused(env: Env) -> None:
    call = env.runtime.propose("s1", "adjust_stock", ADJUST)
    assert env.runtime.reject(call.call_id).state is S.REJECTED
    for action in (env.runtime.approve, env.runtime.execute, env.runtime.reject):
        with pytest.raises(IllegalCallState, match="rejected"):
            action(call.call_id)
    answer = lookup(env.business, call.client_token, call.tool, call.args)
    assert answer.status is LookupStatus.ABSENT and env.hook.entries == 0
    settle_and_check(env, call.call_id)


@pytest.mark.rule("R1")
def test_r1_a_call_never_shown_cannot_be_approved_until_recovery_shows_it(env: Env) -> None:
    crash_at(env, "R1", lambda: env.runtime.propose("s1", "adjust_stock", ADJUST))
    env.restart()
    [call] = env.runtime.checkpoints.calls()
    assert (call.state, call.shown, env.runtime.events_since("s1")) == (S.PENDING, False, [])
    with pytest.raises(IllegalCallState, match="never shown"):
        env.runtime.approve(call.call_id)
    assert env.runtime.recover(call.call_id).shown
    env.runtime.approve(call.call_id)
    assert env.runtime.execute(call.call_id).state is S.ANSWERED
    settle_and_check(env, call.call_id)


# --- execution, retries and recovery (A3–A6, R3–R6) --------------------------------------------


@pytest.mark.rule("R3")
@pytest.mark.rule("A1")
def test_r3_recovery_consumes_the_original_approved_call(env: Env) -> None:
    call = env.approved()
    crash_at(env, "R3", lambda: env.runtime.execute(call.call_id))
    env.restart()
    done = env.runtime.recover(call.call_id)
    assert done.state is S.ANSWERED and done.client_token == call.client_token
    assert [m["client_token"] for m in env.mutations()] == [call.client_token]
    assert len(env.runtime.checkpoints.calls()) == 1
    settle_and_check(env, call.call_id)


@pytest.mark.rule("R4")
@pytest.mark.rule("A5")
@pytest.mark.rule("A6")
def test_r4_recovery_reruns_once_the_handler_runs_twice_the_business_commits_once(
        env: Env) -> None:
    call = env.approved()
    crash_at(env, "R4", lambda: env.runtime.execute(call.call_id))
    assert env.mutations() == [] and env.stock() == 100
    env.restart()
    done = env.runtime.recover(call.call_id)
    assert (done.state, done.rerun_used, env.hook.entries) == (S.ANSWERED, True, 2)
    assert len(env.mutations()) == 1 and env.stock() == 105
    assert "restart_while_executing" in env.runtime.events(call.call_id)
    settle_and_check(env, call.call_id)


@pytest.mark.rule("R5")
@pytest.mark.rule("A4")
def test_r5_recovery_restores_the_first_result_never_rebuilt_from_current_rows(env: Env) -> None:
    call = env.approved()
    crash_at(env, "R5", lambda: env.runtime.execute(call.call_id))
    env.restart()
    other = env.runtime.execute(env.approved(args={"sku": "A1001", "delta": -7},
                                             session="s2").call_id)
    assert other.result is not None and other.result["stock_after"] == 98  # stock moved on
    done = env.runtime.recover(call.call_id)
    assert done.result == {"sku": "A1001", "delta": 5, "stock_before": 100, "stock_after": 105}
    assert env.hook.entries == 2  # the original try and the other call: recovery entered none
    settle_and_check(env, call.call_id)


@pytest.mark.rule("R6")
@pytest.mark.rule("V1")
def test_r6_recovery_only_answers_from_the_checkpoint(env: Env) -> None:
    call = env.approved()
    crash_at(env, "R6", lambda: env.runtime.execute(call.call_id))
    looked: list[str] = []
    env.restart(lookup_fn=spy(looked, LookupAnswer(LookupStatus.ABSENT)))
    assert [e.kind for e in env.runtime.events_since("s1")][-1] == "executing"
    done = env.runtime.recover(call.call_id)
    assert (done.state, looked, env.hook.entries) == (S.ANSWERED, [], 1)
    assert [e.kind for e in env.runtime.events_since("s1")].count("answered") == 1
    settle_and_check(env, call.call_id)


@pytest.mark.rule("A5")
def test_a_retry_safe_tool_resends_the_same_token_once(env: Env) -> None:
    env.hook.at("handler_entered", Busy("locked"))
    call = env.approved("set_listing", {"sku": "A1001", "listed": False})
    done = env.runtime.execute(call.call_id)
    assert (done.state, env.hook.entries) == (S.ANSWERED, 2)
    assert env.runtime.events(call.call_id).count("retry") == 1
    settle_and_check(env, call.call_id)


@pytest.mark.rule("A5")
def test_a_retry_after_the_commit_gets_the_stored_first_result(env: Env) -> None:
    env.hook.at("R5", sqlite3.OperationalError("disk I/O error"))
    call = env.approved("cancel_order", {"order_id": _order(env)})
    done = env.runtime.execute(call.call_id)
    assert done.state is S.ANSWERED and done.result is not None
    assert done.result["status"] == "cancelled" and len(env.mutations()) == 2
    settle_and_check(env, call.call_id)


@pytest.mark.rule("A5")
def test_a_tool_that_is_not_retry_safe_asks_the_store_instead_of_resending(env: Env) -> None:
    env.hook.at("handler_entered", Busy("locked"))
    call = env.approved()
    done = env.runtime.execute(call.call_id)
    assert done.state is S.ANSWERED and "retry" not in env.runtime.events(call.call_id)
    assert env.runtime.events(call.call_id)[4:7] == ["outcome_uncertain", "lookup_absent",
                                                     "save_result"]
    settle_and_check(env, call.call_id)


@pytest.mark.rule("A5")
def test_the_rerun_being_uncertain_again_ends_unknown_and_nothing_writes_after(env: Env) -> None:
    env.hook.at("R4", Crash("R4"), sqlite3.OperationalError("disk I/O error"))
    call = env.approved()
    with pytest.raises(Crash):
        env.runtime.execute(call.call_id)
    env.restart()
    stuck = env.runtime.recover(call.call_id)
    assert stuck.state is S.UNKNOWN and "disk I/O error" in (stuck.error or "")
    assert env.runtime.recover(call.call_id) == stuck  # recovery waits for a person
    with pytest.raises(IllegalCallState, match="reconcile"):
        env.runtime.execute(call.call_id)
    assert (env.hook.entries, env.mutations()) == (2, [])
    settle_and_check(env, call.call_id)


@pytest.mark.rule("W4")
def test_a_business_refusal_fails_the_call_and_stores_nothing(env: Env) -> None:
    call = env.approved(args={"sku": "A1001", "delta": -1000})
    done = env.runtime.execute(call.call_id)
    assert done.state is S.FAILED and "only 100 in stock" in (done.error or "")
    assert env.mutations() == []
    settle_and_check(env, call.call_id)


@pytest.mark.rule("A3")
@pytest.mark.rule("A4")
def test_a_failed_lookup_is_unknown_not_absent_until_a_person_resumes(env: Env) -> None:
    call = env.approved()
    crash_at(env, "R4", lambda: env.runtime.execute(call.call_id))

    def failing(*args: Any) -> LookupAnswer:
        raise LookupFailed("database unreachable")
    env.restart(lookup_fn=failing)
    stuck = env.runtime.recover(call.call_id)
    assert (stuck.state, env.hook.entries, env.mutations()) == (S.UNKNOWN, 1, [])
    env.restart()
    done = env.runtime.resume_lookup(call.call_id)
    assert (done.state, env.hook.entries, len(env.mutations())) == (S.ANSWERED, 2, 1)
    settle_and_check(env, call.call_id)


@pytest.mark.rule("A3")
@pytest.mark.rule("W3")
def test_a_conflicting_record_is_unknown_and_a_person_reconciles_it(env: Env) -> None:
    call = env.approved()
    crash_at(env, "R4", lambda: env.runtime.execute(call.call_id))
    env.restart(lookup_fn=lambda *a: LookupAnswer(LookupStatus.CONFLICT))
    assert env.runtime.recover(call.call_id).state is S.UNKNOWN
    with pytest.raises(InvalidInput, match="note"):
        env.runtime.reconcile(call.call_id, " ")
    done = env.runtime.reconcile(call.call_id, "checked by hand: token held by another call")
    assert done.state is S.RECONCILED and env.mutations() == []
    settle_and_check(env, call.call_id)


@pytest.mark.rule("A4")
@pytest.mark.rule("L5")
def test_an_incompatible_contract_is_unknown_without_a_lookup(env: Env) -> None:
    call = env.approved()
    crash_at(env, "R4", lambda: env.runtime.execute(call.call_id))
    looked: list[str] = []
    upgraded = {**TOOL_SPECS, "adjust_stock": ToolSpec("adjust_stock", contract_version=2)}
    env.restart(tools=upgraded, lookup_fn=spy(looked, LookupAnswer(LookupStatus.ABSENT)))
    assert (env.runtime.recover(call.call_id).state, looked) == (S.UNKNOWN, [])
    with pytest.raises(IllegalCallState, match="contract changed"):
        env.runtime.resume_lookup(call.call_id)
    settle_and_check(env, call.call_id)


# --- cancel (A7) ------------------------------------------------------------------------------


@pytest.mark.rule("A7")
def test_cancel_stops_a_pending_or_approved_call(env: Env) -> None:
    pending = env.runtime.propose("s1", "adjust_stock", ADJUST)
    approved = env.approved(session="s2")
    for call in (pending, approved):
        assert env.runtime.cancel(call.call_id).state is S.CANCELLED
        with pytest.raises(IllegalCallState, match="cancelled"):
            env.runtime.execute(call.call_id)
        settle_and_check(env, call.call_id)
    assert (env.hook.entries, env.mutations()) == (0, [])


@pytest.mark.rule("A7")
def test_cancel_of_a_possibly_started_write_only_asks_and_stops_the_rerun(env: Env) -> None:
    call = env.approved()
    crash_at(env, "R4", lambda: env.runtime.execute(call.call_id))
    env.restart()
    asked = env.runtime.cancel(call.call_id)
    assert (asked.state, asked.cancel_requested) == (S.EXECUTING, True)
    assert env.runtime.recover(call.call_id).state is S.CANCELLED
    assert (env.hook.entries, env.mutations()) == (1, [])
    settle_and_check(env, call.call_id)


@pytest.mark.rule("A7")
def test_cancel_is_not_a_rollback(env: Env) -> None:
    call = env.approved()
    crash_at(env, "R5", lambda: env.runtime.execute(call.call_id))
    env.restart()
    env.runtime.cancel(call.call_id)
    assert env.runtime.recover(call.call_id).state is S.ANSWERED  # the commit stands
    with pytest.raises(IllegalCallState, match="not a rollback"):
        env.runtime.cancel(call.call_id)
    assert env.stock() == 105
    settle_and_check(env, call.call_id)


@pytest.mark.rule("A7")
@pytest.mark.rule("A8")
def test_the_recovery_pass_answers_a_commit_a_late_cancel_cannot_undo(env: Env) -> None:
    """A cancel lands on a committed call after its runtime died; the runtime's own pass takes
    the call up, finds the commit and answers its first result: the outcome stands as
    recorded, with the cancel request on record (A7, R5)."""
    call = env.approved()
    crash_at(env, "R5", lambda: env.runtime.execute(call.call_id))
    env.restart()
    env.runtime.cancel(call.call_id)
    (done,) = env.runtime.recovery_pass()
    assert (done.state, done.cancel_requested) == (S.ANSWERED, True)
    assert env.runtime.events(call.call_id)[-3:] == ["restart_while_executing", "lookup_found",
                                                     "answer"]
    assert env.stock() == 105 and env.runtime.recovery_pass() == []
    settle_and_check(env, call.call_id)


@pytest.mark.rule("A2")
@pytest.mark.rule("A8")
def test_the_recovery_pass_takes_up_every_open_call_but_a_busy_session_s(env: Env) -> None:
    """Old or new, every call nobody is running is moved on; unknown waits for a person, and a
    session a live process holds is left to it."""
    pending = env.runtime.propose("s1", "adjust_stock", ADJUST)
    approved = env.approved(session="s2")
    busy = env.runtime.propose("s3", "adjust_stock", ADJUST)
    env.clock.now += 10 * 24 * 3600.0  # long past every deadline and any look-back window
    with env.runtime.checkpoints.session_lock("s3", "another process"):
        taken = {c.call_id: c.state for c in env.runtime.recovery_pass()}
    assert taken == {pending.call_id: S.EXPIRED, approved.call_id: S.ANSWERED}
    assert env.runtime.get(busy.call_id).state is S.PENDING
    assert {c.call_id for c in env.runtime.recovery_pass(session_id="s3")} == {busy.call_id}
    assert env.runtime.get(busy.call_id).state is S.EXPIRED


# --- sessions (A8) ----------------------------------------------------------------------------


@pytest.mark.rule("A8")
def test_one_sessions_operations_exclude_each_other_and_other_sessions_do_not_wait(
        env: Env) -> None:
    first = env.runtime.propose("s1", "adjust_stock", ADJUST)
    other = env.start()
    seen: list[str] = []

    def meanwhile(point: str) -> None:
        if point == "handler_entered" and not seen:
            for action in (other.cancel, other.approve, other.recover):
                with pytest.raises(SessionBusy, match="busy with execute"):
                    action(first.call_id)
                seen.append(action.__name__)
            seen.append(other.propose("s2", "adjust_stock", ADJUST).state.value)
    env.approved()
    second = env.runtime.propose("s1", "set_listing", {"sku": "A1002", "listed": False})
    env.runtime.approve(second.call_id)
    env.runtime.close()
    env.runtime = env.start(hook=meanwhile)
    env.runtime.execute(second.call_id)
    other.close()
    assert seen == ["cancel", "approve", "recover", "pending_approval"]
    assert env.runtime.cancel(first.call_id).state is S.CANCELLED  # the lock was released


@pytest.mark.rule("A8")
def test_a_dead_holders_session_lock_is_taken_over(env: Env) -> None:
    with env.runtime.checkpoints.connection as conn:
        conn.execute("INSERT INTO session_locks VALUES ('s1', '999999999:x', 'execute', ?)", (T0,))
    assert env.runtime.propose("s1", "adjust_stock", ADJUST).state is S.PENDING


# --- display replay (V1) and retention (W8) -------------------------------------------------------


@pytest.mark.rule("V1")
def test_display_replay_returns_missed_events_once_and_never_calls_a_tool(env: Env) -> None:
    call = env.runtime.execute(env.approved().call_id)
    events = env.runtime.events_since("s1")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert env.runtime.events_since("s1", events[1].seq) == events[2:]
    env.restart()
    (env.business).unlink()  # a replay that touched the business store would fail now
    assert env.runtime.events_since("s1", 0) == events and env.hook.entries == 1
    assert events[-1].payload["result"] == call.result
    with pytest.raises(InvalidInput, match="seq"):
        env.runtime.events_since("s1", -1)


@pytest.mark.rule("W8")
def test_in_flight_tokens_protect_calls_recovery_may_still_need(env: Env) -> None:
    pending = env.runtime.propose("s1", "adjust_stock", ADJUST)
    done = env.runtime.execute(env.approved(session="s2").call_id)
    assert env.runtime.in_flight_tokens() == {pending.client_token}
    assert done.client_token not in env.runtime.in_flight_tokens()


def test_the_runtimes_state_and_event_names_come_from_the_model() -> None:
    observable = {t.observable for t in APPROVAL.transitions}
    assert {s.value for s in CallState} <= set(APPROVAL.state_names)
    assert {"restart_while_executing", "outcome_uncertain"} <= observable


# --- the demo and the bench ----------------------------------------------------------------------


@pytest.mark.rule("W1")
@pytest.mark.rule("W2")
@pytest.mark.rule("W3")
def test_demo_reproduces_the_seeds_example(tmp_path: Path) -> None:
    lines: list[str] = []
    assert demo_approval(tmp_path, lines.append) == {
        "observed_delta": 5, "replay_same_result": True, "lookup_status": "found",
        "different_arguments": "idempotency_conflict"}
    assert "reconciler lookup of the token: found" in lines  # the narration the CLI prints


def test_bench_reports_rates(tmp_path: Path) -> None:
    rates = bench_approval(tmp_path, 0.2)
    assert rates["writes_per_second"] > 0 and rates["lookups_per_second"] > 0


def _order(env: Env) -> str:
    with BusinessStore.open(env.business) as store:
        order = store.create_order("setup", {"customer": "Ann", "items": [
            {"sku": "A1001", "quantity": 1}]})
    return str(order["order_id"])


def test_caller_errors_are_value_errors(env: Env) -> None:
    """Bad calls can be caught as ValueError, like attrs' exceptions."""
    assert issubclass(IllegalCallState, CallerError) and issubclass(ApprovalExpired, ValueError)
