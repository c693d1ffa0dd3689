# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""The query catalogue's other store mutants: drafts and conditions, task versions,
reruns, the status a message is shown, and cancel requests. Each a subclass of the shipped
:class:`~settled.impl.query._store.QueryStore`; the catalogue is ``query.py``."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from settled.impl.query._events import apply_step
from settled.impl.query._store import Query, QueryStatus, QueryStore, Task, query_row, task_row
from settled.impl.query._values import (
    LIVE,
    PHASE_OPEN,
    _json,
    require_conditions,
    require_version,
)
from settled.impl.shared._db import write
from settled.impl.shared._errors import NotAllowed, StaleVersion
from settled.impl.shared._ids import require_id
from settled.model.query import QueryState
from settled.model.query import QueryState as S


class CancelWithoutEvidence(QueryStore):
    """Q21 broken: a cancel after submission began is recorded as cancelled at once.

    How it gets written: the cancel tool treats every live query like a
    queued one ("mark it cancelled, the worker will stop"), so a query the
    platform is running, or may be running, is reported cancelled with no
    evidence that it stopped.
    """

    @staticmethod
    def _request_cancel(conn: sqlite3.Connection, query: sqlite3.Row, state: QueryState,
                        now: str) -> None:
        query_id = query["query_id"]
        if query["cancel_state"] == "requested":
            raise NotAllowed(f"cannot cancel query {query_id!r}: a cancel is already "
                             f"requested and it is {state.value}; wait for the worker to "
                             "settle it on the platform's evidence (Q21)")
        apply_step(conn, query_id, trigger="cancel", params={}, from_state=state,
                   # bug: settled at once; shipped: to_state=state, at=now, updates={"cancel_state": "requested"})  # noqa: E501
                   to_state=QueryState.CANCELLED, at=now, updates={"cancel_state": "requested", "settled_at": now})  # noqa: E501


class ConditionUpdateKeepsDrafts(QueryStore):
    """T2 broken: a condition update carries pending drafts forward instead of invalidating them.

    How it gets written: "the user only tweaked a filter, don't make them
    re-draft": pending drafts are re-stamped with the new condition version.
    Their SQL was written for the old conditions, and they stay confirmable.
    """

    @staticmethod
    def _make_stale(conn: sqlite3.Connection, query_id: str, state: QueryState, now: str) -> None:
        # bug deleted; shipped: apply_step(conn, query_id, trigger="condition_updated", params={},
        # bug deleted; shipped:            from_state=state, to_state=QueryState.INVALIDATED, at=now)
        # bug: re-stamped with the task's new version, not invalidated
        conn.execute("UPDATE queries SET condition_version = (SELECT condition_version FROM tasks "
                     "WHERE task_id = (SELECT task_id FROM queries WHERE query_id = ?)) "
                     "WHERE query_id = ?", (query_id, query_id))


class RerunDeduplicatedBySql(QueryStore):
    """Q2 broken: asking for the same SQL again returns the task's existing query.

    How it gets written: "de-duplicate drafts so a double click does not make
    two": request_query looks for a draft or live query of the task with the
    same SQL and hands it back. A deliberate rerun then never gets its own
    record or id.
    """

    def request_query(self, task_id: str, sql: str, replaces_query_id: str | None = None) -> Query:
        if replaces_query_id is None:  # bug
            states = tuple(s.value for s in (S.AWAITING, *LIVE))
            row = self._conn.execute(
                f"SELECT query_id FROM queries WHERE task_id = ? AND sql = ? AND execution_state "
                f"IN ({', '.join('?' * len(states))}) ORDER BY created_at LIMIT 1",
                (task_id, sql, *states)).fetchone()
            if row is not None:  # the bug: the same SQL is taken for the same query
                return self.query(row["query_id"])
        return super().request_query(task_id, sql, replaces_query_id)


