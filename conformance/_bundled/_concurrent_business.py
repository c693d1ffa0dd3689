"""Concurrent orders on shared stock: the business store under several clients at once.

Theory of operation
-------------------
The approval system (``model.systems.build_approval_system``) says what
concurrent orders share: one ``stock``, taken by each order's ``commit`` under
the refinement ``in_stock`` (W6), and each call's client token, which makes a
second call with it a replay of the first (``token_replayed``, W2). Three
clients here, each with its own connection to one business database, send
orders of one unit under tokens drawn from a small shared pool (so two clients
sometimes send the same token at once) and read the stock.

The model state is the tuple of the calls' approval configurations, each
taken by the approval machine's own steps to ``executing`` (the business call
is in flight), plus the stock. An order's step is the machine's ``commit``
(or ``token_replayed`` once committed) with the system's ``commit`` refinement
deciding whether stock is left; a refusal for stock is legal only where that
refinement's guard fails; a stock read must see the model's stock. The calls
share the stock, so :func:`._concurrent.independence` refuses to split them:
the history is checked as one part.

A call the business store refused for stock stored nothing (W4), so the same
token sent again is a new attempt; the model's ``failed`` call keeps refusing
while no stock is left, and stock never comes back in these campaigns (no
cancel or restock is sent), so the two agree.
"""

from __future__ import annotations

import functools
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Any, Final

from settled.conformance._bundled._approval_adapter import ApprovalAdapter
from settled.conformance._lockstep._concurrent import (
    DEFAULT_MODE,
    CampaignResult,
    Mode,
    independence,
    judge,
    run_clients,
)
from settled.conformance._lockstep._linearize import History, Operation
from settled.impl.approval._business import BusinessStore, Product
from settled.impl.shared._errors import Busy, CallerError, InsufficientStock
from settled.impl.shared._pg import release_store, scratch_store
from settled.model import APPROVAL, Config, IllegalTransition, System
from settled.model.approval import ApprovalState as A
from settled.model.systems import build_approval_system

__all__ = ["BusinessOrdersModel", "run_business_campaign"]

JSON = dict[str, Any]
SKU: Final = "R1001"
STOCK: Final = 5
TOKENS: Final = 6
CLIENTS: Final = 3


@functools.cache
def _system(tokens: int, stock: int) -> System:
    return build_approval_system(calls=tokens, stock=stock)


@functools.cache
def _executing() -> Config:
    """A call in the business store's hands: the approval machine's own steps to executing."""
    c = APPROVAL.initial_config()
    for trigger in ("propose", "show", "approve", "execute"):
        c = next(s for s in APPROVAL.enabled(c) if s.transition.trigger == trigger
                 and s.params.get("retry_safe", False) is False).after
    if c.state != A.EXECUTING:
        raise RuntimeError(f"the approval machine reached {c.state}, not executing")
    return c


class BusinessOrdersModel:
    """Orders and stock reads, stepped by the approval machine and the system's refinement."""

    def __init__(self, tokens: int = TOKENS, stock: int = STOCK) -> None:
        self.system = _system(tokens, stock)
        self.tokens, self.stock = tokens, stock
        refinement = {r.trigger: r for r in self.system.refinements}["commit"]
        self._in_stock = refinement.guards
        self._take = refinement.effect
        self._rules = tuple(sorted({*refinement.rules, *(r for t in APPROVAL.transitions
                                                         if t.trigger in ("commit",
                                                                          "token_replayed",
                                                                          "business_rejected")
                                                         for r in t.rules)}))

    def init(self, key: str) -> Hashable:
        return (tuple(_executing() for _ in range(self.tokens)), self.stock)

    def _sv(self, stock: int) -> dict[str, Any]:
        return {"stock": stock, "session": "free"}

    def _fire(self, c: Config, trigger: str) -> Config | None:
        try:
            return APPROVAL.fire(c, trigger).after
        except IllegalTransition:
            return None

    def step(self, state: Hashable, op: Operation) -> Iterable[Hashable]:
        assert isinstance(state, tuple)
        calls, stock = state
        out = op.output
        if op.input["op"] == "stock":
            return [state] if out is None or out.get("stock") == stock else []
        k = int(op.input["token"])
        c: Config = calls[k]
        sv = self._sv(stock)
        left = all(g.fn(sv, {}) for g in self._in_stock)
        applied: list[Hashable] = []  # the call succeeded
        refused: list[Hashable] = []  # the call was refused for stock
        if c.state == A.EXECUTING:
            after = self._fire(c, "commit")
            if after is not None and left:
                taken = int(self._take(sv, {})["stock"])
                applied.append((_put(calls, k, after), taken))
            failed = self._fire(c, "business_rejected")
            if failed is not None and not left:
                refused.append((_put(calls, k, failed), stock))
        elif c.state == A.COMMITTED:
            again = self._fire(c, "token_replayed")
            if again is not None:
                applied.append((_put(calls, k, again), stock))
        elif c.state == A.FAILED and not left:
            refused.append(state)
        if out is None:
            return [state, *applied, *refused]
        if out.get("ok"):
            return applied
        if out.get("void"):
            return [state]
        return refused

    def describe(self, op: Operation) -> str:
        out = op.output
        if op.input["op"] == "stock":
            return f"stock -> {'?' if out is None else out.get('stock')}"
        shown = ("?" if out is None else out.get("order_id") if out.get("ok")
                 else f"refused ({out.get('error')})")
        return f"order(token {op.input['token']}) -> {shown}"

    def rules(self, op: Operation) -> tuple[str, ...]:
        return self._rules

    def only_constrains(self, op: Operation) -> bool:
        # a read changes nothing; a refusal for stock moves the call to failed, which
        # matters to a later call with the same token, so it is kept
        return op.input["op"] == "stock" and op.output is not None


