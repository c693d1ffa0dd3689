"""The tool-call ledger and the recovery of a whole assistant turn (L1–L5).

Theory of operation. This is the implementation of ``settled.model.ledger``;
every change of a call's row is one of that table's transitions and is logged
under its trigger name (``ledger_events``), so a run can be replayed through
the model (:func:`trace_lines`). Two files, never one transaction across them:

- the *session file*: the session tree (``nodes``; ``sessions.leaf_id`` is
  the checkpoint, the position the session resumes from), the ``ledger``
  (SDK call id → ``operation_id``, origin run, parameter fingerprint,
  contract), the receipts of read-only lookups and explicit rejections, and
  the session's read permission;
- the *business store* (:mod:`..approval._business`, the approval protocol's own): an
  in-app write runs there with ``client_token = operation_id``, so the
  business change and ``mutation_requests`` — its success receipt — commit in
  ONE transaction (L1). No second copy of that discipline exists here.

A turn: :meth:`LedgerRuntime.begin_turn` appends the assistant message with
its tool calls AND registers every call (operation_id minted once) in one
transaction (L1). :meth:`run_call` runs one call under its operation_id;
:meth:`pair_call` checkpoints its tool result; :meth:`continue_turn` lets the
original input go on once every call of the message is paired.

After a crash a runtime with a NEW ``run_id`` (it proves current run rights
only, L2) calls :meth:`recover`: the session moves to the new run, every
unpaired call of the latest assistant message is found — all of them, even
when the checkpoint already ends with another call's result (L4) — and each
is settled from its receipt first: success → success result; rejection →
error result; no receipt → the call continues under its ORIGINAL
operation_id, except a write whose tool contract was upgraded since its
registration, which is paired as ``unknown`` and never as "invalid
parameters, not executed" (L5). A read-only call without a receipt re-checks
the current read permission first. New calls are validated strictly against
the current contract. Then the original input continues.

Runs fence each other through the session row: every write of a call checks
that the session still runs under this ``run_id`` and moves rows by
compare-and-set, so a run that was taken over can no longer pair, recover or
continue anything. A business call it had already started is harmless: it
runs under the call's ORIGINAL operation_id, which the business store
de-duplicates (W2), so a change is never applied twice.

Crash points: the injectable ``hook`` is called as ``hook(point, position)``
with ``"receipt_committed"`` after a call's receipt is durable,
``"inside_transaction"`` inside a write's business transaction before it
commits, and ``"result_checkpointed"`` after a result is checkpointed; a
crash test makes it ``os._exit``.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from ..approval._business import BusinessStore, canonical_json, fingerprint, normalize
from ..shared._db import DEFAULT_BUSY_TIMEOUT, apply_schema, connect, write
from ..shared._declared import require_declared
from ..shared._errors import CallerError, IdempotencyConflict, InvalidInput, NotAllowed, NotFound
from ..shared._ids import require_id

__all__ = [
    "CONTRACTS",
    "HOOK_POINTS",
    "MACHINE",
    "Contract",
    "Entry",
    "LedgerRuntime",
    "ToolCall",
    "TurnReport",
    "contracts_upgraded",
    "trace_lines",
]

SCHEMA_VERSION: Final = 1
MACHINE: Final = "ledger"
TRACE_SCHEMA: Final = "settled.trace/1"
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

Hook = Callable[[str, int], None]
HOOK_POINTS: Final = ("receipt_committed", "inside_transaction", "result_checkpointed")
MAX_INPUT_CHARS: Final = 20_000
MAX_CALLS: Final = 64
_HEX64: Final = re.compile(r"[0-9a-f]{64}")


# --- contracts --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Contract:
    """A tool's contract: version, kind, and what the version allows.

    Version 2 of a write tool allows at most ``max_quantity`` units per order line or stock
    adjustment: arguments registered under version 1 may not pass it (L5).
    """

    tool: str
    read_only: bool = False
    version: int = 1
    max_quantity: int | None = None

    @property
    def fingerprint(self) -> str:
        text = canonical_json({"tool": self.tool, "version": self.version,
                               "read_only": self.read_only, "max_quantity": self.max_quantity})
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The normalized arguments, or :class:`InvalidInput` naming what this version refuses."""
        if self.read_only:
            return _normalize_lookup(self.tool, args)
        normalized = normalize(self.tool, args)
        if self.max_quantity is not None:
            quantities = ([item["quantity"] for item in normalized.get("items", [])]
                          + ([abs(normalized["delta"])] if "delta" in normalized else []))
            too_many = [q for q in quantities if q > self.max_quantity]
            if too_many:
                raise InvalidInput(f"{self.tool} contract v{self.version}: quantity {too_many[0]} "
                                   f"exceeds {self.max_quantity}; split the request")
        return normalized


