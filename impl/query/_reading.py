"""Reading (Q26): a query's status as seen from a message, with no result for the message
that confirmed it; a task's result notifications; the event log."""

from __future__ import annotations

import json

from ...model.query import QueryState
from ..shared._errors import NotAllowed
from ..shared._ids import require_id
from ._events import EventRow, events
from ._values import Notification, QueryStatus, StoreBase, message_row, query_row, task_row


class ReadingPart(StoreBase):
    """What the agent reads back: status, notifications, events."""

    def status(self, query_id: str, message_id: str) -> QueryStatus:
        """The query's status as seen from ``message_id``; no result for its confirming message."""
        require_id("query_id", query_id)
        require_id("message_id", message_id)
        query = query_row(self._conn, query_id)
        message = message_row(self._conn, message_id)
        if message["session_id"] != query["session_id"]:
            raise NotAllowed(f"message {message_id!r} is from session {message['session_id']!r}, "
                             f"query {query_id!r} belongs to {query['session_id']!r}; ask from "
                             "a message of the query's own session")
        withheld = message_id == query["confirmation_message_id"]
        result = None
        if not withheld and query["result_json"] is not None:
            result = json.loads(query["result_json"])
        return QueryStatus(query_id, QueryState(query["execution_state"]), query["cancel_state"],
                           query["condition_version"], result,
                           withheld and query["result_json"] is not None, query["error"])

    def notifications(self, task_id: str) -> list[Notification]:
        require_id("task_id", task_id)
        task_row(self._conn, task_id)
        rows = self._conn.execute("SELECT n.* FROM notifications AS n JOIN messages AS m ON "
                                  "m.message_id = n.message_id WHERE n.task_id = ? ORDER BY m.seq",
                                  (task_id,)).fetchall()
        return [Notification.from_row(row) for row in rows]

    def events(self, query_id: str | None = None) -> list[EventRow]:
        if query_id is not None:
            require_id("query_id", query_id)
        return events(self._conn, query_id)