class StatusShowsResult(QueryStore):
    """Q26 broken: the status tool gives the confirming message the result too.

    How it gets written: "the status tool should be helpful": it always
    includes the stored result, so the turn that confirmed the query reads
    and interprets it, and the result notification interprets it again.
    """

    def status(self, query_id: str, message_id: str) -> QueryStatus:
        answer = super().status(query_id, message_id)
        if not answer.result_withheld:  # bug
            return answer
        stored = query_row(self._conn, query_id)["result_json"]  # bug
        # bug: always handed over; shipped: return answer
        return dataclasses.replace(answer, result=json.loads(stored), result_withheld=False)


class QueuedCancelOnlyRequested(QueryStore):
    """Q20 broken: a queued, never submitted query is only marked for cancelling.

    How it gets written: one cancel path for every authorized query ("record
    the request, the worker will stop it"): a query nothing was sent for
    stays queued, and a worker still submits it.
    """

    @staticmethod
    def _settled_by_cancel(state: QueryState) -> bool:
        return state is QueryState.AWAITING  # bug; shipped: return state in (QueryState.AWAITING, QueryState.QUEUED)  # noqa: E501


class RevisionKeepsOldDraft(QueryStore):
    """T3 broken: a SQL-only revision leaves the draft it replaces confirmable.

    How it gets written: the new draft records ``replaces_query_id`` for the
    history, but the old one is not superseded ("the user may want either"),
    so two drafts of one request can both be confirmed.
    """

    def request_query(self, task_id: str, sql: str, replaces_query_id: str | None = None) -> Query:
        # bug: the link is dropped; shipped: query = super().request_query(task_id, sql, replaces_query_id)
        query = super().request_query(task_id, sql, None)
        if replaces_query_id is not None:  # bug
            with write(self._conn) as conn:
                conn.execute("UPDATE queries SET replaces_query_id = ? WHERE query_id = ?",
                             (replaces_query_id, query.query_id))
        return self.query(query.query_id)  # bug; shipped: return query


class StoppedRunCancels(QueryStore):
    """Q22 broken: stopping the agent's run requests a cancel of the queries it authorized.

    How it gets written: "the user stopped the run, so stop its work": the
    end-of-run hook records a cancel request on every live query the run
    confirmed, and the worker then cancels a query the user never cancelled.
    """

    def end_run(self, run_id: str) -> None:
        super().end_run(run_id)
        now = self._now()  # bug
        with write(self._conn) as conn:  # bug
            rows = conn.execute("SELECT query_id, execution_state FROM queries WHERE "
                                "confirmed_run_id = ? AND cancel_state = 'none'",
                                (run_id,)).fetchall()
            for row in rows:
                state = S(row["execution_state"])
                if state in LIVE and state is not S.QUEUED:  # a stop taken for a cancel
                    apply_step(conn, row["query_id"], trigger="cancel", params={},
                               from_state=state, to_state=state, at=now,
                               updates={"cancel_state": "requested"})


class VersionCountsEveryTask(QueryStore):
    """T1 broken: the next condition version is counted over the session's tasks.

    How it gets written: the count of ``task_conditions`` rows is joined to
    the session instead of filtered by ``task_id``: the first update of a task
    in a session with other tasks jumps its version, so version+1 is no longer what the update saves
    and every reader holding the current version is told it is stale.
    """

    def update_conditions(self, task_id: str, expected_version: int,
                          patch: Mapping[str, Any]) -> Task:
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
            # bug: the session's rows, not the task's; shipped: version = current + 1
            version = conn.execute(
                "SELECT COUNT(*) FROM task_conditions JOIN tasks USING (task_id) "
                "WHERE tasks.session_id = ?", (task["session_id"],)).fetchone()[0] + 1
            conn.execute("UPDATE tasks SET conditions = ?, condition_version = ?, phase = ? "
                         "WHERE task_id = ?", (_json(merged), version, PHASE_OPEN, task_id))
            conn.execute("INSERT INTO task_conditions (task_id, version, conditions, created_at) "
                         "VALUES (?, ?, ?, ?)", (task_id, version, _json(merged), now))
            self._log_condition_update(conn, task_id, now)
        return self.task(task_id)
