"""The approval runtime's checkpoint database: calls, their event log, session locks.

This file is deliberately SEPARATE from the business database and no
transaction ever spans the two: that is the situation the protocol is about.
A business commit and the checkpoint of its result are two commits in two
files, so a crash can fall between them (R5), and recovery must ask the
business store what it committed rather than trust either side alone (A4).

Every state change is one ``BEGIN IMMEDIATE`` transaction that checks the
call is still in a state the change may leave (compare-and-set), updates the
row, appends a ``call_events`` row named after the model's trigger, and —
when a client should see it — a display event (:mod:`._display`).

Session locks (A8). Propose, approve, execute, recover and cancel of one
session are mutually exclusive: each takes a row in ``session_locks`` (a
short ``BEGIN IMMEDIATE`` check-and-insert), does its work — possibly a long
business call in the other file — and deletes the row. A second operation
meanwhile gets :class:`SessionBusy` at once, never a wait. A holder that died
(a hard crash leaves its row behind) is recognised by its process id no
longer existing, or by a row older than ``lock_ttl``, and is taken over: the
lock is what makes an ``absent`` lookup safe to act on, because no live
process of this host can still be inside that session's handler.
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from ...model.approval import ApprovalState
from ..shared._db import DEFAULT_BUSY_TIMEOUT, apply_schema, connect, write
from ..shared._declared import require_declared
from ..shared._errors import Busy, InvalidInput, NotAllowed, NotFound
from ._business_normalize import canonical_json
from ._display import DISPLAY_SCHEMA, DisplayEvent, append_event, events_since

__all__ = [
    "MACHINE",
    "SCHEMA_VERSION",
    "TRACE_SCHEMA",
    "Call",
    "CallState",
    "CheckpointStore",
    "SessionBusy",
    "StateMoved",
    "trace_lines",
    "trace_rows",
]

SCHEMA_VERSION: Final = 3  # 2: call_events.vars (the trace export); 3: calls.retries_allowed
SCHEMA: Final = """
CREATE TABLE calls (
    call_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    client_token TEXT NOT NULL UNIQUE,
    normalized_args TEXT NOT NULL,
    schema_fingerprint TEXT NOT NULL,
    retry_safe INTEGER NOT NULL CHECK (retry_safe IN (0, 1)),
    deadline REAL NOT NULL,
    state TEXT NOT NULL,
    shown INTEGER NOT NULL DEFAULT 0 CHECK (shown IN (0, 1)),
    cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    rerun_used INTEGER NOT NULL DEFAULT 0 CHECK (rerun_used IN (0, 1)),
    retries_allowed INTEGER NOT NULL DEFAULT 0 CHECK (retries_allowed IN (0, 1)),
    result TEXT,
    error TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX calls_by_session ON calls (session_id);
CREATE TABLE call_events (
    call_id TEXT NOT NULL REFERENCES calls (call_id),
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    from_state TEXT NOT NULL,
    state TEXT NOT NULL,
    at REAL NOT NULL,
    vars TEXT NOT NULL,
    PRIMARY KEY (call_id, seq)
);
CREATE TABLE session_locks (
    session_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    operation TEXT NOT NULL,
    acquired_at REAL NOT NULL
);
""" + DISPLAY_SCHEMA

# Columns a state change may set; anything else is a bug in the runtime.
_MUTABLE: Final = frozenset({"shown", "cancel_requested", "rerun_used", "retries_allowed",
                             "result", "error"})
DEFAULT_LOCK_TTL: Final = 600.0
_PROPOSED: Final = "proposed"  # the model's state before the first checkpoint; never stored


# The states a checkpoint can hold: the approval model's states minus two it cannot see.
# ``proposed`` is never durable, and ``committed`` (the business commit happened) is only
# known to the business store: the checkpoint still says ``executing``.
NOT_CHECKPOINTED: Final = frozenset({ApprovalState.PROPOSED, ApprovalState.COMMITTED})

if TYPE_CHECKING:
    # The checker sees the model's enum (same names, same values); at run time the two
    # states above are absent, so ``CallState("committed")`` is a ValueError.
    CallState: TypeAlias = ApprovalState
else:
    CallState = StrEnum("CallState", [(s.name, s.value) for s in ApprovalState
                                      if s not in NOT_CHECKPOINTED], module=__name__)
    CallState.__doc__ = ("The states a checkpoint can hold: the approval model's states "
                         "minus proposed and committed (derived from model/approval.py).")


class SessionBusy(Busy):
    """Another propose/approve/execute/recover/cancel of the session is running (A8)."""


class StateMoved(NotAllowed):
    """The call left the expected state between the read and the write; nothing changed."""


@dataclass(frozen=True, slots=True)
class Call:
    """One write call as checkpointed; ``args`` are the normalized arguments."""

    call_id: str
    session_id: str
    run_id: str
    tool: str
    client_token: str
    args: Mapping[str, Any]
    schema_fingerprint: str
    retry_safe: bool
    deadline: float
    state: CallState
    shown: bool = False
    cancel_requested: bool = False
    rerun_used: bool = False
    result: Mapping[str, Any] | None = None
    error: str | None = None
    # The automatic-retry switch the handler's current run was entered with (A5): recorded
    # with the step that enters the handler, so a reader sees what the runtime decided.
    retries_allowed: bool = False


def _call(row: sqlite3.Row) -> Call:
    result = row["result"]
    return Call(row["call_id"], row["session_id"], row["run_id"], row["tool"],
                row["client_token"], json.loads(row["normalized_args"]),
                row["schema_fingerprint"], bool(row["retry_safe"]), row["deadline"],
                CallState(row["state"]), bool(row["shown"]), bool(row["cancel_requested"]),
                bool(row["rerun_used"]), None if result is None else json.loads(result),
                row["error"], bool(row["retries_allowed"]))


def _logged_vars(conn: sqlite3.Connection, call_id: str, move: tuple[str, CallState],
                 now: float) -> dict[str, object]:
    """The approval model's variables this file can vouch for, after the step (the trace's vars).

    Not logged: the business commit and whether a held result is the first one (only the
    business store knows), the deployed contract, and the per-run retry switch (the model
    does not log it; the call's row records it).
    """
    row = conn.execute("SELECT shown, cancel_requested, rerun_used, retry_safe, deadline "
                       "FROM calls WHERE call_id = ?", (call_id,)).fetchone()
    logged: dict[str, object] = {
        "token_id": "original", "shown": bool(row["shown"]), "retry_safe": bool(row["retry_safe"]),
        "cancel_requested": bool(row["cancel_requested"]), "rerun": bool(row["rerun_used"])}
    if move[0] in (_PROPOSED, CallState.PENDING.value):
        # The model stops the deadline's clock when the call leaves pending, so it is logged
        # only up to then. An approval means the runtime had just judged the deadline ahead;
        # logging this write's later instant instead could contradict its own decision.
        logged["deadline_passed"] = move[1] is not CallState.APPROVED and now >= row["deadline"]
    return logged


def _stored(value: object) -> object:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Mapping):
        return canonical_json(dict(value))
    return value


class CheckpointStore:
    """The checkpoint file: one connection, every write a short BEGIN IMMEDIATE."""

    def __init__(self, conn: sqlite3.Connection, clock: Callable[[], float],
                 lock_ttl: float = DEFAULT_LOCK_TTL) -> None:
        self._conn = conn
        self._clock = clock
        self._lock_ttl = lock_ttl

    @classmethod
    def open(cls, path: str | Path, clock: Callable[[], float], *,
             busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
             lock_ttl: float = DEFAULT_LOCK_TTL) -> CheckpointStore:
        """Open (or create) the checkpoint file at ``path``."""
        conn = connect(path, busy_timeout)
        try:
            apply_schema(conn, SCHEMA, SCHEMA_VERSION, "checkpoint")
        except BaseException:
            conn.close()
            raise
        return cls(conn, clock, lock_ttl)

    def close(self) -> None:
        self._conn.close()

    @property
    def connection(self) -> sqlite3.Connection:
        return self._conn

    # -- reads -----------------------------------------------------------------------------
    def get(self, call_id: str) -> Call:
        row = self._conn.execute("SELECT * FROM calls WHERE call_id = ?", (call_id,)).fetchone()
        if row is None:
            raise NotFound(f"unknown call {call_id!r}; use the call_id that propose() returned")
        return _call(row)

    def events(self, call_id: str) -> list[tuple[str, str, str]]:
        """The call's steps in order: (model trigger, from state, to state).

        The checkpoint cannot see the business commit, so a logged ``executing`` may be
        the model's ``committed``; :func:`trace_rows` exports them as logged.
        """
        rows = self._conn.execute("SELECT event, from_state, state FROM call_events "
                                  "WHERE call_id = ? ORDER BY seq", (call_id,)).fetchall()
        return [(row[0], row[1], row[2]) for row in rows]

    def calls(self, states: frozenset[CallState] | None = None) -> list[Call]:
        rows = self._conn.execute("SELECT * FROM calls ORDER BY created_at, call_id").fetchall()
        return [c for c in map(_call, rows) if states is None or c.state in states]

    def events_since(self, run_id: str, seq: int = 0) -> list[DisplayEvent]:
        return events_since(self._conn, run_id, seq)

    # -- writes ----------------------------------------------------------------------------
    def insert(self, call: Call, event: str,
               display: tuple[str, Mapping[str, Any]] | None = None) -> Call:
        """Checkpoint a new call and its first event in one transaction."""
        now = self._clock()
        with write(self._conn) as conn:
            conn.execute(
                "INSERT INTO calls (call_id, session_id, run_id, tool, client_token, "
                "normalized_args, schema_fingerprint, retry_safe, deadline, state, created_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (call.call_id, call.session_id, call.run_id, call.tool, call.client_token,
                 canonical_json(dict(call.args)), call.schema_fingerprint, int(call.retry_safe),
                 call.deadline, call.state.value, now, now))
            self._log(conn, call, event, (_PROPOSED, call.state), display, now)
        return self.get(call.call_id)

    def update(self, call: Call, event: str, *, allowed: frozenset[CallState],
               to: CallState | None = None,
               display: tuple[str, Mapping[str, Any]] | None = None, **changes: object) -> Call:
        """Move ``call`` (still in one of ``allowed``) to ``to`` and log ``event``."""
        unknown = set(changes) - _MUTABLE
        if unknown:
            raise InvalidInput(f"cannot set {sorted(unknown)} on a call; settable: {sorted(_MUTABLE)}")
        now = self._clock()
        with write(self._conn) as conn:
            row = conn.execute("SELECT state FROM calls WHERE call_id = ?",
                               (call.call_id,)).fetchone()
            if row is None or CallState(row["state"]) not in allowed:
                found = "missing" if row is None else row["state"]
                raise StateMoved(f"call {call.call_id!r} is {found}, not {sorted(allowed)}; "
                                 f"nothing was changed by {event}, re-read the call")
            before = CallState(row["state"])
            state = to or before
            sets = {"state": state.value, "updated_at": now,
                    **{k: _stored(x) for k, x in changes.items()}}
            conn.execute(f"UPDATE calls SET {', '.join(f'{k} = ?' for k in sets)} "  # names: _MUTABLE
                         "WHERE call_id = ?", (*sets.values(), call.call_id))
            self._log(conn, call, event, (before.value, state), display, now)
        return self.get(call.call_id)

    @staticmethod
    def _log(conn: sqlite3.Connection, call: Call, event: str, move: tuple[str, CallState],
             display: tuple[str, Mapping[str, Any]] | None, now: float) -> None:
        require_declared("approval", event, move[0], move[1].value)
        last = conn.execute("SELECT MAX(seq) FROM call_events WHERE call_id = ?",
                            (call.call_id,)).fetchone()[0]
        logged = canonical_json(_logged_vars(conn, call.call_id, move, now))
        conn.execute("INSERT INTO call_events (call_id, seq, event, from_state, state, at, vars) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (call.call_id, int(last or 0) + 1, event, move[0], move[1].value, now,
                      logged))
        if display is not None:
            kind, payload = display
            append_event(conn, call.run_id, kind, call.call_id, payload, now)

    # -- session locks (A8) ------------------------------------------------------------------
    @contextmanager
    def session_lock(self, session_id: str, operation: str) -> Iterator[None]:
        """Hold ``session_id`` for ``operation``; :class:`SessionBusy` if someone else does."""
        holder = f"{os.getpid()}:{uuid.uuid4().hex}"
        self._acquire(session_id, holder, operation)
        try:
            yield
        finally:
            with write(self._conn) as conn:
                conn.execute("DELETE FROM session_locks WHERE session_id = ? AND holder = ?",
                             (session_id, holder))

    def _acquire(self, session_id: str, holder: str, operation: str) -> None:
        now = self._clock()
        with write(self._conn) as conn:
            row = conn.execute("SELECT holder, operation, acquired_at FROM session_locks "
                               "WHERE session_id = ?", (session_id,)).fetchone()
            if row is not None and self._alive(row["holder"], row["acquired_at"], now):
                raise SessionBusy(
                    f"session {session_id!r} is busy with {row['operation']} (holder "
                    f"{row['holder']}); nothing was done by {operation}, retry when it finishes")
            conn.execute("INSERT OR REPLACE INTO session_locks (session_id, holder, operation, "
                         "acquired_at) VALUES (?, ?, ?, ?)", (session_id, holder, operation, now))

    def _alive(self, holder: str, acquired_at: float, now: float) -> bool:
        if now - acquired_at > self._lock_ttl:
            return False
        pid = int(holder.split(":", 1)[0])
        if pid == os.getpid():
            return True
        try:
            os.kill(pid, 0)  # signal 0: existence check only
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


# -- the trace export (settled.trace/1) ----------------------------------------------------------
TRACE_SCHEMA: Final = "settled.trace/1"  # conformance/trace.schema.json
MACHINE: Final = "approval"
def trace_rows(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every call's events as ``settled.trace/1`` rows, by (call_id, seq), in the model's terms.

    ``instance`` is the call id, ``trigger`` the logged event (already the model's observable
    name), ``params`` the proposal's ``retry_safe``, ``vars`` what :func:`_logged_vars` saved.
    States are the checkpoint's as logged. The model's ``committed`` (the business commit
    happened, its result is not checkpointed yet) is never one: the commit is in the other
    file and leaves no event, so an event after it names ``executing``, the state this log
    last saw, and the trace checker considers both readings (README, "Steps your log cannot
    see").
    """
    rows = conn.execute(
        "SELECT e.call_id, e.seq, e.event, e.from_state, e.state, e.at, e.vars, c.retry_safe "
        "FROM call_events AS e JOIN calls AS c ON c.call_id = e.call_id "
        "ORDER BY e.call_id, e.seq").fetchall()
    by_call: dict[str, list[sqlite3.Row]] = {}
    for row in rows:
        by_call.setdefault(row["call_id"], []).append(row)
    out: list[dict[str, Any]] = []
    for call_rows in by_call.values():
        for r in call_rows:
            source, dest = r["from_state"], r["state"]
            params = {"retry_safe": bool(r["retry_safe"])} if r["event"] == "propose" else {}
            out.append({"schema": TRACE_SCHEMA, "machine": MACHINE, "instance": r["call_id"],
                        "seq": r["seq"], "trigger": r["event"], "params": params,
                        "from": source, "to": dest, "vars": json.loads(r["vars"]),
                        "at": datetime.fromtimestamp(r["at"], UTC).isoformat()})
    return out


def trace_lines(checkpoint_path: str | Path) -> Iterator[str]:
    """The checkpoint file's event log as ``settled.trace/1`` JSON lines (no newline)."""
    if not Path(checkpoint_path).is_file():  # connect() would create an empty file
        raise NotFound(f"no checkpoint at {str(checkpoint_path)!r}; pass the runtime's "
                       "checkpoint file")
    conn = connect(checkpoint_path)
    conn.row_factory = sqlite3.Row
    try:
        rows = trace_rows(conn)
    finally:
        conn.close()
    for row in rows:
        yield json.dumps(row, ensure_ascii=False, separators=(",", ":"))
