"""``settled verify``: the one command a reviewer runs."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from settled import _diagrams
from settled._stores import StoreError, chosen, resolved_store
from settled._verify import SEED, verify
from settled.conformance._profiles import PROFILES

# Plain text: a finding names guards in brackets ("[fresh_lease[holds a lease]]"), which
# rich would read as markup and drop.
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def _mark(ok: bool) -> str:
    return "[green]✓[/green]" if ok else "[red]✗[/red]"


def summary(result: dict[str, Any]) -> Table:
    table = Table(title="settled verify")
    for col in ("machine", "static", "explore", "system", "lockstep", "trace check",
                "system lockstep", "ok"):
        table.add_column(col)
    for name, m in result["machines"].items():
        ex, ls, tc = m["explore"], m["lockstep"], m["trace_check"]
        table.add_row(
            name, _mark(not any(m["static"].values())),
            f"{_mark(ex['ok'])} {ex['states']:,} states, {ex['seconds']}s",
            _system_cell(m["system"]),
            f"{_mark(ls['ok'])} {ls.get('examples', 0)} runs, {ls.get('steps', 0):,} steps, "
            f"{_fired(ls)}, {ls.get('seconds', 0)}s"
            + (" on PostgreSQL" if str(ls.get("store", "")).startswith("PostgreSQL") else ""),
            f"{_mark(tc['ok'])} {tc['events']:,} events",
            _system_lockstep_cell(m.get("system_lockstep", {})), _mark(m["ok"]))
    views = result["views"]
    table.add_row("views", "", "", "", "", "", "",
                  "skipped" if views.get("skipped") else _mark(views["ok"]))
    return table


def _fired(ls: dict[str, Any]) -> str:
    """Edges and guard alternatives fired of those declared."""
    edges, cases = ls.get("edges", 0), ls.get("guard_alternatives", 0)
    refusals = ls.get("refusals", 0) - len(ls.get("refusals_never_alone", []))
    return (f"edges {edges - len(ls.get('unfired_edges', []))}/{edges}, guard alternatives "
            f"{cases - len(ls.get('unfired_guard_alternatives', []))}/{cases}, refusals "
            f"{refusals - len(ls.get('unprobed_refusals', []))}/{refusals}")


def _system_cell(sy: dict[str, Any]) -> str:
    if "states" not in sy:
        return _mark(False)
    return (f"{_mark(sy['ok'])} {sy['states']:,} states ({sy['states_unreduced']:,} unreduced), "
            f"{sy['seconds']}s")


def _system_lockstep_cell(sl: dict[str, Any]) -> str:
    if not sl.get("checked"):
        return "[yellow]NOT CHECKED[/yellow]"
    tc = sl["trace_check"]
    return (f"{_mark(sl['ok'])} {sl['examples']} runs, {sl['steps']:,} steps, fired "
            f"{sl['fired']}/{sl['declared']}, {tc['events']:,} events trace-checked, "
            f"{sl['seconds']}s")


def details(result: dict[str, Any]) -> None:
    for name, m in result["machines"].items():
        for key, value in m["static"].items():
            if value:
                err.print(f"{name}: static {key}: {value}")
        if m["explore"]["findings"]:
            err.print(f"{name}: explorer findings {m['explore']['findings']}; run "
                      f"'settled explore {name}' for the counterexamples")
        if m["system"].get("findings"):
            err.print(f"{name}: system findings {m['system']['findings']}; run "
                      f"'settled explore {name} --queries 2' for the counterexamples")
        sl = m.get("system_lockstep", {})
        if not sl.get("checked", True):
            err.print(f"{name}: system lockstep NOT CHECKED: {sl.get('why')}")
        elif sl.get("failure") or sl.get("trace_check", {}).get("failure"):
            err.print(f"{name}: system lockstep: {sl.get('failure') or sl['trace_check']['failure']}")
        if sl.get("checked") and not sl.get("failure"):  # a failed run stops early
            for label in sl.get("unfired", []):
                err.print(f"{name}: the system campaign never fired {label}")
        ls = m["lockstep"]
        if ls.get("failure"):
            err.print(f"{name}: {ls['failure']}")
        if ls.get("unfired_transitions"):
            err.print(f"{name}: the campaign never fired {ls['unfired_transitions']}")
        if ls.get("not_checked"):
            err.print(f"{name}: NOT CHECKED: {', '.join(ls['not_checked'])} (the adapter declares "
                      "them unobservable; the campaign never compared them with the model)")
        for edge in ls.get("unfired_edges", []):
            err.print(f"{name}: the campaign never fired the edge {edge}")
        for case in ls.get("unfired_guard_alternatives", []):
            err.print(f"{name}: the campaign never fired the guard alternative {case}")
        for refusal in ls.get("unprobed_refusals", []):
            err.print(f"{name}: the campaign never asked for a refusal by {refusal} alone")
        for refusal in ls.get("refusals_never_alone", []):
            err.print(f"{name}: NOT PROBED ALONE: {refusal} (in no reachable state does it alone "
                      "refuse the trigger: another guard fails too, or another transition of the "
                      "trigger takes the step)")
        crash = m.get("crash", {})
        for failure in crash.get("failures", []):
            err.print(f"{name}: crash sweep: {failure}")
        for boundary in crash.get("never_crashed", []):
            err.print(f"{name}: the crash sweep never crashed {boundary}")
    for name in result["views"].get("stale", []):
        what = "stale" if (Path(result.get("root", ".")) / "diagrams" / name).exists() else "missing"
        err.print(f"{what} diagrams/{name}: run 'settled verify --write' (or settled diagrams / "
                  "settled spec) and commit it")
    if result["views"].get("skipped"):
        err.print(f"views: skipped: {result['views']['skipped']}")


def verify_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    write: Annotated[bool, typer.Option("--write", help="Regenerate diagrams, spec and coverage "
                                                         "instead of checking them.")] = False,
    root: Annotated[Path, typer.Option(help="Project folder holding diagrams/ and tests/.")] = Path("."),
    profile: Annotated[str, typer.Option(help=f"Lockstep profile: {', '.join(PROFILES)}.")] = "ci",
    seed: Annotated[int, typer.Option(help="Lockstep seed.")] = SEED,
    store: Annotated[str | None, typer.Option(
        "--store", help="Where the lockstep campaigns keep their state: 'sqlite' (files, the "
                        "default), a postgresql:// URL, or 'temp-postgres' (a throwaway cluster). "
                        "Default: $SETTLED_STORE, else sqlite.")] = None,
) -> None:
    """Static checks, exhaustive exploration, lockstep campaign, trace check and drift check."""
    if profile not in PROFILES:
        err.print(f"unknown profile {profile!r}; choose one of {sorted(PROFILES)}")
        raise typer.Exit(2)
    if write:
        _check_writable(root / "diagrams")
    say = (lambda line: None) if as_json else (lambda line: err.print(f"… {line}"))
    try:
        with resolved_store(chosen(store)) as url:
            result = verify(root, write=write, profile_name=profile, seed=seed, say=say, store=url)
    except StoreError as e:
        err.print(str(e))
        raise typer.Exit(2) from None
    except _diagrams.OutputError as e:
        err.print(str(e))
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps(result, sort_keys=True))
    else:
        details(result)
        Console(highlight=False).print(summary(result))
        crashed = result.get("durable_boundaries", {})
        Console(highlight=False).print(f"durable boundaries crashed: {crashed.get('crashed', 0)} "
                                       f"of {crashed.get('boundaries', 0)}")
        Console(highlight=False).print(f"{'OK' if result['ok'] else 'FAILED'} in "
                                       f"{result['seconds']}s")
    raise typer.Exit(0 if result["ok"] else 1)


def _check_writable(directory: Path) -> None:
    """--write must be able to write its files; say so before a minute of work, not after."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".settled-write-check-"):
            pass
    except OSError as e:
        err.print(f"cannot write into {directory}: {e.strerror or e}; choose a writable --root")
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    app.command("verify")(verify_command)
