"""The race catalogue's runner: concurrent campaigns by implementation, their replay and
their figures.

A campaign is identified by (implementation, seed, schedule, mode): the seed draws the
clients' calls, the schedule (with the seed) the controlled scheduler's choices. One
seed tries up to :data:`SCHEDULES` schedules and stops at the first failure, as a
model-checking run tries several interleavings of one scenario: the calls of a seed
stay the same, only who runs when changes. The saved file records the schedule that
failed, so :func:`replay` runs exactly that one again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from settled.conformance._bundled._concurrent_business import BusinessOrdersModel, run_business_campaign
from settled.conformance._bundled._concurrent_ledger import LedgerSessionModel, run_ledger_campaign
from settled.conformance._bundled._concurrent_query import QueryOpsModel, run_query_campaign
from settled.conformance._lockstep._concurrent import DEFAULT_MODE, CampaignResult
from settled.conformance._lockstep._linearize import CheckResult, Model, check, cut, load_history
from settled.conformance.mutants import Mutant
from settled.conformance.mutants.races import RACE_MUTANTS

__all__ = ["CAMPAIGNS", "IMPLEMENTATIONS", "SCHEDULES", "bench", "replay", "run_campaign",
           "run_race_mutant"]

SCHEDULES: Final = 3
CAMPAIGNS: Final[dict[str, Callable[..., CampaignResult]]] = {
    "query": run_query_campaign, "business": run_business_campaign,
    "ledger": run_ledger_campaign}
IMPLEMENTATIONS: Final = tuple(CAMPAIGNS)
_MACHINE: Final = {"query_concurrent": "query", "business_concurrent": "business",
                   "ledger_concurrent": "ledger"}


def _model(implementation: str, meta: dict[str, Any]) -> Model:
    if implementation == "ledger":
        return LedgerSessionModel(int(meta.get("progress", 0)))
    return QueryOpsModel() if implementation == "query" else BusinessOrdersModel()


def run_campaign(implementation: str, seed: int, *, schedules: int = SCHEDULES,
                 **options: Any) -> CampaignResult:
    """The first failing schedule of ``seed`` (0, 1, ... up to ``schedules``), else the last."""
    if implementation not in CAMPAIGNS:
        raise ValueError(f"no concurrent campaign for {implementation!r}; there are "
                         f"{', '.join(IMPLEMENTATIONS)}")
    run = CAMPAIGNS[implementation]
    result = None
    for schedule in range(max(1, schedules)):
        result = run(seed, schedule=schedule, **options)
        if not result.ok:
            break
    assert result is not None
    return result


def run_race_mutant(mutant: Mutant, seed: int, **options: Any) -> CampaignResult:
    """``mutant``'s campaign on ``seed``; it is killed when the result is not ok."""
    return run_campaign(_MACHINE[mutant.machine], seed, adapter_class=mutant.adapter_class,
                        mutant=mutant.name, **options)


def replay(path: Path, *, store: str | None = None) -> tuple[CheckResult, CampaignResult]:
    """(the saved history checked again, the same campaign run again): same seed, schedule,
    mode and mutant (from the race catalogue) as recorded. ValueError on a bad file."""
    history, _minimal, _data = load_history(path)
    meta = history.meta
    implementation = meta.get("implementation")
    if implementation not in CAMPAIGNS:
        raise ValueError(f"{str(path)!r}: no campaign for implementation {implementation!r}")
    options: dict[str, Any] = {"mode": meta["mode"], "store": store,
                               "ops_per_client": int(meta["ops_per_client"]),
                               "schedule": int(meta.get("schedule", 0))}
    if implementation == "query":
        options.update(clients=int(meta["clients"]), queries=int(meta["queries"]))
    if meta.get("mutant"):
        found = [m for m in RACE_MUTANTS if m.name == meta["mutant"]]
        if not found:
            raise ValueError(f"{str(path)!r}: no race mutant named {meta['mutant']!r}")
        options.update(adapter_class=found[0].adapter_class, mutant=found[0].name)
    saved = check(history, _model(str(implementation), meta), split=implementation == "query")
    again = CAMPAIGNS[str(implementation)](int(meta["seed"]), **options)
    return saved, again


