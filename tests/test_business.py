"""The ERP business store and the reconciler (W1–W8, A3), against real SQLite files."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from settled.impl.approval._business import BusinessStore, Product
from settled.impl.approval._business_normalize import canonical_json, fingerprint, normalize
from settled.impl.approval._reconciler import LookupAnswer, LookupStatus, lookup
from settled.impl.shared._errors import (
    Busy,
    CallerError,
    IdempotencyConflict,
    InsufficientStock,
    InvalidInput,
    LookupFailed,
    NotAllowed,
    NotFound,
    SettledError,
)

# fork keeps the children cheap; each child opens its own connection after the fork.
FORK = multiprocessing.get_context("fork")

ADJUST_5 = {"sku": "A1001", "delta": 5}
ORDER = {"customer": "Ann", "items": [{"sku": "A1001", "quantity": 2}]}


class FakeClock:
    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    path = tmp_path / "business.db"
    BusinessStore.create(path).close()
    return path


@pytest.fixture
def store(db_path: Path) -> Any:
    with BusinessStore.open(db_path) as opened:
        yield opened


def file_bytes(path: Path) -> dict[str, bytes]:
    files = [path, Path(f"{path}-wal")]
    return {p.name: p.read_bytes() for p in files if p.exists()}


# --- the seed's example and the token contract -----------------------------------------------


@pytest.mark.rule("W1")
@pytest.mark.rule("W2")
@pytest.mark.rule("W3")
@pytest.mark.rule("A3")
def test_seed_example_adjusts_once_replays_the_first_result_and_conflicts_on_other_args(
        store: BusinessStore, db_path: Path) -> None:
    """The article's 04_idempotency.py: observed_delta 5, replay, found, conflict."""
    before = store.stock("A1001")
    first = store.adjust_stock("tok-1", ADJUST_5)
    replay = store.adjust_stock("tok-1", ADJUST_5)
    answer = lookup(db_path, "tok-1", "adjust_stock", normalize("adjust_stock", ADJUST_5))
    with pytest.raises(IdempotencyConflict, match="tok-1"):
        store.adjust_stock("tok-1", {"sku": "A1001", "delta": 6})
    assert store.stock("A1001") - before == 5
    assert replay == first
    assert answer == LookupAnswer(LookupStatus.FOUND, first)


@pytest.mark.rule("W2")
def test_a_replay_returns_the_stored_result_and_changes_no_row(store: BusinessStore) -> None:
    first = store.create_order("tok-1", ORDER)
    rows = store.snapshot()
    assert store.create_order("tok-1", ORDER) == first
    assert store.snapshot() == rows


@pytest.mark.rule("W4")
def test_a_new_token_is_a_new_call_and_is_applied_again(store: BusinessStore) -> None:
    first = store.create_order("tok-1", ORDER)
    second = store.create_order("tok-2", ORDER)
    assert first["order_id"] != second["order_id"]
    assert store.stock("A1001") == 100 - 4


@pytest.mark.rule("W3")
def test_a_token_reused_for_another_tool_is_a_conflict_and_changes_nothing(
        store: BusinessStore) -> None:
    store.adjust_stock("tok-1", ADJUST_5)
    rows = store.snapshot()
    with pytest.raises(IdempotencyConflict, match="'tok-1' was already used for adjust_stock"):
        store.set_listing("tok-1", {"sku": "A1001", "listed": False})
    assert store.snapshot() == rows


@pytest.mark.rule("W5")
def test_reordered_split_and_padded_items_are_the_same_request(store: BusinessStore) -> None:
    plain = {"customer": "Ann", "items": [{"sku": "A1001", "quantity": 3},
                                          {"sku": "A1002", "quantity": 1}]}
    shuffled = {"customer": "  Ann ", "items": [{"sku": "A1002", "quantity": 1},
                                                {"sku": "A1001", "quantity": 1},
                                                {"sku": "A1001", "quantity": 2}]}
    assert normalize("create_order", shuffled) == normalize("create_order", plain)
    first = store.create_order("tok-1", plain)
    assert store.create_order("tok-1", shuffled) == first
    assert first["customer"] == "Ann"
    assert first["items"] == [{"quantity": 3, "sku": "A1001"}, {"quantity": 1, "sku": "A1002"}]
    assert store.stock("A1001") == 97


