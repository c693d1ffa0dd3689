"""Concurrent campaigns and the linearizability checker (conformance/_lockstep/_linearize.py,
conformance/_lockstep/_concurrent.py, conformance/mutants/races.py)."""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable
from pathlib import Path

import pytest

from settled.conformance._bundled._concurrent_business import BusinessOrdersModel, run_business_campaign
from settled.conformance._bundled._concurrent_query import QueryOpsModel, run_query_campaign
from settled.conformance._bundled._races import replay, run_campaign, run_race_mutant
from settled.conformance._lockstep._concurrent import independence
from settled.conformance._lockstep._linearize import (
    History,
    Operation,
    check,
    load_history,
    minimal_failure,
    save_history,
    timeline,
)
from settled.conformance.mutants import Mutant, all_mutants
from settled.conformance.mutants.races import RACE_MUTANTS
from settled.impl.shared import _db
from settled.model.systems import build_approval_system, build_query_system

MODEL = QueryOpsModel()


def op(i: int, client: str, call: str, worker: int, output: dict[str, object] | None,
       start: int, end: int | None, key: str = "q0") -> Operation:
    return Operation(i, client, key, {"op": call, "worker": worker}, output, start, end)


def claim(i: int, worker: int, epoch: int, start: int, end: int, key: str = "q0") -> Operation:
    return op(i, f"c{worker}", "claim", worker, {"ok": True, "epoch": epoch}, start, end, key)


# ---------------------------------------------------------------------------- the checker
def test_an_empty_history_is_reported_as_nothing_checked_not_as_a_pass() -> None:
    result = check([], MODEL)
    assert not result.ok
    assert result.nothing_checked
    assert "nothing checked" in result.summary()


def test_two_overlapping_claims_with_successive_epochs_are_linearizable() -> None:
    result = check([claim(0, 0, 1, 1, 4), claim(1, 1, 2, 2, 3)], MODEL)
    assert result.ok and result.checked == 2 and result.parts == 1


def test_two_claims_that_got_the_same_epoch_are_rejected_with_the_minimal_history() -> None:
    history = [
        claim(0, 0, 1, 1, 4),
        claim(1, 1, 1, 2, 3),  # the race: both hold epoch 1
        op(2, "c2", "begin_submit", 2, {"ok": False, "error": "NotAllowed"}, 5, 6),
        claim(3, 0, 1, 7, 8, key="q1"),  # another query: a part of its own
    ]
    result = check(history, MODEL)
    assert not result.ok
    assert result.failed_key == "q0" and result.parts == 2
    minimal = minimal_failure(history, MODEL)
    assert sorted(o.id for o in minimal) == [0, 1]
    drawn = timeline(minimal, MODEL)
    assert "w0 claim(q0) -> epoch 1" in drawn and "w1 claim(q0) -> epoch 1" in drawn


def test_real_time_order_is_respected() -> None:
    # w1 got epoch 1 and returned before w0 was invoked, so w0 cannot have epoch 1 too,
    # and w0's epoch-2 claim cannot come first: rejected. Overlapping, it is fine.
    apart = [claim(0, 1, 2, 1, 2), claim(1, 0, 1, 3, 4)]
    assert not check(apart, MODEL).ok
    overlapping = [claim(0, 1, 2, 1, 3), claim(1, 0, 1, 2, 4)]
    assert check(overlapping, MODEL).ok


def test_an_unknown_operation_may_take_effect_or_not() -> None:
    # w0's claim crashed (no response): w1's epoch 2 needs it to have taken effect ...
    took = [op(0, "c0", "claim", 0, None, 1, None), claim(1, 1, 2, 2, 3)]
    assert check(took, MODEL).ok
    # ... and w1's epoch 1 needs it not to have: both are accepted.
    did_not = [op(0, "c0", "claim", 0, None, 1, None), claim(1, 1, 1, 2, 3)]
    assert check(did_not, MODEL).ok
    # A known claim that returned epoch 3 is explained by neither.
    assert not check([op(0, "c0", "claim", 0, None, 1, None), claim(1, 1, 3, 2, 3)], MODEL).ok


def test_a_refusal_the_model_would_have_allowed_is_rejected() -> None:
    refused = [op(0, "c0", "claim", 0, {"ok": False, "error": "NotAllowed"}, 1, 2)]
    assert not check(refused, MODEL).ok
    void = [op(0, "c0", "claim", 0, {"ok": False, "void": True, "error": "Busy"}, 1, 2)]
    assert check(void, MODEL).ok


class Register:
    """A read/write register: the checker is generic, not tied to the protocol's machines."""

    def init(self, key: str) -> Hashable:
        return 0

    def step(self, state: Hashable, o: Operation) -> Iterable[Hashable]:
        if o.input["op"] == "write":
            return [o.input["value"]]
        if o.output is None or o.output["value"] == state:
            return [state]
        return []

    def describe(self, o: Operation) -> str:
        return f"{o.input}"

    def rules(self, o: Operation) -> tuple[str, ...]:
        return ()