CONTRACTS: Final = MappingProxyType({c.tool: c for c in (
    Contract("create_order"), Contract("cancel_order"), Contract("adjust_stock"),
    Contract("set_listing"), Contract("stock_level", read_only=True))})


def contracts_upgraded(contracts: Mapping[str, Contract] = CONTRACTS,
                       tools: Sequence[str] | None = None) -> dict[str, Contract]:
    """The contracts after a deployment that upgrades ``tools`` (default: every write tool)."""
    chosen = [t for t, c in contracts.items() if not c.read_only] if tools is None else tools
    out = dict(contracts)
    for tool in chosen:
        c = out[tool]
        out[tool] = replace(c, version=c.version + 1, max_quantity=1)
    return out


def _normalize_lookup(tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(args, Mapping) or set(args) != {"sku"}:
        raise InvalidInput(f"{tool}: arguments are {_show(args)}; pass exactly {{\"sku\": ...}}")
    sku = args["sku"]
    if not isinstance(sku, str) or not sku.strip() or len(sku) > 64:
        raise InvalidInput(f"{tool}: sku is {_show(sku)}; it must be a non-empty string of at "
                           "most 64 characters")
    return {"sku": sku}


# --- values -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of an assistant message, as the SDK delivered it."""

    call_id: str
    tool: str
    args: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Entry:
    """One ledger row: the call id's mapping, its state and (when known) its receipt."""

    call_id: str
    session_id: str
    position: int
    tool: str
    args: Mapping[str, Any]
    fingerprint: str
    contract: str
    read_only: bool
    operation_id: str
    origin_run_id: str
    state: str
    receipt: str = "none"  # none | success | rejected
    receipt_body: Any = None
    result: Mapping[str, Any] | None = None


@dataclass
class TurnReport:
    """What :meth:`LedgerRuntime.recover` did to one turn."""

    session_id: str
    run_id: str
    calls: int = 0
    paired_from_receipts: list[str] = field(default_factory=list)
    continued: list[str] = field(default_factory=list)  # ran again under the original op id
    unknown: list[str] = field(default_factory=list)
    denied: list[str] = field(default_factory=list)
    results: dict[str, Mapping[str, Any]] = field(default_factory=dict)


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _text_id(name: str, value: object) -> str:
    return require_id(name, value, "pass the id this session uses")


def check_fingerprint(value: object) -> str:
    """A parameter fingerprint is 64 lowercase hex characters (sha256)."""
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise InvalidInput(f"fingerprint {_show(value)} is malformed; pass the 64 lowercase hex "
                           "characters of the sha256 of the call's canonical parameters")
    return value


def _no_hook(point: str, position: int) -> None:
    """Production never crashes on purpose."""


def _connect_with_schema(path: str | Path, busy_timeout: float) -> sqlite3.Connection:
    conn = connect(path, busy_timeout)
    try:
        apply_schema(conn, SCHEMA, SCHEMA_VERSION, "ledger")
    except BaseException:
        conn.close()
        raise
    return conn


class LedgerRuntime:
    """Register, run, pair, recover and continue the tool calls of assistant turns (L1–L5).

    ``run_id`` names this process's run; a restarted process passes a new one and calls
    :meth:`recover` (or :meth:`resume`) before touching a session another run left.
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

    def __enter__(self) -> LedgerRuntime:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def business(self) -> BusinessStore:
        return self._business

    @property
    def connection(self) -> sqlite3.Connection:
        return self._conn

    # -- sessions ----------------------------------------------------------------------------
    def open_session(self, session_id: str, user_input: str) -> str:
        """Create a session under this run with the user's input as its first node; its id."""
        session = _text_id("session_id", session_id)
        if not isinstance(user_input, str) or not user_input.strip() \
                or len(user_input) > MAX_INPUT_CHARS:
            raise InvalidInput(f"user_input is {_show(user_input)}; pass the user's message "
                               f"(1 to {MAX_INPUT_CHARS} characters)")
        now = self._clock()
        with write(self._conn) as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session,)).fetchone():
                raise NotAllowed(f"session {session!r} exists; resume it with recover() instead")
            node = f"node-{uuid.uuid4().hex[:16]}"
            conn.execute("INSERT INTO sessions (session_id, first_run_id, run_id, leaf_id, "
                         "created_at) VALUES (?, ?, ?, ?, ?)",
                         (session, self.run_id, self.run_id, node, now))
            conn.execute("INSERT INTO nodes (node_id, session_id, parent_id, role, call_id, "
                         "content, created_at) VALUES (?, ?, NULL, 'user', NULL, ?, ?)",
                         (node, session, canonical_json({"text": user_input}), now))
            conn.execute("INSERT INTO read_grants (session_id, granted) VALUES (?, 1)", (session,))
        return session

    def revoke_read(self, session_id: str) -> None:
        """Withdraw the session's read permission (read-only tools are refused from now on)."""
        session = self._session(_text_id("session_id", session_id))["session_id"]
        with write(self._conn) as conn:
            conn.execute("UPDATE read_grants SET granted = 0 WHERE session_id = ?", (session,))

    def may_read(self, session_id: str) -> bool:
        row = self._conn.execute("SELECT granted FROM read_grants WHERE session_id = ?",
                                 (session_id,)).fetchone()
        return bool(row and row["granted"])

    # -- L1: registration ------------------------------------------------------------------------
    def begin_turn(self, session_id: str, calls: Sequence[ToolCall]) -> list[Entry]:
        """Checkpoint the assistant message and register all its calls in one transaction (L1).

        Every call is validated strictly against the current contract first; a bad call
        refuses the whole message and nothing is written.
        """
        session = _text_id("session_id", session_id)
        if isinstance(calls, ToolCall) or not isinstance(calls, Sequence) \
                or not 1 <= len(calls) <= MAX_CALLS:
            raise InvalidInput(f"calls is {_show(calls)}; pass a list of 1 to {MAX_CALLS} "
                               "ToolCall values")
        checked = [self._checked(i, c) for i, c in enumerate(calls)]
        ids = [c[0] for c in checked]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise InvalidInput(f"call id {dup!r} appears twice in one assistant message; each "
                               "tool call needs its own id")
        now = self._clock()
        with write(self._conn) as conn:
            row = self._owned(conn, session, "begin a turn")
            known = conn.execute(
                "SELECT call_id FROM ledger WHERE call_id IN (SELECT value FROM json_each(?))",
                (json.dumps(ids),)).fetchone()
            if known is not None:
                raise IdempotencyConflict(
                    f"call id {known['call_id']!r} is already registered; nothing was written, "
                    "use redeliver() for a call the SDK delivers again")
            open_calls = [r["call_id"] for r in conn.execute(
                "SELECT call_id FROM ledger WHERE session_id = ? AND state != 'continued' "
                "ORDER BY position", (session,))]
            if open_calls:  # recovery looks at the latest message only: never bury these (L4)
                raise NotAllowed(f"session {session!r}'s latest turn has calls {open_calls} that "
                                 "have not continued; nothing was written, recover() or "
                                 "continue_turn() it before the next assistant message")
            message = f"node-{uuid.uuid4().hex[:16]}"
            content = {"tool_calls": [{"call_id": c, "tool": t, "args": a}
                                      for c, t, a, _ in checked]}
            conn.execute("INSERT INTO nodes (node_id, session_id, parent_id, role, call_id, "
                         "content, created_at) VALUES (?, ?, ?, 'assistant', NULL, ?, ?)",
                         (message, session, row["leaf_id"], canonical_json(content), now))
            conn.execute("UPDATE sessions SET leaf_id = ? WHERE session_id = ?", (message, session))
            for position, (call_id, tool, args, contract) in enumerate(checked):
                op = self._mint_operation_id()
                conn.execute(
                    "INSERT INTO ledger (call_id, session_id, message_id, position, tool, "
                    "normalized_args, fingerprint, contract, read_only, operation_id, "
                    "minted_operation_id, origin_run_id, state, registered_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'registered', ?)",
                    (call_id, session, message, position, tool, canonical_json(args),
                     fingerprint(tool, args), contract.fingerprint, int(contract.read_only), op,
                     op, self.run_id, now))
                self._log(conn, call_id, "register", "requested", "registered",
                          {"kind": "read" if contract.read_only else "write"})
        return [self.entry(c[0]) for c in checked]

    def _checked(self, index: int, call: object) -> tuple[str, str, dict[str, Any], Contract]:
        if not isinstance(call, ToolCall):
            raise InvalidInput(f"calls[{index}] is {_show(call)}; pass ToolCall(call_id, tool, "
                               "args)")
        call_id = _text_id(f"calls[{index}].call_id", call.call_id)
        contract = self._contracts.get(call.tool) if isinstance(call.tool, str) else None
        if contract is None:
            raise InvalidInput(f"calls[{index}]: unknown tool {_show(call.tool)}; use one of "
                               f"{', '.join(sorted(self._contracts))}")
        return call_id, call.tool, contract.validate(call.args), contract

    @staticmethod
    def _mint_operation_id() -> str:
        return f"op-{uuid.uuid4().hex}"

    # -- L3: a call id delivered again -------------------------------------------------------------
    def redeliver(self, session_id: str, call_id: str, tool: str, args: Mapping[str, Any], *,
                  param_fingerprint: str | None = None) -> Entry:
        """The SDK delivers a call id again: the same parameters return its entry unchanged;
        other parameters are :class:`IdempotencyConflict` and change nothing (L3)."""
        if param_fingerprint is not None:
            check_fingerprint(param_fingerprint)
        entry = self._entry_of(session_id, call_id)
        if not isinstance(tool, str) or tool not in self._contracts:
            raise InvalidInput(f"unknown tool {_show(tool)}; use one of "
                               f"{', '.join(sorted(self._contracts))}")
        try:
            normalized = Contract(tool, self._contracts[tool].read_only).validate(args)
        except InvalidInput as exc:
            raise IdempotencyConflict(f"call id {call_id!r} is registered with other parameters "
                                      f"({exc}); nothing was changed") from exc
        wanted = fingerprint(tool, normalized)
        if param_fingerprint is not None and param_fingerprint != wanted:
            raise InvalidInput(f"fingerprint {param_fingerprint!r} is not the fingerprint of these "
                               f"parameters ({wanted}); pass the parameters' own fingerprint")
        if entry.state == "continued":
            raise NotAllowed(f"call id {call_id!r} belongs to a turn that already continued; "
                             "nothing was changed, a new request needs a new call id")
        if tool != entry.tool or wanted != entry.fingerprint:
            raise IdempotencyConflict(
                f"call id {call_id!r} is registered for {entry.tool} with fingerprint "
                f"{entry.fingerprint[:12]}…, not {tool} with {wanted[:12]}…; idempotency_conflict: "
                "nothing was changed, a new request needs a new call id")
        with write(self._conn) as conn:  # the redelivery changes nothing, and is logged (L3)
            state = self._model_state(conn, call_id, entry.state)
            self._log(conn, call_id, "reregister", state, state, {"params": "same"})
        return entry

    # -- running and pairing -----------------------------------------------------------------------
    def run_call(self, session_id: str, call_id: str) -> Entry:
        """Run a registered call with no receipt under its operation_id; its receipt commits
        with the business change (writes) or the lookup (reads) (L1)."""
        entry = self._entry_of(session_id, call_id)
        self._owned(self._conn, entry.session_id, "run a call")
        if entry.state != "registered" or entry.receipt != "none":
            raise NotAllowed(self._why_not(entry, "run"))
        self._position = entry.position
        if entry.read_only:
            self._run_lookup(entry)
        else:
            try:
                self._business.execute(entry.tool, entry.operation_id, entry.args)
            except CallerError as exc:  # an explicit refusal: nothing changed (W6)
                self._reject(entry, str(exc))
        self._hook("receipt_committed", entry.position)
        return self.entry(call_id)

    def _run_lookup(self, entry: Entry) -> None:
        now = self._clock()
        with write(self._conn) as conn:
            if not self.may_read(entry.session_id):
                body: Any = {"error": f"read permission of session {entry.session_id!r} is "
                                      "revoked; nothing was read"}
                status = "rejected"
            else:
                body, status = self._lookup(entry.args["sku"]), "success"
            conn.execute("INSERT INTO receipts (operation_id, call_id, status, body, at) VALUES "
                         "(?, ?, ?, ?, ?)", (entry.operation_id, entry.call_id, status,
                                            canonical_json(body), now))
            if status == "rejected":
                self._log(conn, entry.call_id, "reject", "registered", "receipted")

    def _lookup(self, sku: str) -> dict[str, Any]:
        row = self._business.connection.execute(
            "SELECT sku, stock, listed FROM products WHERE sku = ?", (sku,)).fetchone()
        if row is None:
            return {"sku": sku, "found": False}
        return {"sku": row["sku"], "found": True, "stock": row["stock"],
                "listed": bool(row["listed"])}

    def _reject(self, entry: Entry, reason: str) -> None:
        with write(self._conn) as conn:
            conn.execute("INSERT INTO receipts (operation_id, call_id, status, body, at) VALUES "
                         "(?, ?, 'rejected', ?, ?)", (entry.operation_id, entry.call_id,
                                                      canonical_json({"error": reason}),
                                                      self._clock()))
            self._log(conn, entry.call_id, "reject", "registered", "receipted")

    def pair_call(self, session_id: str, call_id: str) -> Entry:
        """Checkpoint the result of a receipted call: success or error from its receipt (L4)."""
        entry = self._entry_of(session_id, call_id)
        self._owned(self._conn, entry.session_id, "pair a call")
        if entry.state != "registered" or entry.receipt == "none":
            raise NotAllowed(self._why_not(entry, "pair"))
        self._pair(entry, "pair", "receipted", self._from_receipt(entry))
        return self.entry(call_id)

    @staticmethod
    def _from_receipt(entry: Entry) -> dict[str, Any]:
        if entry.receipt == "success":
            return {"status": "success", "operation_id": entry.operation_id,
                    "content": entry.receipt_body}
        return {"status": "error", "operation_id": entry.operation_id,
                "content": entry.receipt_body}

    def _pair(self, entry: Entry, event: str, source: str, result: Mapping[str, Any]) -> None:
        now = self._clock()
        with write(self._conn) as conn:
            self._owned(conn, entry.session_id, "pair a call")  # the fence, under the lock (L2)
            moved = conn.execute("UPDATE ledger SET state = 'paired' WHERE call_id = ? AND "
                                 "state = ?", (entry.call_id, entry.state)).rowcount
            if not moved:
                raise NotAllowed(f"call {entry.call_id!r} moved while it was being paired; "
                                 "nothing was changed, read it again")
            leaf = conn.execute("SELECT leaf_id FROM sessions WHERE session_id = ?",
                                (entry.session_id,)).fetchone()["leaf_id"]
            node = f"node-{uuid.uuid4().hex[:16]}"
            conn.execute("INSERT INTO nodes (node_id, session_id, parent_id, role, call_id, "
                         "content, created_at) VALUES (?, ?, ?, 'tool_result', ?, ?, ?)",
                         (node, entry.session_id, leaf, entry.call_id, canonical_json(result),
                          now))
            conn.execute("UPDATE sessions SET leaf_id = ? WHERE session_id = ?",
                         (node, entry.session_id))
            self._log(conn, entry.call_id, event, source, "paired")
        self._hook("result_checkpointed", entry.position)

    # -- L4, L5: recovery ---------------------------------------------------------------------------
    def resume(self, session_id: str) -> bool:
        """Take the session over under this run (L2): its unpaired calls are now recovering.

        Returns False when the session already runs under this run_id (nothing to do).
        """
        session = _text_id("session_id", session_id)
        with write(self._conn) as conn:
            row = conn.execute("SELECT run_id FROM sessions WHERE session_id = ?",
                               (session,)).fetchone()
            if row is None:
                raise NotFound(f"session {session!r} has no checkpoint; nothing to recover, open "
                               "it with open_session()")
            if row["run_id"] == self.run_id:
                return False
            conn.execute("UPDATE sessions SET run_id = ? WHERE session_id = ?",
                         (self.run_id, session))
            for r in conn.execute("SELECT call_id, state FROM ledger WHERE session_id = ? AND "
                                  "state != 'continued' ORDER BY registered_at, position",
                                  (session,)).fetchall():
                source = self._model_state(conn, r["call_id"], r["state"])
                to = "paired" if r["state"] == "paired" else "recovering"
                conn.execute("UPDATE ledger SET state = ? WHERE call_id = ?", (to, r["call_id"]))
                self._log(conn, r["call_id"], "restart", source, to)
        return True

    def unpaired_calls(self, session_id: str) -> list[Entry]:
        """Every tool call of the latest assistant message with no paired result (L4)."""
        session = self._session(_text_id("session_id", session_id))["session_id"]
        message = self._conn.execute(
            "SELECT message_id FROM ledger WHERE session_id = ? ORDER BY registered_at DESC, "
            "rowid DESC LIMIT 1", (session,)).fetchone()
        if message is None:
            return []
        rows = self._conn.execute(
            "SELECT call_id FROM ledger WHERE message_id = ? AND state IN ('registered', "
            "'recovering') ORDER BY position", (message["message_id"],)).fetchall()
        return [self.entry(r["call_id"]) for r in rows]

    def recover_call(self, session_id: str, call_id: str) -> Entry:
        """Settle one recovering call: its receipt first, then contract and permission (L4, L5).

        A call without a receipt that may continue goes back to ``registered`` under its
        ORIGINAL operation_id (run it with :meth:`run_call`); every other call is paired.
        """
        entry = self._entry_of(session_id, call_id)
        self._owned(self._conn, entry.session_id, "recover a call")
        if entry.call_id not in {e.call_id for e in self.unpaired_calls(entry.session_id)}:
            raise NotAllowed(f"call {call_id!r} is not an unpaired call of session "
                             f"{entry.session_id!r}'s latest assistant message; nothing to "
                             "recover")
        if entry.state != "recovering":
            raise NotAllowed(self._why_not(entry, "recover"))
        self._position = entry.position
        if entry.receipt != "none":  # the receipt decides, whatever the contract is now (L5)
            self._pair(entry, "recover_pair", "recovering", self._from_receipt(entry))
        elif entry.read_only and not self.may_read(entry.session_id):
            self._pair(entry, "recover_pair", "recovering", {
                "status": "error", "operation_id": entry.operation_id,
                "content": {"error": "read permission revoked since the call was registered; "
                                     "nothing was read"}})
        elif not entry.read_only and not self._same_contract(entry):
            self._pair(entry, "recover_pair", "recovering", self._unknown(entry))
        else:
            self._continue_call(entry)
        return self.entry(call_id)

    def _continue_call(self, entry: Entry) -> None:
        """No receipt: the call continues under its original operation_id (L2, L4)."""
        with write(self._conn) as conn:
            self._owned(conn, entry.session_id, "recover a call")  # the fence, under the lock
            moved = conn.execute("UPDATE ledger SET state = 'registered' WHERE call_id = ? AND "
                                 "state = 'recovering'", (entry.call_id,)).rowcount
            if not moved:
                raise NotAllowed(f"call {entry.call_id!r} moved while it was being recovered; "
                                 "nothing was changed, read it again")
            self._log(conn, entry.call_id, "resume", "recovering", "registered")

    def _unknown(self, entry: Entry) -> dict[str, Any]:
        return {"status": "unknown", "operation_id": entry.operation_id,
                "content": {"error": f"{entry.tool} was registered under an earlier contract and "
                                     "has no receipt: it may have run, so it is neither re-run "
                                     "nor reported as not executed; verify it by its "
                                     f"operation_id {entry.operation_id}"}}

    def _same_contract(self, entry: Entry) -> bool:
        contract = self._contracts.get(entry.tool)
        return contract is not None and contract.fingerprint == entry.contract

    def recover(self, session_id: str) -> TurnReport:
        """Recover the session's latest turn under this run, then let the input continue."""
        session = _text_id("session_id", session_id)
        self.resume(session)
        report = TurnReport(session, self.run_id)
        pending = self.unpaired_calls(session)
        report.calls = len(self._calls_of_latest(session))
        for entry in pending:
            if entry.state == "recovering":
                receipted = entry.receipt != "none"
                entry = self.recover_call(session, entry.call_id)
                if entry.state == "paired":
                    result = entry.result or {}
                    (report.paired_from_receipts if receipted else report.unknown
                     if result.get("status") == "unknown" else report.denied).append(entry.call_id)
                    continue
            if entry.receipt == "none":
                entry = self.run_call(session, entry.call_id)
                report.continued.append(entry.call_id)
            self.pair_call(session, entry.call_id)
        latest = self._calls_of_latest(session)
        for entry in latest:
            report.results[entry.call_id] = entry.result or {}
        if any(e.state != "continued" for e in latest):
            self.continue_turn(session)
        return report

    def _calls_of_latest(self, session: str) -> list[Entry]:
        message = self._conn.execute(
            "SELECT message_id FROM ledger WHERE session_id = ? ORDER BY registered_at DESC, "
            "rowid DESC LIMIT 1", (session,)).fetchone()
        if message is None:
            return []
        return [self.entry(r["call_id"]) for r in self._conn.execute(
            "SELECT call_id FROM ledger WHERE message_id = ? ORDER BY position",
            (message["message_id"],))]

    def continue_turn(self, session_id: str) -> str:
        """The original input continues with every call's result; the new leaf's id (L4)."""
        session = _text_id("session_id", session_id)
        now = self._clock()
        with write(self._conn) as conn:
            row = self._owned(conn, session, "continue the turn")
            calls = conn.execute(
                "SELECT call_id, state FROM ledger WHERE message_id = (SELECT message_id FROM "
                "ledger WHERE session_id = ? ORDER BY registered_at DESC, rowid DESC LIMIT 1) "
                "ORDER BY position", (session,)).fetchall()
            if not calls:
                raise NotAllowed(f"session {session!r} has no turn with tool calls to continue")
            open_calls = [r["call_id"] for r in calls if r["state"] != "paired"]
            if any(r["state"] == "continued" for r in calls):
                raise NotAllowed(f"session {session!r}'s latest turn already continued")
            if open_calls:
                raise NotAllowed(f"calls {open_calls} of session {session!r}'s latest assistant "
                                 "message have no paired result; recover() them first")
            user = conn.execute("SELECT content FROM nodes WHERE session_id = ? AND role = 'user' "
                                "ORDER BY created_at DESC, rowid DESC LIMIT 1",
                                (session,)).fetchone()
            node = f"node-{uuid.uuid4().hex[:16]}"
            content = {"continues": json.loads(user["content"]),
                       "with_results_of": [r["call_id"] for r in calls]}
            conn.execute("INSERT INTO nodes (node_id, session_id, parent_id, role, call_id, "
                         "content, created_at) VALUES (?, ?, ?, 'assistant', NULL, ?, ?)",
                         (node, session, row["leaf_id"], canonical_json(content), now))
            conn.execute("UPDATE sessions SET leaf_id = ? WHERE session_id = ?", (node, session))
            for r in calls:
                conn.execute("UPDATE ledger SET state = 'continued' WHERE call_id = ?",
                             (r["call_id"],))
                self._log(conn, r["call_id"], "continue", "paired", "continued")
        return node

    def run_turn(self, session_id: str, calls: Sequence[ToolCall]) -> list[Entry]:
        """The happy path: register the message, run and pair each call, continue."""
        entries = self.begin_turn(session_id, calls)
        for entry in entries:
            self.run_call(session_id, entry.call_id)
            self.pair_call(session_id, entry.call_id)
        self.continue_turn(session_id)
        return [self.entry(e.call_id) for e in entries]

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


def trace_rows(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every call's events as ``settled.trace/1`` rows, by (call_id, seq)."""
    out: list[dict[str, Any]] = []
    for r in conn.execute("SELECT * FROM ledger_events ORDER BY call_id, seq"):
        out.append({"schema": TRACE_SCHEMA, "machine": MACHINE, "instance": r["call_id"],
                    "seq": r["seq"], "trigger": r["event"], "params": json.loads(r["params"]),
                    "from": r["from_state"], "to": r["state"], "vars": json.loads(r["vars"]),
                    "at": datetime.fromtimestamp(r["at"], UTC).isoformat()})
    return out


def trace_lines(ledger_path: str | Path) -> Iterator[str]:
    """The session file's event log as ``settled.trace/1`` JSON lines (no newline)."""
    if not Path(ledger_path).is_file():
        raise NotFound(f"no session file at {str(ledger_path)!r}; pass the ledger runtime's file")
    conn = connect(ledger_path)
    try:
        rows = trace_rows(conn)
    finally:
        conn.close()
    for row in rows:
        yield json.dumps(row, ensure_ascii=False, separators=(",", ":"))
