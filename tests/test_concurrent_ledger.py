"""The ledger runtime's concurrent campaign (conformance/_bundled/_concurrent_ledger.py): several
runtimes on one session, the session's run as the fence (L2), checked for linearizability."""

from __future__ import annotations

from typing import Any

import pytest

from settled.conformance._bundled._concurrent_ledger import (
    CLIENTS,
    STOCK,
    LedgerSessionModel,
    run_ledger_campaign,
)
from settled.conformance._bundled._races import CAMPAIGNS, run_campaign, run_race_mutant
from settled.conformance._lockstep._linearize import Operation, check
from settled.conformance.mutants.races import RACE_MUTANTS

LEDGER_MUTANTS = [m for m in RACE_MUTANTS if m.machine == "ledger_concurrent"]


def op(i: int, by: str, name: str, output: dict[str, Any] | None, start: int, end: int | None,
       **params: Any) -> Operation:
    return Operation(i, by, "s1", {"op": name, "by": by, **params}, output, start, end)


OK = {"ok": True}
REFUSED = {"ok": False, "error": "NotAllowed"}


def test_a_run_taken_over_may_not_recover_a_call_afterwards() -> None:
    history = [op(0, "c0", "resume", {"ok": True, "took": True}, 1, 2),
               op(1, "c1", "resume", {"ok": True, "took": True}, 3, 4),
               op(2, "c0", "recover_call", OK, 5, 6, call="t0-c1")]
    assert not check(history, LedgerSessionModel(), split=False).ok
    refused = [*history[:2], op(2, "c0", "recover_call", REFUSED, 5, 6, call="t0-c1")]
    assert check(refused, LedgerSessionModel(), split=False).ok


def test_a_recovery_overlapping_the_takeover_may_come_first() -> None:
    history = [op(0, "c0", "resume", {"ok": True, "took": True}, 1, 2),
               op(1, "c1", "resume", {"ok": True, "took": True}, 3, 6),
               op(2, "c0", "recover_call", OK, 4, 5, call="t0-c1"),
               op(3, "c1", "rows", {"ok": True, "run": "c1",
                                   "calls": ["recovering", "recovering"]}, 7, 8)]
    assert check(history, LedgerSessionModel(), split=False).ok
    # ... but then the takeover made the call recovering again: a row still registered is not
    moved = [*history[:3], op(3, "c1", "rows", {"ok": True, "run": "c1",
                                               "calls": ["recovering", "registered"]}, 7, 8)]
    assert not check(moved, LedgerSessionModel(), split=False).ok


def test_a_call_run_twice_shows_in_the_stock() -> None:
    history = [op(0, "c0", "resume", {"ok": True, "took": True}, 1, 2),
               op(1, "c0", "recover_call", OK, 3, 4, call="t0-c0"),
               op(2, "c0", "run_call", {"ok": True, "receipt": "success"}, 5, 6, call="t0-c0"),
               op(3, "c1", "run_call", {"ok": True, "receipt": "success"}, 7, 8, call="t0-c0")]
    once = [*history, Operation(4, "audit", "s1", {"op": "stock"}, {"ok": True, "stock": STOCK - 1},
                                9, 10)]
    assert check(once, LedgerSessionModel(), split=False).ok  # the second run is a replay (W2)
    twice = [*history, Operation(4, "audit", "s1", {"op": "stock"},
                                 {"ok": True, "stock": STOCK - 2}, 9, 10)]
    assert not check(twice, LedgerSessionModel(), split=False).ok


def test_the_shipped_runtime_passes_controlled_and_free_campaigns() -> None:
    assert "ledger" in CAMPAIGNS
    for seed, mode in ((1, "controlled"), (2, "controlled"), (3, "controlled"), (1, "free")):
        result = run_ledger_campaign(seed, mode=mode)  # type: ignore[arg-type]
        assert result.ok, result.report()
        assert result.result.checked == CLIENTS * 30 + 2 and not result.errors
        assert result.history.meta["progress"] == seed % 3


def test_the_campaign_reaches_later_turns_and_takes_the_session_over() -> None:
    ops = run_ledger_campaign(1).history.operations
    done = {(o.input["op"], bool(o.output and o.output.get("ok"))) for o in ops}
    for step in ("resume", "recover_call", "run_call", "pair_call", "continue_turn",
                 "begin_turn", "redeliver"):
        assert (step, True) in done, step
    assert (("pair_call", False) in done or ("recover_call", False) in done)  # the fence refuses


def test_the_controlled_mode_repeats_the_ledger_history() -> None:
    first = run_ledger_campaign(4, ops_per_client=12)
    again = run_ledger_campaign(4, ops_per_client=12)
    assert [o.to_json() for o in first.history.operations] == \
        [o.to_json() for o in again.history.operations]


@pytest.mark.parametrize("mutant", LEDGER_MUTANTS, ids=lambda m: m.name)
def test_the_ledger_race_mutant_is_killed(mutant: Any) -> None:
    killed = [seed for seed in (1, 2, 3) if not run_race_mutant(mutant, seed, shrink=False).ok]
    assert killed == [1, 2, 3]


def test_a_postgresql_url_runs_the_ledger_campaign_on_sqlite_files() -> None:
    result = run_campaign("ledger", 1, store="postgresql://nowhere/none", schedules=1,
                          ops_per_client=6)
    assert result.ok and result.history.meta["store"] == "sqlite"


def test_verify_checks_the_ledger_concurrently() -> None:
    from settled import _cmd_verify, _verify

    assert "ledger.concurrent" not in _verify.expected_unchecked(["ledger"])
    row = _verify.check_concurrent("ledger", 3)
    assert row["checked"] and row["ok"], row.get("failure")
    assert row["implementation"] == "ledger" and row["store"] == "SQLite"
    assert row["operations"]["controlled"] > 0 and row["operations"]["free"] > 0
    assert "NOT CHECKED" not in _cmd_verify._concurrent_cell(row)
