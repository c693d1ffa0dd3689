"""``settled explore``: exhaustive model checking of one declared machine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from settled._bounds import DEFAULTS, Bounds, MaxEpoch, MaxTaskVersion
from settled._output import emit
from settled._paths import OutputPathError, writable_dir, writable_file
from settled.conformance._explore import ExploreResult, explore
from settled.conformance._explore._system import explore_system
from settled.conformance._itf import write_itf
from settled.conformance._liveness import check_machine, check_system, system_classifier
from settled.model import MACHINES, Protocol, build_query_machine
from settled.model.systems import (
    SYSTEMS,
)

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def machine_for(name: str, workers: int | None, bounds: Bounds = DEFAULTS) -> Protocol:
    """The named machine at the given workers and bounds; a clear error for an unknown name."""
    if name not in MACHINES:
        err.print(f"unknown model {name!r}; choose one of {sorted(MACHINES)}")
        raise typer.Exit(2)
    bounds.check(name)
    if name == "query" and (workers is not None or bounds.kwargs()):
        if workers is not None and workers < 1:
            err.print(f"--workers must be at least 1, got {workers}")
            raise typer.Exit(2)
        return build_query_machine(workers=2 if workers is None else workers, **bounds.kwargs())
    return MACHINES[name]


class Progress:
    """A live line (states, frontier, rate) for long runs; silent when not wanted."""

    def __init__(self, enabled: bool) -> None:
        self.live = Live(Text(""), console=err, transient=True) if enabled else None

    def __enter__(self) -> Progress:
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.live.__exit__(None, None, None)

    def __call__(self, states: int, frontier: int, seconds: float) -> None:
        if self.live:
            rate = states / seconds if seconds else 0.0
            self.live.update(Text(f"explored {states:,} states, frontier {frontier:,}, "
                                  f"{rate:,.0f} states/s"))


def report_text(result: ExploreResult) -> None:
    out = Console(highlight=False, soft_wrap=True)
    out.print(f"{result.model}: {result.states:,} states, {result.edges:,} edges in "
              f"{result.seconds:.2f}s ({result.states_per_second:,.0f} states/s), "
              f"bounds {result.bounds}")
    for f in result.findings:
        rules = ", ".join(f.rules) or "-"
        out.print(f"[bold]{f.kind}[/bold] {escape(f.name)} ({rules}): {escape(f.text)}")
        if f.counterexample is not None:
            out.print(escape(f.counterexample.steps_text()))
    lockstep_only_text(out, result.lockstep_only)
    if not result.complete:
        out.print(f"INCOMPLETE: stopped at {result.states:,} states (--max-states); the rest of "
                  "the space was not explored")
    else:
        out.print("no violations, deadlocks, traps, unreached states or unfired transitions"
                  if result.ok else f"{len(result.findings)} finding(s)")


def _bounds_text(bounds: Bounds, model: str, instances: int) -> None:
    """The model's bounds, said when the command line set one."""
    line = bounds.line(model, instances)
    if line is not None:
        Console(highlight=False, soft_wrap=True, markup=False).print(line)


def lockstep_only_text(out: Console, props: list[dict[str, object]]) -> None:
    """Properties exploring cannot fail, said as such rather than counted as passing."""
    for prop in props:
        reads = ", ".join(str(r) for r in prop["reads"])  # type: ignore[attr-defined]
        out.print(f"not checked here: {prop['kind']} {escape(str(prop['name']))} is checked by "
                  f"lockstep only (no declared effect writes {reads})")


