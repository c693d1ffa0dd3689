# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""Shared-state mutants of the approval implementation, killed by the approval *system*'s lockstep.

The machine lockstep gives every call products of its own with ample stock,
so a stock check that does not look across calls has nothing to act on there.
The system lockstep (``approval_system``: two orders on one unit of one
product) must kill it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, cast

from settled.conformance._bundled._approval_system_adapter import ApprovalSystemAdapter
from settled.impl.approval._approval import ApprovalRuntime, Call
from settled.impl.approval._business import BusinessStore, _record
from settled.impl.approval._business_normalize import JSON
from settled.impl.approval._business_rules import (
    _APPLIERS,
    _apply_create_order,
    _order_result,
    _product,
    _resubmitted_draft,
    _take_stock,
)
from settled.impl.shared._errors import NotAllowed

from . import Mutant
from ._shipped import fork_of
from .approval import runtime_opening

__all__ = ["MUTANTS", "LockPerCall", "ProposeOutsideTheLock", "StockUncheckedAtCommit"]


class StockUncheckedAtCommit(BusinessStore):
    """W6 broken across calls: an order's commit takes stock without checking it.

    How it gets written: "the approver saw the stock when the order was
    shown, so the commit only has to decrement it" (clamped at zero so the
    table's constraint never fires). Two orders approved on the last unit both
    commit: an oversell.
    """

    def _change(self, conn: sqlite3.Connection, token: str, request: tuple[str, JSON, str]) -> JSON:
        tool, normalized, _wanted = request
        now = self._now()  # one instant for the business rows and the record
        # bug: an order's own applier; shipped: result = _APPLIERS[tool](conn, normalized, now)
        result = {**_APPLIERS, "create_order": _apply_create_order_unchecked}[tool](
            conn, normalized, now)
        return _record(conn, token, request, result, now)


@fork_of(_apply_create_order)
def _apply_create_order_unchecked(conn: sqlite3.Connection, args: JSON, now: float) -> JSON:
    if args["draft_id"] is not None:
        row = conn.execute("SELECT order_id FROM orders WHERE draft_id = ?",
                           (args["draft_id"],)).fetchone()
        if row is not None:
            return _resubmitted_draft(conn, row["order_id"], args)
    # bug: listed is checked, the stock is not (clamped at zero); shipped: _take_stock(conn, args["items"])
    _take_stock_unchecked(conn, args["items"])
    count = conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0]
    order_id = f"ord-{count + 1:06d}"
    conn.execute("INSERT INTO orders (order_id, customer, status, draft_id, created_at) "
                 "VALUES (?, ?, 'open', ?, ?)", (order_id, args["customer"], args["draft_id"], now))
    conn.executemany("INSERT INTO order_lines (order_id, sku, quantity) VALUES (?, ?, ?)",
                     [(order_id, item["sku"], item["quantity"]) for item in args["items"]])
    return _order_result(conn, order_id)


@fork_of(_take_stock)
def _take_stock_unchecked(conn: sqlite3.Connection, items: list[JSON]) -> None:
    for item in items:
        product = _product(conn, item["sku"])
        if not product["listed"]:
            raise NotAllowed(f"sku {item['sku']!r} is not listed; nothing was changed, "
                             "list the product before ordering it")
        # bug deleted; shipped: if product["stock"] < item["quantity"]:
        # bug deleted; shipped:     raise InsufficientStock(item["sku"], item["quantity"], product["stock"])
    conn.executemany(
        # bug: clamped at zero; shipped: "UPDATE products SET stock = stock - ? WHERE sku = ?",
        "UPDATE products SET stock = MAX(stock - ?, 0) WHERE sku = ?",
                     [(item["quantity"], item["sku"]) for item in items])


_Runtime = runtime_opening(StockUncheckedAtCommit)


class LockPerCall(ApprovalRuntime):
    """A8 broken: an operation on a call locks the call, not the call's session.

    How it gets written: "two operations on one call must not overlap, so lock
    the call" (keyed by the call id). Operations on two calls of one session
    then overlap: a second call is approved or cancelled while the first
    call's handler runs.
    """

    @contextmanager
    def _locked(self, call_id: str, action: str) -> Iterator[Call]:
        # bug: the call's id; shipped: with self._checkpoints.session_lock(self.get(call_id).session_id, action):  # noqa: E501
        with self._checkpoints.session_lock(call_id, action):
            yield self.get(call_id)


class ProposeOutsideTheLock(ApprovalRuntime):
    """A8 broken for create: a new call is checkpointed and shown without its session's lock.

    How it gets written: "a call that does not exist yet cannot collide with an
    operation on it, so propose needs no lock". The lock is the session's: a
    new call of the session is created while another call's handler runs.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        store, locking = self._checkpoints, self._checkpoints.session_lock  # bug

        # bug: propose takes no lock
        def session_lock(session_id: str, operation: str) -> AbstractContextManager[None]:
            if operation == "propose":
                return nullcontext()
            return locking(session_id, operation)

        store.session_lock = session_lock  # type: ignore[method-assign, assignment]  # bug


MUTANTS: list[Mutant] = [
    Mutant(name="W6-stock-unchecked-at-commit", rule="W6", machine="approval_system",
           description=(StockUncheckedAtCommit.__doc__ or "").strip().split("\n", 1)[0],
           adapter_class=cast(Any, type("StockUncheckedSystemAdapter", (ApprovalSystemAdapter,),
                                        {"runtime_class": _Runtime}))),
    Mutant(name="A8-lock-per-call", rule="A8", machine="approval_system",
           description=(LockPerCall.__doc__ or "").strip().split("\n", 1)[0],
           adapter_class=cast(Any, type("LockPerCallSystemAdapter", (ApprovalSystemAdapter,),
                                        {"runtime_class": LockPerCall}))),
    Mutant(name="A8-propose-outside-the-lock", rule="A8", machine="approval_system",
           description=(ProposeOutsideTheLock.__doc__ or "").strip().split("\n", 1)[0],
           adapter_class=cast(Any, type("ProposeUnlockedSystemAdapter", (ApprovalSystemAdapter,),
                                        {"runtime_class": ProposeOutsideTheLock}))),
]
