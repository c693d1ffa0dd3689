"""``settled demo ledger``: a turn of three tool calls, a crash, and the recovery of the turn.

The data-agent article's ledger story on real files: the user asks the agent
to order two mugs, restock bottles and say how many mugs are left. The
assistant message asks for three tool calls — two in-app writes and one
read-only lookup. The runtime runs the message's calls first and checkpoints
their results after them. The first write commits; the second write commits
its business change and its receipt together, and the process dies
(``os._exit`` in a child process) before any result reaches the checkpoint.
A new process, under a new ``run_id``, recovers the turn:
both writes are paired from their receipts (none runs again), the lookup
re-checks the read permission and runs once under its ORIGINAL operation_id,
and the original input continues.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from settled.impl.approval._business import BusinessStore
from settled.impl.ledger._ledger import LedgerRuntime
from settled.impl.ledger._ledger_values import ToolCall
from settled.impl.shared._crash import CRASH_EXIT_CODE

__all__ = ["CALLS", "bench_ledger", "demo_ledger"]

Say = Callable[[str], None]
SESSION: Final = "demo-session"
USER_INPUT: Final = "Order two mugs for Ann, restock 5 bottles, and tell me how many mugs are left."
CALLS: Final = (
    ToolCall("call_order", "create_order",
             {"customer": "Ann", "items": [{"sku": "A1001", "quantity": 2}]}),
    ToolCall("call_restock", "adjust_stock", {"sku": "A1002", "delta": 5}),
    ToolCall("call_mugs_left", "stock_level", {"sku": "A1001"}),
)
_CRASH_AFTER: Final = 1  # the second write: crash once its receipt is durable, before pairing


def _first_process(ledger: str, business: str, run_id: str) -> None:
    """The first run: dies after the second write's receipt commits (never returns)."""

    def hook(point: str, position: int) -> None:
        if point == "receipt_committed" and position == _CRASH_AFTER:
            os._exit(CRASH_EXIT_CODE)

    with LedgerRuntime(ledger, business, run_id=run_id, hook=hook) as runtime:
        runtime.open_session(SESSION, USER_INPUT)
        runtime.begin_turn(SESSION, list(CALLS))
        for call in CALLS:  # the message's calls run first, their results are checkpointed after
            runtime.run_call(SESSION, call.call_id)
        for call in CALLS:
            runtime.pair_call(SESSION, call.call_id)
        runtime.continue_turn(SESSION)
    os._exit(0)  # the story needs a crash; reaching here means the hook never fired


