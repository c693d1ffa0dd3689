"""The crash matrix: a real hard exit (``os._exit``) at each window R1–R6, for each write tool.

A forked child proposes, approves and executes one call and dies at the
window's crash point without any cleanup. The parent then checks, from the
files alone: the exit code, how many times the handler was entered (a file
the child appends to, unbuffered), ``mutation_requests``, the business tables,
the checkpoint, the display log and ``PRAGMA integrity_check``. Finally it
recovers the call in a new runtime and checks that the business store holds
exactly one application of the call — compared with a clean reference run of
the same tool — or none where the call expired or was rejected.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from settled.impl.approval._approval import ApprovalExpired, ApprovalRuntime, Call, CallState
from settled.impl.approval._business import BusinessStore
from settled.impl.approval._business_normalize import canonical_json
from settled.impl.shared._crash import CRASH_EXIT_CODE

S = CallState
FORK = multiprocessing.get_context("fork")  # each child opens its own connections after the fork
CRASHED = CRASH_EXIT_CODE  # the same code the query crash tests use
T0 = 1_000.0
TOOLS: dict[str, dict[str, Any]] = {
    "create_order": {"customer": "Ann", "items": [{"sku": "A1002", "quantity": 3},
                                                  {"sku": "A1001", "quantity": 2}]},
    "cancel_order": {"order_id": "ord-000001"},
    "adjust_stock": {"sku": "A1001", "delta": -4},
    "set_listing": {"sku": "B2001", "listed": True},
}
# What the checkpoint holds right after the crash, per window.
STATE_AFTER_CRASH = {"R1": S.PENDING, "R2": S.PENDING, "R3": S.APPROVED, "R4": S.EXECUTING,
                     "R5": S.EXECUTING, "R6": S.RESULT_CHECKPOINTED}
ENTRIES_AT_CRASH = {"R1": 0, "R2": 0, "R3": 0, "R4": 1, "R5": 1, "R6": 1}
COMMITTED_AT_CRASH = {"R1": 0, "R2": 0, "R3": 0, "R4": 0, "R5": 1, "R6": 1}
# Handler entries after recovery: R4 re-runs (A6), R5 and R6 never enter again.
ENTRIES_AFTER = {"R1": 1, "R2": 0, "R3": 1, "R4": 2, "R5": 1, "R6": 1}
SCENARIOS = [(w, tool, "approve") for w in STATE_AFTER_CRASH for tool in TOOLS] + [
    ("R1", "adjust_stock", "reject")]


class Files:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.business, self.checkpoint = root / "business.db", root / "checkpoint.db"
        self.entries = root / "handler_entries"

    def handler_entries(self) -> int:
        return len(self.entries.read_bytes()) if self.entries.exists() else 0


def _child(files: Files, window: str, tool: str) -> None:
    fd = os.open(files.entries, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def hook(point: str) -> None:
        if point == "handler_entered":
            os.write(fd, b".")  # unbuffered: survives the hard exit
        if point == window:
            os._exit(CRASHED)
    runtime = ApprovalRuntime(files.checkpoint, files.business, clock=lambda: T0, hook=hook)
    call = runtime.propose("session-1", tool, TOOLS[tool])
    runtime.approve(call.call_id)
    runtime.execute(call.call_id)
    os._exit(0)  # reaching here means the crash point was never hit: the parent fails


def _prepare(root: Path) -> Files:
    files = Files(root)
    root.mkdir(parents=True)
    with BusinessStore.create(files.business) as store:
        store.create_order("setup", {"customer": "Bo", "items": [{"sku": "A1003", "quantity": 5}]})
    return files


def _tables(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Business rows without what differs between two correct runs (times, tokens).

    A stored result is compared on its own (it holds the order's creation time).
    """
    with BusinessStore.open(path) as store:
        snapshot = store.snapshot()
    drop = {"created_at", "client_token", "result"}
    return {table: sorted(([{k: x for k, x in row.items() if k not in drop} for row in rows]),
                          key=canonical_json) for table, rows in snapshot.items()}


def _reference(root: Path, tool: str) -> dict[str, list[dict[str, Any]]]:
    """The business tables after the same tool ran once, cleanly."""
    reference = _prepare(root / "reference")
    with BusinessStore.open(reference.business) as store:
        store.execute(tool, "reference", TOOLS[tool])
    return _tables(reference.business)