def test_the_checker_works_on_any_model_with_the_small_interface() -> None:
    def w(i: int, v: int, a: int, b: int) -> Operation:
        return Operation(i, "w", "r", {"op": "write", "value": v}, {}, a, b)

    def r(i: int, v: int, a: int, b: int) -> Operation:
        return Operation(i, "r", "r", {"op": "read"}, {"value": v}, a, b)

    assert check([w(0, 1, 1, 4), r(1, 1, 2, 3)], Register()).ok  # overlapping: may see it
    assert check([w(0, 1, 1, 4), r(1, 0, 2, 3)], Register()).ok  # ... or not
    assert not check([w(0, 1, 1, 2), r(1, 0, 3, 4)], Register()).ok  # stale read after it
    # a 200-operation history with much overlap still checks (memoisation)
    ops = [w(i, i % 3, 2 * i, 2 * i + 5) for i in range(200)]
    assert check(ops, Register()).ok


def test_a_history_round_trips_through_its_file(tmp_path: Path) -> None:
    history = History((claim(0, 0, 1, 1, 4), claim(1, 1, 1, 2, 3)), {"seed": 3})
    path = save_history(tmp_path / "h.json", history, minimal=history.operations,
                        rules=("Q11",), verdict="NOT linearizable")
    loaded, minimal, data = load_history(path)
    assert loaded == history and list(minimal) == list(history.operations)
    assert data["rules_broken"] == ["Q11"]
    (tmp_path / "bad.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not a settled-history"):
        load_history(tmp_path / "bad.json")


# ---------------------------------------------------------------------------- independence
def test_the_split_per_query_is_proven_from_the_system_declaration() -> None:
    system = build_query_system()
    proven, why = independence(system, {"claim", "begin_submit", "submit_answered"})
    assert proven, why
    # condition_updated is synchronised across the task's queries: no split.
    proven, why = independence(system, {"claim", "condition_updated"})
    assert not proven and "condition_updated" in why
    # orders draw on one stock (the commit refinement): one part, never split
    proven, why = independence(build_approval_system(), {"commit"})
    assert not proven and "commit" in why


def order(i: int, client: str, token: int, output: dict[str, object] | None, start: int,
          end: int | None) -> Operation:
    return Operation(i, client, "stock", {"op": "order", "token": token}, output, start, end)


def test_orders_beyond_the_stock_are_rejected_and_a_replay_takes_no_stock() -> None:
    model = BusinessOrdersModel(tokens=3, stock=1)
    sold_twice = [order(0, "c0", 0, {"ok": True}, 1, 3), order(1, "c1", 1, {"ok": True}, 2, 4)]
    assert not check(sold_twice, model, split=False).ok
    one_refused = [order(0, "c0", 0, {"ok": True}, 1, 3),
                   order(1, "c1", 1, {"ok": False, "error": "InsufficientStock"}, 2, 4)]
    assert check(one_refused, model, split=False).ok
    replayed = [order(0, "c0", 0, {"ok": True}, 1, 2), order(1, "c1", 0, {"ok": True}, 3, 4),
                Operation(2, "c2", "stock", {"op": "stock"}, {"ok": True, "stock": 0}, 5, 6)]
    assert check(replayed, model, split=False).ok
    applied_twice = [*replayed[:2],
                     Operation(2, "c2", "stock", {"op": "stock"}, {"ok": True, "stock": -1}, 5, 6)]
    assert not check(applied_twice, model, split=False).ok
    # a refusal while stock is left is not what the store may do
    early = [order(0, "c0", 0, {"ok": False, "error": "InsufficientStock"}, 1, 2)]
    assert not check(early, model, split=False).ok


# ---------------------------------------------------------------------------- the DB hook
def test_the_boundary_hook_sees_each_outermost_transaction_once(tmp_path: Path) -> None:
    seen: list[str] = []
    conn = _db.connect(tmp_path / "x.db")
    previous = _db.set_boundary_hook(seen.append)
    try:
        with _db.write(conn):
            conn.execute("CREATE TABLE t (x)")
            with _db.write(_db.connect(tmp_path / "y.db")):  # nested: not a boundary
                pass
        with pytest.raises(ZeroDivisionError), _db.write(conn):
            1 / 0  # noqa: B018
    finally:
        _db.set_boundary_hook(previous)
    assert seen == ["begin", "commit", "begin", "commit"]
    with _db.write(conn):  # removed: nothing more is seen
        pass
    assert seen == ["begin", "commit", "begin", "commit"]


# ---------------------------------------------------------------------------- campaigns
def test_the_bundled_worker_passes_a_controlled_and_a_free_campaign() -> None:
    for mode in ("controlled", "free"):
        result = run_query_campaign(1, mode=mode)
        assert result.ok, result.report()
        assert result.result.checked > 50 and not result.errors


def test_the_bundled_business_store_passes_a_controlled_and_a_free_campaign() -> None:
    for mode in ("controlled", "free"):
        result = run_business_campaign(1, mode=mode)
        assert result.ok, result.report()
        assert result.result.checked == 30 and result.result.parts == 1 and not result.errors


