"""A worker process hard-exits at each named crash point; recovery settles the query once.

The parent prepares an authorized query, a child process runs a worker armed
to ``os._exit(77)`` at one point, and the parent then checks the files the
way an operator would after a power cut: both SQLite files pass
``PRAGMA integrity_check``, the platform ran the SQL at most once, the event
log ends where the crash left it. A fresh worker (another process's view:
new connection, no remembered leases) then recovers, and the query settles
consistently with the platform's evidence, executed exactly once, not lost,
and notified exactly once.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from settled.conformance._trace import check_lines
from settled.impl.platform._platform import APP_MONTHLY_SQL, SyntheticPlatform
from settled.impl.query._events import trace_lines
from settled.impl.query._store import QueryStore
from settled.impl.query._worker import Worker
from settled.impl.shared._crash import CRASH_EXIT_CODE, CRASH_POINTS
from settled.model.query import QueryState as S

SESSION, USER, EXECUTE = "s1", "u1", "只看 app，再执行"
LEASE = 30

CHILD = """
import sys
from settled.impl.shared._crash import CrashPoints
from settled.impl.platform._platform import SyntheticPlatform
from settled.impl.query._worker import Worker

store, platform_dir, point, lease = sys.argv[1:5]
platform = SyntheticPlatform(platform_dir, auto_complete_after_polls=1)
worker = Worker(store, platform, "doomed", float(lease), crash=CrashPoints([point], mode="exit"))
worker.run_until_idle()
sys.exit(0)  # reaching this line means the crash point was never hit
"""

# What the log's last event is when the child dies at each point.
LAST_EVENT = {
    "after_submitting_commit": ("begin_submit", "submitting"),
    "after_platform_stored": ("begin_submit", "submitting"),
    "after_terminal_stored": ("lookup_succeeded", "succeeded"),
}
# What the platform holds for the query when the child dies at each point.
RECEIVED = {"after_submitting_commit": 0, "after_platform_stored": 1, "after_terminal_stored": 1}
# What recovery logs: nothing was sent → looked up, not found, resubmitted under the
# same id; something was sent → looked up, never resubmitted; settled → nothing.
RECOVERY = {
    "after_submitting_commit": ["claim", "lookup_not_found", "resubmit", "submit_answered",
                                "lookup_succeeded"],
    "after_platform_stored": ["claim", "lookup_succeeded"],
    "after_terminal_stored": [],
}
SUBMISSIONS = {"after_submitting_commit": 2, "after_platform_stored": 1, "after_terminal_stored": 1}


def prepare(tmp_path: Path) -> tuple[Path, Path, str, str]:
    store_path, platform_dir = tmp_path / "store.db", tmp_path / "platform"
    with SyntheticPlatform(platform_dir) as platform, QueryStore(store_path, platform) as store:
        task = store.create_task(USER, SESSION, {"month": "2026-01", "channel": "app"}).task_id
        message = store.receive_message(SESSION, USER, EXECUTE,
                                        (datetime(2026, 2, 3, 2, tzinfo=UTC), "Asia/Shanghai"))
        store.attribute_message(message.message_id, task)
        draft = store.request_query(task, APP_MONTHLY_SQL)
        store.confirm(draft.query_id, 1, 1, EXECUTE, message.message_id, store.start_run(SESSION))
    return store_path, platform_dir, draft.query_id, task


def integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.rule("Q12")
@pytest.mark.rule("Q13")
@pytest.mark.rule("Q24")
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_hard_exit_at_each_crash_point_recovers_to_one_execution(tmp_path: Path,
                                                                   point: str) -> None:
    store_path, platform_dir, qid, task = prepare(tmp_path)
    child = subprocess.run([sys.executable, "-c", CHILD, str(store_path), str(platform_dir), point,
                            str(LEASE)],
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == CRASH_EXIT_CODE, child.stderr

    platform = SyntheticPlatform(platform_dir, auto_complete_after_polls=1)
    assert integrity(store_path) == "ok"
    assert integrity(platform.ledger_path) == "ok"
    assert platform.executions(qid) <= 1
    assert platform.submissions_received(qid) == RECEIVED[point]
    with QueryStore(store_path, platform) as store:
        last = store.events(qid)[-1]
        assert (last["trigger"], last["to"]) == LAST_EVENT[point]
        # Outcome and notification are one commit: queued already, or not settled yet.
        assert len(store.notifications(task)) == (point == "after_terminal_stored")
        before = store.events(qid)

        later = lambda: datetime.now(UTC) + timedelta(seconds=LEASE + 1)  # noqa: E731 - lease expired
        with Worker(store_path, platform, "rescuer", LEASE, later) as rescuer:
            rescuer.run_until_idle()

        done = store.query(qid)
        assert done.state is S.SUCCEEDED
        assert platform.executions(qid) == 1, "never executed twice, never lost"
        (note,) = store.notifications(task)
        assert note.query_id == qid and "16 yuan" in note.text
        report = check_lines(trace_lines(store_path))
        assert report.ok, "\n".join(v.text() for v in report.violations)
        recovery = [e["trigger"] for e in store.events(qid)][len(before):]
        assert recovery == RECOVERY[point]
        assert done.submissions == SUBMISSIONS[point]
    platform.close()