def explore_command(
    model: Annotated[str, typer.Argument(help=f"The machine: {', '.join(MACHINES)}.")],
    queries: Annotated[int, typer.Option("--queries", "--instances", min=1,
                                         help="Instances of the declared system (sharing state).")] = 1,
    workers: Annotated[int | None, typer.Option(help="Workers (query machine).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    itf: Annotated[Path | None, typer.Option(help="Write each counterexample as ITF here.")] = None,
    graph: Annotated[Path | None, typer.Option(help="Write the state graph as JSON here.")] = None,
    max_states: Annotated[int | None, typer.Option(min=1, help="Stop after this many states.")] = None,
    engine: Annotated[str, typer.Option(
        help="ours, or spin: SPIN explores the Promela export too, and its states, steps and "
             "findings are set beside ours (exit 1 when they differ).")] = "ours",
    cores: Annotated[int | None, typer.Option(
        help="--engine spin: SPIN's multi-core search on N cores (pan -DNCORE=N).")] = None,
    bitstate: Annotated[bool, typer.Option(
        "--bitstate", help="--engine spin: SPIN's bitstate hashing; its counts are lower "
                           "bounds, with SPIN's hash factor and a coverage estimate.")] = False,
    stock: Annotated[int | None, typer.Option(
        help="Units of stock (the approval system, with --queries N > 1).")] = None,
    max_epoch: MaxEpoch = None,
    max_task_version: MaxTaskVersion = None,
) -> None:
    """Explore every reachable state; exit 0 only when nothing is found.

    With ``--queries N`` (N > 1) the N instances form the declared system: they share the
    task's version, the session and the worker processes (query), the stock (approval) or
    the run and read permission (ledger),
    and the search is reduced by symmetry; the report gives both the reduced and the
    unreduced state counts."""
    _check_bounds(queries, workers)
    bounds = Bounds(max_epoch, max_task_version).check(model)
    if engine not in ("ours", "spin"):
        err.print(f"--engine {engine!r}: choose ours or spin")
        raise typer.Exit(2)
    if engine != "spin" and (cores is not None or bitstate):
        err.print(f"{'--cores' if cores is not None else '--bitstate'} sets SPIN's search; "
                  "add --engine spin")
        raise typer.Exit(2)
    if engine == "spin":
        if bitstate and cores is not None and cores > 1:
            err.print(f"--cores {cores} with --bitstate: SPIN's multi-core bitstate search "
                      "stores a state twice when two cores reach it together (18,057 stored of "
                      "the query machine's 18,054 here), so its counts bound nothing; use one "
                      "of the two")
            raise typer.Exit(2)
        from settled._cmd_spin import _explore_spin

        _explore_spin(model, queries, workers, as_json, itf, graph, max_states,
                      _check_cores(cores), bitstate, stock, bounds)
        return
    _check_usage(model, queries, workers, graph)
    _check_outputs(itf, graph)
    if stock is not None and (model != "approval" or queries < 2 or stock < 0):
        err.print(f"--stock {stock}: only the approval system (--queries N > 1) has stock "
                  "(0 or more)")
        raise typer.Exit(2)
    memory = _check_memory(model, queries, workers, max_states, bounds)
    if queries > 1:
        _explore_system(model, queries, workers, as_json, itf, graph, max_states, memory, stock,
                        bounds)
        return
    protocol = machine_for(model, workers, bounds)
    with Progress(not as_json) as progress:
        result = explore(protocol, instances=queries, max_states=max_states, progress=progress)
    live = check_machine(result)  # the progress properties, on the same graph
    if itf is not None:
        result.write_itf(itf)
        live.write_itf(itf)
    if graph is not None:
        graph.write_text(json.dumps(result.graph_json(), sort_keys=True) + "\n", encoding="utf-8")
    if as_json:
        emit({**result.to_json(), "progress": live.to_json(), "memory_estimate": memory,
              "model_bounds": bounds.effective(model, 1)},
             exit_code(bool(result.findings or live.violated), result.complete))
    else:
        report_text(result)
        _bounds_text(bounds, model, 1)
        Console(highlight=False, soft_wrap=True, markup=False).print(live.text())
    raise typer.Exit(exit_code(bool(result.findings or live.violated), result.complete))


# The reachable space grows about as a product in the number of queries (each adds a copy of
# a machine of thousands of configurations) and of workers; past these it no longer fits in
# memory on a laptop, so they are refused up front rather than discovered by the OOM killer.
MAX_QUERIES = 3
MAX_WORKERS = 4
INCOMPLETE = 3


def exit_code(found: bool, complete: bool) -> int:
    """1 a finding (even in part of the space), else 3 stopped before the whole space was
    seen, else 0."""
    if found:
        return 1
    return 0 if complete else INCOMPLETE


def _check_usage(model: str, queries: int, workers: int | None, graph: Path | None) -> None:
    """Options that do not go together, refused before any estimate or work."""
    if model not in MACHINES:
        err.print(f"unknown model {model!r}; choose one of {sorted(MACHINES)}")
        raise typer.Exit(2)
    if workers is not None and model != "query":
        err.print(f"--workers {workers}: only the query machine has worker processes; drop "
                  "--workers")
        raise typer.Exit(2)
    if queries > 1 and graph is not None:
        err.print("--graph writes the state graph of one machine; drop --queries or --graph")
        raise typer.Exit(2)


def _check_bounds(queries: int, workers: int | None) -> None:
    if workers is not None and workers < 1:
        err.print(f"--workers must be at least 1, got {workers}")
        raise typer.Exit(2)
    if queries > MAX_QUERIES:
        err.print(f"--queries {queries} is over the maximum {MAX_QUERIES}: each query multiplies "
                  "the space by thousands of states (two queries with two workers are already "
                  "8.2 million states under symmetry and 10 GB); use at most 3")
        raise typer.Exit(2)
    if workers is not None and workers > MAX_WORKERS:
        err.print(f"--workers {workers} is over the maximum {MAX_WORKERS}: each worker multiplies "
                  "the lease space; use at most 4")
        raise typer.Exit(2)


def _check_cores(cores: int | None) -> int:
    """``--cores``: at least 1, at most this machine's processors."""
    import os

    if cores is None:
        return 1
    if cores < 1:
        err.print(f"--cores must be at least 1, got {cores}")
        raise typer.Exit(2)
    have = os.cpu_count() or 1
    if cores > have:
        err.print(f"--cores {cores} is more than this machine's {have} processor(s); use at "
                  f"most {have}")
        raise typer.Exit(2)
    return cores


def _check_memory(model: str, queries: int, workers: int | None,
                  max_states: int | None, bounds: Bounds = DEFAULTS) -> dict[str, object] | None:
    """Say how much memory the run will take; refuse one that cannot fit (exit 2), and, at
    bounds of the query model's own, one that nothing measured shows to fit, unless
    ``--max-states`` caps it."""
    from settled._memory import estimate

    if model not in MACHINES:
        return None  # the unknown name is reported by the command itself
    guess = estimate(model, queries, workers, max_states,
                     bounds=(bounds.max_epoch, bounds.max_task_version))
    what = f"{model}" + (f" with --queries {queries}" if queries > 1 else "") + (
        f" --workers {workers}" if workers is not None else "") + (
        f" {bounds.options()}" if bounds.kwargs() else "")
    if guess is None and bounds.kwargs():
        err.print(f"{what}: no measured run at these bounds and none to bound it (one above "
                  "its default, one below); cap the run with --max-states N")
        raise typer.Exit(2)
    if guess is None:
        err.print(f"estimate: none, no measured run of {model} with {queries} instance(s) "
                  "(see settled/_memory.py); --max-states N bounds the run")
        return None
    if guess.cannot_fit:
        err.print(f"{what} needs {guess.text()}; lower --queries or --workers, or stop early "
                  "with --max-states N")
        raise typer.Exit(2)
    if not guess.fits:
        err.print(f"{what}: nothing measured shows it fits (at the default bounds: "
                  f"{guess.text()}); cap the run with --max-states N")
        raise typer.Exit(2)
    err.print(f"estimate: {guess.text()}")
    return guess.to_json()


def _check_outputs(itf: Path | None, graph: Path | None) -> None:
    try:
        if itf is not None:
            writable_dir(itf)
        if graph is not None:
            writable_file(graph)
    except OutputPathError as e:
        err.print(str(e))
        raise typer.Exit(2) from None


def _explore_system(model: str, queries: int, workers: int | None, as_json: bool,
                    itf: Path | None, graph: Path | None, max_states: int | None,
                    memory: dict[str, object] | None = None, stock: int | None = None,
                    bounds: Bounds = DEFAULTS) -> None:
    if model not in SYSTEMS:
        err.print(f"unknown model {model!r}; choose one of {sorted(SYSTEMS)}")
        raise typer.Exit(2)
    if graph is not None:
        err.print("--graph writes the state graph of one machine; drop --queries or --graph")
        raise typer.Exit(2)
    from settled._cmd_spin_system import system_for

    system = system_for(model, queries, workers, stock, bounds)
    from settled.model.progress import liveness_of

    declared = liveness_of(system)
    with Progress(not as_json) as progress:
        result = explore_system(system, max_states=max_states, progress=progress,
                                classify=system_classifier(declared))
    live = check_system(result, declared)
    if itf is not None:
        itf.mkdir(exist_ok=True)  # its parent was checked by _check_outputs
        live.write_itf(itf)
        for f in result.findings:
            if f.counterexample is not None:
                meta = {"property": f.name, "kind": f.kind, "rules": list(f.rules)}
                write_itf(itf / f.file_name, f.counterexample.to_itf(meta))
    if as_json:
        emit({**result.to_json(), "progress": live.to_json(), "memory_estimate": memory,
              "model_bounds": bounds.effective(model, queries)},
             exit_code(bool(result.findings or live.violated), result.complete))
    else:
        _bounds_text(bounds, model, queries)
        out = Console(highlight=False, soft_wrap=True)
        out.print(f"{result.system} ({system.meaning}): {result.states:,} states explored, "
                  f"standing for {result.states_unreduced:,} without symmetry reduction; "
                  f"{result.edges:,} edges in {result.seconds:.2f}s "
                  f"({result.states_per_second:,.0f} states/s)")
        for f in result.findings:
            out.print(f"[bold]{f.kind}[/bold] {escape(f.name)} ({', '.join(f.rules) or '-'}): "
                      f"{escape(f.text)}")
            if f.counterexample is not None:
                out.print(escape(f.counterexample.steps_text()))
        lockstep_only_text(out, result.lockstep_only)
        if not result.complete:
            out.print(f"INCOMPLETE: stopped at {result.states:,} states (--max-states)")
        else:
            out.print("no violations, deadlocks, traps, unreached states or unfired transitions"
                      if result.ok else f"{len(result.findings)} finding(s)")
        Console(highlight=False, soft_wrap=True, markup=False).print(live.text())
    raise typer.Exit(exit_code(bool(result.findings or live.violated), result.complete))


def register(app: typer.Typer) -> None:
    app.command("explore")(explore_command)
