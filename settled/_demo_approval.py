"""``settled demo approval`` and ``settled bench approval``: the seed's example, end to end.

The article's ``04_idempotency.py`` reads the stock of A1001, adjusts it by 5
twice under one token, tries the token with another quantity and looks the
token up. Here the first adjustment goes through the whole approval runtime
(propose → approve → execute), and the replay, the lookup and the conflict
use the call's own checkpointed token, exactly as recovery would.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from settled.impl.approval._approval import ApprovalRuntime
from settled.impl.approval._business import BusinessStore
from settled.impl.approval._reconciler import lookup
from settled.impl.shared._errors import IdempotencyConflict

__all__ = ["bench_approval", "demo_approval"]

Say = Callable[[str], None]
SKU = "A1001"


def _fresh(directory: str | Path | None, prefix: str) -> tuple[Path, Path]:
    """A new folder under ``directory`` with a seeded business file (the caller decides whether
    ``directory`` is kept)."""
    if directory is not None:
        Path(directory).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=directory))
    business = folder / "business.db"
    BusinessStore.create(business).close()
    return folder / "checkpoint.db", business


def demo_approval(directory: str | Path | None = None, say: Say | None = None) -> dict[str, Any]:
    """Run the seed's example; return its four observations, narrating each step to ``say``."""
    tell: Say = say or (lambda line: None)
    checkpoint, business = _fresh(directory, "approval-demo-")
    tell(f"fresh databases in {business.parent}")
    with ApprovalRuntime(checkpoint, business) as runtime:
        store = runtime.business
        before = store.stock(SKU)
        tell(f"stock of {SKU} before: {before}")
        call = runtime.propose("demo-session", "adjust_stock", {"sku": SKU, "delta": 5})
        tell(f"proposed {call.tool} {dict(call.args)} as {call.call_id}; token "
             f"{call.client_token} checkpointed before the approval was shown")
        runtime.approve(call.call_id)
        call = runtime.execute(call.call_id)
        tell(f"approved and executed: {call.state.value}, first result {dict(call.result or {})}")
        replay = store.adjust_stock(call.client_token, {"sku": SKU, "delta": 5})
        tell(f"same token, same arguments again: {replay} (no second change)")
        answer = lookup(business, call.client_token, call.tool, call.args)
        tell(f"reconciler lookup of the token: {answer.status.value}")
        try:
            store.adjust_stock(call.client_token, {"sku": SKU, "delta": 6})
            different = "accepted"
        except IdempotencyConflict as exc:
            different = "idempotency_conflict"
            tell(f"same token, delta 6: {exc}")
        after = store.stock(SKU)
        tell(f"stock of {SKU} after: {after}")
    return {"observed_delta": after - before, "replay_same_result": replay == call.result,
            "lookup_status": answer.status.value, "different_arguments": different}


def bench_approval(directory: str | Path | None = None, seconds: float = 2.0) -> dict[str, Any]:
    """Approved writes end to end, then recovery lookups, each for half of ``seconds``."""
    checkpoint, business = _fresh(directory, "approval-bench-")
    tokens: list[tuple[str, str, Any]] = []
    with ApprovalRuntime(checkpoint, business) as runtime:
        start = time.perf_counter()
        while time.perf_counter() - start < seconds / 2 or not tokens:
            call = runtime.propose("bench-session", "adjust_stock", {"sku": SKU, "delta": 1})
            runtime.approve(call.call_id)
            runtime.execute(call.call_id)
            tokens.append((call.client_token, call.tool, call.args))
        write_time = time.perf_counter() - start
    lookups, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds / 2 or not lookups:
        token, tool, args = tokens[lookups % len(tokens)]
        lookup(business, token, tool, args)
        lookups += 1
    lookup_time = time.perf_counter() - start
    return {"writes_per_second": round(len(tokens) / write_time, 1),
            "lookups_per_second": round(lookups / lookup_time, 1),
            "writes": len(tokens), "lookups": lookups}
