"""``settled mutants``: run the bug catalogue against the lockstep kit.

Every mutant (a small, plausible bug in the bundled implementation, named
after the rule it breaks) must be killed, and the unmodified implementation
must pass. Exit 0 only then; 1 when a mutant survived or the baseline
failed; 2 when the call was malformed (unknown profile or mutant name).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from settled._output import emit
from settled._paths import OutputPathError, writable_dir
from settled.conformance._profiles import PROFILES, profile
from settled.conformance.mutants import rule_coverage
from settled.conformance.mutants._run import MutantResult, MutantsReport, run_mutants, select_mutants

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
out = Console(highlight=False, soft_wrap=True)


def mutants(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON (no table, no "
                                          "progress line).")] = False,
    profile_name: Annotated[str, typer.Option("--profile", help=f"Hypothesis profile: "
                                              f"{', '.join(PROFILES)}.")] = "ci",
    seed: Annotated[int | None, typer.Option("--seed", help="Seed every campaign with N, for a "
                                             "reproducible run.")] = None,
    only: Annotated[list[str] | None, typer.Option("--only", help="Run only the mutant NAME "
                                                   "(repeatable); the baseline then covers its "
                                                   "machine only.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print each counterexample's "
                                          "step list.")] = False,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Folder for counterexamples "
                                                 "(default ./settled-counterexamples).")] = None,
    no_tour: Annotated[bool, typer.Option("--no-tour", help="Switch the directed tour off: "
                                          "the random phase alone hunts each mutant (the JSON's "
                                          "random_only_kill_rate).")] = False,
    model: Annotated[bool, typer.Option("--model", help="Check the MODEL mutants instead (a "
                                        "declared machine with one change), each with our "
                                        "explorer and SPIN; --only names them.")] = False,
) -> None:
    """Run every mutant of the implementation through the lockstep kit; all must be killed."""
    if model:
        if profile_name != "ci" or seed is not None or out_dir is not None or no_tour:
            err.print("settled mutants --model: --profile, --seed, --out and --no-tour set the "
                      "lockstep kit's campaigns; the model mutants take none of them")
            raise typer.Exit(2)
        from settled._cmd_model_mutants import run_model_mutants

        run_model_mutants(as_json, only)
        return
    try:
        settings = profile(profile_name)
        if only:
            select_mutants(only)  # fail on a typo before minutes of baseline
        if out_dir is not None:
            writable_dir(out_dir)
    except (ValueError, OutputPathError) as exc:
        err.print(f"settled mutants: {exc}")
        raise typer.Exit(2) from None
    start = time.perf_counter()
    if as_json:
        report = run_mutants(settings, seed=seed, names=only or None, out=out_dir,
                             tour=not no_tour)
    else:
        with err.status("starting…") as status:
            report = run_mutants(settings, seed=seed, names=only or None, out=out_dir,
                                 tour=not no_tour, progress=lambda n, total, what: status.update(
                                     f"[{n}/{total}] {what}"))
    elapsed = time.perf_counter() - start
    if as_json:
        emit(report.to_json(), 0 if report.ok else 1)
    else:
        out.print(_table(report))
    _details(report, verbose, err if as_json else out)
    if not as_json:
        out.print(_summary(report, elapsed, profile_name, seed))
    raise typer.Exit(0 if report.ok else 1)


def _table(report: MutantsReport) -> Table:
    table = Table("mutant", "rule", "killed", "by", "seconds", "steps", title="settled mutants")
    for m in report.mutants:
        mark = "[green]✓[/green]" if m.killed else "[red]✗[/red]"
        table.add_row(escape(m.name), m.rule, mark, m.killed_by or "-", f"{m.seconds:.2f}",
                      "-" if m.steps is None else str(len(m.steps)))
    return table


def _details(report: MutantsReport, verbose: bool, console: Console) -> None:
    """Baseline failures always; with --verbose every counterexample and every survivor."""
    for b in report.baseline:
        if not b.passed:
            console.print(f"[red]baseline {escape(b.machine)} failed[/red] (the unmodified "
                          f"implementation):\n{escape(b.failure or '')}")
    if verbose:
        for m in report.mutants:
            console.print(escape(_mutant_detail(m)))


def _mutant_detail(m: MutantResult) -> str:
    if m.killed:
        where = f"\n  ITF: {m.itf_path}" if m.itf_path else ""
        return f"{m.failure}{where}"
    if m.failure:
        return f"{m.name}: not killed, the kit itself failed:\n{m.failure}"
    return f"{m.name}: survived {m.seconds:.1f}s of campaign; no counterexample"


def _summary(report: MutantsReport, elapsed: float, profile_name: str, seed: int | None) -> str:
    baseline = ("baseline passed" if report.baseline_passed
                else "[red]baseline FAILED[/red]")
    killed = f"{report.killed}/{report.total} mutants killed"
    if report.killed < report.total:
        survivors = ", ".join(m.name for m in report.mutants if not m.killed)
        killed = f"[red]{killed}[/red] (survived: {escape(survivors)})"
    run = (f"profile {profile_name}" + ("" if seed is None else f", seed {seed}")
           + ("" if report.tour else ", tour off: random phase only"))
    rules = rule_coverage()
    covered = (f"catalogue covers {len(rules.covered)}/{rules.total} breakable rules "
               f"(without a mutant: {', '.join(rules.missing) or 'none'}; "
               f"excluded: {', '.join(rules.excluded) or 'none'})")
    return f"{killed}, {baseline} ({run}, {elapsed:.1f}s)\n{covered}"


def register(app: typer.Typer) -> None:
    app.command()(mutants)
