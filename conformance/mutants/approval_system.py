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
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, cast

from settled.impl.approval._approval import ApprovalRuntime, Call
from settled.impl.approval._business import (
    BusinessStore,
    _order_result,
    _product,
    _record,
    check_token,
    fingerprint,
    normalize,
)
from settled.impl.shared._db import write
from settled.impl.shared._errors import NotAllowed

from .._approval_system_adapter import ApprovalSystemAdapter
from . import Mutant
from .approval import runtime_opening

__all__ = ["MUTANTS", "LockPerCall", "ProposeOutsideTheLock", "StockUncheckedAtCommit"]


class StockUncheckedAtCommit(BusinessStore):
    """W6 broken across calls: an order's commit takes stock without checking it.

    How it gets written: "the approver saw the stock when the order was
    shown, so the commit only has to decrement it" (clamped at zero so the
    table's constraint never fires). Two orders approved on the last unit both
    commit: an oversell.
    """

    def execute(self, tool: str, client_token: str, args: Mapping[str, Any]) -> Any:
        if tool != "create_order":
            return super().execute(tool, client_token, args)
        self._hook("handler_entered")
        token = check_token(client_token)
        normalized = normalize(tool, args)
        wanted = fingerprint(tool, normalized)
        with write(self._conn) as conn:
            first = self._first_result(conn, token, tool, wanted)
            if first is not None:
                return first
            now = self._now()
            result = _order_without_stock_check(conn, normalized, now)
            stored = _record(conn, token, (tool, normalized, wanted), result, now)
            self._hook("before_commit")
        self._hook("after_commit")
        return stored


def _order_without_stock_check(conn: sqlite3.Connection, args: Any, now: float) -> Any:
    for item in args["items"]:
        if not _product(conn, item["sku"])["listed"]:
            raise NotAllowed(f"sku {item['sku']!r} is not listed")
    conn.executemany("UPDATE products SET stock = MAX(stock - ?, 0) WHERE sku = ?",  # the bug
                     [(item["quantity"], item["sku"]) for item in args["items"]])
    count = conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0]
    order_id = f"ord-{count + 1:06d}"
    conn.execute("INSERT INTO orders (order_id, customer, status, draft_id, created_at) "
                 "VALUES (?, ?, 'open', ?, ?)", (order_id, args["customer"], args["draft_id"], now))
    conn.executemany("INSERT INTO order_lines (order_id, sku, quantity) VALUES (?, ?, ?)",
                     [(order_id, item["sku"], item["quantity"]) for item in args["items"]])
    return _order_result(conn, order_id)


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
        with self._checkpoints.session_lock(call_id, action):  # the bug: the call's id
            yield self.get(call_id)


class ProposeOutsideTheLock(ApprovalRuntime):
    """A8 broken for create: a new call is checkpointed and shown without its session's lock.

    How it gets written: "a call that does not exist yet cannot collide with an
    operation on it, so propose needs no lock". The lock is the session's: a
    new call of the session is created while another call's handler runs.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        store, locking = self._checkpoints, self._checkpoints.session_lock

        def session_lock(session_id: str, operation: str) -> AbstractContextManager[None]:
            if operation == "propose":  # the bug
                return nullcontext()
            return locking(session_id, operation)

        store.session_lock = session_lock  # type: ignore[method-assign, assignment]


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