@pytest.mark.rule("W5")
@pytest.mark.parametrize(("tool", "args"), [
    ("create_order", {"customer": " Bo ", "items": [{"sku": "B", "quantity": 1},
                                                   {"sku": "A", "quantity": 2}]}),
    ("cancel_order", {"order_id": "ord-000001"}),
    ("adjust_stock", {"sku": "A1001", "delta": -3}),
    ("set_listing", {"sku": "A1001", "listed": True}),
])
def test_normalizing_a_normalized_request_changes_nothing(tool: str, args: dict[str, Any]) -> None:
    once = normalize(tool, args)
    assert normalize(tool, once) == once
    assert fingerprint(tool, once) == fingerprint(tool, normalize(tool, once))


@pytest.mark.rule("W7")
def test_a_resubmitted_draft_returns_the_original_order_under_a_new_token(
        store: BusinessStore) -> None:
    draft = {**ORDER, "draft_id": "draft-7"}
    original = store.create_order("tok-1", draft)
    again = store.create_order("tok-2", {**draft, "customer": " Ann  "})
    assert again == original
    assert store.stock("A1001") == 98
    assert len(store.snapshot()["orders"]) == 1


@pytest.mark.rule("W7")
def test_a_resubmitted_draft_with_other_items_is_a_conflict(store: BusinessStore) -> None:
    store.create_order("tok-1", {**ORDER, "draft_id": "draft-7"})
    other = {"customer": "Ann", "items": [{"sku": "A1002", "quantity": 1}], "draft_id": "draft-7"}
    with pytest.raises(IdempotencyConflict, match=r"draft 'draft-7'.*'ord-000001'"):
        store.create_order("tok-2", other)
    assert store.stock("A1002") == 40


# --- business rules -------------------------------------------------------------------------


@pytest.mark.rule("W6")
def test_an_order_never_oversells_and_the_error_names_sku_asked_and_available(
        store: BusinessStore) -> None:
    rows = store.snapshot()
    big = {"customer": "Ann", "items": [{"sku": "A1001", "quantity": 1},
                                        {"sku": "A1002", "quantity": 41}]}
    with pytest.raises(InsufficientStock, match="'A1002': asked for 41, only 40") as caught:
        store.create_order("tok-1", big)
    assert (caught.value.sku, caught.value.asked, caught.value.available) == ("A1002", 41, 40)
    assert store.snapshot() == rows
    store.create_order("tok-1", ORDER)  # a business rejection does not use up the token


def test_stock_adjustment_may_not_go_below_zero(store: BusinessStore) -> None:
    with pytest.raises(InsufficientStock, match="'B2001': asked for 6, only 5"):
        store.adjust_stock("tok-1", {"sku": "B2001", "delta": -6})
    assert store.adjust_stock("tok-1", {"sku": "B2001", "delta": -5})["stock_after"] == 0


def test_cancel_restores_stock_and_a_second_cancel_is_not_allowed(store: BusinessStore) -> None:
    order = store.create_order("tok-1", ORDER)
    cancelled = store.cancel_order("tok-2", {"order_id": order["order_id"]})
    assert cancelled == {"order_id": order["order_id"], "status": "cancelled",
                         "restored_items": [{"sku": "A1001", "quantity": 2}]}
    assert store.stock("A1001") == 100
    with pytest.raises(NotAllowed, match="already cancelled"):
        store.cancel_order("tok-3", {"order_id": order["order_id"]})
    assert store.cancel_order("tok-2", {"order_id": order["order_id"]}) == cancelled


def test_an_unlisted_product_cannot_be_ordered_until_listed_again(store: BusinessStore) -> None:
    assert store.set_listing("tok-1", {"sku": "A1001", "listed": False}) == {
        "sku": "A1001", "listed": False, "was_listed": True}
    with pytest.raises(NotAllowed, match="'A1001' is not listed"):
        store.create_order("tok-2", ORDER)
    store.set_listing("tok-3", {"sku": "A1001", "listed": True})
    assert store.create_order("tok-2", ORDER)["status"] == "open"


# --- bad input ------------------------------------------------------------------------------