def test_the_controlled_mode_repeats_the_same_history_for_the_same_seed() -> None:
    first = run_query_campaign(4, ops_per_client=12)
    again = run_query_campaign(4, ops_per_client=12)
    assert [o.to_json() for o in first.history.operations] == \
        [o.to_json() for o in again.history.operations]


@pytest.mark.parametrize("mutant", RACE_MUTANTS, ids=lambda m: m.name)
def test_a_found_race_is_saved_drawn_and_replays_from_its_file(mutant: Mutant,
                                                               tmp_path: Path) -> None:
    result = run_race_mutant(mutant, 1, out=tmp_path)
    assert not result.ok
    assert mutant.rule in result.rules
    assert result.saved is not None and result.saved.is_file()
    assert 2 <= len(result.minimal) <= len(result.result.failed_ops)
    assert "minimal history:" in result.report()
    saved, again = replay(result.saved)
    assert not saved.ok and not again.ok
    if result.history.meta["mode"] == "controlled":  # the same schedule, the same history
        assert [o.to_json() for o in again.history.operations] == \
            [o.to_json() for o in result.history.operations]


def test_race_mutants_are_not_in_the_lockstep_catalogue() -> None:
    # the lockstep kit cannot reach them by construction; they have their own catalogue
    names = {m.name for m in all_mutants()}
    assert RACE_MUTANTS and not names & {m.name for m in RACE_MUTANTS}
    for machine in ("query_concurrent", "business_concurrent"):
        assert len([m for m in RACE_MUTANTS if m.machine == machine]) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("mutant", RACE_MUTANTS, ids=lambda m: m.name)
def test_each_race_mutant_is_killed_on_seeds_1_to_10_on_sqlite(mutant: Mutant) -> None:
    survived = [seed for seed in range(1, 11) if run_race_mutant(mutant, seed, shrink=False).ok]
    assert survived == []


@pytest.mark.slow
@pytest.mark.parametrize("implementation", ["query", "business", "ledger"])
def test_the_bundled_implementation_passes_seeds_1_to_10_on_sqlite(implementation: str) -> None:
    failed = [(seed, mode) for seed in range(1, 11) for mode in ("controlled", "free")
              if not run_campaign(implementation, seed, mode=mode, shrink=False).ok]
    assert failed == []


@pytest.mark.slow
def test_race_mutants_die_and_the_bundled_implementation_passes_on_postgresql(
        pg_url: str) -> None:
    for mutant in RACE_MUTANTS:
        survived = [seed for seed in range(1, 11)
                    if run_race_mutant(mutant, seed, store=pg_url, shrink=False).ok]
        assert survived == [], mutant.name
    failed = [(implementation, seed, mode) for implementation in ("query", "business")
              for seed in range(1, 11) for mode in ("controlled", "free")
              if not run_campaign(implementation, seed, mode=mode, store=pg_url,
                                  shrink=False).ok]
    assert failed == []


def test_one_campaign_of_each_implementation_runs_on_postgresql(pg_url: str) -> None:
    for implementation in ("query", "business"):
        result = run_campaign(implementation, 2, store=pg_url, ops_per_client=16, schedules=1)
        assert result.ok, result.report()
        assert result.history.meta["store"] == "postgresql"


# ---------------------------------------------------------------------------- settled verify
def test_verify_runs_the_concurrent_campaign_and_says_what_it_did_not_check() -> None:
    from settled import _cmd_verify, _verify

    passed = _verify.check_concurrent("approval", 3)
    assert passed["checked"] and passed["ok"] and passed["operations"]["controlled"] > 0
    assert "ops" in _cmd_verify._concurrent_cell(passed)
    missing = _verify.check_concurrent("no-such-machine", 3)
    assert not missing["checked"] and "no concurrent campaign" in missing["why"]
    assert "NOT CHECKED" in _cmd_verify._concurrent_cell(missing)
    report = _verify.MachineReport("approval", explore={"ok": True}, system={"ok": True},
                                   lockstep={"ok": True}, trace_check={"ok": True},
                                   crash={"ok": True}, concurrent={**passed, "ok": False},
                                   system_lockstep={"checked": True, "ok": True})
    assert not report.ok  # a failed campaign fails verify
    report.concurrent = passed
    assert report.ok


def test_a_cut_history_makes_calls_pending_at_the_cut_unknown() -> None:
    from settled.conformance._lockstep._linearize import cut

    # w1's claim is invoked after w0's and returns before it: w0 saw epoch 2. Cut before
    # w1's invocation, w0's result is no longer certain: it becomes unknown, not a failure.
    whole = [claim(0, 0, 2, 1, 4), claim(1, 1, 1, 2, 3)]
    assert check(whole, MODEL).ok
    first = cut(whole, 1)
    assert first[0].unknown and first[0].output is None
    assert check(first, MODEL).ok
    assert not check(whole[:1], MODEL).ok  # a plain slice would report a race that is not there
