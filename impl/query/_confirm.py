"""Confirmation (Q4-Q10, Q25): the user's whole message, current versions, the current
run and no unattributed message of the session authorize and queue a draft in one
transaction; a confirmed query is returned as it is (Q8)."""

from __future__ import annotations

import sqlite3

from ...model.query import QueryState
from ..shared._db import write
from ..shared._errors import InvalidInput, MessagePending, NotAllowed, StaleVersion
from ..shared._ids import require_id
from ._events import append_event, apply_step
from ._runs import require_rights
from ._values import (
    CONFIRM_PARAMS,
    LIVE,
    PHASE_EXECUTING,
    Query,
    StoreBase,
    _why_not,
    message_row,
    query_row,
    require_version,
    task_row,
)


class ConfirmPart(StoreBase):
    """The user's confirmation of a draft."""

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
        """Authorize and queue ``query_id`` in one transaction, or return a live query as is (Q8)."""
        require_id("query_id", query_id)
        require_version("draft_version", draft_version)
        require_version("condition_version", condition_version)
        if not isinstance(instruction_quote, str):
            raise InvalidInput(f"instruction_quote must be a str, got {instruction_quote!r:.80}; "
                               "quote the user's whole message (Q5)")
        require_id("message_id", message_id)
        require_id("run_id", run_id)
        now = self._now()
        with write(self._conn) as conn:
            query = query_row(conn, query_id)
            message = message_row(conn, message_id)
            _check_versions(query, draft_version, condition_version)
            _check_message(query, message, instruction_quote)
            state = QueryState(query["execution_state"])
            if state in LIVE:  # Q8: a retry changes nothing, and the log says it came
                append_event(conn, query_id, "confirm", CONFIRM_PARAMS, state, state, now)
                return Query.from_row(query)
            if state is not QueryState.AWAITING:
                raise NotAllowed(f"cannot confirm query {query_id!r}: it is {state.value}"
                                 f"{_why_not(state)}")
            self._require_rights(conn, run_id, query["session_id"], query_id)
            task = self._confirmable(conn, query, message)
            apply_step(conn, query_id, trigger="confirm", params=CONFIRM_PARAMS,
                       from_state=QueryState.AWAITING, to_state=QueryState.QUEUED, at=now,
                       updates={"authorized_version": task["condition_version"],
                                "confirmation_message_id": message_id,
                                "budget_message_id": message_id, "confirmed_run_id": run_id})
            conn.execute("UPDATE messages SET applied_to_task = 1 WHERE message_id = ?",
                         (message_id,))
            conn.execute("UPDATE tasks SET phase = ? WHERE task_id = ?",
                         (PHASE_EXECUTING, query["task_id"]))
        return self.query(query_id)

    @staticmethod
    def _require_rights(conn: sqlite3.Connection, run_id: str, session_id: str,
                        query_id: str) -> None:
        """The run must hold the session's execution rights (Q6); see ``_runs``."""
        require_rights(conn, run_id, session_id, query_id)

    @classmethod
    def _confirmable(cls, conn: sqlite3.Connection, query: sqlite3.Row,
                     message: sqlite3.Row) -> sqlite3.Row:
        qid, task_id = query["query_id"], query["task_id"]
        if message["attribution"] != "attributed":
            raise MessagePending(f"cannot confirm query {qid!r}: message {message['message_id']!r} "
                                 f"is {message['attribution']}, not yet attributed to a task; "
                                 "attribute it, then ask for confirmation again (Q9)")
        if message["task_id"] != task_id:
            raise NotAllowed(f"cannot confirm query {qid!r}: message {message['message_id']!r} "
                             f"belongs to task {message['task_id']!r}, the query to {task_id!r}; "
                             "confirm a draft of the message's own task (Q6)")
        task = task_row(conn, task_id)
        if task["condition_version"] != query["condition_version"]:
            raise StaleVersion(f"cannot confirm query {qid!r}: it was drafted at condition version "
                               f"{query['condition_version']}, the task is at "
                               f"{task['condition_version']}; draft again (Q6)")
        blocking = cls._unattributed_besides(conn, query, message)
        if blocking:
            names = ", ".join(f"{r['message_id']!r} ({r['attribution']})" for r in blocking)
            raise MessagePending(f"cannot confirm query {qid!r}: message(s) {names} of session "
                                 f"{query['session_id']!r} are not attributed yet; attribute them, "
                                 "then ask the user to confirm again (Q9, Q10)")
        if not query["check_ok"] or query["cancel_state"] != "none" or query["submissions"]:
            raise NotAllowed(f"cannot confirm query {qid!r}: it did not pass its check, has a "
                             "cancel request or was submitted (Q6)")
        return task

    @staticmethod
    def _unattributed_besides(conn: sqlite3.Connection, query: sqlite3.Row,
                              message: sqlite3.Row) -> list[sqlite3.Row]:
        """The session's user messages, other than the confirming one, not attributed to a
        task (pending, or their attribution failed): each may change what the user wants, so
        any of them blocks a first confirmation (Q9, Q10)."""
        return conn.execute(
            "SELECT message_id, attribution FROM messages WHERE session_id = ? AND kind = 'user' "
            "AND attribution IN ('pending', 'failed') AND message_id != ? ORDER BY seq",
            (query["session_id"], message["message_id"])).fetchall()


def _check_versions(query: sqlite3.Row, draft_version: int, condition_version: int) -> None:
    # Checked first, before the state, so a retry with stale versions is an
    # error even when the query is already queued (Q8).
    qid = query["query_id"]
    if draft_version != query["draft_version"]:
        raise StaleVersion(f"cannot confirm query {qid!r}: draft_version {draft_version} is stale, "
                           f"the query's is {query['draft_version']}; re-read the draft (Q4)")
    if condition_version != query["condition_version"]:
        raise StaleVersion(f"cannot confirm query {qid!r}: condition_version {condition_version} "
                           f"does not match the draft's {query['condition_version']}; re-read the "
                           "task's conditions and the draft (Q4)")


def _check_message(query: sqlite3.Row, message: sqlite3.Row, quote: str) -> None:
    qid, mid = query["query_id"], message["message_id"]
    if message["kind"] != "user":
        raise InvalidInput(f"cannot confirm query {qid!r} with message {mid!r}: it is a result "
                           "notification and carries no user intent; quote the user's own "
                           "message (Q25)")
    if (message["session_id"], message["user_id"]) != (query["session_id"], query["user_id"]):
        raise NotAllowed(f"cannot confirm query {qid!r} with message {mid!r}: the message is from "
                         f"session {message['session_id']!r} user {message['user_id']!r}, the "
                         f"query belongs to session {query['session_id']!r} user "
                         f"{query['user_id']!r}; confirm with the query owner's message (Q6)")
    if quote.strip() != message["text"].strip():
        raise InvalidInput(f"cannot confirm query {qid!r}: instruction_quote {quote.strip()!r:.120} "
                           f"is not the whole message {mid!r}; quote the user's entire message, "
                           "not a part of it (Q5)")
