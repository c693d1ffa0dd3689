"""The ledger system's adapter: the tool calls of ONE assistant message, in one session.

Where the machine adapter (``_ledger_adapter``) gives each model instance a
session of its own, here every instance is a call of the same assistant
message, driven by the same runtime under the same run. So what the system
declares shared is really shared:

- ``register`` is ONE :meth:`~settled.impl.ledger._ledger.LedgerRuntime.begin_turn`
  that checkpoints the message and registers every call in its transaction,
  each call a write or a read as the step's per-call ``kind`` says;
- ``crash`` is one process dying: the runtime closes (a write with no receipt
  dies inside its business transaction first, the first such call of the
  message) and a new runtime under a new ``run_id`` resumes the session, so
  every unpaired call of the message is recovering at once (L2, L4);
- ``continue`` is one :meth:`continue_turn` of the session (L4);
- the read permission is the session's (``permission_revoked`` revokes it
  for every call).

A call's contract is its own fact (the model's ``contract``): each call of
the message uses tools of its own, a write tool (``create_order``,
``adjust_stock`` or ``set_listing``) and a read-only lookup registered in
the deployment under the call's name, so a deployment that upgrades one
call's tools leaves the others' alone. The world is arranged as the machine
adapter arranges it: a write is refused by its business rules (the order's
product unlisted, the stock adjustment's product emptied, the listing's
product gone, each for the length of the call); a read is refused once the
session's read permission is revoked.

``observe(i)`` reads the ledger, the session and the business rows, as the
machine adapter does; ``executions`` of a write counts its business effect
(the call's customer's orders; the adjusted product's stock moved, in steps
of the call's delta) or, for a listing, whose effect a second application
would not change, the business store's records of its applications, written
in the same transaction. ``observe(None)`` reports ``unpaired``: the calls of
the message without a tool result in the session tree.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from settled.conformance._bundled._ledger_adapter import QUANTITY, STOCK, LedgerAdapter, _Item
from settled.conformance._bundled._named import Named
from settled.conformance._bundled._system_step import perform_system_step
from settled.impl.ledger._ledger_values import CONTRACTS, Contract, ToolCall, contracts_upgraded
from settled.impl.shared._crash import CrashNow, unwatched
from settled.impl.shared._db import write
from settled.model import System, Value
from settled.model.systems import build_ledger_system

__all__ = ["LedgerSystemAdapter", "ledger_system"]

SESSION: Final = "session-message"
# Each call's write tool: one per call, so a deployment upgrading one call's tool is its own.
WRITE_TOOLS: Final = ("create_order", "adjust_stock", "set_listing")


@functools.cache
def ledger_system(calls: int, /) -> System:
    """The declared ledger system, built once per process (campaigns share its plans;
    positional only, so that one system has one cache key)."""
    return build_ledger_system(calls=calls)


@dataclass
class _Call(_Item):
    """One call of the message: its own write tool, lookup tool and products."""

    tools: tuple[str, str] = ("create_order", "lookup-0")
    contracts: dict[str, Contract] = field(default_factory=dict)  # the one deployment, shared

    session = Named(SESSION)  # one session for every instance

    @property
    def write_tool(self) -> str:
        return self.tools[0]

    @property
    def read_tool(self) -> str:
        return self.tools[1]

    def call(self, kind: str) -> ToolCall:
        if kind == "read":
            return ToolCall(self.call_id, self.read_tool, {"sku": self.product})
        return ToolCall(self.call_id, self.write_tool, self.write_args(self.quantity))

    def write_args(self, quantity: int) -> dict[str, Any]:
        if self.write_tool == "adjust_stock":
            return {"sku": self.product, "delta": -quantity}
        if self.write_tool == "set_listing":
            return {"sku": self.product, "listed": quantity % 2 == 0}
        return {"customer": self.customer, "items": [{"sku": self.product, "quantity": quantity}]}

    def other_args(self, tool: str) -> dict[str, Any]:
        if tool == self.read_tool:
            return {"sku": f"C{self.n}"}
        return self.write_args(self.quantity + 1)


class LedgerSystemAdapter(LedgerAdapter):
    """Drives ``calls`` tool calls of one assistant message through one runtime."""

    def __init__(self, calls: int = 3, directory: Path | None = None) -> None:
        if not 1 <= calls <= len(WRITE_TOOLS):
            raise ValueError(f"calls is {calls}; the adapter has write tools for 1 to "
                             f"{len(WRITE_TOOLS)} calls (one each: {', '.join(WRITE_TOOLS)})")
        self.system = ledger_system(calls)
        self.protocol = self.system.machine
        self.instances = calls
        self._files("settled-ledger-system-", directory, calls)
        # One deployment: every tool of CONTRACTS, and a lookup tool of each call's own.
        self.contracts: dict[str, Contract] = dict(CONTRACTS)
        self.items: list[_Item] = []
        for n in range(calls):
            lookup = f"lookup-{n}"
            self.contracts[lookup] = Contract(lookup, read_only=True)
            self.items.append(_Call(n, contracts=self.contracts,
                                    tools=(WRITE_TOOLS[n], lookup)))
        self._armed: set[str] = set()
        self._open(self.items[0])
        self._rt(self.items[0]).open_session(SESSION, "user input of the message's session")

    # ------------------------------------------------------------------ the one runtime
    def _open(self, item: _Item) -> None:
        """A new runtime (a new run) for the whole session: every call goes through it."""
        super()._open(item)
        for other in self.items:
            other.runtime = item.runtime

    def _call(self, item: _Item) -> _Call:
        assert isinstance(item, _Call)
        return item

    # ------------------------------------------------------------------ perform
    def perform(self, instance: int | None, trigger: str,
                params: Mapping[str, Value]) -> None:
        if instance is not None:
            super().perform(instance, trigger, params)
        else:
            perform_system_step(self._perform_system, trigger, params)

    def _perform_system(self, trigger: str, params: Mapping[str, Value]) -> None:
        if trigger == "register":
            self._register(params)
        elif trigger == "crash":
            self._crash()
        elif trigger == "continue":
            self._rt(self.items[0]).continue_turn(SESSION)
        else:
            raise KeyError(f"the ledger system has no synchronised step {trigger!r}")

    def _register(self, params: Mapping[str, Value]) -> None:
        """One transaction checkpoints the message and registers every call, each of its own
        kind (``q<i>.kind``). A new call is validated strictly against the contract deployed
        now (L5): under an upgraded contract a write asks for what that contract allows."""
        calls = []
        for i, item in enumerate(self.items):
            kind = str(params[f"q{i}.kind"])
            call = self._call(item)
            tool = call.read_tool if kind == "read" else call.write_tool
            item.quantity = 1 if self.contracts[tool].version > 1 else QUANTITY
            calls.append(item.call(kind))
        entries = self._rt(self.items[0]).begin_turn(SESSION, calls)
        for item, entry in zip(self.items, entries, strict=True):
            item.minted = entry.operation_id

    def _crash(self) -> None:
        rt = self._rt(self.items[0])
        for item in self.items:
            row = rt.connection.execute("SELECT state FROM ledger WHERE call_id = ?",
                                        (item.call_id,)).fetchone()
            if row is None or row["state"] != "registered":
                continue
            entry = rt.entry(item.call_id)
            if entry.receipt == "none" and not entry.read_only:
                # The process dies inside this write's business transaction: nothing kept.
                self._armed = {"inside_transaction"}
                try:
                    rt.run_call(SESSION, item.call_id)
                except CrashNow:
                    pass
                finally:
                    self._armed = set()
                break
        rt.close()
        self._open(self.items[0])
        self._rt(self.items[0]).resume(SESSION)

    def _do_register(self, item: _Item, params: Mapping[str, Value]) -> None:
        raise KeyError("register is synchronised in the ledger system: perform(None, ...)")

    def _do_crash(self, item: _Item, params: Mapping[str, Value]) -> None:
        raise KeyError("crash is synchronised in the ledger system: perform(None, ...)")

    def _do_continue(self, item: _Item, params: Mapping[str, Value]) -> None:
        raise KeyError("continue is synchronised in the ledger system: perform(None, ...)")

    def _do_reject(self, item: _Item, params: Mapping[str, Value]) -> None:
        rt = self._rt(item)
        if rt.entry(item.call_id).read_only:  # the model rejects a read once it is revoked
            rt.run_call(item.session, item.call_id)
            return
        tool = self._call(item).write_tool
        conn = rt.business.connection
        sku = item.product
        row = dict(conn.execute("SELECT sku, name, stock, listed FROM products WHERE sku = ?",
                                (sku,)).fetchone())
        # The world: for the length of the call another client makes the business rules refuse.
        with unwatched(), write(conn):
            if tool == "create_order":
                conn.execute("UPDATE products SET listed = 0 WHERE sku = ?", (sku,))
            elif tool == "adjust_stock":
                conn.execute("UPDATE products SET stock = 0 WHERE sku = ?", (sku,))
            else:
                conn.execute("DELETE FROM products WHERE sku = ?", (sku,))
        try:
            rt.run_call(item.session, item.call_id)
        finally:
            with unwatched(), write(conn):
                conn.execute("INSERT INTO products (sku, name, stock, listed) VALUES "
                             "(:sku, :name, :stock, :listed) ON CONFLICT (sku) DO UPDATE SET "
                             "stock = excluded.stock, listed = excluded.listed", row)

    def _do_contract_upgraded(self, item: _Item, params: Mapping[str, Value]) -> None:
        """A deployment upgrades this call's tools: the one it registered with, or, before
        registration, both it may be registered with."""
        call = self._call(item)
        row = self._rt(item).connection.execute("SELECT tool FROM ledger WHERE call_id = ?",
                                                (item.call_id,)).fetchone()
        tools = [row["tool"]] if row is not None else list(call.tools)
        self.contracts.update(contracts_upgraded(self.contracts, tools=tools))

    # ------------------------------------------------------------------ observe
    def observe(self, instance: int | None) -> Mapping[str, Value]:
        if instance is None:
            return {"unpaired": self.instances - self._paired()}
        out = dict(super().observe(instance))
        call = self._call(self.items[instance])
        if out["state"] == "requested":  # its tools' deployment, before it picked one
            upgraded = any(self.contracts[t].version > 1 for t in call.tools)
            out["contract"] = "upgraded" if upgraded else "current"
        return out

    def _paired(self) -> int:
        """The message's calls with a tool result in the session tree."""
        ids = [item.call_id for item in self.items]
        marks = ", ".join("?" * len(ids))
        return int(self._rt(self.items[0]).connection.execute(
            f"SELECT COUNT(*) FROM nodes WHERE session_id = ? AND role = 'tool_result' AND "
            f"call_id IN ({marks})", (SESSION, *ids)).fetchone()[0])

    def _orders(self, item: _Item) -> int:
        """Applications of the call's write, from its business effect."""
        tool = self._call(item).write_tool
        conn = self._rt(item).business.connection
        if tool == "create_order":
            return super()._orders(item)
        if tool == "adjust_stock":
            stock = conn.execute("SELECT stock FROM products WHERE sku = ?",
                                 (item.product,)).fetchone()[0]
            return (STOCK - int(stock)) // item.quantity
        # A listing set twice reads the same: the store's records of its applications count.
        entry = self._rt(item).entry(item.call_id)
        return len(self._ran_under(item, False, entry.tool, entry.fingerprint))

    def close(self) -> None:
        if self._folder.released:
            return
        self._rt(self.items[0]).close()
        self._folder.release()