def _integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def _crash(files: Files, window: str, tool: str) -> int:
    child = FORK.Process(target=_child, args=(files, window, tool))
    child.start()
    child.join(30)
    return child.exitcode if child.exitcode is not None else -1


def _only_call(runtime: ApprovalRuntime) -> Call:
    [call] = runtime.checkpoints.calls()
    return call


def _check_after_crash(files: Files, window: str, before: dict[str, Any]) -> None:
    assert files.handler_entries() == ENTRIES_AT_CRASH[window]
    assert (_integrity(files.business), _integrity(files.checkpoint)) == ("ok", "ok")
    tables = _tables(files.business)
    new = len(tables["mutation_requests"]) - len(before["mutation_requests"])
    assert new == COMMITTED_AT_CRASH[window]
    if not COMMITTED_AT_CRASH[window]:
        assert tables == before  # nothing committed: the business data is untouched


def _check_checkpoint(runtime: ApprovalRuntime, window: str, tool: str) -> Call:
    call = _only_call(runtime)
    assert (call.state, call.tool, call.deadline) == (STATE_AFTER_CRASH[window], tool, T0 + 300)
    assert call.client_token.startswith("tok-") and call.args
    kinds = [e.kind for e in runtime.events_since("session-1")]
    shown = {"R1": [], "R2": ["approval_requested"], "R3": ["approval_requested", "approved"]}
    assert kinds == shown.get(window, ["approval_requested", "approved", "executing"])
    assert call.result is None or window == "R6"
    return call


def _recover(runtime: ApprovalRuntime, call: Call, window: str, follow_up: str) -> Call:
    if window == "R2":  # the person comes back after the deadline: the restart did not extend it
        with pytest.raises(ApprovalExpired):
            runtime.approve(call.call_id)
        return runtime.get(call.call_id)
    call = runtime.recover(call.call_id)
    if window == "R1":
        if follow_up == "reject":
            return runtime.reject(call.call_id)
        runtime.approve(call.call_id)
        return runtime.execute(call.call_id)
    return call


@pytest.mark.rule("R1")
@pytest.mark.rule("R2")
@pytest.mark.rule("R3")
@pytest.mark.rule("R4")
@pytest.mark.rule("R5")
@pytest.mark.rule("R6")
@pytest.mark.rule("A6")
@pytest.mark.parametrize(("window", "tool", "follow_up"), SCENARIOS,
                         ids=[f"{w}-{t}-{f}" for w, t, f in SCENARIOS])
def test_hard_exit_then_recovery_leaves_exactly_one_business_result(
        tmp_path: Path, window: str, tool: str, follow_up: str) -> None:
    files = _prepare(tmp_path / "run")
    before = _tables(files.business)
    assert _crash(files, window, tool) == CRASHED
    _check_after_crash(files, window, before)
    late = T0 + 301 if window == "R2" else T0
    with ApprovalRuntime(files.checkpoint, files.business, clock=lambda: late,
                         hook=lambda p: _count(files, p)) as runtime:
        call = _check_checkpoint(runtime, window, tool)
        done = _recover(runtime, call, window, follow_up)
        events = runtime.events_since("session-1")
    assert done.client_token == call.client_token  # recovery consumed the original token
    assert files.handler_entries() == (0 if follow_up == "reject" else ENTRIES_AFTER[window])
    if window == "R2" or follow_up == "reject":
        assert done.state in (S.EXPIRED, S.REJECTED)
        assert _tables(files.business) == before  # no business result at all
        return
    assert done.state is S.ANSWERED
    assert _tables(files.business) == _reference(tmp_path, tool)  # exactly one application
    with BusinessStore.open(files.business) as store:
        [record] = [m for m in store.snapshot()["mutation_requests"]
                    if m["client_token"] == call.client_token]
    assert done.result == json.loads(record["result"])  # the first result, as stored
    assert [e.kind for e in events].count("answered") == 1
    assert (_integrity(files.business), _integrity(files.checkpoint)) == ("ok", "ok")


def _count(files: Files, point: str) -> None:
    if point == "handler_entered":
        with files.entries.open("ab") as out:
            out.write(b".")


def test_scenarios_cover_every_window_for_every_tool() -> None:
    assert len(SCENARIOS) >= 15
    assert {(w, t) for w, t, _ in SCENARIOS} == {(w, t) for w in STATE_AFTER_CRASH for t in TOOLS}

