"""The ledger's crash matrix: a real hard exit (``os._exit``) inside a turn of three tool calls.

A forked child opens a session, registers an assistant message asking for
three in-app writes and runs the turn (run, then checkpoint the result, call
by call), dying at one window without any cleanup:

- after the first call's receipt;
- inside the second call's business transaction (nothing of it is kept);
- after the second call's commit — its receipt commits with it — before its
  result is checkpointed;
- after the second call's result is checkpointed, before the third starts.

The parent checks the files as the crash left them, then recovers the turn
in a new process's runtime (a new ``run_id``) and checks: exactly one result
per call, each business change applied once, every operation_id the one
minted at registration, the original input continued, and the event log
conforms to the model.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
from pathlib import Path

import pytest

from settled.conformance._trace import check_lines
from settled.impl.approval._business import BusinessStore
from settled.impl.ledger._ledger import LedgerRuntime, trace_lines
from settled.impl.ledger._ledger_values import HOOK_POINTS, ToolCall
from settled.impl.shared._crash import CRASH_EXIT_CODE

FORK = multiprocessing.get_context("fork")
SESSION = "crash-session"
CALLS = (
    ToolCall("call_a", "create_order", {"customer": "Ann", "items": [{"sku": "A1001", "quantity": 2}]}),
    ToolCall("call_b", "adjust_stock", {"sku": "A1002", "delta": 5}),
    ToolCall("call_c", "create_order", {"customer": "Bob", "items": [{"sku": "A1003", "quantity": 1}]}),
)
# window -> (hook point, call position), and what the crash left durable: receipts per call.
WINDOWS = {
    "after_first_receipt": (("receipt_committed", 0), ("success", "none", "none")),
    "inside_second_transaction": (("inside_transaction", 1), ("success", "none", "none")),
    "after_second_commit": (("receipt_committed", 1), ("success", "success", "none")),
    "after_second_result": (("result_checkpointed", 1), ("success", "success", "none")),
}


def _child(ledger: str, business: str, point: str, position: int) -> None:
    def hook(at: str, where: int) -> None:
        if (at, where) == (point, position):
            os._exit(CRASH_EXIT_CODE)

    with LedgerRuntime(ledger, business, run_id="run-1", hook=hook) as runtime:
        runtime.open_session(SESSION, "order for Ann and Bob, restock bottles")
        runtime.run_turn(SESSION, list(CALLS))
    os._exit(0)


def _crash(tmp_path: Path, point: str, position: int) -> tuple[Path, Path]:
    ledger, business = tmp_path / "sessions.db", tmp_path / "business.db"
    BusinessStore.create(business).close()
    child = FORK.Process(target=_child, args=(str(ledger), str(business), point, position))
    child.start()
    child.join(60)
    assert child.exitcode == CRASH_EXIT_CODE, f"the child did not die at {point}/{position}"
    return ledger, business


def _changes(business: Path) -> dict[str, int]:
    conn = sqlite3.connect(business)
    try:
        return {"ann_orders": conn.execute("SELECT COUNT(*) FROM orders WHERE customer = 'Ann'"
                                           ).fetchone()[0],
                "bob_orders": conn.execute("SELECT COUNT(*) FROM orders WHERE customer = 'Bob'"
                                           ).fetchone()[0],
                "bottles_added": conn.execute("SELECT stock FROM products WHERE sku = 'A1002'"
                                              ).fetchone()[0] - 40,
                "records": conn.execute("SELECT COUNT(*) FROM mutation_requests").fetchone()[0]}
    finally:
        conn.close()


def _recover_and_check(ledger: Path, business: Path) -> None:
    with LedgerRuntime(ledger, business, run_id="run-2") as runtime:
        minted = {c.call_id: runtime.entry(c.call_id).operation_id for c in CALLS}
        report = runtime.recover(SESSION)
        results = [n for n in runtime.nodes(SESSION) if n["role"] == "tool_result"]
        per_call = {c.call_id: [n for n in results if n["call_id"] == c.call_id] for c in CALLS}
        assert {k: len(v) for k, v in per_call.items()} == {c.call_id: 1 for c in CALLS}
        assert all(v[0]["content"]["status"] == "success" for v in per_call.values())
        assert {c.call_id: runtime.entry(c.call_id).operation_id for c in CALLS} == minted
        assert {c.call_id: runtime.entry(c.call_id).state for c in CALLS} == {
            c.call_id: "continued" for c in CALLS}
        assert runtime.nodes(SESSION)[-1]["content"]["with_results_of"] == [c.call_id for c in CALLS]
        assert report.unknown == [] and report.denied == []
        assert runtime.session(SESSION)["run_id"] == "run-2"
        assert runtime.connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert _changes(business) == {"ann_orders": 1, "bob_orders": 1, "bottles_added": 5,
                                  "records": 3}
    report_ = check_lines(list(trace_lines(ledger)))
    assert report_.ok, report_.violations[0].text()


def _receipts(ledger: Path, business: Path) -> tuple[str, ...]:
    with LedgerRuntime(ledger, business, run_id="reader") as runtime:
        return tuple(runtime.entry(c.call_id).receipt for c in CALLS)


@pytest.mark.rule("L1")
@pytest.mark.rule("L2")
@pytest.mark.rule("L4")
@pytest.mark.parametrize("window", sorted(WINDOWS))
def test_a_hard_exit_in_each_window_recovers_one_result_per_call(tmp_path, window):
    (point, position), receipts = WINDOWS[window]
    ledger, business = _crash(tmp_path, point, position)
    assert _receipts(ledger, business) == receipts
    before = _changes(business)
    assert before["records"] == sum(r == "success" for r in receipts)  # change and receipt together
    assert before["ann_orders"] == 1
    assert before["bottles_added"] == (5 if receipts[1] == "success" else 0)
    assert before["bob_orders"] == 0
    _recover_and_check(ledger, business)


@pytest.mark.slow
@pytest.mark.rule("L1")
@pytest.mark.rule("L4")
@pytest.mark.parametrize("position", range(len(CALLS)))
@pytest.mark.parametrize("point", HOOK_POINTS)
def test_the_full_matrix_every_point_of_every_call(tmp_path, point, position):
    ledger, business = _crash(tmp_path, point, position)
    _recover_and_check(ledger, business)


@pytest.mark.rule("L4")
def test_a_second_crash_during_recovery_still_recovers_once(tmp_path):
    ledger, business = _crash(tmp_path, "receipt_committed", 1)

    def die_in_recovery(ledger_: str, business_: str) -> None:
        def hook(at: str, where: int) -> None:
            if (at, where) == ("result_checkpointed", 1):  # call_b, paired by recovery
                os._exit(CRASH_EXIT_CODE)

        with LedgerRuntime(ledger_, business_, run_id="run-1b", hook=hook) as runtime:
            runtime.recover(SESSION)
        os._exit(0)

    child = FORK.Process(target=die_in_recovery, args=(str(ledger), str(business)))
    child.start()
    child.join(60)
    assert child.exitcode == CRASH_EXIT_CODE
    _recover_and_check(ledger, business)
