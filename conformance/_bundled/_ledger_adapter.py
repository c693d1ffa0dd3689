"""The ledger adapter: the SQLite ledger runtime held to ``model/ledger.py``.

Each model instance is the FIRST tool call of an assistant message in a
session of its own, so instances never share a run, a contract deployment or
a read permission. The message always asks for a second call, the
*companion* (a stock adjustment on the instance's own product), which the
adapter runs and pairs as soon as the message is registered: so the
checkpoint already ends with another call's result whenever the modelled
call is unpaired — the situation rule L4 warns about. The companion is not
part of the model; its events still go through the trace checker.

The modelled call is a write (``create_order`` of two units of the
instance's product, for its own customer) or a read-only lookup
(``stock_level`` of that product), as the model's ``register`` chooses.
Everything runs on real files with the runtime in this thread; the world is
arranged where a step names it:

- ``reject`` of a write unlists the product for the length of the call, so
  the business store refuses it; a read is refused because the model only
  rejects it once the read permission is revoked;
- ``crash`` of a registered write with no receipt dies INSIDE its business
  transaction (:class:`~settled.impl.shared._crash.CrashNow` from the runtime's
  hook), which is the model's "crash before or inside the transaction:
  nothing kept"; every crash then opens a new runtime under a new ``run_id``
  and resumes the session (L2);
- ``contract_upgraded`` upgrades every tool's contract in the deployment the
  runtime reads; ``permission_revoked`` revokes the session's read
  permission.

``observe`` reads the ledger, the session tree and the business rows:
``executions`` counts the instance's customer's orders (a write) or the
lookups recorded under a success receipt (a read), and ``operation_id`` /
``ran_under`` compare operation ids with the one minted at registration.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final

from settled.conformance import Adapter, Refused
from settled.conformance._bundled._named import Named
from settled.conformance._bundled._scratch import run_folder
from settled.impl.approval._business import BusinessStore, Product
from settled.impl.ledger._ledger import LedgerRuntime
from settled.impl.ledger._ledger import trace_lines as ledger_trace_lines
from settled.impl.ledger._ledger_values import CONTRACTS, Contract, ToolCall, contracts_upgraded
from settled.impl.shared._crash import CrashNow, unwatched
from settled.impl.shared._db import write
from settled.impl.shared._errors import CallerError
from settled.model import LEDGER, Protocol, Value

__all__ = ["FORBIDDEN", "LedgerAdapter"]

# Caller actions the kit may ask to be refused: declared by the model (``LEDGER.refusable``).
FORBIDDEN: Final = LEDGER.refusable
STOCK: Final = 100
QUANTITY: Final = 2  # more than an upgraded contract allows (L5)


@dataclass
class _Item:
    n: int
    runtime: LedgerRuntime | None = None
    contracts: dict[str, Contract] = field(default_factory=lambda: dict(CONTRACTS))
    minted: str | None = None  # the operation_id registration minted for the modelled call

    quantity: int = QUANTITY  # what the modelled write orders, fixed at registration

    # The instance's own rows, named after its number.
    session = Named("session-{n}")
    call_id = Named("call-{n}")
    product = Named("P{n}")
    customer = Named("Customer {n}")

    def call(self, kind: str) -> ToolCall:
        if kind == "read":
            return ToolCall(self.call_id, "stock_level", {"sku": self.product})
        return ToolCall(self.call_id, "create_order", {
            "customer": self.customer,
            "items": [{"sku": self.product, "quantity": self.quantity}]})

    def other_args(self, tool: str) -> dict[str, Any]:
        if tool == "stock_level":
            return {"sku": f"C{self.n}"}
        return {"customer": self.customer,
                "items": [{"sku": self.product, "quantity": self.quantity + 1}]}


class LedgerAdapter(Adapter):
    """Drives the bundled ledger runtime; a mutant swaps ``runtime_class``."""

    runtime_class: ClassVar[type[LedgerRuntime]] = LedgerRuntime

    def __init__(self, instances: int = 3, directory: Path | None = None) -> None:
        self.protocol: Protocol = LEDGER
        self.instances = instances
        self._files("settled-ledger-", directory, instances)
        self.items = [_Item(n) for n in range(instances)]
        self._armed: set[str] = set()
        for item in self.items:
            self._open(item)
            self._rt(item).open_session(item.session, f"user input of session {item.n}")

    def _files(self, prefix: str, directory: Path | None, instances: int) -> None:
        """The run's folder, where its session ledger goes, and its business store: two
        products in stock (P and C) for each instance."""
        self._folder = run_folder(prefix, directory)
        self.dir = self._folder.path
        self.ledger_path = self.dir / "sessions.db"
        self.business_path = self.dir / "business.db"
        BusinessStore.create(self.business_path, [
            Product(f"{kind}{n}", f"{kind}{n}", STOCK) for n in range(instances)
            for kind in "PC"]).close()

    # ------------------------------------------------------------------ runtimes
    def _open(self, item: _Item) -> None:
        item.runtime = self.runtime_class(
            self.ledger_path, self.business_path, run_id=f"run-{item.n}-{uuid.uuid4().hex[:8]}",
            contracts=item.contracts, hook=self._hook)

    def _rt(self, item: _Item) -> LedgerRuntime:
        assert item.runtime is not None
        return item.runtime

    def _hook(self, point: str, position: int) -> None:
        if point in self._armed:
            self._armed.discard(point)
            raise CrashNow(point)

    # ------------------------------------------------------------------ perform
    def perform(self, instance: int, trigger: str, params: Mapping[str, Value]) -> None:
        item = self.items[instance]
        try:
            getattr(self, f"_do_{trigger}")(item, params)
        except CallerError as exc:
            raise Refused(f"{type(exc).__name__}: {exc}") from exc

    def _do_register(self, item: _Item, params: Mapping[str, Value]) -> None:
        rt = self._rt(item)
        companion = ToolCall(f"companion-{item.n}", "adjust_stock",
                             {"sku": f"C{item.n}", "delta": 1})
        # A new call is validated strictly against the contract deployed now (L5): under an
        # upgraded contract the order asks for what that contract allows.
        upgraded = any(c.version > 1 for c in item.contracts.values())
        item.quantity = 1 if upgraded else QUANTITY
        entries = rt.begin_turn(item.session, [item.call(str(params["kind"])), companion])
        item.minted = entries[0].operation_id
        rt.run_call(item.session, companion.call_id)
        rt.pair_call(item.session, companion.call_id)

    def _do_reregister(self, item: _Item, params: Mapping[str, Value]) -> None:
        rt = self._rt(item)
        row = rt.connection.execute("SELECT read_only FROM ledger WHERE call_id = ?",
                                    (item.call_id,)).fetchone()
        call = item.call("read" if row is not None and row["read_only"] else "write")
        args = call.args if params["params"] == "same" else item.other_args(call.tool)
        tool = call.tool
        rt.redeliver(item.session, item.call_id, tool, args)

    def _do_run(self, item: _Item, params: Mapping[str, Value]) -> None:
        self._rt(item).run_call(item.session, item.call_id)

    def _do_reject(self, item: _Item, params: Mapping[str, Value]) -> None:
        rt = self._rt(item)
        if rt.entry(item.call_id).read_only:  # the model rejects a read once it is revoked
            rt.run_call(item.session, item.call_id)
            return
        conn = rt.business.connection
        with unwatched(), write(conn):  # the world: another client unlists the product
            conn.execute("UPDATE products SET listed = 0 WHERE sku = ?", (item.product,))
        try:
            rt.run_call(item.session, item.call_id)
        finally:
            with unwatched(), write(conn):
                conn.execute("UPDATE products SET listed = 1 WHERE sku = ?", (item.product,))

    def _do_pair(self, item: _Item, params: Mapping[str, Value]) -> None:
        self._rt(item).pair_call(item.session, item.call_id)

    def _do_crash(self, item: _Item, params: Mapping[str, Value]) -> None:
        rt = self._rt(item)
        row = rt.connection.execute("SELECT state FROM ledger WHERE call_id = ?",
                                    (item.call_id,)).fetchone()
        if row is not None and row["state"] == "registered":
            entry = rt.entry(item.call_id)
            if entry.receipt == "none" and not entry.read_only:
                # Die inside the write's business transaction: nothing of it may be kept.
                self._armed = {"inside_transaction"}
                try:
                    rt.run_call(item.session, item.call_id)
                except CrashNow:
                    pass
                finally:
                    self._armed = set()
        rt.close()
        self._open(item)
        self._rt(item).resume(item.session)

    def recover_crash(self, instance: int, trigger: str, params: Mapping[str, Value]) -> None:
        """The runtime died at a durable boundary: as the model's ``crash``, a new runtime
        under a new run_id opens the files (the old connections close, an open transaction
        rolls back) and resumes the session (L2)."""
        item = self.items[instance]
        self._rt(item).close()  # closing twice is harmless (a crash inside a restart)
        self._open(item)
        if item.minted is None:  # the crash fell after registration committed, before it returned
            row = self._rt(item).connection.execute(
                "SELECT operation_id FROM ledger WHERE call_id = ?", (item.call_id,)).fetchone()
            item.minted = None if row is None else str(row["operation_id"])
        self._rt(item).resume(item.session)

    def _do_contract_upgraded(self, item: _Item, params: Mapping[str, Value]) -> None:
        item.contracts.update(contracts_upgraded(item.contracts, tools=list(item.contracts)))

    def _do_permission_revoked(self, item: _Item, params: Mapping[str, Value]) -> None:
        self._rt(item).revoke_read(item.session)

    def _do_recover_pair(self, item: _Item, params: Mapping[str, Value]) -> None:
        self._rt(item).recover_call(item.session, item.call_id)

    _do_resume = _do_recover_pair

    def _do_continue(self, item: _Item, params: Mapping[str, Value]) -> None:
        self._rt(item).continue_turn(item.session)

    # ------------------------------------------------------------------ quiescence
    # The quiescence phase's turn of the runtime's own scheduler: pairing, recovering and
    # continuing the turn (a call arriving, registered, is the SDK's: the kit's to schedule;
    # running it is the business store's, though the runtime's recovery may run it too).
    acting = frozenset({"pair", "recover_pair", "resume", "continue"})

    def own_turn(self, instance: int) -> None:
        """The runtime recovers the session's latest turn, as a process does with a session
        it holds (:meth:`LedgerRuntime.recover`): it chooses what each call needs."""
        item = self.items[instance]
        rt = self._rt(item)
        row = rt.connection.execute("SELECT state FROM ledger WHERE call_id = ?",
                                    (item.call_id,)).fetchone()
        if row is None:
            return  # no call registered yet: nothing for the runtime
        rt.recover(item.session)

    # ------------------------------------------------------------------ observe
    def observe(self, instance: int) -> Mapping[str, Value]:
        item = self.items[instance]
        rt = self._rt(item)
        conn = rt.connection
        session = conn.execute("SELECT run_id, first_run_id FROM sessions WHERE session_id = ?",
                               (item.session,)).fetchone()
        run = "origin" if session["run_id"] == session["first_run_id"] else "resumed"
        permission = "granted" if rt.may_read(item.session) else "revoked"
        row = conn.execute("SELECT * FROM ledger WHERE call_id = ?", (item.call_id,)).fetchone()
        if row is None:
            upgraded = any(c.version > 1 for c in item.contracts.values())
            c = self.protocol.initial_config()
            return {**self.protocol.view(c), "state": c.state, "run": run,
                    "permission": permission, "contract": "upgraded" if upgraded else "current"}
        entry = rt.entry(item.call_id)
        state = entry.state
        if state == "registered" and entry.receipt != "none":
            state = "receipted"
        ran = self._ran_under(item, entry.read_only, entry.tool, entry.fingerprint)
        contract = item.contracts.get(entry.tool)
        return {
            "state": state,
            "kind": "read" if entry.read_only else "write",
            "operation_id": "original" if entry.operation_id == item.minted else "new",
            "run": run,
            "receipt": entry.receipt,
            "result": "none" if entry.result is None else str(entry.result["status"]),
            "executions": len(ran) if entry.read_only else self._orders(item),
            "ran_under": _ran_under(set(ran), item.minted),
            "contract": ("current" if contract is not None
                         and contract.fingerprint == row["contract"] else "upgraded"),
            "permission": permission,
        }

    def _orders(self, item: _Item) -> int:
        conn = self._rt(item).business.connection
        return int(conn.execute("SELECT COUNT(*) FROM orders WHERE customer = ?",
                                (item.customer,)).fetchone()[0])

    def _ran_under(self, item: _Item, read_only: bool, tool: str, wanted: str) -> list[str]:
        """The operation_ids the call's effect was applied under."""
        rt = self._rt(item)
        if read_only:
            return [r[0] for r in rt.connection.execute(
                "SELECT operation_id FROM receipts WHERE call_id = ? AND status = 'success'",
                (item.call_id,))]
        return [r[0] for r in rt.business.connection.execute(
            "SELECT client_token FROM mutation_requests WHERE tool = ? AND args_fingerprint = ?",
            (tool, wanted))]

    # ------------------------------------------------------------------ trace
    def trace_lines(self) -> Iterable[str]:
        return list(ledger_trace_lines(self.ledger_path))

    def close(self) -> None:
        if self._folder.released:
            return
        for item in self.items:
            if item.runtime is not None:
                item.runtime.close()
        self._folder.release()


def _ran_under(ops: set[str], minted: str | None) -> str:
    if not ops:
        return "none"
    if len(ops) > 1:
        return "both"
    return "original" if ops == {minted} else "new"

