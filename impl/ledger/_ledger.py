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

This module holds the recovery (L4, L5) and the trace export. The steps of a live turn
are in :mod:`._ledger_turn`, the session file's schema, reads, fences and event log in
:mod:`._ledger_file`, and the contracts and values in :mod:`._ledger_values`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from ..shared._db import connect, write
from ..shared._errors import NotAllowed, NotFound
from ._ledger_turn import LedgerTurns
from ._ledger_values import Entry, TurnReport, _text_id

__all__ = [
    "MACHINE",
    "LedgerRuntime",
    "trace_lines",
]

MACHINE: Final = "ledger"
TRACE_SCHEMA: Final = "settled.trace/1"


class LedgerRuntime(LedgerTurns):
    """Register, run, pair, recover and continue the tool calls of assistant turns (L1–L5).

    ``run_id`` names this process's run; a restarted process passes a new one and calls
    :meth:`recover` (or :meth:`resume`) before touching a session another run left.
    """

    def __enter__(self) -> LedgerRuntime:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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