ITEM = {"sku": "A1001", "quantity": 1}
BAD_INPUTS = [
    ("create_order", {"customer": "Ann", "items": [{"sku": "Z9", "quantity": 1}]}, NotFound, "Z9"),
    ("adjust_stock", {"sku": "Z9", "delta": 1}, NotFound, "unknown sku 'Z9'"),
    ("set_listing", {"sku": "Z9", "listed": True}, NotFound, "unknown sku 'Z9'"),
    ("cancel_order", {"order_id": "ord-999"}, NotFound, "unknown order 'ord-999'"),
    ("create_order", {"customer": "Ann", "items": [{"sku": "A1001", "quantity": 0}]},
     InvalidInput, r"quantity is 0"),
    ("create_order", {"customer": "Ann", "items": [{"sku": "A1001", "quantity": -2}]},
     InvalidInput, r"quantity is -2"),
    ("create_order", {"customer": "Ann", "items": [{"sku": "A1001", "quantity": 1.5}]},
     InvalidInput, r"quantity is 1\.5"),
    ("create_order", {"customer": "Ann", "items": [{"sku": "A1001", "quantity": "2"}]},
     InvalidInput, r"quantity is '2'"),
    ("create_order", {"customer": "Ann", "items": [{"sku": "A1001", "quantity": True}]},
     InvalidInput, r"quantity is True"),
    ("create_order", {"customer": "Ann", "items": [{"sku": "A1001", "quantity": 10_001}]},
     InvalidInput, r"quantity is 10001; it must be an integer from 1 to 10000"),
    ("create_order", {"customer": "Ann", "items": [{"sku": "A1001", "quantity": 6000}] * 2},
     InvalidInput, r"total quantity of sku 'A1001' is 12000"),
    ("create_order", {"customer": "   ", "items": [ITEM]}, InvalidInput, "customer is '   '"),
    ("create_order", {"customer": "x" * 201, "items": [ITEM]}, InvalidInput, "201 characters"),
    ("create_order", {"customer": 7, "items": [ITEM]}, InvalidInput, "customer is 7"),
    ("create_order", {"customer": "Ann", "items": []}, InvalidInput, "1 to 100"),
    ("create_order", {"customer": "Ann", "items": [ITEM] * 101}, InvalidInput, "1 to 100"),
    ("create_order", {"customer": "Ann", "items": [{"sku": "A1001"}]}, InvalidInput,
     r"items\[0\]: missing field\(s\) quantity"),
    ("create_order", {"customer": "Ann", "items": [ITEM], "note": "x" * 17_000}, InvalidInput,
     r"bytes of JSON, at most 16384"),
    ("create_order", {"items": [ITEM]}, InvalidInput, r"missing field\(s\) customer"),
    ("adjust_stock", {"sku": "A1001", "delta": 1, "why": "x"}, InvalidInput,
     r"unknown field\(s\) why"),
    ("adjust_stock", {"sku": "A1001"}, InvalidInput, r"missing field\(s\) delta"),
    ("adjust_stock", {"sku": "A1001", "delta": 0}, InvalidInput, "delta is 0"),
    ("adjust_stock", {"sku": "A1001", "delta": True}, InvalidInput, "delta is True"),
    ("adjust_stock", {"sku": "A1001", "delta": 2.0}, InvalidInput, r"delta is 2\.0"),
    ("adjust_stock", {"sku": "A1001", "delta": 1_000_001}, InvalidInput, "delta is 1000001"),
    ("set_listing", {"sku": "A1001", "listed": 1}, InvalidInput, "listed is 1"),
]


@pytest.mark.rule("W4")
@pytest.mark.parametrize(("tool", "args", "error", "match"), BAD_INPUTS)
def test_bad_input_is_refused_before_any_write_and_leaves_the_token_free(
        store: BusinessStore, db_path: Path, tool: str, args: dict[str, Any],
        error: type[CallerError], match: str) -> None:
    rows, files = store.snapshot(), file_bytes(db_path)
    with pytest.raises(error, match=match) as caught:
        store.execute(tool, "tok-1", args)
    assert isinstance(caught.value, ValueError)
    assert store.snapshot() == rows
    assert file_bytes(db_path) == files
    assert store.adjust_stock("tok-1", {"sku": "A1001", "delta": 1})["stock_after"] == 101


@pytest.mark.rule("W1")
@pytest.mark.parametrize(("token", "match"), [
    (None, "must be a non-empty string, got None"), ("", "must be a non-empty string, got ''"),
    ("   ", "must be a non-empty string, got '   '"), (42, "must be a non-empty string, got 42"),
    ("t" * 129, r"'t+\.\.\. has 129 characters"),
])
def test_a_missing_or_malformed_token_is_refused_before_any_write(
        store: BusinessStore, db_path: Path, token: Any, match: str) -> None:
    rows, files = store.snapshot(), file_bytes(db_path)
    with pytest.raises(InvalidInput, match=f"client_token {match}"):
        store.adjust_stock(token, ADJUST_5)
    assert store.snapshot() == rows
    assert file_bytes(db_path) == files


# --- retention ------------------------------------------------------------------------------


