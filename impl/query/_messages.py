"""User messages (M1, Q9, Q10): stored with their request clock, pending until attributed
to a task; a pending or failed message blocks the session's confirmations."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from ..shared._db import next_message_seq, write
from ..shared._errors import IdempotencyConflict, NotAllowed
from ..shared._ids import require_id
from ._values import (
    Message,
    StoreBase,
    message_row,
    new_id,
    require_clock,
    require_text,
    task_row,
)


class MessagesPart(StoreBase):
    """Receiving, attributing and failing the user's messages of a session."""

    def receive_message(self, session_id: str, user_id: str, text: str,
                        clock: tuple[datetime, str], message_id: str | None = None,
                        task_id: str | None = None) -> Message:
        """Store a user message with its request clock; pending until attributed (Q9).

        A ``message_id`` the caller already used (a recovered delivery) returns
        the stored message with its original clock (M1); other content under
        the same id is an :class:`IdempotencyConflict`. Where the attribution
        is known at once, ``task_id`` attributes the message in the same
        transaction (one commit instead of two; the same checks as
        :meth:`attribute_message`, and a refusal stores nothing).
        """
        require_id("session_id", session_id)
        require_id("user_id", user_id)
        require_text("text", text)
        instant, zone = require_clock(clock)
        if message_id is not None:
            require_id("message_id", message_id)
        if task_id is not None:
            require_id("task_id", task_id)
        wanted = message_id or new_id("msg")
        with write(self._conn) as conn:  # the session lock of Q9
            old = conn.execute("SELECT * FROM messages WHERE message_id = ?", (wanted,)).fetchone()
            if old is not None:
                if (old["session_id"], old["user_id"], old["text"], old["kind"]) != (
                        session_id, user_id, text, "user"):
                    raise IdempotencyConflict(
                        f"message_id {wanted!r} was received with other content; a redelivery "
                        "must carry the same session, user and text, a new message needs a new id")
                if task_id is not None:
                    self._attribute_in(conn, old, task_id)
                    return Message.from_row(message_row(conn, wanted))
                return Message.from_row(old)
            seq = next_message_seq(conn)
            conn.execute(
                "INSERT INTO messages (message_id, seq, session_id, user_id, text, kind, "
                "request_clock_utc, time_zone, attribution, received_at) "
                "VALUES (?, ?, ?, ?, ?, 'user', ?, ?, 'pending', ?)",
                (wanted, seq, session_id, user_id, text, instant, zone, self._now()))
            if task_id is not None:
                self._attribute_in(conn, message_row(conn, wanted), task_id)
        return self.message(wanted)

    def message(self, message_id: str) -> Message:
        return Message.from_row(message_row(self._conn, require_id("message_id", message_id)))

    def attribute_message(self, message_id: str, task_id: str) -> Message:
        """Decide that ``message_id`` belongs to ``task_id`` (from pending or failed)."""
        require_id("message_id", message_id)
        require_id("task_id", task_id)
        with write(self._conn) as conn:
            self._attribute_in(conn, self._user_message(conn, message_id, "attribute"), task_id)
        return self.message(message_id)

    @staticmethod
    def _attribute_in(conn: sqlite3.Connection, message: sqlite3.Row, task_id: str) -> None:
        message_id = message["message_id"]
        task = task_row(conn, task_id)
        if (task["session_id"], task["user_id"]) != (message["session_id"], message["user_id"]):
            raise NotAllowed(f"cannot attribute message {message_id!r} to task {task_id!r}: the "
                             "task belongs to another session or user; pick a task of the "
                             "message's own session")
        if message["attribution"] == "attributed":
            if message["task_id"] == task_id:
                return
            raise NotAllowed(f"message {message_id!r} is already attributed to task "
                             f"{message['task_id']!r}; an attribution is not moved")
        conn.execute("UPDATE messages SET attribution = 'attributed', task_id = ? "
                     "WHERE message_id = ?", (task_id, message_id))

    def fail_message(self, message_id: str) -> Message:
        """Record that attributing ``message_id`` failed (e.g. a model timeout); it blocks (Q10)."""
        require_id("message_id", message_id)
        with write(self._conn) as conn:
            message = self._user_message(conn, message_id, "fail")
            if message["attribution"] == "attributed":
                raise NotAllowed(f"message {message_id!r} is already attributed to task "
                                 f"{message['task_id']!r}; it cannot fail afterwards")
            conn.execute("UPDATE messages SET attribution = 'failed' WHERE message_id = ?",
                         (message_id,))
        return self.message(message_id)

    @staticmethod
    def _user_message(conn: sqlite3.Connection, message_id: str, action: str) -> sqlite3.Row:
        message = message_row(conn, message_id)
        if message["kind"] != "user":
            raise NotAllowed(f"cannot {action} message {message_id!r}: it is a result notification, "
                             "not a user message; only user messages are attributed")
        return message
