"""The worker: claim, submit, lookup, resubmit, cancel and late results (Q1, Q11–Q17, Q21–Q25).

Most tests end by replaying the store's event log through the declared model
with the conformance kit's trace checker: the log the worker wrote must be a
path the model allows.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from settled.conformance._trace import check_lines
from settled.impl.platform._platform import (
    APP_DAILY_SQL,
    APP_MONTHLY_SQL,
    MONTHLY_BY_CHANNEL_SQL,
    SyntheticPlatform,
)
from settled.impl.platform._platform_answers import (
    CANCEL_AFTER,
    CANCEL_BEFORE,
    FAULT_KIND,
    Fault,
    PlatformStatus,
    SubmitAnswer,
)
from settled.impl.query._events import trace_lines
from settled.impl.query._store import Query, QueryStore
from settled.impl.query._worker import Worker
from settled.impl.shared._crash import CrashNow, CrashPoints
from settled.impl.shared._errors import NotAllowed, StaleLease
from settled.model.query import QueryState as S

SESSION, USER = "s1", "u1"
START = datetime(2026, 2, 3, 2, 0, tzinfo=UTC)
CLOCK = (START, "Asia/Shanghai")
EXECUTE = "只看 app，再执行"
LEASE = 30


class FakeClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[SyntheticPlatform]:
    with SyntheticPlatform(tmp_path / "platform") as opened:
        yield opened


@pytest.fixture
def store(tmp_path: Path, platform: SyntheticPlatform, clock: FakeClock) -> Iterator[QueryStore]:
    with QueryStore(tmp_path / "store.db", platform, clock=clock) as opened:
        yield opened


@pytest.fixture
def worker(store: QueryStore, platform: SyntheticPlatform, clock: FakeClock) -> Iterator[Worker]:
    with Worker(store.path, platform, "w1", LEASE, clock) as opened:
        yield opened


@pytest.fixture
def task_id(store: QueryStore) -> str:
    return store.create_task(USER, SESSION, {"month": "2026-01", "channel": "app"}).task_id


def said(store: QueryStore, text: str, task_id: str) -> str:
    message = store.receive_message(SESSION, USER, text, CLOCK)
    store.attribute_message(message.message_id, task_id)
    return message.message_id


def queued(store: QueryStore, task_id: str, sql: str = APP_MONTHLY_SQL) -> Query:
    draft = store.request_query(task_id, sql)
    return store.confirm(draft.query_id, draft.draft_version, draft.condition_version, EXECUTE,
                         said(store, EXECUTE, task_id), store.start_run(SESSION))


def submitted(worker: Worker, query_id: str) -> S:
    worker.claim(query_id)
    worker.begin_submit(query_id)
    return worker.call_submit(query_id)


def log(store: QueryStore, query_id: str) -> list[tuple[str, str, str]]:
    return [(e["trigger"], e["from"], e["to"]) for e in store.events(query_id)]


def assert_conforms(store: QueryStore) -> None:
    report = check_lines(trace_lines(store.path))
    assert report.ok, "\n".join(v.text() for v in report.violations)


def dump(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {n: sorted(conn.execute(f"SELECT * FROM {n}").fetchall(), key=repr) for n in names}
    finally:
        conn.close()


# --------------------------------------------------------------------------- the seed story
@pytest.mark.rule("Q14")
@pytest.mark.rule("Q15")
@pytest.mark.rule("Q23")
@pytest.mark.rule("Q24")
@pytest.mark.rule("Q25")
@pytest.mark.rule("M2")
def test_seed_story_the_late_16_yuan_answers_the_earlier_question(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker) -> None:
    """Seed 003 end to end: revise to app, execute, lose the answer, move on to v3, 16 yuan arrives."""
    task = store.create_task(USER, SESSION, {"month": "2026-01", "metric": "net revenue",
                                             "unit": "yuan"}).task_id
    said(store, "查 2026 年 1 月各渠道净收入，金额用元", task)
    q1 = store.request_query(task, MONTHLY_BY_CHANNEL_SQL)
    execute = said(store, EXECUTE, task)
    store.update_conditions(task, 1, {"channel": "app"})
    assert store.query(q1.query_id).state is S.INVALIDATED
    q2 = store.request_query(task, APP_MONTHLY_SQL)
    assert (q2.draft_version, q2.condition_version) == (2, 2)
    store.confirm(q2.query_id, 2, 2, EXECUTE, execute, store.start_run(SESSION))

    worker.claim(q2.query_id)
    worker.begin_submit(q2.query_id)
    platform.inject(Fault.LOST_RESPONSE)
    assert worker.call_submit(q2.query_id) is S.UNKNOWN

    daily = said(store, "再按天展开，先给我 SQL", task)
    store.update_conditions(task, 2, {"granularity": "day"})
    q3 = store.request_query(task, APP_DAILY_SQL)
    assert worker.lookup(q2.query_id) is S.RUNNING
    platform.complete(q2.query_id)
    assert worker.lookup(q2.query_id) is S.SUCCEEDED

    done, now = store.query(q2.query_id), store.task(task)
    assert (done.condition_version, done.phase_moved) == (2, False)
    assert (now.condition_version, now.phase) == (3, "open"), "v3's phase is untouched"
    assert store.query(q3.query_id).state is S.AWAITING, "Q3 still needs its own confirmation"
    (note,) = store.notifications(task)
    assert (note.query_id, note.condition_version, note.sql) == (q2.query_id, 2, APP_MONTHLY_SQL)
    assert note.result == {"columns": ["channel", "net_revenue_yuan"], "rows": [["app", 16.0]]}
    assert "earlier question" in note.text and "channel=app" in note.text
    assert "the earlier result: channel app, net_revenue_yuan 16 yuan" in note.text
    assert "not the current version 3" in note.text
    assert (note.budget_message_id, note.request_clock_utc) == (
        execute, store.message(execute).request_clock_utc)
    assert store.message(note.message_id).kind == "notification"
    assert store.status(q2.query_id, execute).result is None
    assert store.status(q2.query_id, daily).result == note.result
    assert (platform.submissions_received(q2.query_id), platform.executions(q2.query_id)) == (1, 1)
    assert log(store, q2.query_id)[-4:] == [
        ("submit_unanswered", "submitting", "submission_unknown"),
        ("condition_updated", "submission_unknown", "submission_unknown"),
        ("lookup_running", "submission_unknown", "running"),
        ("lookup_succeeded", "running", "succeeded")]
    assert_conforms(store)


@pytest.mark.rule("Q24")
def test_a_result_at_the_tasks_current_version_moves_its_phase(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker, task_id: str) -> None:
    query = queued(store, task_id)
    submitted(worker, query.query_id)
    platform.complete(query.query_id)
    worker.lookup(query.query_id)
    assert store.query(query.query_id).phase_moved
    assert store.task(task_id).phase == "answered"
    (note,) = store.notifications(task_id)
    assert "earlier" not in note.text and "16 yuan" in note.text
    assert_conforms(store)


@pytest.mark.rule("Q24")
def test_a_result_while_the_task_awaits_clarification_moves_nothing(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker, task_id: str) -> None:
    # The model has no clarification variable (its phase_moved compares the
    # versions only), so this log is not replayed through it.
    query = queued(store, task_id)
    submitted(worker, query.query_id)
    store.set_awaiting_clarification(task_id, True)
    platform.complete(query.query_id)
    assert worker.lookup(query.query_id) is S.SUCCEEDED
    assert not store.query(query.query_id).phase_moved
    assert store.task(task_id).phase == "executing"


# --------------------------------------------------------------------------- leases (Q11)
@pytest.mark.rule("Q11")
def test_a_live_lease_is_claimed_only_after_it_expires(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker, clock: FakeClock,
        task_id: str) -> None:
    query = queued(store, task_id)
    assert worker.claim() == query.query_id
    with Worker(store.path, platform, "w2", LEASE, clock) as other:
        assert other.claim() is None
        with pytest.raises(NotAllowed, match="'w1' holds lease_epoch 1 until"):
            other.claim(query.query_id)
        clock.advance(LEASE + 1)
        assert other.claim() == query.query_id
    assert store.query(query.query_id).lease_epoch == 2
    assert_conforms(store)


@pytest.mark.rule("Q11")
def test_a_paused_worker_whose_lease_was_taken_over_changes_nothing(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker, clock: FakeClock,
        task_id: str) -> None:
    query = queued(store, task_id)
    qid = query.query_id
    worker.claim(qid)
    worker.begin_submit(qid)
    clock.advance(LEASE + 1)  # w1 pauses past its lease
    with Worker(store.path, platform, "w2", LEASE, clock) as other:
        other.claim(qid)
        rows = dump(store.path)
        with pytest.raises(StaleLease, match="lease_epoch 1, the row is at lease_epoch 2"):
            worker.call_submit(qid)
        with pytest.raises(StaleLease):
            worker.lookup(qid)
        assert dump(store.path) == rows
        assert platform.submissions_received(qid) == 0, "a stale lease never calls the platform"
        with pytest.raises(NotAllowed, match="possibly submitted, look it up"):
            other.call_submit(qid)
        other.run_until_idle()
        assert store.query(qid).state is S.RUNNING
    assert_conforms(store)


class PausingPlatform:
    """A platform whose submit lets something happen while the request is in flight."""

    def __init__(self, real: SyntheticPlatform, during: Callable[[], object]) -> None:
        self._real, self._during = real, during
        self.TARGET, self.TARGET_VERSION = real.TARGET, real.TARGET_VERSION

    def submit(self, query_id: str, sql: str) -> SubmitAnswer:
        self._during()
        return self._real.submit(query_id, sql)


@pytest.mark.rule("Q11")
@pytest.mark.rule("Q13")
def test_an_answer_arriving_after_a_takeover_is_not_recorded(
        store: QueryStore, platform: SyntheticPlatform, clock: FakeClock, task_id: str) -> None:
    qid = queued(store, task_id).query_id
    other = Worker(store.path, platform, "w2", LEASE, clock)

    def takeover() -> None:
        clock.advance(LEASE + 1)
        other.claim(qid)

    with Worker(store.path, PausingPlatform(platform, takeover), "w1", LEASE, clock) as slow, other:
        slow.claim(qid)
        slow.begin_submit(qid)
        with pytest.raises(StaleLease, match="the row is at lease_epoch 2"):
            slow.call_submit(qid)
        assert store.query(qid).state is S.SUBMITTING
        assert other.lookup(qid) is S.RUNNING, "the new owner finds it on the platform"
    assert (platform.submissions_received(qid), store.query(qid).submissions) == (1, 1)
    assert_conforms(store)


# --------------------------------------------------------------------------- submit (Q12–Q17)
@pytest.mark.rule("Q12")
def test_submitting_is_committed_before_the_platform_is_called(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker, task_id: str) -> None:
    qid = queued(store, task_id).query_id
    worker.claim(qid)
    assert worker.begin_submit(qid) is S.SUBMITTING
    seen = store.query(qid)  # another connection sees the commit
    assert (seen.state, seen.submissions, seen.submit_epoch) == (S.SUBMITTING, 1, 1)
    assert platform.submissions_received(qid) == 0
    assert worker.call_submit(qid) is S.RUNNING
    assert_conforms(store)


@pytest.mark.rule("Q13")
def test_a_recovered_submitting_is_looked_up_never_resubmitted(
        store: QueryStore, platform: SyntheticPlatform, clock: FakeClock, task_id: str) -> None:
    qid = queued(store, task_id).query_id
    doomed = Worker(store.path, platform, "w1", LEASE, clock,
                    crash=CrashPoints(["after_platform_stored"]))
    doomed.claim(qid)
    doomed.begin_submit(qid)
    with pytest.raises(CrashNow):
        doomed.call_submit(qid)
    doomed.close()
    clock.advance(LEASE + 1)
    with Worker(store.path, platform, "w2", LEASE, clock) as rescuer:
        rescuer.claim(qid)
        with pytest.raises(NotAllowed, match="possibly submitted"):
            rescuer.call_submit(qid)
        assert rescuer.lookup(qid) is S.RUNNING
        platform.complete(qid)
        assert rescuer.lookup(qid) is S.SUCCEEDED
    assert (platform.submissions_received(qid), platform.executions(qid)) == (1, 1)
    assert log(store, qid)[-3:] == [("claim", "submitting", "submitting"),
                                    ("lookup_running", "submitting", "running"),
                                    ("lookup_succeeded", "running", "succeeded")]
    assert_conforms(store)


@pytest.mark.rule("Q14")
@pytest.mark.rule("Q17")
def test_no_answer_is_unknown_and_only_an_explicit_rejection_is_failed(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker, task_id: str) -> None:
    lost, rejected = queued(store, task_id).query_id, queued(store, task_id).query_id
    platform.inject(Fault.LOST_RESPONSE)
    assert submitted(worker, lost) is S.UNKNOWN
    platform.inject(Fault.REJECT)
    assert submitted(worker, rejected) is S.FAILED
    assert "permission denied" in (store.status(rejected, said(store, "?", task_id)).error or "")
    (note,) = store.notifications(task_id)
    assert note.query_id == rejected and "it failed: permission denied" in note.text
    assert log(store, lost)[-1] == ("submit_unanswered", "submitting", "submission_unknown")
    assert_conforms(store)


@pytest.mark.rule("Q1")
@pytest.mark.rule("Q15")
@pytest.mark.rule("Q16")
def test_an_undelivered_request_is_resubmitted_under_the_same_id_after_not_found(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker, task_id: str) -> None:
    qid = queued(store, task_id).query_id
    platform.inject(Fault.UNDELIVERED)
    assert submitted(worker, qid) is S.UNKNOWN
    assert worker.lookup(qid) is S.NOT_FOUND
    assert worker.resubmit(qid) is S.SUBMITTING
    assert worker.call_submit(qid) is S.RUNNING
    assert store.query(qid).submissions == 2
    assert platform.submissions_received(qid) == 1, "one delivered request, same query_id"
    assert_conforms(store)


@pytest.mark.rule("Q14")
@pytest.mark.rule("Q15")
@pytest.mark.parametrize(("submit_fault", "lookup_fault", "kinds"), [
    (Fault.RESET_AFTER, Fault.BUSY, ("reset", "busy")),
    (Fault.MALFORMED, Fault.ERROR, ("malformed", "error")),
    (Fault.BUSY, Fault.RESET_BEFORE, ("busy", "reset")),
])
def test_every_fault_kind_is_unknown_and_logged_as_what_the_worker_met(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker, task_id: str,
        submit_fault: Fault, lookup_fault: Fault, kinds: tuple[str, str]) -> None:
    qid = queued(store, task_id).query_id
    platform.inject(submit_fault)
    assert submitted(worker, qid) is S.UNKNOWN
    platform.inject(lookup_fault)
    assert worker.lookup(qid) is S.UNKNOWN
    events = store.events(qid)[-2:]
    assert [(e["trigger"], e["params"].get("fault")) for e in events] == [
        ("submit_unanswered", kinds[0]), ("lookup_timeout", kinds[1])]
    assert store.query(qid).submissions == 1
    assert_conforms(store)


@pytest.mark.rule("Q15")
def test_a_lookup_timeout_proves_nothing_and_never_resubmits(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker, task_id: str) -> None:
    qid = queued(store, task_id).query_id
    platform.inject(Fault.UNDELIVERED)
    submitted(worker, qid)
    platform.inject(Fault.LOOKUP_TIMEOUT)
    assert worker.lookup(qid) is S.UNKNOWN
    assert log(store, qid)[-1] == ("lookup_timeout", "submission_unknown", "submission_unknown")
    with pytest.raises(NotAllowed, match="it is submission_unknown, resubmit needs not_found"):
        worker.resubmit(qid)
    assert store.query(qid).submissions == 1
    assert_conforms(store)


@pytest.mark.rule("Q16")
def test_three_submissions_not_found_end_the_query_exhausted(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker, task_id: str) -> None:
    qid = queued(store, task_id).query_id
    platform.inject(Fault.UNDELIVERED, count=3)
    worker.run_until_idle()
    done = store.query(qid)
    assert (done.state, done.submissions) == (S.EXHAUSTED, 3)
    assert platform.submissions_received(qid) == 0
    assert [t for t, _, _ in log(store, qid)].count("resubmit") == 3
    (note,) = store.notifications(task_id)
    assert "not found on the platform after 3 submissions" in note.text
    assert_conforms(store)


def test_a_failure_on_the_platform_is_recorded_with_its_reason(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker, task_id: str) -> None:
    qid = queued(store, task_id).query_id
    submitted(worker, qid)
    platform.inject(Fault.EXEC_FAIL)
    platform.complete(qid)
    assert worker.lookup(qid) is S.FAILED
    assert "EXEC_FAIL" in (store.notifications(task_id)[0].text)
    assert_conforms(store)


# --------------------------------------------------------------------------- cancel (Q21, Q22)
@pytest.mark.rule("Q21")
def test_a_cancel_while_running_is_recorded_on_the_platforms_evidence(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker, task_id: str) -> None:
    qid = queued(store, task_id).query_id
    submitted(worker, qid)
    store.cancel(qid)
    assert store.query(qid).state is S.RUNNING, "a request is not a cancel"
    assert worker.settle_cancel(qid) is S.CANCELLED
    assert platform.lookup(qid).status is PlatformStatus.CANCELLED
    assert platform.executions(qid) == 0
    assert log(store, qid)[-1] == ("cancel_confirmed", "running", "cancelled")
    assert_conforms(store)


@pytest.mark.rule("Q21")
def test_a_success_before_the_cancel_stands(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker, task_id: str) -> None:
    qid = queued(store, task_id).query_id
    submitted(worker, qid)
    platform.complete(qid)
    store.cancel(qid)
    assert worker.settle_cancel(qid) is S.SUCCEEDED
    assert store.query(qid).cancel_state == "requested"
    assert store.notifications(task_id)[0].result is not None
    assert_conforms(store)


@pytest.mark.rule("Q21")
def test_a_cancel_of_a_query_the_platform_never_got_is_confirmed_without_resubmitting(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker, task_id: str) -> None:
    qid = queued(store, task_id).query_id
    platform.inject(Fault.UNDELIVERED)
    submitted(worker, qid)
    store.cancel(qid)
    worker.run_until_idle()
    assert store.query(qid).state is S.CANCELLED
    assert [t for t, _, _ in log(store, qid)][-2:] == ["lookup_not_found", "confirm_cancel"]
    assert platform.submissions_received(qid) == 0
    assert_conforms(store)


@pytest.mark.rule("Q21")
@pytest.mark.rule("Q14")
@pytest.mark.parametrize("fault", [*CANCEL_BEFORE, *CANCEL_AFTER], ids=lambda f: f.value)
def test_an_unanswered_cancel_logs_its_fault_and_no_verdict(
        store: QueryStore, platform: SyntheticPlatform, worker: Worker, task_id: str,
        fault: Fault) -> None:
    qid = queued(store, task_id).query_id
    submitted(worker, qid)
    store.cancel(qid)
    before = store.events(qid)
    platform.inject(fault)
    assert worker.settle_cancel(qid) is S.RUNNING
    events = store.events(qid)
    assert events[:-1] == before
    assert log(store, qid)[-1] == ("cancel_unanswered", "running", "running")
    assert events[-1]["params"]["fault"] == FAULT_KIND[fault]
    assert store.query(qid).cancel_state == "requested"  # still to be settled
    # Before the platform saw it, it still runs; after, it was cancelled: the same log.
    acted = fault in CANCEL_AFTER
    assert platform.status(qid) is (PlatformStatus.CANCELLED if acted else PlatformStatus.RUNNING)
    assert worker.settle_cancel(qid) is S.CANCELLED
    assert_conforms(store)


@pytest.mark.rule("Q22")
def test_ending_the_run_that_confirmed_a_query_does_not_cancel_it(
        store: QueryStore, platform: SyntheticPlatform, clock: FakeClock, task_id: str) -> None:
    draft = store.request_query(task_id, APP_MONTHLY_SQL)
    run = store.start_run(SESSION)
    store.confirm(draft.query_id, 1, 1, EXECUTE, said(store, EXECUTE, task_id), run)
    store.end_run(run)
    with SyntheticPlatform(platform.directory, auto_complete_after_polls=1) as finishing, \
            Worker(store.path, finishing, "w1", LEASE, clock) as worker:
        worker.run_until_idle()
    done = store.query(draft.query_id)
    assert (done.state, done.cancel_state) == (S.SUCCEEDED, "none")
    assert_conforms(store)


# --------------------------------------------------------------------------- notifications (Q25)
@pytest.mark.rule("Q24")
@pytest.mark.rule("Q25")
def test_a_crash_after_the_terminal_commit_finds_the_notification_already_queued(
        store: QueryStore, platform: SyntheticPlatform, clock: FakeClock, task_id: str) -> None:
    qid = queued(store, task_id).query_id
    doomed = Worker(store.path, platform, "w1", LEASE, clock,
                    crash=CrashPoints(["after_terminal_stored"]))
    submitted(doomed, qid)
    platform.complete(qid)
    with pytest.raises(CrashNow):
        doomed.lookup(qid)
    doomed.close()
    # The outcome and its notification are one commit: nothing is missing.
    assert store.query(qid).state is S.SUCCEEDED and len(store.notifications(task_id)) == 1
    with Worker(store.path, platform, "w2", LEASE, clock) as rescuer:
        assert not rescuer.run_once()
        assert rescuer.recover_notifications() == []
    assert len(store.notifications(task_id)) == 1
    assert_conforms(store)


@pytest.mark.rule("Q24")
def test_a_settled_query_without_a_notification_gets_one_on_recovery(
        store: QueryStore, platform: SyntheticPlatform, clock: FakeClock, task_id: str) -> None:
    qid = queued(store, task_id).query_id
    with Worker(store.path, platform, "w1", LEASE, clock) as worker:
        submitted(worker, qid)
        platform.complete(qid)
        worker.lookup(qid)
    # A store written before outcome and notification shared a commit.
    raw = sqlite3.connect(store.path, isolation_level=None)
    (message_id,) = raw.execute("SELECT message_id FROM notifications WHERE query_id = ?",
                                (qid,)).fetchone()
    raw.execute("DELETE FROM notifications WHERE query_id = ?", (qid,))
    raw.execute("DELETE FROM messages WHERE message_id = ?", (message_id,))
    raw.close()
    assert store.notifications(task_id) == []
    with Worker(store.path, platform, "w2", LEASE, clock) as rescuer:
        assert len(rescuer.recover_notifications()) == 1
        assert rescuer.recover_notifications() == []
    assert len(store.notifications(task_id)) == 1


# --------------------------------------------------------------------------- processes (Q11)
RACER = """
import sys
from settled.impl.platform._platform import SyntheticPlatform
from settled.impl.query._worker import Worker

