# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""The query catalogue's store mutants that get confirmation wrong: the message a
confirmation quotes, the draft and condition versions it names, what authorizes it and when
it is recorded. Each a subclass of the shipped :class:`~settled.impl.query._store.QueryStore`;
the catalogue is ``query.py``."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from settled.impl.query._events import append_event, apply_step
from settled.impl.query._store import (
    CONFIRM_PARAMS,
    Message,
    Query,
    QueryStore,
    _check_message,
    _check_versions,
    iso,
    message_row,
    query_row,
    task_row,
)
from settled.impl.query._values import LIVE, PHASE_EXECUTING, _why_not, require_version
from settled.impl.shared._db import write
from settled.impl.shared._errors import InvalidInput, MessagePending, NotAllowed
from settled.impl.shared._ids import require_id
from settled.model.query import QueryState
from settled.model.query import QueryState as S


class ReconfirmRequeues(QueryStore):
    """Q8 broken: confirming an already confirmed query queues it again.

    How it gets written: the confirm tool checks versions and the quote, then
    runs the first-confirmation path for any authorized query ("confirming
    twice is harmless, it just queues"), so a network retry puts a running
    query back to ``queued`` at the task's current version, to be submitted
    again.
    """

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
        state = self.query(query_id).state  # bug
        if state in LIVE:  # bug: the first confirmation's path, again
            with write(self._conn) as conn:
                query = query_row(conn, query_id)
                _check_versions(query, draft_version, condition_version)
                _check_message(query, message_row(conn, message_id), instruction_quote)
                task = task_row(conn, query["task_id"])
                apply_step(conn, query_id, trigger="confirm", params=CONFIRM_PARAMS,
                           from_state=state, to_state=S.QUEUED, at=self._now(),
                           updates={"authorized_version": task["condition_version"],
                                    "confirmation_message_id": message_id,
                                    "budget_message_id": message_id})
            return self.query(query_id)
        return super().confirm(query_id, draft_version, condition_version, instruction_quote,
                               message_id, run_id)


class PartialQuoteAccepted(QueryStore):
    """Q5 broken: a quote that is only a part of the user's message authorizes.

    How it gets written: ``if quote in message.text`` instead of equality —
    "the model quoted the relevant bit" — so "execute" cut out of "don't
    execute yet" runs the query.
    """

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
        text = self.message(message_id).text  # bug
        if instruction_quote.strip() and instruction_quote.strip() in text:  # bug
            instruction_quote = text  # a part is taken for the whole
        return super().confirm(query_id, draft_version, condition_version, instruction_quote,
                               message_id, run_id)


class NotificationAuthorizes(QueryStore):
    """Q25 broken: a result notification, quoted whole, counts as the user's confirmation.

    How it gets written: a notification inherits the budget and the clock of
    the user message it was made for (M2), and the engineer extends that to
    intent: the execute entry resolves a quoted notification to that user
    message and confirms with it. A host-generated notice becomes an
    "execute".
    """

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
        # bug
        note = self._conn.execute("SELECT budget_message_id, text FROM notifications "
                                  "WHERE message_id = ?", (message_id,)).fetchone()
        if note is not None and instruction_quote.strip() == note["text"].strip():  # bug
            origin = self.message(note["budget_message_id"])  # the bug: its author speaks for it
            message_id, instruction_quote = origin.message_id, origin.text
        return super().confirm(query_id, draft_version, condition_version, instruction_quote,
                               message_id, run_id)


class RedeliveryTakesNewClock(QueryStore):
    """M1 broken: a redelivered message is stamped with the recovery's clock.

    How it gets written: the receive path is an upsert that refreshes the
    stored request clock ("keep the latest delivery's metadata"), so "last
    month" in a message recovered on another day means another month.
    """

    def receive_message(self, session_id: str, user_id: str, text: str,
                        clock: tuple[datetime, str], message_id: str | None = None,
                        task_id: str | None = None) -> Message:
        message = super().receive_message(session_id, user_id, text, clock, message_id, task_id)
        if message_id is not None:  # bug: the delivery's clock overwrites the first
            with write(self._conn) as conn:
                conn.execute("UPDATE messages SET request_clock_utc = ?, time_zone = ? "
                             "WHERE message_id = ?", (iso(clock[0]), clock[1], message_id))
        return self.message(message.message_id)  # bug; shipped: return message


class FailedCheckAwaits(QueryStore):
    """Q3 broken: a draft whose check failed still waits for confirmation.

    How it gets written: the draft is saved as awaiting confirmation first and
    the check's verdict only stored beside it ("the user can decide"), so SQL
    the platform refused can be confirmed.
    """

    def request_query(self, task_id: str, sql: str, replaces_query_id: str | None = None) -> Query:
        query = super().request_query(task_id, sql, replaces_query_id)
        if query.state is S.CHECK_FAILED:  # bug
            with write(self._conn) as conn:
                conn.execute("UPDATE queries SET execution_state = ? WHERE query_id = ?",
                             (S.AWAITING.value, query.query_id))
        return self.query(query.query_id)  # bug; shipped: return query


