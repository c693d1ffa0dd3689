"""The sizes of a ``settled bench`` run, and the arithmetic every section reports with.

Each section of the bench (:mod:`._bench_impl`, :mod:`._bench_lockstep`,
:mod:`._bench_trace`, :mod:`._bench_explore`) takes a :class:`Sizes` and rounds its rates
and ratios the same way; this room holds what they share, so that none of them imports
another, nor the command's runner (:mod:`._bench`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from settled.conformance._lockstep import MIN_STEPS

__all__ = ["FULL", "QUICK", "SEED", "Say", "Sizes"]

Say = Callable[[str], None]
SEED = 20260203


@dataclass(frozen=True, slots=True)
class Sizes:
    rounds: int  # interleaved rounds of the impl and lockstep comparisons
    queries_per_round: int  # one-worker queries settled per round
    raw_commits_per_round: int
    race_queries: int  # queued up front for the four worker processes
    lockstep_examples: int
    lockstep_steps: int
    trace_events: int  # at least this many; generation stops at an instance boundary
    explore_bounds: tuple[int, int, int]  # build_query_machine(workers, max_epoch, max_task_version)
    system_size: tuple[int, int]  # build_query_system(queries, workers)
    transitions_max_states: int | None  # None: the oracle side explores the whole space too
    approval_seconds: float
    ledger_seconds: float = 4.0
    # searches of the single machine, each from a fresh declaration (its evaluators compiled
    # anew): its seconds are their median, since one search is a fraction of a second
    single_runs: int = 5


# A few minutes on a shared 2-core machine. The single machine is the default
# one (18,054 states) and its oracle run fits whole, so the ratio compares two
# complete runs. The system is two queries of one task with two worker
# processes, explored completely.
FULL = Sizes(rounds=3, queries_per_round=40, raw_commits_per_round=1500, race_queries=200,
             lockstep_examples=30, lockstep_steps=50, trace_events=1_000_000,
             explore_bounds=(2, 3, 3), system_size=(2, 2), transitions_max_states=None,
             approval_seconds=4.0)
QUICK = Sizes(rounds=1, queries_per_round=4, raw_commits_per_round=200, race_queries=8,
              lockstep_examples=3, lockstep_steps=MIN_STEPS + 5, trace_events=20_000,
              explore_bounds=(1, 2, 2), system_size=(1, 1), transitions_max_states=None,
              approval_seconds=0.4, ledger_seconds=0.4, single_runs=1)


def _rate(n: float, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else 0.0


def _ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b > 0 else 0.0
