"""One instance of the approval adapter: its call's session, clock, tools and setup rows."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Final

from settled.impl.approval._approval import TOOL_SPECS, ToolSpec

from ._approval_worker import _Worker
from ._named import Named

__all__ = ["SETUP_QUANTITY", "STOCK", "T0", "TOOL_FOR", "TTL"]

T0: Final = 1_000_000.0
TTL: Final = 300.0
STOCK: Final = 100
SETUP_QUANTITY: Final = 2  # the order each instance may be asked to cancel
# (retry_safe, instance parity) -> tool: the model chooses retry_safe, the runtime's tool
# declares it (create_order and adjust_stock are not retry_safe, the other two are). The
# kit's coverage tour drives instance 0, mostly with retry_safe false, so that slot holds the
# tool with the most to get wrong: arguments with a normal form (W5), and a result that a
# recomputation could not reproduce (a new order gets a new id, A4).
TOOL_FOR: Final = {(False, 0): "create_order", (False, 1): "adjust_stock",
                   (True, 0): "cancel_order", (True, 1): "set_listing"}


def _fresh() -> float:
    return time.time() + 10 * 365 * 24 * 3600.0


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@dataclass
class _Item:
    n: int
    worker: _Worker = field(init=False)
    clock: _Clock = field(default_factory=_Clock)
    tools: dict[str, ToolSpec] = field(default_factory=lambda: dict(TOOL_SPECS))
    proposed_at: float = T0
    stock_moved: int = 0  # by other writers, on the instance's own product (see _commits)
    order_id: str = ""  # the setup order, made from the instance's draft (W7)
    resubmits: int = 0
    replay_first: Any = None  # the setup adjustment's first result (W2)
    replay_answers: list[Any] = field(default_factory=list)  # what replaying its token returned
    # Its arguments under new tokens (W4): each token, taken before the call, and its answer.
    renewal_tokens: list[str] = field(default_factory=list)
    renewals: dict[str, Any] = field(default_factory=dict)
    draft_answers: list[str] = field(default_factory=list)  # order ids a resubmission returned

    # The instance's own rows, named after its number.
    replay_token = Named("setup-stock-{n}")
    draft_id = Named("draft-{n}")
    session = Named("session-{n}")
    run = Named("run-{n}")  # the run its call is proposed in: it finds the call in the checkpoint
    listed = Named("L{n}")
    other = Named("M{n}")
    unlisted = Named("U{n}")
    customer = Named("Customer {n}")

    def replay_args(self) -> Any:
        return {"sku": f"R{self.n}", "delta": 1}  # a product of its own, touched by nothing else

    def draft_args(self) -> Any:
        return {"customer": f"setup-{self.n}", "draft_id": self.draft_id,
                "items": [{"sku": self.listed, "quantity": SETUP_QUANTITY}]}

    def args(self, tool: str) -> Any:
        # create_order's arguments are deliberately not in normal form (W5): an untrimmed
        # name, a SKU split over two lines, items out of order.
        return {"create_order": {"customer": f"  {self.customer} ", "items": [
                    {"sku": self.other, "quantity": 1}, {"sku": self.listed, "quantity": 2},
                    {"sku": self.other, "quantity": 1}]},
                "cancel_order": {"order_id": self.order_id},
                "adjust_stock": {"sku": self.listed, "delta": -3},
                "set_listing": {"sku": self.unlisted, "listed": True}}[tool]
