"""The agent's query store: tasks, messages, drafts, confirmation, cancel, status.

Theory of operation. Every call validates its arguments with no database
access first (a bad value is an :class:`InvalidInput` naming the value and the
fix), then runs ONE ``BEGIN IMMEDIATE`` transaction that re-reads every row
its decision depends on, checks the protocol, and writes. Any refusal raised
inside the transaction rolls it back, so a refused call changes no row. The
write lock is the session lock of Q9: receiving a message and confirming a
query can never interleave. On PostgreSQL (``path`` a ``postgresql://`` URL)
the same transaction runs SERIALIZABLE, which gives the same guarantee: a
concurrent writer that would make the decision stale aborts one side with
:class:`._pg.WriteConflict`, nothing written (see :mod:`._pg`).

A query's state changes only through :func:`._events.apply_step`, which logs
the model's event in the same transaction. The store fires the user's
transitions (check_passed/check_failed, revised, condition_updated, confirm,
cancel); the worker (:mod:`._worker`) fires the rest.

Execution rights (Q6) are a ``runs`` table: :meth:`QueryStore.start_run`
makes a new run the session's current one, which takes the rights from any
earlier run; :meth:`QueryStore.end_run` ends a run. Ending or replacing a run
never touches a query already authorized (Q22): stopping the agent is not a
cancel.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..model.query import LIVE, QueryState
from ._db import next_message_seq, row_lock, write
from ._errors import (
    IdempotencyConflict,
    InvalidInput,
    MessagePending,
    NotAllowed,
    NotFound,
    StaleVersion,
)
from ._events import EventRow, apply_step, events, query_vars, vars_of_row
from ._ids import require_id
from ._orders_data import shape_problem
from ._pg import is_url
from ._platform import SyntheticPlatform
from ._schema import open_store

__all__ = [
    "CONFIRM_PARAMS",
    "Clock",
    "Message",
    "Notification",
    "Query",
    "QueryStatus",
    "QueryStore",
    "Task",
    "utc_now",
]

Clock = Callable[[], datetime]
"""An aware ``datetime`` for "now"; injectable so leases and clocks can be tested."""

MAX_TEXT_CHARS: Final = 20_000
MAX_CONDITIONS_BYTES: Final = 16 * 1024
PHASE_OPEN: Final = "open"
PHASE_EXECUTING: Final = "executing"

# What a first confirmation that passed every check *is* in the model's terms.
CONFIRM_PARAMS: Final = {"quote": "whole", "draft_version": "current",
                         "condition_version": "current", "message": "attributed"}

_DRAFT_STATES: Final = (QueryState.DRAFTED, QueryState.AWAITING)


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise InvalidInput(f"clock gave a naive datetime {moment!r}; give an aware one (UTC)")
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


# --------------------------------------------------------------------------- values
@dataclass(frozen=True, slots=True)
class Task:
    task_id: str
    user_id: str
    session_id: str
    conditions: dict[str, Any]
    condition_version: int
    phase: str
    awaiting_clarification: bool

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Task:
        return cls(row["task_id"], row["user_id"], row["session_id"], json.loads(row["conditions"]),
                   row["condition_version"], row["phase"], bool(row["awaiting_clarification"]))


@dataclass(frozen=True, slots=True)
class Message:
    message_id: str
    session_id: str
    user_id: str
    text: str
    kind: str
    request_clock_utc: str
    time_zone: str
    attribution: str
    task_id: str | None
    applied_to_task: bool

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Message:
        return cls(row["message_id"], row["session_id"], row["user_id"], row["text"], row["kind"],
                   row["request_clock_utc"], row["time_zone"], row["attribution"], row["task_id"],
                   bool(row["applied_to_task"]))


@dataclass(frozen=True, slots=True)
class Query:
    query_id: str
    task_id: str
    session_id: str
    user_id: str
    sql: str
    draft_version: int
    condition_version: int
    replaces_query_id: str | None
    check_ok: bool
    check_reason: str | None
    state: QueryState
    cancel_state: str
    submissions: int
    lease_epoch: int
    lease_owner: str | None
    submit_epoch: int
    authorized_version: int
    confirmation_message_id: str | None
    budget_message_id: str | None
    phase_moved: bool
    result_ref: str | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Query:
        return cls(
            row["query_id"], row["task_id"], row["session_id"], row["user_id"], row["sql"],
            row["draft_version"], row["condition_version"], row["replaces_query_id"],
            bool(row["check_ok"]), row["check_reason"], QueryState(row["execution_state"]),
            row["cancel_state"], row["submissions"], row["lease_epoch"], row["lease_owner"],
            row["submit_epoch"], row["authorized_version"], row["confirmation_message_id"],
            row["budget_message_id"], bool(row["phase_moved"]), row["result_ref"])


@dataclass(frozen=True, slots=True)
class QueryStatus:
    """What the status tool returns; ``result`` is withheld for the confirming message (Q26)."""

    query_id: str
    state: QueryState
    cancel_state: str
    condition_version: int
    result: dict[str, Any] | None
    result_withheld: bool
    error: str | None


@dataclass(frozen=True, slots=True)
class Notification:
    notification_id: str
    query_id: str
    task_id: str
    condition_version: int
    sql: str
    outcome: QueryState
    result: dict[str, Any] | None
    budget_message_id: str
    request_clock_utc: str
    time_zone: str
    message_id: str
    text: str

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Notification:
        result = None if row["result"] is None else json.loads(row["result"])
        return cls(row["notification_id"], row["query_id"], row["task_id"], row["condition_version"],
                   row["sql"], QueryState(row["outcome"]), result, row["budget_message_id"],
                   row["request_clock_utc"], row["time_zone"], row["message_id"], row["text"])


# --------------------------------------------------------------------------- validation
def require_version(name: str, value: object) -> int:
    if type(value) is not int or value < 1:
        raise InvalidInput(f"{name} must be an int >= 1, got {value!r:.80}; pass the version "
                           "you read")
    return value


def require_text(name: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must be a non-empty str, got {value!r:.80}; pass the user's "
                           "text as received")
    if len(value) > MAX_TEXT_CHARS:
        raise InvalidInput(f"{name} is {len(value):,} characters, the limit is {MAX_TEXT_CHARS:,}; "
                           "shorten it")
    return value


def require_conditions(name: str, value: object, *, allow_empty: bool) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and k for k in value):
        raise InvalidInput(f"{name} must be a mapping with non-empty str keys, got {value!r:.80}; "
                           "pass a dict such as {'channel': 'app'}")
    if not value and not allow_empty:
        raise InvalidInput(f"{name} is empty; a patch names at least one condition to change")
    try:
        encoded = json.dumps(dict(value), ensure_ascii=False, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{name} must hold JSON values only ({exc}); use str, number, bool, "
                           "None, list or dict values") from exc
    if len(encoded.encode()) > MAX_CONDITIONS_BYTES:
        raise InvalidInput(f"{name} is {len(encoded.encode()):,} bytes as JSON, the limit is "
                           f"{MAX_CONDITIONS_BYTES:,}; keep conditions small")
    return dict(json.loads(encoded))


def require_sql(value: object) -> str:
    problem = shape_problem(value)
    if problem is not None:
        raise InvalidInput(f"cannot draft this sql: {problem}; write one read-only SELECT "
                           "(or WITH) statement")
    assert isinstance(value, str)
    return value


def require_clock(value: object) -> tuple[str, str]:
    """``(utc_instant, time_zone)`` → the stored pair (M1)."""
    if not (isinstance(value, tuple) and len(value) == 2):
        raise InvalidInput(f"clock must be a (utc_instant, time_zone) pair, got {value!r:.80}; "
                           "pass (datetime.now(UTC), 'Asia/Shanghai') or the like")
    instant, zone = value
    if not isinstance(instant, datetime) or instant.tzinfo is None:
        raise InvalidInput(f"clock's instant must be an aware datetime, got {instant!r:.80}; "
                           "pass the message's receive time in UTC")
    if not isinstance(zone, str) or not zone:
        raise InvalidInput(f"clock's time zone must be an IANA name, got {zone!r:.80}; pass a name "
                           "such as 'Asia/Shanghai'")
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidInput(f"unknown time zone {zone!r:.80}; pass an IANA name such as "
                           "'Asia/Shanghai'") from exc
    return iso(instant), zone


# --------------------------------------------------------------------------- row reads
def task_row(conn: sqlite3.Connection, task_id: str) -> sqlite3.Row:
    row: sqlite3.Row | None = conn.execute("SELECT * FROM tasks WHERE task_id = ?" + row_lock(conn),
                                           (task_id,)).fetchone()
    if row is None:
        raise NotFound(f"no task {task_id!r}; create it first or pass an id create_task returned")
    return row


def query_row(conn: sqlite3.Connection, query_id: str) -> sqlite3.Row:
    row: sqlite3.Row | None = conn.execute("SELECT * FROM queries WHERE query_id = ?" + row_lock(conn),
                                           (query_id,)).fetchone()
    if row is None:
        raise NotFound(f"no query {query_id!r}; pass an id request_query returned")
    return row


def message_row(conn: sqlite3.Connection, message_id: str) -> sqlite3.Row:
    row: sqlite3.Row | None = conn.execute("SELECT * FROM messages WHERE message_id = ?",
                                           (message_id,)).fetchone()
    if row is None:
        raise NotFound(f"no message {message_id!r}; pass an id receive_message returned")
    return row


# --------------------------------------------------------------------------- the store
class QueryStore:
    """Tasks, messages, drafts and the user's side of the query protocol, on one SQLite file."""

    def __init__(self, path: str | Path, platform: SyntheticPlatform,
                 clock: Clock | None = None) -> None:
        # A file path, or a postgresql:// URL (see impl/_pg.py); workers open the same.
        self.path: Path | str = str(path) if is_url(path) else Path(path)
        self.platform = platform
        self._clock: Clock = clock or utc_now
        self._conn = open_store(self.path)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> QueryStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _now(self) -> str:
        return iso(self._clock())

    # ---------------------------------------------------------------- runs (Q6, Q22)
    def start_run(self, session_id: str) -> str:
        """A new run of ``session_id``; it holds the session's execution rights from now on."""
        require_id("session_id", session_id)
        run_id = new_id("run")
        with write(self._conn) as conn:
            seq = conn.execute("SELECT COALESCE(MAX(started_seq), 0) + 1 FROM runs").fetchone()[0]
            conn.execute("INSERT INTO runs (run_id, session_id, started_at, started_seq) "
                         "VALUES (?, ?, ?, ?)", (run_id, session_id, self._now(), seq))
        return run_id

    def end_run(self, run_id: str) -> None:
        """End ``run_id``: it loses its rights; queries it authorized keep running (Q22)."""
        require_id("run_id", run_id)
        with write(self._conn) as conn:
            row = conn.execute("SELECT ended_at FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                raise NotFound(f"no run {run_id!r}; pass an id start_run returned")
            if row["ended_at"] is None:
                conn.execute("UPDATE runs SET ended_at = ? WHERE run_id = ?", (self._now(), run_id))

    def _require_rights(self, conn: sqlite3.Connection, run_id: str, session_id: str,
                        query_id: str) -> None:
        run = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if run is None:
            raise NotFound(f"no run {run_id!r}; pass an id start_run returned")
        # The latest run started holds the rights; a later run takes them for
        # good, even after it ends itself (an earlier run never gets them back).
        latest = conn.execute("SELECT run_id, ended_at FROM runs WHERE session_id = ? "
                              "ORDER BY started_seq DESC LIMIT 1", (session_id,)).fetchone()
        current = latest if latest is not None and latest["ended_at"] is None else None
        if run["session_id"] != session_id:
            raise NotAllowed(f"cannot confirm query {query_id!r}: run {run_id!r} belongs to session "
                             f"{run['session_id']!r}, the query to {session_id!r}; confirm from a "
                             "run of the query's own session")
        if current is None or current["run_id"] != run_id:
            now = "none" if current is None else repr(current["run_id"])
            raise NotAllowed(f"cannot confirm query {query_id!r}: run {run_id!r} no longer holds the "
                             f"execution rights of session {session_id!r} (current run: {now}); "
                             "confirm from the current run (Q6)")

    # ---------------------------------------------------------------- tasks (T1, T2)
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

    @staticmethod
    def _log_condition_update(conn: sqlite3.Connection, task_id: str, now: str) -> None:
        # Pending drafts lose their right to be confirmed (T2); authorized
        # queries keep their version and only see the task move on (Q23).
        rows = conn.execute("SELECT query_id, execution_state FROM queries WHERE task_id = ? "
                            "ORDER BY created_at, query_id", (task_id,)).fetchall()
        for row in rows:
            state = QueryState(row["execution_state"])
            if state in _DRAFT_STATES:
                target = QueryState.INVALIDATED
            elif state in LIVE:
                target = state
            else:
                continue
            apply_step(conn, row["query_id"], trigger="condition_updated", params={},
                       from_state=state, to_state=target, at=now)

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

    # ---------------------------------------------------------------- messages (M1, Q9, Q10)
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

    # ---------------------------------------------------------------- drafts (Q3, T3)
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

    def query(self, query_id: str) -> Query:
        return Query.from_row(query_row(self._conn, require_id("query_id", query_id)))

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

    # ---------------------------------------------------------------- confirmation (Q4–Q10, Q25)
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
            if state in LIVE:
                return Query.from_row(query)  # Q8: a retry changes nothing
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
    def _confirmable(conn: sqlite3.Connection, query: sqlite3.Row,
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
        blocking = conn.execute(
            "SELECT message_id, attribution FROM messages WHERE session_id = ? AND kind = 'user' "
            "AND attribution IN ('pending', 'failed') AND message_id != ? ORDER BY seq",
            (query["session_id"], message["message_id"])).fetchall()
        if blocking:
            names = ", ".join(f"{r['message_id']!r} ({r['attribution']})" for r in blocking)
            raise MessagePending(f"cannot confirm query {qid!r}: message(s) {names} of session "
                                 f"{query['session_id']!r} are not attributed yet; attribute them, "
                                 "then ask the user to confirm again (Q9, Q10)")
        if not query["check_ok"] or query["cancel_state"] != "none" or query["submissions"]:
            raise NotAllowed(f"cannot confirm query {qid!r}: it did not pass its check, has a "
                             "cancel request or was submitted (Q6)")
        return task

    # ---------------------------------------------------------------- cancel (Q19–Q22)
    def cancel(self, query_id: str) -> Query:
        """Cancel locally before submission (Q20); from submitting on only request it (Q21)."""
        require_id("query_id", query_id)
        now = self._now()
        with write(self._conn) as conn:
            query = query_row(conn, query_id)
            state = QueryState(query["execution_state"])
            if state in (QueryState.AWAITING, QueryState.QUEUED):
                apply_step(conn, query_id, trigger="cancel", params={}, from_state=state,
                           to_state=QueryState.CANCELLED, at=now, updates={"settled_at": now})
            elif state in LIVE:
                if query["cancel_state"] == "requested":
                    raise NotAllowed(f"cannot cancel query {query_id!r}: a cancel is already "
                                     f"requested and it is {state.value}; wait for the worker to "
                                     "settle it on the platform's evidence (Q21)")
                apply_step(conn, query_id, trigger="cancel", params={}, from_state=state,
                           to_state=state, at=now, updates={"cancel_state": "requested"})
            else:
                raise NotAllowed(f"cannot cancel query {query_id!r}: it is {state.value}"
                                 f"{_why_not(state, '; it is settled, there is nothing to cancel')}")
        return self.query(query_id)

    # ---------------------------------------------------------------- reading (Q26)
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


# --------------------------------------------------------------------------- confirm checks
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


def _why_not(state: QueryState,
             settled: str = "; it is settled, a new run of the same sql needs a new query (Q2)") -> str:
    return {
        QueryState.CHECK_FAILED: "; its check failed, draft new sql (Q3)",
        QueryState.INVALIDATED: "; the task's conditions changed, draft again (T2)",
        QueryState.SUPERSEDED: "; a revision replaced it, confirm the new draft (T3)",
        QueryState.DRAFTED: "; its check has not finished",
    }.get(state, settled)


def _json(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