def _business_changes(store: BusinessStore) -> int:
    """Applications of the turn's writes, read off the business rows they change."""
    conn = store.connection
    orders = conn.execute("SELECT COUNT(*) FROM orders WHERE customer = 'Ann'").fetchone()[0]
    restocked = conn.execute("SELECT stock FROM products WHERE sku = 'A1002'").fetchone()[0] - 40
    return int(orders) + int(restocked // 5)


def demo_ledger(directory: str | Path | None = None, say: Say | None = None) -> dict[str, Any]:
    """Tell the story; return its four figures (and the details behind them)."""
    tell: Say = say or (lambda line: None)
    if directory is not None:
        Path(directory).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="ledger-demo-", dir=directory))
    ledger, business = folder / "sessions.db", folder / "business.db"
    BusinessStore.create(business).close()
    tell(f"fresh databases in {folder}")
    tell(f"user: {USER_INPUT}")
    tell("assistant asks for " + ", ".join(f"{c.call_id} ({c.tool})" for c in CALLS))
    child = multiprocessing.get_context("fork").Process(
        target=_first_process, args=(str(ledger), str(business), "run-1"))
    child.start()
    child.join()
    tell(f"run-1 died with exit code {child.exitcode} after {CALLS[1].call_id}'s receipt "
         "committed, before its result was checkpointed")
    with LedgerRuntime(ledger, business, run_id="run-2") as runtime:
        before = {c.call_id: runtime.entry(c.call_id) for c in CALLS}
        for c in CALLS:
            e = before[c.call_id]
            tell(f"  {c.call_id}: operation_id {e.operation_id}, receipt {e.receipt}, "
                 f"{'paired' if e.result else 'unpaired'}")
        unpaired = runtime.unpaired_calls(SESSION)
        leaf = runtime.nodes(SESSION)[-1]
        ends = (f"the result of {leaf['call_id']}" if leaf["role"] == "tool_result"
                else f"the {leaf['role']} message")
        tell(f"run-2 takes the session over; unpaired calls of the latest assistant message: "
             f"{[e.call_id for e in unpaired]} (the checkpoint ends with {ends})")
        tell(f"read permission re-checked: {'granted' if runtime.may_read(SESSION) else 'revoked'}")
        report = runtime.recover(SESSION)
        after = {c.call_id: runtime.entry(c.call_id) for c in CALLS}
        for c in CALLS:
            tell(f"  {c.call_id}: {after[c.call_id].result['status']}"  # type: ignore[index]
                 f" under {after[c.call_id].operation_id}")
        results = [n for n in runtime.nodes(SESSION) if n["role"] == "tool_result"]
        last = runtime.nodes(SESSION)[-1]
        tell(f"the original input continues: {last['content']['continues']['text']!r} with the "
             f"results of {last['content']['with_results_of']}")
        changes = _business_changes(runtime.business)
        lookups = runtime.connection.execute(
            "SELECT COUNT(*) FROM receipts WHERE call_id = ? AND status = 'success'",
            (CALLS[2].call_id,)).fetchone()[0]
    per_call = {c.call_id: sum(1 for n in results if n["call_id"] == c.call_id) for c in CALLS}
    paired = sum(1 for n in per_call.values() if n == 1)
    new_ids = sum(1 for c in CALLS if after[c.call_id].operation_id != before[c.call_id].operation_id)
    tell(f"paired from receipts: {report.paired_from_receipts}; continued under the original "
         f"operation_id: {report.continued}; business changes: {changes}; lookups run: {lookups}")
    return {"calls": len(CALLS), "paired": paired, "business_changes": changes,
            "new_operation_ids": new_ids,
            "details": {"crash_exit_code": child.exitcode,
                        "paired_from_receipts": report.paired_from_receipts,
                        "continued": report.continued, "lookups_run": int(lookups),
                        "results_per_call": per_call,
                        "continued_input": last["role"] == "assistant"
                        and "continues" in last["content"]}}


def bench_ledger(directory: str | Path | None = None, seconds: float = 2.0) -> dict[str, Any]:
    """Clean three-call turns for half of ``seconds``, then recoveries of half-run turns.

    A recovered turn was registered and had two of its three calls run (receipts, no
    results) by one run; another run then recovers it: pairs two from receipts, runs the
    lookup, continues. ``recovery_seconds_over_turn_seconds`` divides the seconds one
    recovery takes by the seconds one clean turn takes (both per turn, end to end).
    """
    if directory is not None:
        Path(directory).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="ledger-bench-", dir=directory))
    ledger, business = folder / "sessions.db", folder / "business.db"
    BusinessStore.create(business).close()
    turns = 0

    def calls(n: int) -> list[ToolCall]:
        return [ToolCall(f"{n}-{c.call_id}", c.tool, c.args) for c in (
            ToolCall("order", "adjust_stock", {"sku": "A1003", "delta": -1}),
            ToolCall("restock", "adjust_stock", {"sku": "A1002", "delta": 1}),
            CALLS[2])]

    with LedgerRuntime(ledger, business, run_id="bench-a") as a, \
            LedgerRuntime(ledger, business, run_id="bench-b") as b:
        start = time.perf_counter()
        while time.perf_counter() - start < seconds / 2 or not turns:
            a.open_session(f"clean-{turns}", "bench")
            a.run_turn(f"clean-{turns}", calls(turns))
            turns += 1
        turn_time = time.perf_counter() - start
        prepared = max(1, turns)
        for n in range(prepared):
            session = f"crashed-{n}"
            a.open_session(session, "bench")
            entries = a.begin_turn(session, calls(turns + n))
            for entry in entries[:2]:
                a.run_call(session, entry.call_id)
        start = time.perf_counter()
        recovered = 0
        while recovered < prepared and (time.perf_counter() - start < seconds / 2
                                        or not recovered):
            b.recover(f"crashed-{recovered}")
            recovered += 1
        recover_time = time.perf_counter() - start
    per_turn, per_recovery = turn_time / turns, recover_time / recovered
    return {"turns_per_second": round(turns / turn_time, 1),
            "calls_per_second": round(3 * turns / turn_time, 1),
            "recoveries_per_second": round(recovered / recover_time, 1),
            "recovery_seconds_over_turn_seconds": round(per_recovery / per_turn, 3),
            "turns": turns, "recoveries": recovered}
