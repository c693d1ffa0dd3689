"""The approval system's adapter: order calls drawing on ONE product's stock.

Every model instance is an order (``create_order``) for one unit of the same
product, whose stock is the system's ``stock`` (1 unit: two approved orders
would oversell, W6). ``observe(None)`` reads that stock from the business
store. The business store checks stock inside the commit's transaction, so
the second order's handler is refused (``business_rejected``) once the first
committed, which is what the system's ``commit`` refinement says.

All calls are proposed in ONE session (each in a run of its own, by which
the adapter finds it), so the runtime's session lock (A8) is under test: while
one call's runtime is parked inside an operation (its ``running`` flag), any
other call's create, approve, execute, cancel or recovery meets
``SessionBusy``, a refusal that changes nothing, exactly where the system's
``session`` mutex refuses it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from settled.conformance._bundled._approval_adapter import ApprovalAdapter, _check, _Item
from settled.conformance._bundled._named import Named
from settled.impl.approval._approval import ToolSpec
from settled.impl.shared._db import write
from settled.model.systems import build_approval_system

SHARED_SKU = "S"


@functools.cache
def approval_system(calls: int, stock: int, /) -> Any:
    """The declared approval system, built once per process (campaigns share its plans;
    positional only, so that one system has one cache key)."""
    return build_approval_system(calls=calls, stock=stock)


SESSION = "session-shared"


class _Order(_Item):
    session = Named(SESSION)  # one session for every instance

    def args(self, tool: str) -> Any:
        if tool != "create_order":
            return super().args(tool)
        return {"customer": f"  {self.customer} ", "items": [
            {"sku": SHARED_SKU, "quantity": 1}, {"sku": self.other, "quantity": 1}]}


class ApprovalSystemAdapter(ApprovalAdapter):
    """``calls`` order calls on one product of ``stock`` units."""

    def __init__(self, calls: int = 2, stock: int = 1, directory: Path | None = None) -> None:
        self.system = approval_system(calls, stock)
        self._stock = stock
        super().__init__(calls, directory=directory)
        with write(self.world.connection) as conn:  # the shared product joins the catalogue
            conn.execute("INSERT INTO products (sku, name, stock, listed) VALUES (?, ?, ?, 1)",
                         (SHARED_SKU, SHARED_SKU, stock))

    def _item(self, n: int) -> _Item:
        item = super()._item(n)
        order = _Order(n)
        for f in dataclasses.fields(item):  # everything the setup made for this instance
            setattr(order, f.name, getattr(item, f.name))
        return order

    def propose(self, item: _Item, params: Mapping[str, Any]) -> None:
        # An order tool that declares the retry_safe the model proposes with (A5).
        item.tools["create_order"] = ToolSpec("create_order", bool(params["retry_safe"]))
        item.proposed_at = item.clock.now
        _check(item.worker.call("propose", item.session, "create_order",
                                item.args("create_order"), run_id=item.run))

    def business_rejects(self, item: _Item) -> None:
        """With the shared stock gone, nothing is arranged: the business store itself must
        refuse the order (W6). Otherwise another writer unlists a product the order needs."""
        if self.world.stock(SHARED_SKU) == 0:
            self.go(item)
        else:
            super().business_rejects(item)

    def crash_in_handler(self, item: _Item) -> None:
        """With the shared stock gone the handler refuses before it reaches R4, so the crash
        before the commit happens where the handler is parked, on entry: nothing committed."""
        if self.world.stock(SHARED_SKU) == 0:
            self.restart(item)
            self.recover(item)
        else:
            super().crash_in_handler(item)

    def perform(self, instance: int | None, trigger: str,
                params: Mapping[str, Any]) -> None:
        if instance is None:
            raise KeyError(f"the approval system has no synchronised or system step {trigger!r}")
        super().perform(instance, trigger, params)

    def observe(self, instance: int | None) -> Mapping[str, Any]:
        if instance is None:
            held = self._read.execute("SELECT 1 FROM session_locks WHERE session_id = ?",
                                      (SESSION,)).fetchone()
            return {"stock": self.world.stock(SHARED_SKU),
                    "session": "free" if held is None else "held"}
        return super().observe(instance)