class DraftVersionNotChecked(QueryStore):
    """Q4 broken: the confirm call checks the condition version but not the draft version.

    How it gets written: "the conditions are what matters": the draft_version
    the caller read is not compared, so a confirmation of an older draft
    authorizes whatever the draft is now.
    """

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
        current = self.query(query_id).draft_version  # bug: the caller's version is ignored
        # bug; shipped: return super().confirm(query_id, draft_version, condition_version, instruction_quote, message_id, run_id)  # noqa: E501
        return super().confirm(query_id, current, condition_version, instruction_quote,
                               message_id, run_id)


class PendingMessageIgnored(QueryStore):
    """Q10 broken: an unattributed newer message does not block the first confirmation.

    How it gets written: only the quoted message's attribution is checked
    ("that is the one that authorizes"); a newer message that may change the
    task ("wait, by day") is ignored and the old draft runs.
    """

    @staticmethod
    def _unattributed_besides(conn: sqlite3.Connection, query: sqlite3.Row,
                              message: sqlite3.Row) -> list[sqlite3.Row]:
        return conn.execute(
            "SELECT message_id, attribution FROM messages WHERE session_id = ? AND kind = 'user' "
            # bug: only the quoted message; shipped: "AND attribution IN ('pending', 'failed') AND message_id != ? ORDER BY seq",  # noqa: E501
            "AND attribution IN ('pending', 'failed') AND message_id = ? ORDER BY seq",
            (query["session_id"], message["message_id"])).fetchall()


class AuthorizationFollowsTask(QueryStore):
    """Q23 broken: a condition update re-stamps authorized queries with the new version.

    How it gets written: "keep every query of the task at the task's
    version": live queries get the new version too, so a late result counts
    as current and the query seems authorized at conditions nobody confirmed.
    """

    @classmethod
    def _log_condition_update(cls, conn: sqlite3.Connection, task_id: str, now: str) -> None:
        super()._log_condition_update(conn, task_id, now)
        version = task_row(conn, task_id)["condition_version"]  # bug
        states = tuple(s.value for s in LIVE)  # bug
        # bug
        conn.execute(f"UPDATE queries SET authorized_version = ? WHERE task_id = ? AND "
                     f"execution_state IN ({', '.join('?' * len(states))})",
                     (version, task_id, *states))


class BudgetAttributedLater(QueryStore):
    """Q7 broken: the confirmation does not record its confirming message.

    How it gets written: the confirm transaction records the authorization,
    the budget and the queueing, and the confirming message's id is left to
    "the status tool, when it is first asked", which never does it: the
    status tool then cannot tell the confirming message from any other and
    hands it the result to interpret (Q26 depends on Q7's one transaction).
    """

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
        first = self.query(query_id).state is S.AWAITING  # bug
        query = super().confirm(query_id, draft_version, condition_version, instruction_quote,
                                message_id, run_id)
        if first and query.state is S.QUEUED:  # bug: not part of the confirmation
            with write(self._conn) as conn:
                conn.execute("UPDATE queries SET confirmation_message_id = NULL "
                             "WHERE query_id = ?", (query_id,))
        return self.query(query_id)  # bug; shipped: return query


class PendingCheckedAfterQueueing(PendingMessageIgnored):
    """Q9 broken: an undecided newer message is noticed only after the query is queued.

    How it gets written: the pending-message check runs after the confirm
    transaction ("report message_pending to the caller"), so the caller is
    told message_pending while the query is already queued at the old
    conditions, and the newer message can no longer change what runs.
    """

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
        query = super().confirm(query_id, draft_version, condition_version, instruction_quote,
                                message_id, run_id)
        pending = self._conn.execute(  # bug
            "SELECT message_id FROM messages WHERE session_id = ? AND kind = 'user' AND "
            "attribution = 'pending' AND message_id != ?", (query.session_id, message_id)).fetchone()
        if pending is not None:  # bug: too late, the query is queued
            raise MessagePending(f"message {pending['message_id']!r} is not attributed yet (Q9)")
        return query


class SupersededDraftConfirmable(QueryStore):
    """Q6 broken: a draft that a revision replaced can still be confirmed and queued.

    How it gets written: "pending confirmation" is read off the row's flags
    (it passed its check, has no cancel request, was never submitted) rather
    than off its state. A draft that a SQL-only revision replaced still has
    all three, so the old SQL is queued beside its replacement.
    """

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
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
            # bug: the flags, not the state, say it awaits confirmation; shipped: if state is not QueryState.AWAITING:  # noqa: E501
            if state not in (QueryState.AWAITING, QueryState.SUPERSEDED):
                raise NotAllowed(f"cannot confirm query {query_id!r}: it is {state.value}"
                                 f"{_why_not(state)}")
            self._require_rights(conn, run_id, query["session_id"], query_id)
            task = self._confirmable(conn, query, message)
            # bug: "still a checked draft": confirmed from awaiting_confirmation
            conn.execute("UPDATE queries SET execution_state = ? WHERE query_id = ?",
                         (QueryState.AWAITING.value, query_id))
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
