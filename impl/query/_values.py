"""The query store's values, validators and row reads: what every part of the store shares.

Every call validates its arguments here, with no database access, before its
one transaction (a bad value is an :class:`InvalidInput` naming the value and
the fix); the row reads run inside that transaction and lock the row where
the database can (see ``row_lock``).
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

from ...model.query import QueryState
from ..platform._orders_data import shape_problem
from ..platform._platform_answers import PlatformClient
from ..shared._db import row_lock
from ..shared._errors import InvalidInput, NotFound
from ..shared._ids import require_id

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
# The implementation's own constants, not the model's: lockstep holds the two together, which
# it could not do if they were one name (a wrong budget here diverges at the fourth submission).
LIVE: Final = (QueryState.QUEUED, QueryState.SUBMITTING, QueryState.UNKNOWN,
               QueryState.NOT_FOUND, QueryState.RUNNING)  # authorized, not settled
MAX_SUBMISSIONS: Final = 3  # submissions of one query before it is exhausted (Q16)


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


class StoreBase:
    """What every part of :class:`~._store.QueryStore` works on: one connection, the
    platform it checks drafts on, and the clock."""

    path: Path | str
    platform: PlatformClient
    _conn: sqlite3.Connection
    _clock: Clock

    def _now(self) -> str:
        return iso(self._clock())

    def query(self, query_id: str) -> Query:
        return Query.from_row(query_row(self._conn, require_id("query_id", query_id)))
