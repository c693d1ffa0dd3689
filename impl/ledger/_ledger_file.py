"""The session file: its schema, the runtime's open files, its reads and the event log.

:class:`LedgerFile` opens the session file (and the business store beside it), reads the
ledger's rows back as :class:`~._ledger_values.Entry` values, fences every write on the
session's current run (L2) and logs each change of a call's row under its model trigger.
It is its own room because it is the storage every protocol step stands on: the turn's
steps (:mod:`._ledger_turn`) and the recovery (:mod:`._ledger`) decide, and read, fence
and log through these helpers.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from ..approval._business import BusinessStore
from ..approval._business_normalize import canonical_json
from ..shared._db import DEFAULT_BUSY_TIMEOUT, apply_schema, connect
from ..shared._declared import require_declared
from ..shared._errors import NotAllowed, NotFound
from ._ledger_values import CONTRACTS, Contract, Entry, Hook, _no_hook, _text_id

__all__ = ["SCHEMA", "SCHEMA_VERSION", "LedgerFile"]

SCHEMA_VERSION: Final = 1
SCHEMA: Final = """
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    first_run_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    leaf_id TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE nodes (
    node_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (session_id),
    parent_id TEXT,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool_result')),
    call_id TEXT,
    content TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE UNIQUE INDEX one_result_per_call ON nodes (call_id) WHERE role = 'tool_result';
CREATE TABLE ledger (
    call_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (session_id),
    message_id TEXT NOT NULL REFERENCES nodes (node_id),
    position INTEGER NOT NULL,
    tool TEXT NOT NULL,
    normalized_args TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    contract TEXT NOT NULL,
    read_only INTEGER NOT NULL CHECK (read_only IN (0, 1)),
    operation_id TEXT NOT NULL UNIQUE,
    minted_operation_id TEXT NOT NULL,
    origin_run_id TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('registered', 'recovering', 'paired', 'continued')),
    registered_at REAL NOT NULL
);
CREATE TABLE receipts (
    operation_id TEXT PRIMARY KEY,
    call_id TEXT NOT NULL REFERENCES ledger (call_id),
    status TEXT NOT NULL CHECK (status IN ('success', 'rejected')),
    body TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE read_grants (
    session_id TEXT PRIMARY KEY REFERENCES sessions (session_id),
    granted INTEGER NOT NULL CHECK (granted IN (0, 1))
);
CREATE TABLE ledger_events (
    call_id TEXT NOT NULL REFERENCES ledger (call_id),
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    from_state TEXT NOT NULL,
    state TEXT NOT NULL,
    params TEXT NOT NULL,
    vars TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (call_id, seq)
)
"""


def _connect_with_schema(path: str | Path, busy_timeout: float) -> sqlite3.Connection:
    conn = connect(path, busy_timeout)
    try:
        apply_schema(conn, SCHEMA, SCHEMA_VERSION, "ledger")
    except BaseException:
        conn.close()
        raise
    return conn


class LedgerFile:
    """The session file and the business store one runtime holds open, reads and logs to.

    ``run_id`` names this process's run; every write of a call is fenced on it (L2).
    """

    business_class: type[BusinessStore] = BusinessStore

    def __init__(self, ledger_path: str | Path, business_path: str | Path, *,
                 run_id: str | None = None, contracts: Mapping[str, Contract] = CONTRACTS,
                 hook: Hook | None = None, clock: Callable[[], float] = time.time,
                 busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> None:
        self.run_id = _text_id("run_id", run_id or f"run-{uuid.uuid4().hex[:12]}")
        # Kept by reference: a deployment that upgrades a contract is seen at once.
        self._contracts, self._hook, self._clock = contracts, hook or _no_hook, clock
        self._position = -1
        self._conn = _connect_with_schema(ledger_path, busy_timeout)
        try:
            self._business = self.business_class.open(business_path, hook=self._business_hook,
                                                busy_timeout=busy_timeout)
        except BaseException:
            self._conn.close()
            raise

    def close(self) -> None:
        self._business.close()
        self._conn.close()

    @property
    def business(self) -> BusinessStore:
        return self._business

    @property
    def connection(self) -> sqlite3.Connection:
        return self._conn

    # -- reads -------------------------------------------------------------------------------------
    def entry(self, call_id: str) -> Entry:
        row = self._conn.execute("SELECT * FROM ledger WHERE call_id = ?",
                                 (_text_id("call_id", call_id),)).fetchone()
        if row is None:
            raise NotFound(f"unknown call id {call_id!r}; no assistant message of any session "
                           "registered it (begin_turn registers the calls of a message)")
        receipt, body = self._receipt(row)
        result = self._conn.execute("SELECT content FROM nodes WHERE call_id = ? AND "
                                    "role = 'tool_result'", (row["call_id"],)).fetchone()
        return Entry(row["call_id"], row["session_id"], row["position"], row["tool"],
                     json.loads(row["normalized_args"]), row["fingerprint"], row["contract"],
                     bool(row["read_only"]), row["operation_id"], row["origin_run_id"],
                     row["state"], receipt, body,
                     None if result is None else json.loads(result["content"]))

    def _receipt(self, row: sqlite3.Row) -> tuple[str, Any]:
        """(success | rejected | none, body): the business store's record, or ours."""
        own = self._conn.execute("SELECT status, body FROM receipts WHERE operation_id = ?",
                                 (row["operation_id"],)).fetchone()
        if own is not None:
            return own["status"], json.loads(own["body"])
        if not row["read_only"]:
            stored = self._business.connection.execute(
                "SELECT result FROM mutation_requests WHERE client_token = ?",
                (row["operation_id"],)).fetchone()
            if stored is not None:
                return "success", json.loads(stored["result"])
        return "none", None

    def session(self, session_id: str) -> dict[str, Any]:
        """The session's checkpoint: run, first run and leaf_id."""
        return dict(self._session(_text_id("session_id", session_id)))

    def nodes(self, session_id: str) -> list[dict[str, Any]]:
        """The session's nodes from the root to the leaf (the checkpoint's branch)."""
        row = self._session(_text_id("session_id", session_id))
        out, node = [], row["leaf_id"]
        while node is not None:
            n = self._conn.execute("SELECT * FROM nodes WHERE node_id = ?", (node,)).fetchone()
            out.append({**dict(n), "content": json.loads(n["content"])})
            node = n["parent_id"]
        return out[::-1]

    # -- plumbing ----------------------------------------------------------------------------------
    def _session(self, session: str) -> sqlite3.Row:
        row = self._conn.execute("SELECT * FROM sessions WHERE session_id = ?",
                                 (session,)).fetchone()
        if row is None:
            raise NotFound(f"session {session!r} has no checkpoint; open it with open_session()")
        return row  # type: ignore[no-any-return]

    def _owned(self, conn: sqlite3.Connection, session: str, action: str) -> sqlite3.Row:
        row = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (session,)).fetchone()
        if row is None:
            raise NotFound(f"session {session!r} has no checkpoint; open it with open_session()")
        if row["run_id"] != self.run_id:
            raise NotAllowed(f"cannot {action}: session {session!r} runs under {row['run_id']!r}, "
                             f"not this run {self.run_id!r}; call recover() to take it over")
        return row  # type: ignore[no-any-return]

    def _entry_of(self, session_id: str, call_id: str) -> Entry:
        session = _text_id("session_id", session_id)
        entry = self.entry(call_id)
        if entry.session_id != session:
            raise NotAllowed(f"call {call_id!r} belongs to session {entry.session_id!r}, not "
                             f"{session!r}; nothing was changed, use the call's own session")
        return entry

    @staticmethod
    def _why_not(entry: Entry, action: str) -> str:
        hint = {"paired": "it is already paired", "continued": "its turn already continued",
                "recovering": "it is recovering; call recover_call() first"}.get(entry.state)
        if hint is None:
            hint = ("it has no receipt; run it first" if entry.receipt == "none"
                    else f"it already has a {entry.receipt} receipt; pair it")
        return f"cannot {action} call {entry.call_id!r} ({entry.tool}): {hint}"

    def _business_hook(self, point: str) -> None:
        if point == "before_commit":
            self._hook("inside_transaction", self._position)

    def _model_state(self, conn: sqlite3.Connection, call_id: str, stored: str) -> str:
        if stored != "registered":
            return stored
        row = conn.execute("SELECT * FROM ledger WHERE call_id = ?", (call_id,)).fetchone()
        return "receipted" if self._receipt(row)[0] != "none" else "registered"

    def _log(self, conn: sqlite3.Connection, call_id: str, event: str, source: str, dest: str,
             params: Mapping[str, Any] | None = None) -> None:
        require_declared("ledger", event, source, dest)
        seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM ledger_events WHERE call_id = ?",
                           (call_id,)).fetchone()[0]
        conn.execute("INSERT INTO ledger_events (call_id, seq, event, from_state, state, params, "
                     "vars, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (call_id, seq, event, source, dest, canonical_json(dict(params or {})),
                      canonical_json(self._logged_vars(conn, call_id, event, dest)),
                      self._clock()))

    def _logged_vars(self, conn: sqlite3.Connection, call_id: str, event: str,
                     dest: str) -> dict[str, Any]:
        row = conn.execute("SELECT l.*, s.run_id AS now_run, s.first_run_id FROM ledger AS l "
                           "JOIN sessions AS s USING (session_id) WHERE l.call_id = ?",
                           (call_id,)).fetchone()
        result = conn.execute("SELECT content FROM nodes WHERE call_id = ? AND role = "
                              "'tool_result'", (call_id,)).fetchone()
        return {"kind": "read" if row["read_only"] else "write",
                "operation_id": ("original" if row["operation_id"] == row["minted_operation_id"]
                                 else "new"),
                "run": "origin" if row["now_run"] == row["first_run_id"] else "resumed",
                "receipt": self._receipt(row)[0],
                "result": "none" if result is None else json.loads(result["content"])["status"]}