def bench(quick: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """(figures for ``lockstep``, the ``linearizability`` section) of ``settled bench``.

    The race mutants' kills by mode on seeds 1-10 (1-3 when quick) are the measurement
    :data:`._concurrent.DEFAULT_MODE` was chosen by."""
    seeds = range(1, 4 if quick else 11)
    ops = runs = 0.0
    for implementation in IMPLEMENTATIONS:
        for seed in seeds:
            r = CAMPAIGNS[implementation](seed)
            ops += len(r.history.operations)
            runs += r.run_seconds
    # A 200-operation history of the bundled query worker (3 clients, 12 queries).
    big = run_query_campaign(1, queries=12, ops_per_client=120, shrink=False)
    history = cut(big.history.operations, 200)
    model = QueryOpsModel()
    rounds = 3 if quick else 10
    t0 = time.perf_counter()
    for _ in range(rounds):
        verdict = check(history, model)
    per_history = (time.perf_counter() - t0) / rounds
    # ... and one of the business store, not split (the orders share the stock).
    orders = cut(run_business_campaign(1, ops_per_client=67, shrink=False).history.operations, 200)
    t0 = time.perf_counter()
    for _ in range(rounds):
        unsplit = check(orders, BusinessOrdersModel(), split=False)
    per_unsplit = (time.perf_counter() - t0) / rounds
    kills: dict[str, Any] = {}
    for mode in ("controlled", "free"):
        figures: dict[str, Any] = {}
        for m in RACE_MUTANTS:
            t_mutant = time.perf_counter()
            killed, first = 0, None
            for seed in seeds:
                r = run_race_mutant(m, seed, mode=mode, shrink=False, schedules=1)
                if not r.ok:
                    killed += 1
                    if first is None:
                        first = time.perf_counter() - t_mutant
            figures[m.name] = {"killed": killed, "seeds": len(seeds),
                               "seconds": round(time.perf_counter() - t_mutant, 3),
                               "seconds_to_first_kill": None if first is None else round(first, 3)}
        kills[mode] = {"killed": sum(f["killed"] for f in figures.values()),
                       "runs": len(RACE_MUTANTS) * len(seeds), "mutants": figures}
    lockstep = {"concurrent_ops_per_second": round(ops / runs, 1) if runs else None}
    section = {"history_operations": len(history), "history_parts": verdict.parts,
               "history_linearizable": verdict.ok, "search_states": verdict.explored,
               "seconds_per_history": round(per_history, 4),
               "unsplit_history_operations": len(orders),
               "unsplit_history_linearizable": unsplit.ok,
               "unsplit_search_states": unsplit.explored,
               "seconds_per_unsplit_history": round(per_unsplit, 4),
               "default_mode": DEFAULT_MODE,
               # one schedule per seed here, so the two modes are compared like for like
               "race_mutant_kills_by_mode": kills, "seeds": [seeds.start, seeds.stop - 1]}
    return lockstep, section


def main(argv: list[str] | None = None) -> int:
    """``python -m settled.conformance._bundled._races run IMPLEMENTATION [--seed N] [--mode M]
    [--mutant NAME] [--store URL] [--out DIR]`` or ``… replay FILE [--store URL]``.

    Exit 0: linearizable; 1: a race found (or reproduced); 2: bad input; 3: a campaign
    that could not run (a client did not start, nothing was checked)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m settled.conformance._bundled._races")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="one concurrent campaign (up to SCHEDULES schedules)")
    run.add_argument("implementation", choices=IMPLEMENTATIONS)
    run.add_argument("--seed", type=int, default=1)
    run.add_argument("--mode", choices=("controlled", "free"), default=DEFAULT_MODE)
    run.add_argument("--mutant", help="a race mutant's name (conformance/mutants/races.py)")
    run.add_argument("--store", help="a postgresql:// URL (default: SQLite files)")
    run.add_argument("--out", type=Path, help="where a failing history is saved")
    again = sub.add_parser("replay", help="check a saved history and run its campaign again")
    again.add_argument("file", type=Path)
    again.add_argument("--store", help="a postgresql:// URL (default: SQLite files)")
    args = parser.parse_args(argv)
    try:
        if args.command == "replay":
            saved, result = replay(args.file, store=args.store)
            print(f"saved history: {saved.summary()}")
            print(result.report())
            if result.result.nothing_checked or not result.started:
                return 3
            return 1 if not (saved.ok and result.ok) else 0
        options: dict[str, Any] = {"mode": args.mode, "store": args.store, "out": args.out}
        if args.mutant:
            found = [m for m in RACE_MUTANTS if m.name == args.mutant]
            if not found:
                raise ValueError(f"no race mutant named {args.mutant!r}; there are "
                                 f"{', '.join(m.name for m in RACE_MUTANTS)}")
            if _MACHINE[found[0].machine] != args.implementation:
                raise ValueError(f"{args.mutant} is a mutant of {_MACHINE[found[0].machine]}")
            result = run_race_mutant(found[0], args.seed, **options)
        else:
            result = run_campaign(args.implementation, args.seed, **options)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    print(result.report())
    if result.result.nothing_checked or not result.started:
        return 3
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
