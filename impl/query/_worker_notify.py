"""The result notification of a settled query: the phase it moves its task to, and its text.

A settled query's outcome is told to the agent as a notification message, queued in the
transaction that stores the outcome (Q24, Q25) and carrying the clock of the message the
query's budget came from (M2). :data:`SETTLED_PHASE` maps an outcome to the task phase
it moves the task to; :class:`WorkerNotices` queues the notification inside the caller's
transaction; :func:`notification_text` says what it tells. It is its own room because it
builds a message from the rows alone, whatever the lease and the platform did: the
worker (:mod:`._worker`) decides when a query settles and commits the transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any, Final

from ...model.query import QueryState as S
from ..shared._db import next_message_seq
from ._values import message_row, new_id, query_row, task_row

__all__ = ["SETTLED_PHASE", "WorkerNotices", "notification_text"]

# The task phase a settled query moves its task to, when it may (Q24).
SETTLED_PHASE: Final = {S.SUCCEEDED: "answered", S.FAILED: "query_failed",
                        S.CANCELLED: "query_cancelled", S.EXHAUSTED: "query_not_run"}


class WorkerNotices:
    """Queue the result notification of a settled query, once (Q24, Q25, M2)."""

    @staticmethod
    def _queue_in(conn: sqlite3.Connection, query_id: str, now: str) -> str | None:
        """Queue the notification inside the caller's open transaction (see queue_notification)."""
        query = query_row(conn, query_id)
        state = S(query["execution_state"])
        if state not in SETTLED_PHASE or not query["submissions"] or not query["budget_message_id"]:
            return None  # nothing ran on the platform: nothing to tell
        old = conn.execute("SELECT notification_id FROM notifications WHERE query_id = ?",
                           (query_id,)).fetchone()
        if old is not None:
            return str(old["notification_id"])
        budget = message_row(conn, query["budget_message_id"])
        task = task_row(conn, query["task_id"])
        conditions = json.loads(conn.execute(
            "SELECT conditions FROM task_conditions WHERE task_id = ? AND version = ?",
            (query["task_id"], query["condition_version"])).fetchone()["conditions"])
        result = None if query["result_json"] is None else json.loads(query["result_json"])
        text = notification_text(query, task["condition_version"], conditions, result)
        message_id, notification_id = new_id("msg"), new_id("note")
        seq = next_message_seq(conn)
        # The notification is a message the agent reads, never one that
        # authorizes (Q25); it inherits the budget message's clock (M2).
        conn.execute(
            "INSERT INTO messages (message_id, seq, session_id, user_id, text, kind, "
            "request_clock_utc, time_zone, attribution, task_id, received_at) "
            "VALUES (?, ?, ?, ?, ?, 'notification', ?, ?, 'attributed', ?, ?)",
            (message_id, seq, query["session_id"], query["user_id"], text,
             budget["request_clock_utc"], budget["time_zone"], query["task_id"], now))
        conn.execute(
            "INSERT INTO notifications (notification_id, query_id, task_id, condition_version, "
            "sql, outcome, result, budget_message_id, request_clock_utc, time_zone, "
            "message_id, text, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (notification_id, query_id, query["task_id"], query["condition_version"],
             query["sql"], state.value, query["result_json"], budget["message_id"],
             budget["request_clock_utc"], budget["time_zone"], message_id, text, now))
        return notification_id


# --------------------------------------------------------------------------- notification text
def notification_text(query: sqlite3.Row, task_version: int, conditions: Mapping[str, Any],
                      result: Mapping[str, Any] | None) -> str:
    """What the agent is told: the query's own question, outcome and, if late, that it is late."""
    qid, version = query["query_id"], query["condition_version"]
    about = ", ".join(f"{k}={_plain(v)}" for k, v in sorted(conditions.items())) or "no conditions"
    state = S(query["execution_state"])
    if state is S.SUCCEEDED and result is not None:
        outcome = f"result: {_render(result)}"
    elif state is S.SUCCEEDED:
        outcome = "it succeeded"
    elif state is S.FAILED:
        outcome = f"it failed: {query['error']}"
    elif state is S.CANCELLED:
        outcome = "it was cancelled and did not finish"
    else:
        outcome = f"it was not found on the platform after {query['submissions']} submissions"
    if task_version != version:
        return (f"Late outcome of query {qid}: it answers the earlier question of task "
                f"{query['task_id']} at condition version {version} ({about}), not the current "
                f"version {task_version}; the earlier {outcome}.")
    return (f"Outcome of query {qid} for task {query['task_id']} at condition version {version} "
            f"({about}): {outcome}.")


def _render(result: Mapping[str, Any]) -> str:
    columns, rows = result["columns"], result["rows"]
    if not rows:
        return "no rows"
    shown = ["; ".join(", ".join(f"{c} {_cell(c, v)}" for c, v in zip(columns, r, strict=True))
                       for r in rows[:5])]
    if len(rows) > 5:
        shown.append(f"… {len(rows)} rows in all")
    return " ".join(shown)


def _cell(column: str, value: object) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = f"{value:,.2f}".rstrip("0").rstrip(".")
        return f"{number} yuan" if column.endswith("_yuan") else number
    return _plain(value)


def _plain(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