store, platform_dir, name = sys.argv[1:4]
with SyntheticPlatform(platform_dir, auto_complete_after_polls=1) as platform, \\
        Worker(store, platform, name, 30) as worker:
    worker.run_until_idle()
"""


@pytest.mark.rule("Q1")
@pytest.mark.rule("Q11")
def test_three_worker_processes_run_each_query_exactly_once(
        store: QueryStore, platform: SyntheticPlatform, task_id: str) -> None:
    ids = [queued(store, task_id).query_id for _ in range(8)]
    racers = [subprocess.Popen([sys.executable, "-c", RACER, str(store.path),
                                str(platform.directory), f"p{n}"], stderr=subprocess.PIPE,
                               text=True) for n in range(3)]
    for racer in racers:
        _, err = racer.communicate(timeout=60)
        assert racer.returncode == 0, err
    assert {store.query(q).state for q in ids} == {S.SUCCEEDED}
    assert [platform.executions(q) for q in ids] == [1] * 8
    assert [platform.submissions_received(q) for q in ids] == [1] * 8
    assert len(store.notifications(task_id)) == 8
    owners = {store.query(q).lease_owner for q in ids}
    assert owners <= {"p0", "p1", "p2"}
    assert_conforms(store)


# --------------------------------------------------------------------------- one commit (Q11, Q12)
@pytest.mark.rule("Q12")
def test_claiming_a_queued_query_with_begin_submit_logs_both_steps_in_one_commit(
        store: QueryStore, worker: Worker, task_id: str) -> None:
    qid = queued(store, task_id).query_id
    assert worker.claim(qid, begin_submit=True) == qid
    assert log(store, qid)[-2:] == [("claim", "queued", "queued"),
                                    ("begin_submit", "queued", "submitting")]
    done = store.query(qid)
    assert (done.submissions, done.submit_epoch, done.lease_epoch) == (1, 1, 1)
    assert worker.call_submit(qid) is S.RUNNING
    assert_conforms(store)


def test_claiming_a_live_query_with_begin_submit_only_claims(
        store: QueryStore, platform: SyntheticPlatform, clock: FakeClock, task_id: str) -> None:
    qid = queued(store, task_id).query_id
    with Worker(store.path, platform, "w1", 0, clock) as first:
        submitted(first, qid)
    with Worker(store.path, platform, "w2", 0, clock) as second:
        second.claim(qid, begin_submit=True)
    assert log(store, qid)[-1] == ("claim", "running", "running")
    assert_conforms(store)


# --------------------------------------------------------------------------- its own constants
def test_the_worker_keeps_its_own_submission_budget_and_lockstep_sees_a_wrong_one(
        monkeypatch, tmp_path):
    """impl/ owns its constants: the budget the worker enforces is its own name, not the
    model's, so a budget that disagrees with the model's is a divergence, not invisible."""
    from settled.conformance import lockstep
    from settled.conformance._bundled._query_adapter import QueryAdapter
    from settled.impl.query import _worker
    from settled.model import query as model

    assert _worker.MAX_SUBMISSIONS == model.MAX_SUBMISSIONS
    monkeypatch.setattr(_worker, "MAX_SUBMISSIONS", model.MAX_SUBMISSIONS + 1)
    report = lockstep(QueryAdapter, "query", profile="dev", seed=1, out=tmp_path)
    assert report.status == "diverged", report.text()
    assert "submissions" in (report.failure or ""), report.failure  # the fourth one, refused
