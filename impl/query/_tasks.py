"""Tasks and their condition versions (T1, T2, Q23): every version kept, and an update
invalidates the task's pending drafts."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from ...model.query import QueryState
from ..shared._db import write
from ..shared._errors import InvalidInput, NotFound, StaleVersion
from ..shared._ids import require_id
from ._events import apply_step
from ._values import (
    _DRAFT_STATES,
    LIVE,
    PHASE_OPEN,
    StoreBase,
    Task,
    _json,
    new_id,
    require_conditions,
    require_version,
    task_row,
)


class TasksPart(StoreBase):
    """A task's conditions, versioned; a clarification flag a late result respects (Q24)."""

    def create_task(self, user_id: str, session_id: str, conditions: Mapping[str, Any]) -> Task:
        require_id("user_id", user_id)
        require_id("session_id", session_id)
        values = require_conditions("conditions", conditions, allow_empty=True)
        task_id, now, encoded = new_id("task"), self._now(), _json(values)
        with write(self._conn) as conn:
            conn.execute("INSERT INTO tasks (task_id, user_id, session_id, conditions, "
                         "condition_version, phase, created_at) VALUES (?, ?, ?, ?, 1, ?, ?)",
                         (task_id, user_id, session_id, encoded, PHASE_OPEN, now))
            conn.execute("INSERT INTO task_conditions (task_id, version, conditions, created_at) "
                         "VALUES (?, 1, ?, ?)", (task_id, encoded, now))
        return self.task(task_id)

    def task(self, task_id: str) -> Task:
        return Task.from_row(task_row(self._conn, require_id("task_id", task_id)))

    def conditions_at(self, task_id: str, version: int) -> dict[str, Any]:
        """The task's conditions as they were at ``version`` (T1 keeps every version)."""
        require_id("task_id", task_id)
        require_version("version", version)
        row = self._conn.execute("SELECT conditions FROM task_conditions WHERE task_id = ? AND "
                                 "version = ?", (task_id, version)).fetchone()
        if row is None:
            raise NotFound(f"task {task_id!r} has no condition version {version}; versions run "
                           "from 1 to the task's current condition_version")
        return dict(json.loads(row["conditions"]))

    def update_conditions(self, task_id: str, expected_version: int,
                          patch: Mapping[str, Any]) -> Task:
        """Merge ``patch`` (a ``None`` value removes the key) and save version+1 (T1, T2, Q23)."""
        require_id("task_id", task_id)
        require_version("expected_version", expected_version)
        changes = require_conditions("patch", patch, allow_empty=False)
        now = self._now()
        with write(self._conn) as conn:
            task = task_row(conn, task_id)
            current = task["condition_version"]
            if expected_version != current:
                raise StaleVersion(f"cannot update task {task_id!r}: expected_version "
                                   f"{expected_version} is stale, current is {current}; re-read "
                                   "the conditions and send the patch again (T1)")
            merged = json.loads(task["conditions"])
            for key, value in changes.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            version = current + 1
            conn.execute("UPDATE tasks SET conditions = ?, condition_version = ?, phase = ? "
                         "WHERE task_id = ?", (_json(merged), version, PHASE_OPEN, task_id))
            conn.execute("INSERT INTO task_conditions (task_id, version, conditions, created_at) "
                         "VALUES (?, ?, ?, ?)", (task_id, version, _json(merged), now))
            self._log_condition_update(conn, task_id, now)
        return self.task(task_id)

    @classmethod
    def _log_condition_update(cls, conn: sqlite3.Connection, task_id: str, now: str) -> None:
        # Pending drafts lose their right to be confirmed (T2); authorized
        # queries keep their version and only see the task move on (Q23).
        rows = conn.execute("SELECT query_id, execution_state FROM queries WHERE task_id = ? "
                            "ORDER BY created_at, query_id", (task_id,)).fetchall()
        stale = cls._stale_drafts(rows)
        for row in rows:
            state = QueryState(row["execution_state"])
            if row["query_id"] in stale:
                cls._make_stale(conn, row["query_id"], state, now)
            elif state in LIVE:
                apply_step(conn, row["query_id"], trigger="condition_updated", params={},
                           from_state=state, to_state=state, at=now)

    @staticmethod
    def _stale_drafts(rows: list[sqlite3.Row]) -> set[str]:
        """The drafts a condition update makes stale: every draft of the task (T2)."""
        return {r["query_id"] for r in rows if QueryState(r["execution_state"]) in _DRAFT_STATES}

    @staticmethod
    def _make_stale(conn: sqlite3.Connection, query_id: str, state: QueryState, now: str) -> None:
        """A stale draft is invalidated: it can never be confirmed (T2)."""
        apply_step(conn, query_id, trigger="condition_updated", params={},
                   from_state=state, to_state=QueryState.INVALIDATED, at=now)

    def set_awaiting_clarification(self, task_id: str, awaiting: bool) -> Task:
        """Mark the task as waiting for the user's clarification (a late result then moves nothing)."""
        require_id("task_id", task_id)
        if not isinstance(awaiting, bool):
            raise InvalidInput(f"awaiting must be a bool, got {awaiting!r:.80}; pass True or False")
        with write(self._conn) as conn:
            task_row(conn, task_id)
            conn.execute("UPDATE tasks SET awaiting_clarification = ? WHERE task_id = ?",
                         (int(awaiting), task_id))
        return self.task(task_id)