@pytest.mark.rule("W8")
def test_purge_removes_old_records_but_never_an_in_flight_token(db_path: Path) -> None:
    clock = FakeClock(1_000.0)
    with BusinessStore.open(db_path, now=clock) as store:
        for token, at in (("old-in-flight", 1_000.0), ("old", 2_000.0), ("young", 4_500.0)):
            clock.now = at
            store.adjust_stock(token, ADJUST_5)
        clock.now = 5_000.0
        purged = store.purge_idempotency_records(1_000, in_flight={"old-in-flight"})
        kept = [row["client_token"] for row in store.snapshot()["mutation_requests"]]
    assert purged == 1
    assert kept == ["old-in-flight", "young"]
    assert lookup(db_path, "old", "adjust_stock", ADJUST_5).status is LookupStatus.ABSENT


@pytest.mark.rule("W8")
def test_purge_takes_an_explicit_now_and_refuses_a_bad_age(store: BusinessStore) -> None:
    store.adjust_stock("tok-1", ADJUST_5)
    with pytest.raises(InvalidInput, match="older_than_seconds is -1"):
        store.purge_idempotency_records(-1)
    assert store.purge_idempotency_records(10, now=0.0) == 0
    assert store.purge_idempotency_records(0, now=10.0**12) == 1


# --- reconciler -----------------------------------------------------------------------------


@pytest.mark.rule("A3")
def test_lookup_found_returns_the_first_result_as_stored_not_current_data(
        store: BusinessStore, db_path: Path) -> None:
    first = store.adjust_stock("tok-1", ADJUST_5)
    store.adjust_stock("tok-2", {"sku": "A1001", "delta": -50})
    answer = lookup(db_path, "tok-1", "adjust_stock", normalize("adjust_stock", ADJUST_5))
    assert answer.status is LookupStatus.FOUND
    assert answer.result == first == {"delta": 5, "sku": "A1001", "stock_after": 105,
                                      "stock_before": 100}


@pytest.mark.rule("A3")
def test_lookup_answers_absent_and_conflict_from_a_completed_read(
        store: BusinessStore, db_path: Path) -> None:
    store.adjust_stock("tok-1", ADJUST_5)
    files = file_bytes(db_path)
    assert lookup(db_path, "tok-9", "adjust_stock", ADJUST_5) == LookupAnswer(LookupStatus.ABSENT)
    other_args = lookup(db_path, "tok-1", "adjust_stock", {"sku": "A1001", "delta": 6})
    other_tool = lookup(store.connection, "tok-1", "set_listing", {"sku": "A1001", "listed": True})
    assert other_args == other_tool == LookupAnswer(LookupStatus.CONFLICT)
    assert file_bytes(db_path) == files


@pytest.mark.rule("A3")
def test_lookup_of_a_missing_file_fails_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "gone.db"
    with pytest.raises(LookupFailed, match="unknown, not absent"):
        lookup(missing, "tok-1", "adjust_stock", ADJUST_5)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.rule("A3")
