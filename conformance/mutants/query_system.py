# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""Shared-state mutants of the query implementation, killed by the query *system*'s lockstep.

Each breaks a rule that concerns several queries of one task or session, in
a way that one query in a task and session of its own can never show: the
machine lockstep (``query``), where each instance is alone in its task and
its session, passes them. The system lockstep (``query_system``: two queries
of one task and session, shared worker processes) must kill them.
"""

from __future__ import annotations

import sqlite3
from typing import cast

from settled.conformance._bundled._query_system_adapter import QuerySystemAdapter
from settled.impl.query._store import QueryStore
from settled.impl.query._values import _DRAFT_STATES
from settled.impl.query._worker import Worker
from settled.model.query import QueryState

from . import Mutant
from .query import VersionCountsEveryTask

__all__ = ["MUTANTS", "NotificationTakesNewestClock", "OlderPendingMessageIgnored",
           "UpdateInvalidatesNewestDraftOnly"]


class UpdateInvalidatesNewestDraftOnly(QueryStore):
    """T2 broken across drafts: a condition update invalidates only the task's newest draft.

    How it gets written: "the update was made while the user looked at the
    latest draft, so that is the one it makes stale". An older draft of the
    same task stays ``awaiting_confirmation``, although its SQL was written
    for conditions that no longer hold.
    """

    @staticmethod
    def _stale_drafts(rows: list[sqlite3.Row]) -> set[str]:
        # bug deleted; shipped: return {r["query_id"] for r in rows if QueryState(r["execution_state"]) in _DRAFT_STATES}  # noqa: E501
        # bug: the newest draft alone
        drafts = [r["query_id"] for r in rows if QueryState(r["execution_state"]) in _DRAFT_STATES]
        return set(drafts[-1:])  # bug


class OlderPendingMessageIgnored(QueryStore):
    """Q9 broken across drafts: only a message newer than the draft blocks its confirmation.

    How it gets written: "a message that arrived before the draft was
    drafted was already taken into account when drafting". It was not: it is
    still unattributed, and may belong to this task, to another, or change
    what the user wants; a draft made after it is confirmed anyway.
    """

    @staticmethod
    def _unattributed_besides(conn: sqlite3.Connection, query: sqlite3.Row,
                              message: sqlite3.Row) -> list[sqlite3.Row]:
        return conn.execute(
            "SELECT message_id, attribution FROM messages WHERE session_id = ? AND kind = 'user' "
            # bug: only messages received after the draft count; shipped: "AND attribution IN ('pending', 'failed') AND message_id != ? ORDER BY seq",  # noqa: E501
            "AND attribution IN ('pending', 'failed') AND message_id != ? AND received_at > ? "
            "ORDER BY seq",  # bug; shipped: (query["session_id"], message["message_id"])).fetchall()
            (query["session_id"], message["message_id"], query["created_at"])).fetchall()  # bug


class NotificationTakesNewestClock(Worker):
    """M2 broken across messages: a result notification takes the newest message's clock.

    How it gets written: "the notification answers the conversation as it is
    now", so it is stamped with the request clock of the session's newest
    user message instead of the message the query's budget came from. While
    no later message has arrived the two are the same message; once the user
    wrote again, on a later day, "last month" in the notification means
    another month.
    """

    @staticmethod
    def _queue_in(conn: sqlite3.Connection, query_id: str, now: str) -> str | None:
        made = Worker._queue_in(conn, query_id, now)
        if made is None:  # bug
            return made
        newest = conn.execute(  # bug: the session's newest user message, not the budget's
            "SELECT m.request_clock_utc, m.time_zone FROM messages AS m JOIN queries AS q "
            "ON q.session_id = m.session_id WHERE q.query_id = ? AND m.kind = 'user' "
            "ORDER BY m.seq DESC LIMIT 1", (query_id,)).fetchone()
        conn.execute("UPDATE notifications SET request_clock_utc = ?, time_zone = ? "  # bug
                     "WHERE notification_id = ?", (newest[0], newest[1], made))
        return made


def _adapter(part: type[QueryStore] | type[Worker]) -> type[QuerySystemAdapter]:
    slot = "worker_class" if issubclass(part, Worker) else "store_class"
    return cast(type[QuerySystemAdapter],
                type(f"{part.__name__}SystemAdapter", (QuerySystemAdapter,), {slot: part}))


def _mutant(name: str, part: type[QueryStore] | type[Worker]) -> Mutant:
    doc = (part.__doc__ or "").strip()
    return Mutant(name=name, rule=name.split("-", 1)[0], machine="query_system",
                  description=doc.split("\n", 1)[0], adapter_class=_adapter(part))


MUTANTS: list[Mutant] = [
    _mutant("T2-update-invalidates-newest-draft-only", UpdateInvalidatesNewestDraftOnly),
    _mutant("Q9-older-pending-message-ignored", OlderPendingMessageIgnored),
    _mutant("M2-notification-takes-newest-message-clock", NotificationTakesNewestClock),
    # The machine catalogue's T1 bug, in a session that really has two tasks.
    _mutant("T1-version-counted-over-the-session-tasks", VersionCountsEveryTask),
]
