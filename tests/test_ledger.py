"""The ledger runtime (L1–L5) on real files: registration, conflicts, recovery, bad input.

Every refusal is checked to be a typed error that names the value and the
fix, and to leave both files exactly as they were.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from settled._cmd_demo import ledger_problems
from settled.impl.approval._business import BusinessStore
from settled.impl.approval._business_normalize import fingerprint
from settled.impl.ledger._ledger import LedgerRuntime
from settled.impl.ledger._ledger_values import CONTRACTS, ToolCall, contracts_upgraded
from settled.impl.shared._errors import IdempotencyConflict, InvalidInput, NotAllowed, NotFound

S = "session-1"
ORDER = ToolCall("c_order", "create_order",
                 {"customer": "Ann", "items": [{"sku": "A1001", "quantity": 2}]})
RESTOCK = ToolCall("c_restock", "adjust_stock", {"sku": "A1002", "delta": 5})
LOOKUP = ToolCall("c_lookup", "stock_level", {"sku": "A1001"})


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    business = tmp_path / "business.db"
    BusinessStore.create(business).close()
    return tmp_path / "sessions.db", business


def runtime(files: tuple[Path, Path], run: str, **kwargs: Any) -> LedgerRuntime:
    return LedgerRuntime(*files, run_id=run, **kwargs)


def dump(files: tuple[Path, Path]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in files:
        conn = sqlite3.connect(path)
        try:
            tables = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            for t in tables:
                out[f"{path.name}:{t}"] = sorted(map(repr, conn.execute(f"SELECT * FROM {t}")))
        finally:
            conn.close()
    return out


def started(files: tuple[Path, Path], *calls: ToolCall) -> LedgerRuntime:
    rt = runtime(files, "run-1")
    rt.open_session(S, "order mugs, restock bottles, count mugs")
    rt.begin_turn(S, list(calls or (ORDER, RESTOCK, LOOKUP)))
    return rt


def results(rt: LedgerRuntime) -> dict[str, str]:
    return {n["call_id"]: n["content"]["status"] for n in rt.nodes(S) if n["role"] == "tool_result"}


# --- L1: registration and receipts ------------------------------------------------------------


@pytest.mark.rule("L1")
def test_registration_saves_every_mapping_with_the_checkpoint(files):
    with started(files) as rt:
        leaf = rt.session(S)["leaf_id"]
        message = rt.nodes(S)[-1]
        assert message["node_id"] == leaf and message["role"] == "assistant"
        assert [c["call_id"] for c in message["content"]["tool_calls"]] == [
            "c_order", "c_restock", "c_lookup"]
        entries = [rt.entry(c) for c in ("c_order", "c_restock", "c_lookup")]
        assert len({e.operation_id for e in entries}) == 3
        assert all(e.origin_run_id == "run-1" and e.state == "registered" and e.receipt == "none"
                   for e in entries)
        assert entries[0].fingerprint == fingerprint("create_order", entries[0].args)


@pytest.mark.rule("L1")
def test_a_write_commits_its_business_change_and_receipt_together(files):
    with started(files) as rt:
        entry = rt.run_call(S, "c_order")
        row = rt.business.connection.execute(
            "SELECT result FROM mutation_requests WHERE client_token = ?",
            (entry.operation_id,)).fetchone()
        assert entry.receipt == "success" and json.loads(row[0]) == entry.receipt_body
        assert rt.business.stock("A1001") == 98


@pytest.mark.rule("L1")
@pytest.mark.rule("L4")
def test_an_explicit_rejection_is_a_receipt_and_pairs_as_an_error(files):
    with started(files, ToolCall("c_big", "create_order",
                                 {"customer": "Ann", "items": [{"sku": "B2001", "quantity": 1}]})
                 ) as rt:
        entry = rt.run_call(S, "c_big")  # B2001 is not listed: the business store refuses
        assert entry.receipt == "rejected" and "not listed" in entry.receipt_body["error"]
        assert rt.pair_call(S, "c_big").result["status"] == "error"


# --- L2: a new run proves run rights only --------------------------------------------------------


@pytest.mark.rule("L2")
def test_a_new_run_must_take_the_session_over_and_keeps_every_operation_id(files):
    with started(files) as rt:
        minted = {c: rt.entry(c).operation_id for c in ("c_order", "c_restock", "c_lookup")}
    with runtime(files, "run-2") as rt2:
        with pytest.raises(NotAllowed, match=r"runs under 'run-1'.*recover"):
            rt2.run_call(S, "c_order")
        report = rt2.recover(S)
        assert report.continued == ["c_order", "c_restock", "c_lookup"]
        assert {c: rt2.entry(c).operation_id for c in minted} == minted
        assert all(rt2.entry(c).origin_run_id == "run-1" for c in minted)


@pytest.mark.rule("L2")
def test_a_run_that_was_taken_over_can_change_nothing(files):
    old = started(files)
    try:
        old.run_call(S, "c_order")
        with runtime(files, "run-2") as new:
            new.recover(S)
            before = dump(files)
            for action in (lambda: old.pair_call(S, "c_order"), lambda: old.continue_turn(S),
                           lambda: old.run_call(S, "c_restock"),
                           lambda: old.begin_turn(S, [ToolCall("c_next", "stock_level",
                                                               {"sku": "A1001"})])):
                with pytest.raises(NotAllowed, match="runs under 'run-2'"):
                    action()
            assert dump(files) == before
            # A business call the old run had in flight re-applies nothing: same operation_id.
            entry = new.entry("c_order")
            assert old.business.execute("create_order", entry.operation_id, ORDER.args) \
                == entry.receipt_body
            assert new.business.stock("A1001") == 98
    finally:
        old.close()


# --- L3: the same call id with other parameters ------------------------------------------------


@pytest.mark.rule("L3")
def test_the_same_call_id_with_other_parameters_is_a_conflict_and_changes_nothing(files):
    with started(files) as rt:
        same = rt.redeliver(S, "c_restock", "adjust_stock", {"sku": "A1002", "delta": 5})
        assert same == rt.entry("c_restock")
        before = dump(files)
        with pytest.raises(IdempotencyConflict, match=r"c_restock.*idempotency_conflict"):
            rt.redeliver(S, "c_restock", "adjust_stock", {"sku": "A1002", "delta": 6})
        with pytest.raises(IdempotencyConflict, match="c_restock"):
            rt.redeliver(S, "c_restock", "create_order", ORDER.args)
        with pytest.raises(IdempotencyConflict, match="already registered"):
            rt.begin_turn(S, [ToolCall("c_restock", "adjust_stock", {"sku": "A1002", "delta": 6})])
        assert dump(files) == before


# --- L4: recovery pairs the whole turn -------------------------------------------------------------


@pytest.mark.rule("L4")
def test_recovery_pairs_every_unpaired_call_even_when_the_checkpoint_ends_with_a_result(files):
    with started(files) as rt:
        rt.run_call(S, "c_order")
        rt.run_call(S, "c_restock")
        rt.pair_call(S, "c_restock")  # the checkpoint now ends with the LAST write's result
        assert rt.nodes(S)[-1]["call_id"] == "c_restock"
    with runtime(files, "run-2") as rt2:
        assert [e.call_id for e in rt2.unpaired_calls(S)] == ["c_order", "c_lookup"]
        report = rt2.recover(S)
        assert report.paired_from_receipts == ["c_order"] and report.continued == ["c_lookup"]
        assert results(rt2) == {"c_order": "success", "c_restock": "success",
                                "c_lookup": "success"}
        assert rt2.business.stock("A1001") == 98  # the order was not placed twice
        assert rt2.nodes(S)[-1]["content"]["continues"]["text"].startswith("order mugs")


@pytest.mark.rule("L4")
def test_the_input_does_not_continue_while_a_call_is_unpaired(files):
    with started(files) as rt:
        rt.run_call(S, "c_order")
        rt.pair_call(S, "c_order")
        before = dump(files)
        with pytest.raises(NotAllowed, match=r"c_restock.*c_lookup.*no paired result"):
            rt.continue_turn(S)
        assert dump(files) == before


# --- L5: contract upgrade ----------------------------------------------------------------------------


@pytest.mark.rule("L5")
def test_after_an_upgrade_the_receipt_decides_and_no_receipt_is_unknown(files):
    with started(files, ORDER, RESTOCK, ToolCall(
            "c_bad", "create_order", {"customer": "Ann", "items": [{"sku": "B2001", "quantity": 2}]})
            ) as rt:
        rt.run_call(S, "c_order")  # success receipt
        rt.run_call(S, "c_bad")  # explicit rejection
    upgraded = contracts_upgraded(CONTRACTS)
    with runtime(files, "run-2", contracts=upgraded) as rt2:
        # Under the new contract none of the three is valid (quantity 2 > 1, delta 5 > 1) ...
        for c in (ORDER, RESTOCK):
            with pytest.raises(InvalidInput, match="contract v2"):
                upgraded[c.tool].validate(c.args)
        report = rt2.recover(S)
        # ... yet recovery never says "invalid parameters, not executed" for a registered call.
        assert results(rt2) == {"c_order": "success", "c_restock": "unknown", "c_bad": "error"}
        assert report.unknown == ["c_restock"] and report.continued == []
        assert "operation_id" in rt2.entry("c_restock").result["content"]["error"]
        assert rt2.business.stock("A1002") == 40  # the unknown write was not run again


@pytest.mark.rule("L5")
def test_new_calls_are_validated_strictly_against_the_current_contract(files):
    with runtime(files, "run-1", contracts=contracts_upgraded(CONTRACTS)) as rt:
        rt.open_session(S, "order mugs")
        before = dump(files)
        with pytest.raises(InvalidInput, match="quantity 2 exceeds 1; split the request"):
            rt.begin_turn(S, [ORDER])
        assert dump(files) == before
        rt.begin_turn(S, [ToolCall("c_one", "create_order",
                                   {"customer": "Ann", "items": [{"sku": "A1001", "quantity": 1}]})])


@pytest.mark.rule("L5")
def test_a_read_only_call_re_checks_the_read_permission_on_recovery(files):
    with started(files, LOOKUP) as rt:
        rt.revoke_read(S)
    with runtime(files, "run-2") as rt2:
        report = rt2.recover(S)
        assert report.denied == ["c_lookup"] and results(rt2) == {"c_lookup": "error"}
        assert "permission revoked" in rt2.entry("c_lookup").result["content"]["error"]
        assert rt2.connection.execute("SELECT COUNT(*) FROM receipts").fetchone()[0] == 0


# --- bad input: typed, naming the value and the fix, no write -----------------------------------------


@pytest.mark.parametrize(("action", "error", "message"), [
    (lambda rt: rt.run_call(S, "c_nope"), NotFound, r"unknown call id 'c_nope'.*begin_turn"),
    (lambda rt: rt.pair_call(S, "c_nope"), NotFound, r"unknown call id 'c_nope'"),
    (lambda rt: rt.recover_call(S, "c_nope"), NotFound, r"unknown call id 'c_nope'"),
    (lambda rt: rt.redeliver(S, "c_order", "create_order",
                             {"customer": "Ann", "items": [{"sku": "A1001", "quantity": 3}]}),
     IdempotencyConflict, r"c_order.*nothing was changed"),
    (lambda rt: rt.pair_call("session-2", "c_order"), NotAllowed,
     r"'c_order' belongs to session 'session-1', not 'session-2'.*own session"),
    (lambda rt: rt.run_call("session-2", "c_order"), NotAllowed, r"belongs to session 'session-1'"),
    (lambda rt: rt.redeliver(S, "c_order", "create_order", ORDER.args, param_fingerprint="abc"),
     InvalidInput, r"fingerprint 'abc' is malformed.*64 lowercase hex"),
    (lambda rt: rt.redeliver(S, "c_order", "create_order", ORDER.args,
                             param_fingerprint="A" * 64), InvalidInput, r"is malformed"),
    (lambda rt: rt.redeliver(S, "c_order", "create_order", ORDER.args,
                             param_fingerprint="0" * 64),
     InvalidInput, r"not the fingerprint of these parameters"),
    (lambda rt: rt.recover("no-such-session"), NotFound,
     r"session 'no-such-session' has no checkpoint"),
    (lambda rt: rt.unpaired_calls("no-such-session"), NotFound, r"has no checkpoint"),
    (lambda rt: rt.begin_turn(S, [ToolCall("x", "drop_table", {})]), InvalidInput,
     r"unknown tool 'drop_table'; use one of"),
    (lambda rt: rt.begin_turn(S, [ToolCall("x", "adjust_stock", {"sku": "A1001", "delta": 0})]),
     InvalidInput, r"delta is 0"),
    (lambda rt: rt.begin_turn(S, [RESTOCK.__class__("d", "adjust_stock", RESTOCK.args)] * 2),
     InvalidInput, r"call id 'd' appears twice"),
    (lambda rt: rt.begin_turn(S, []), InvalidInput, r"calls is \[\]; pass a list of 1 to"),
    (lambda rt: rt.pair_call(S, "c_order"), NotAllowed, r"it has no receipt; run it first"),
    (lambda rt: rt.recover_call(S, "c_order"), NotAllowed, r"c_order.*no receipt; run it first"),
    (lambda rt: rt.open_session(S, "again"), NotAllowed, r"session 'session-1' exists"),
    (lambda rt: rt.begin_turn(S, [RESTOCK]), NotAllowed,
     r"latest turn has calls \['c_order'\] that have not continued"),
    (lambda rt: rt.open_session("s2", ""), InvalidInput, r"user_input is ''"),
], ids=lambda x: x if isinstance(x, str) else getattr(x, "__name__", None))
@pytest.mark.rule("L1")
@pytest.mark.rule("L3")
def test_bad_input_is_a_typed_error_naming_the_value_and_the_fix_with_no_write(
        files, action, error, message):
    with started(files, ORDER) as rt:
        rt.open_session("session-2", "another user")
        before = dump(files)
        with pytest.raises(error, match=message):
            action(rt)
        assert dump(files) == before


def test_every_hook_point_is_reached_in_a_turn(files):
    seen: list[tuple[str, int]] = []
    with runtime(files, "run-1", hook=lambda point, at: seen.append((point, at))) as rt:
        rt.open_session(S, "order")
        rt.run_turn(S, [ORDER, LOOKUP])
    assert set(seen) == {("inside_transaction", 0), ("receipt_committed", 0),
                         ("result_checkpointed", 0), ("receipt_committed", 1),
                         ("result_checkpointed", 1)}


# --- the demo ------------------------------------------------------------------------------------------


@pytest.mark.rule("L4")
@pytest.mark.rule("L5")
def test_the_demo_prints_exactly_the_four_figures(tmp_path):
    done = subprocess.run([sys.executable, "-m", "settled.cli", "demo", "ledger", "--json", "--dir",
                           str(tmp_path / "kept")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ('{"calls": 3, "paired": 3, "business_changes": 2, '
                                   '"new_operation_ids": 0}')
    assert list((tmp_path / "kept").glob("*/sessions.db"))


def test_the_demo_check_fails_when_a_figure_or_a_fact_is_off():
    good = {"calls": 3, "paired": 3, "business_changes": 2, "new_operation_ids": 0,
            "details": {"crash_exit_code": 77, "paired_from_receipts": ["call_order", "call_restock"],
                        "continued": ["call_mugs_left"], "lookups_run": 1,
                        "continued_input": True}}
    assert ledger_problems(good) == []
    assert ledger_problems({**good, "business_changes": 3}) == [
        "business_changes: expected 2, got 3"]
    assert ledger_problems({**good, "details": {**good["details"], "lookups_run": 2}}) == [
        "expected: the lookup ran once, under its original operation_id"]
    assert len(ledger_problems({})) == 8  # nothing observed: every fact is reported missing