def _put(calls: tuple[Config, ...], k: int, c: Config) -> tuple[Config, ...]:
    return (*calls[:k], c, *calls[k + 1:])


class _StoreSession:
    def __init__(self, store_class: type[BusinessStore], location: str) -> None:
        self.store = store_class.open(location)

    def perform(self, key: str, call: JSON) -> JSON:
        if call["op"] == "stock":
            return {"ok": True, "stock": self.store.stock(SKU)}
        result = self.store.create_order(f"tok-{call['token']}", {
            "customer": "concurrent", "items": [{"sku": SKU, "quantity": 1}]})
        return {"ok": True, "order_id": result.get("order_id")}

    def close(self) -> None:
        self.store.close()


def _classify(exc: Exception) -> JSON | None:
    if isinstance(exc, Busy):
        return {"ok": False, "void": True, "error": type(exc).__name__}
    if isinstance(exc, InsufficientStock):
        return {"ok": False, "error": type(exc).__name__}
    if isinstance(exc, CallerError):  # any other refusal: the model has no step for it
        return {"ok": False, "error": type(exc).__name__, "unexpected": str(exc)[:200]}
    return None


def _plans(seed: int, clients: int, ops: int) -> list[list[tuple[str, JSON]]]:
    plans = []
    for i in range(clients):
        rng = random.Random(f"{seed}/business/{i}")
        # Every client walks the tokens in the same order, mostly, so that two of them
        # often send one token at once (the W2 race needs that) and orders meet on the stock.
        plans.append([("stock", {"op": "stock"} if rng.random() < 0.2
                       else {"op": "order", "token": j * TOKENS // ops if rng.random() < 0.8
                             else rng.randrange(TOKENS)})
                      for j in range(ops)])
    return plans


def run_business_campaign(seed: int, *, mode: Mode = DEFAULT_MODE, ops_per_client: int = 10,
                          store: str | None = None,
                          adapter_class: Callable[..., object] = ApprovalAdapter,
                          mutant: str | None = None, out: Path | None = None,
                          shrink: bool = True, schedule: int = 0) -> CampaignResult:
    """Concurrent one-unit orders on shared stock, checked against the approval system."""
    system = _system(TOKENS, STOCK)
    split, why = independence(system, {"commit", "token_replayed", "business_rejected"})
    if split:
        raise RuntimeError(f"the declaration no longer says orders share stock: {why}")
    store_class: type[BusinessStore] = getattr(adapter_class, "business_class", BusinessStore)
    start = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix="settled-orders-")
    location = scratch_store(store, "business") if store else str(Path(tmp) / "business.db")
    try:
        store_class.create(location, [Product(SKU, "Race mug", STOCK)]).close()
        t_run = time.perf_counter()
        ops, errors = run_clients(f"{seed}/{schedule}", mode, _plans(seed, CLIENTS, ops_per_client),
                                  lambda i: _StoreSession(store_class, location), _classify)
        run_seconds = time.perf_counter() - t_run
    finally:
        if store:
            release_store(location, "business")
        shutil.rmtree(tmp, ignore_errors=True)
    meta = {"implementation": "business", "seed": seed, "schedule": schedule, "mode": mode,
            "clients": CLIENTS,
            "ops_per_client": ops_per_client, "stock": STOCK, "tokens": TOKENS,
            "store": "postgresql" if store else "sqlite", "mutant": mutant}
    return judge(History(tuple(ops), meta), BusinessOrdersModel(), split=False, shrink=shrink,
                 out=out, start=start, run_seconds=run_seconds, errors=errors,
                 independence=f"not split: {why}",
                 rules_of=lambda minimal: BusinessOrdersModel().rules(minimal[0]))
