"""Drafts (Q3, T3): SQL checked on the platform without running it, saved as a query
awaiting confirmation; a revision supersedes the draft it names."""

from __future__ import annotations

import sqlite3
from typing import Any

from ...model.query import QueryState
from ..shared._db import write
from ..shared._errors import NotAllowed, NotFound, StaleVersion
from ..shared._ids import require_id
from ._events import apply_step, query_vars, vars_of_row
from ._values import Query, StoreBase, new_id, query_row, require_sql, task_row


class DraftsPart(StoreBase):
    """Drafting and revising queries, and reading one in the model's terms."""

    def request_query(self, task_id: str, sql: str, replaces_query_id: str | None = None) -> Query:
        """Check ``sql`` on the platform without running it and save the draft (Q3).

        A SQL-only revision names the draft it replaces; that draft is
        superseded whatever the new check says, so a failed check never gives
        it back its right to be confirmed (T3).
        """
        require_id("task_id", task_id)
        require_sql(sql)
        if replaces_query_id is not None:
            require_id("replaces_query_id", replaces_query_id)
        version = self._draftable(task_id, replaces_query_id)
        verdict = self.platform.check(sql)  # a remote call: never inside a transaction
        query_id, now = new_id("q"), self._now()
        with write(self._conn) as conn:
            task = task_row(conn, task_id)
            if task["condition_version"] != version:
                raise StaleVersion(f"cannot save the draft for task {task_id!r}: its conditions "
                                   f"moved from version {version} to {task['condition_version']} "
                                   "while the sql was checked; re-read them and draft again")
            if replaces_query_id is not None:
                self._replaceable(conn, task_id, replaces_query_id)
            draft_version = task["draft_counter"] + 1
            conn.execute("UPDATE tasks SET draft_counter = ? WHERE task_id = ?",
                         (draft_version, task_id))
            conn.execute(
                "INSERT INTO queries (query_id, task_id, session_id, user_id, sql, draft_version, "
                "condition_version, replaces_query_id, check_ok, check_reason, execution_state, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (query_id, task_id, task["session_id"], task["user_id"], sql, draft_version,
                 version, replaces_query_id, int(verdict.ok), verdict.reason,
                 QueryState.DRAFTED.value, now))
            checked = QueryState.AWAITING if verdict.ok else QueryState.CHECK_FAILED
            apply_step(conn, query_id, trigger="check_passed" if verdict.ok else "check_failed",
                       params={}, from_state=QueryState.DRAFTED, to_state=checked, at=now)
            if replaces_query_id is not None:
                apply_step(conn, replaces_query_id, trigger="revised", params={},
                           from_state=QueryState.AWAITING, to_state=QueryState.SUPERSEDED, at=now)
        return self.query(query_id)

    def _draftable(self, task_id: str, replaces_query_id: str | None) -> int:
        # Read once before the platform call so a bad id fails without one;
        # the transaction afterwards checks everything again.
        task = task_row(self._conn, task_id)
        if replaces_query_id is not None:
            self._replaceable(self._conn, task_id, replaces_query_id)
        return int(task["condition_version"])

    @staticmethod
    def _replaceable(conn: sqlite3.Connection, task_id: str, replaces_query_id: str) -> None:
        old = query_row(conn, replaces_query_id)
        if old["task_id"] != task_id:
            raise NotAllowed(f"cannot replace query {replaces_query_id!r}: it belongs to task "
                             f"{old['task_id']!r}, not {task_id!r}; name a draft of this task")
        if old["execution_state"] != QueryState.AWAITING.value:
            raise NotAllowed(f"cannot replace query {replaces_query_id!r}: it is "
                             f"{old['execution_state']}, only a draft awaiting confirmation can be "
                             "revised; draft without replaces_query_id (T3)")

    def observe(self, query_id: str) -> dict[str, Any]:
        """The query in the model's terms: ``{"state": …}`` plus the logged variables.

        The same projection the event log uses (versions counted from the
        query's own draft, see :mod:`._events`), for a conformance adapter.
        """
        state = QueryState(query_row(self._conn, require_id("query_id", query_id))["execution_state"])
        return {"state": state.value, **query_vars(self._conn, query_id)}

    def observe_with_task(self, query_id: str) -> dict[str, Any]:
        """:meth:`observe`, plus the task's ``awaiting_clarification``, in one read.

        One statement, so one snapshot: what an observer polling after every
        step needs, at the cost of one read instead of three.
        """
        row = self._conn.execute(
            "SELECT q.execution_state, q.submissions, q.cancel_state, q.lease_epoch, "
            "q.submit_epoch, q.authorized_version, q.phase_moved, q.condition_version, "
            "t.condition_version AS task_version, t.awaiting_clarification "
            "FROM queries AS q JOIN tasks AS t ON t.task_id = q.task_id WHERE q.query_id = ?",
            (require_id("query_id", query_id),)).fetchone()
        if row is None:
            raise NotFound(f"no query {query_id!r}; pass an id request_query returned")
        return {"state": QueryState(row["execution_state"]).value, **vars_of_row(row),
                "clarifying": bool(row["awaiting_clarification"])}