@pytest.mark.parametrize("content", [b"this is not a database" * 100, b""])
def test_lookup_of_a_corrupt_or_foreign_file_fails_instead_of_answering_absent(
        tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "corrupt.db"
    path.write_bytes(content)
    with pytest.raises(LookupFailed):
        lookup(path, "tok-1", "adjust_stock", ADJUST_5)


@pytest.mark.rule("A3")
def test_lookup_against_a_held_lock_fails_within_its_timeout(db_path: Path) -> None:
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("UPDATE products SET stock = stock WHERE sku = 'A1001'")
    try:
        with pytest.raises(LookupFailed, match="locked"):
            lookup(db_path, "tok-1", "adjust_stock", ADJUST_5, timeout=0.1)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_found_answer_must_carry_a_result_and_others_must_not() -> None:
    with pytest.raises(ValueError, match="found answer must carry"):
        LookupAnswer(LookupStatus.FOUND)
    with pytest.raises(ValueError, match="absent answer must not"):
        LookupAnswer(LookupStatus.ABSENT, {})


# --- hooks and hard exits -------------------------------------------------------------------


def test_hooks_see_each_point_of_a_new_call_and_only_the_entry_of_a_replay(
        db_path: Path) -> None:
    seen: list[str] = []
    with BusinessStore.open(db_path, hook=seen.append) as store:
        store.adjust_stock("tok-1", ADJUST_5)
        store.adjust_stock("tok-1", ADJUST_5)
    assert seen == ["handler_entered", "before_commit", "after_commit", "handler_entered"]


def _exit_at(point: str) -> Any:
    def hook(name: str) -> None:
        if name == point:
            os._exit(17)
    return hook


def _crashing_call(path: Path, point: str) -> None:
    BusinessStore.open(path, hook=_exit_at(point)).adjust_stock("tok-1", ADJUST_5)


@pytest.mark.rule("W6")
@pytest.mark.rule("A6")
@pytest.mark.parametrize(("point", "status", "stock"), [
    ("before_commit", LookupStatus.ABSENT, 100),
    ("after_commit", LookupStatus.FOUND, 105),
])
def test_a_hard_exit_at_a_hook_leaves_all_or_nothing_and_the_token_resumes_once(
        db_path: Path, point: str, status: LookupStatus, stock: int) -> None:
    child = FORK.Process(target=_crashing_call, args=(db_path, point))
    child.start()
    child.join(timeout=30)
    assert child.exitcode == 17
    assert lookup(db_path, "tok-1", "adjust_stock", ADJUST_5).status is status
    with BusinessStore.open(db_path) as store:
        assert store.stock("A1001") == stock
        assert store.adjust_stock("tok-1", ADJUST_5)["stock_after"] == 105
        assert store.stock("A1001") == 105


# --- concurrency ----------------------------------------------------------------------------

Call = tuple[str, str, dict[str, Any]]


def _run_calls(path: Path, calls: list[Call], barrier: Any, results: Any) -> None:
    """Child process: start with the others, run each call, retry Busy under the same token."""
    outcomes: list[tuple[str, Any]] = []
    with BusinessStore.open(path) as store:
        barrier.wait()
        for tool, token, args in calls:
            outcomes.append(_one_call(store, tool, token, args))
    results.put(outcomes)


def _one_call(store: BusinessStore, tool: str, token: str, args: dict[str, Any]) -> tuple[str, Any]:
    for _ in range(20):
        try:
            return ("ok", store.execute(tool, token, args))
        except Busy:
            continue  # the protocol's answer to Busy: the same call, the same token
        except SettledError as exc:
            return (type(exc).__name__, str(exc))
    return ("Busy", "still busy after 20 tries")


def run_in_processes(path: Path, per_process: list[list[Call]]) -> list[tuple[str, Any]]:
    barrier, results = FORK.Barrier(len(per_process)), FORK.Queue()
    children = [FORK.Process(target=_run_calls, args=(path, calls, barrier, results))
                for calls in per_process]
    for child in children:
        child.start()
    outcomes = [outcome for _ in children for outcome in results.get(timeout=60)]
    for child in children:
        child.join(timeout=30)
        assert child.exitcode == 0
    return outcomes


@pytest.mark.rule("W2")
@pytest.mark.rule("W6")
def test_four_processes_with_one_token_change_once_and_all_get_the_first_result(
        db_path: Path) -> None:
    outcomes = run_in_processes(db_path, [[("adjust_stock", "tok-1", ADJUST_5)]] * 4)
    with BusinessStore.open(db_path) as store:
        assert store.stock("A1001") == 105
        assert len(store.snapshot()["mutation_requests"]) == 1
    assert outcomes == [("ok", {"delta": 5, "sku": "A1001", "stock_after": 105,
                                "stock_before": 100})] * 4


@pytest.mark.rule("W3")
@pytest.mark.rule("W6")
def test_four_processes_with_one_token_and_other_args_apply_exactly_one(db_path: Path) -> None:
    outcomes = run_in_processes(
        db_path, [[("adjust_stock", "tok-1", {"sku": "A1001", "delta": d})] for d in (1, 2, 3, 4)])
    kinds = sorted(kind for kind, _ in outcomes)
    assert kinds == ["IdempotencyConflict"] * 3 + ["ok"]
    (applied,) = [result for kind, result in outcomes if kind == "ok"]
    with BusinessStore.open(db_path) as store:
        assert store.stock("A1001") == 100 + applied["delta"]


@pytest.mark.rule("W6")
def test_parallel_orders_never_oversell(tmp_path: Path) -> None:
    path = tmp_path / "scarce.db"
    BusinessStore.create(path, [Product("S1", "Scarce", 15)]).close()
    per_process = [[("create_order", f"p{p}-{i}",
                     {"customer": f"c{p}", "items": [{"sku": "S1", "quantity": 2}]})
                    for i in range(5)] for p in range(4)]
    outcomes = run_in_processes(path, per_process)
    accepted = sum(kind == "ok" for kind, _ in outcomes)
    assert {kind for kind, _ in outcomes} == {"ok", "InsufficientStock"}
    with BusinessStore.open(path) as store:
        assert store.stock("S1") == 15 - 2 * accepted == 1
        assert len(store.snapshot()["orders"]) == accepted == 7


def test_canonical_json_is_byte_stable_for_equal_values() -> None:
    assert canonical_json({"b": 1, "a": [1, "é"]}) == '{"a":[1,"é"],"b":1}'
