"""One assistant turn: its session, the registration of its calls, running, pairing, continuing.

:class:`LedgerTurns` holds the steps of a turn that goes well (L1, L3): open a session,
register every call of an assistant message in one transaction, run a call under its
operation_id, pair its result, and let the original input continue. It is its own room
because these are the steps a live run takes; what a NEW run does with a turn another
run left (L2, L4, L5) is the recovery in :mod:`._ledger`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..approval._business_normalize import canonical_json, fingerprint
from ..shared._db import write
from ..shared._errors import CallerError, IdempotencyConflict, InvalidInput, NotAllowed
from ._ledger_file import LedgerFile
from ._ledger_values import (
    MAX_CALLS,
    MAX_INPUT_CHARS,
    Contract,
    Entry,
    ToolCall,
    _show,
    _text_id,
    check_fingerprint,
)

__all__ = ["LedgerTurns"]


class LedgerTurns(LedgerFile):
    """Open a session, register a turn's calls, run and pair each, continue the turn (L1, L3)."""

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
