# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""Ledger mutants: the ledger runtime or its business store, each wrong in one rule (L1–L5).

Each is a small subclass written the way an engineer might plausibly get it
wrong, driven by the ledger adapter. None of them is reachable from ``impl/``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from settled.conformance._bundled._ledger_adapter import LedgerAdapter
from settled.impl.approval._business_normalize import canonical_json, fingerprint
from settled.impl.ledger._ledger import LedgerRuntime
from settled.impl.ledger._ledger_values import Entry, TurnReport, _text_id
from settled.impl.shared._db import write
from settled.impl.shared._errors import IdempotencyConflict, InvalidInput

from . import Mutant
from .approval import W6RecordInItsOwnTransaction

__all__ = ["MUTANTS"]


class L4PairsOnlyTheLastCall(LedgerRuntime):
    """Recovery looks at the last tool call of the message only: "the checkpoint ends with a
    tool result, so the turn was answered" — the earlier calls stay unpaired."""

    def unpaired_calls(self, session_id: str) -> list[Entry]:
        session = self._session(_text_id("session_id", session_id))["session_id"]
        message = self._conn.execute(
            "SELECT message_id FROM ledger WHERE session_id = ? ORDER BY registered_at DESC, "
            "rowid DESC LIMIT 1", (session,)).fetchone()
        if message is None:
            return []
        rows = self._conn.execute(
            # bug: the last call only; shipped: "SELECT call_id FROM ledger WHERE message_id = ? AND state IN ('registered', "  # noqa: E501
            "SELECT call_id FROM (SELECT call_id, state FROM ledger WHERE message_id = ? "
            "ORDER BY position DESC LIMIT 1) WHERE state IN ('registered', "  # bug
            # bug; shipped: "'recovering') ORDER BY position", (message["message_id"],)).fetchall()
            "'recovering')", (message["message_id"],)).fetchall()
        return [self.entry(r["call_id"]) for r in rows]


class L4RecoveryStopsAtTheFirstUnpairedCall(LedgerRuntime):
    """Recovery walks the latest message's unpaired calls and stops at the first one that was
    not interrupted ("a call that never crashed is the SDK's to finish"): a registered or
    receipted call is never run, paired or continued by the runtime.

    Every step the kit asks for is right (``recover_call``, ``pair_call`` and
    ``continue_turn`` are untouched), so the lockstep campaign and the crash sweep cannot tell
    it from the runtime; only the runtime's own recovery, once faults stop, leaves the call
    unpaired for ever."""

    def recover(self, session_id: str) -> TurnReport:
        pending = self.unpaired_calls(session_id)  # bug
        # bug: stops at the first unpaired call that was not interrupted
        if pending and pending[0].state != "recovering":
            self.resume(session_id)
            return TurnReport(session_id, self.run_id)
        return super().recover(session_id)


class L2RecoveryMintsANewOperationId(LedgerRuntime):
    """A call continued after a restart gets a fresh operation_id for the new run."""

    def _continue_call(self, entry: Entry) -> None:
        super()._continue_call(entry)
        with self._conn:  # bug: a new operation id
            self._conn.execute("UPDATE ledger SET operation_id = ? WHERE call_id = ?",
                               (f"op-{uuid.uuid4().hex}", entry.call_id))


class L5UpgradeReportedNotExecuted(LedgerRuntime):
    """After a contract upgrade, recovery validates the registered call against the NEW
    contract and answers "invalid parameters, not executed" — for a call that may have run."""

    def recover_call(self, session_id: str, call_id: str) -> Entry:
        entry = self._entry_of(session_id, call_id)  # bug
        contract = self._contracts.get(entry.tool)  # bug
        # bug: validated against the new contract
        if entry.state == "recovering" and entry.receipt == "none" and contract is not None \
                and not entry.read_only and not self._same_contract(entry):
            try:
                contract.validate(entry.args)
            except InvalidInput as exc:
                self._pair(entry, "recover_pair", "recovering", {
                    "status": "not_executed", "operation_id": entry.operation_id,
                    "content": {"error": f"invalid parameters, not executed: {exc}"}})
                return self.entry(call_id)
        return super().recover_call(session_id, call_id)


class _ReceiptInItsOwnTransaction(W6RecordInItsOwnTransaction):
    """The business change commits first; the success receipt in a transaction after it."""


class L1ReceiptAfterTheChange(LedgerRuntime):
    business_class = _ReceiptInItsOwnTransaction


class L3ChangedParametersAccepted(LedgerRuntime):
    """A call id delivered again with other parameters is taken as an update of the call."""

    def redeliver(self, session_id: str, call_id: str, tool: str, args: Mapping[str, Any], *,
                  param_fingerprint: str | None = None) -> Entry:
        # bug deleted; shipped: return super().redeliver(session_id, call_id, tool, args, param_fingerprint=param_fingerprint)  # noqa: E501
        try:  # bug: a conflict taken for an update
            return super().redeliver(session_id, call_id, tool, args,
                                     param_fingerprint=param_fingerprint)
        except IdempotencyConflict:
            normalized = self._contracts[tool].validate(args)
            with write(self._conn):
                self._conn.execute("UPDATE ledger SET normalized_args = ?, fingerprint = ? "
                                   "WHERE call_id = ?", (canonical_json(normalized),
                                                         fingerprint(tool, normalized), call_id))
            return self.entry(call_id)


def _adapter(runtime: type[LedgerRuntime]) -> type[LedgerAdapter]:
    """The bundled ledger adapter, running the mutated ``runtime``."""
    return type(f"{runtime.__name__}Adapter", (LedgerAdapter,), {"runtime_class": runtime})


MUTANTS: list[Mutant] = [
    Mutant("L4-recovery-pairs-only-the-last-call", "L4", "ledger",
           "recovery pairs only the last tool call of the message, as if a checkpoint ending "
           "with a tool result meant the turn was answered",
           _adapter(L4PairsOnlyTheLastCall)),
    Mutant("L4-recovery-stops-at-the-first-unpaired-call", "L4", "ledger",
           "the runtime's recovery stops at the first unpaired call that was not interrupted, "
           "leaving it unpaired for ever (only the quiescence phase shows it)",
           _adapter(L4RecoveryStopsAtTheFirstUnpairedCall)),
    Mutant("L2-recovery-mints-a-new-operation-id", "L2", "ledger",
           "a call continued after a restart gets a new operation_id for the new run",
           _adapter(L2RecoveryMintsANewOperationId)),
    Mutant("L5-upgrade-reported-not-executed", "L5", "ledger",
           "after a contract upgrade a registered call without a receipt is validated against "
           "the new contract and reported 'invalid parameters, not executed'",
           _adapter(L5UpgradeReportedNotExecuted)),
    Mutant("L1-receipt-after-the-business-change", "L1", "ledger",
           "the success receipt is written in a transaction after the business change",
           _adapter(L1ReceiptAfterTheChange)),
    Mutant("L3-changed-parameters-accepted", "L3", "ledger",
           "the same call id with other parameters is accepted as an update of the call",
           _adapter(L3ChangedParametersAccepted)),
]
