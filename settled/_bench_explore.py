"""The ``explore`` section of ``settled bench``: the explorer, against its oracle and SPIN.

The single query machine through the table explorer (the median of fresh searches), its
liveness check on the same graph, SPIN's ``pan`` on the Promela export, and the
``transitions`` oracle; then the query system, reduced by symmetry, and the floor under its
seconds in CPython, timed on the graph it built (``_system_floor``). Its own room: it
measures the model checkers, with no files and no implementation.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from settled._bench_sizes import FULL, Say, Sizes, _rate, _ratio
from settled.conformance._explore import explore, explore_via_transitions
from settled.conformance._explore._system import explore_system
from settled.conformance._explore._system_floor import search_floor
from settled.conformance._liveness import check_machine
from settled.model import Protocol, build_query_machine
from settled.model.systems import build_query_system

__all__ = ["bench_explore"]


def bench_explore(sizes: Sizes = FULL, say: Say = lambda _: None) -> dict[str, Any]:
    """The single query machine through the table and through the ``transitions`` oracle, then
    the query system whose queries share the task's version and the worker processes."""
    workers, epochs, versions = sizes.explore_bounds
    name = f"query(workers={workers}, max_epoch={epochs}, max_task_version={versions})"
    say(f"explore: {name} through the table (one core, invariants and step properties), "
        f"{sizes.single_runs} searches")
    runs: list[float] = []
    for _ in range(sizes.single_runs):
        p = build_query_machine(workers, epochs, versions)  # fresh: evaluators compiled anew
        start = time.perf_counter()
        table = explore(p, instances=1)
        runs.append(time.perf_counter() - start)
    table_s = statistics.median(runs)
    say(f"explore: {table.states:,} states in {table_s:.1f}s; progress under fairness on the "
        "same graph")
    start = time.perf_counter()
    live = check_machine(table)
    live_s = time.perf_counter() - start
    if not live.ok:
        raise RuntimeError(f"bench: the declared query machine is not live: {live.text()}")
    spin = _spin_figures(p, table, table_s, say)
    say(f"explore: liveness in {live_s:.1f}s; again through the transitions oracle")
    start = time.perf_counter()
    oracle = explore_via_transitions(p, instances=1, max_states=sizes.transitions_max_states)
    oracle_s = time.perf_counter() - start
    if oracle.complete and oracle.states != table.states:
        raise RuntimeError(f"bench: the oracle reached {oracle.states} states, the table "
                           f"{table.states}")
    rate, oracle_rate = _rate(table.states, table_s), _rate(oracle.states, oracle_s)
    queries, procs = sizes.system_size
    system = build_query_system(queries=queries, workers=procs)
    say(f"explore: {system.meaning}, shared version and processes, reduced by symmetry")
    start = time.perf_counter()
    result = explore_system(system, keep_graph=True)
    system_s = time.perf_counter() - start
    say(f"explore: {result.states:,} states in {system_s:.1f}s; the floor under it, on its graph")
    floor = search_floor(result.graph)
    result.graph = None
    return {"single_states": table.states, "single_states_per_second": rate,
            "vs_transitions_ratio": _ratio(rate, oracle_rate),
            "transitions_states_per_second": oracle_rate, "transitions_states": oracle.states,
            "transitions_complete": oracle.complete, "model": name,
            "single_seconds": round(table_s, 3), "single_runs": len(runs),
            "transitions_seconds": round(oracle_s, 2),
            "liveness_seconds": round(live_s, 2),
            "liveness_ratio_to_safety": round(live_s / table_s, 2) if table_s else 0.0,
            "liveness_properties": len(live.verdicts),
            "system": system.meaning, "system_states": result.states,
            "system_states_unreduced": result.states_unreduced,
            "system_states_per_second": _rate(result.states, system_s),
            "system_seconds": round(system_s, 4), "system_complete": result.complete,
            "system_findings": len(result.findings),
            "system_successor_entries": floor.entries,
            "system_floor_seconds": round(floor.seconds, 4),
            "system_seconds_over_floor": round(system_s / floor.seconds, 2)
            if floor.seconds else 0.0,
            "independent_product": result.independent_product, **spin}


def _spin_figures(p: Protocol, table: Any, table_s: float, say: Say) -> dict[str, Any]:
    """SPIN (``pan``, compiled from the Promela export) on the same machine in the same run:
    its search seconds against the explorer's, and both counts; a disagreement stops the
    bench. Without spin the figures are None and ``spin_skipped`` says why, in one line."""
    from settled.conformance._explore._promela import (
        SpinFailed,
        SpinUnavailable,
        compare,
        render_machine,
        run_spin,
    )

    try:
        say("explore: the same machine on SPIN (pan, from the Promela export)")
        # gcc -O0 (cc), as before tcc became the default: a pan of tcc's runs slower, and the
        # ratio would flatter us
        spin = run_spin(render_machine(p), trails=False, compiler="cc")
    except (SpinUnavailable, SpinFailed) as e:
        say(f"explore: SPIN figures SKIPPED: {e}")
        return {"spin_seconds": None, "spin_ratio": None, "spin_states": None,
                "spin_compile_seconds": None, "spin_compiler": None, "spin_skipped": str(e)}
    agreement = compare(table, spin)
    if not agreement.agree:
        raise RuntimeError(f"bench: SPIN and the explorer disagree: {agreement.disagreements}")
    return {"spin_seconds": round(spin.seconds, 3), "spin_states": spin.states,
            "spin_steps": spin.steps, "spin_compile_seconds": spin.compile_seconds,
            "spin_compiler": f"{spin.compiler} -O0",
            "spin_ratio": round(table_s / spin.seconds, 2) if spin.seconds else 0.0,
            "spin_skipped": None}
