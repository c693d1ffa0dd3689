"""``settled verify``: the one command a reviewer runs."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from settled import _diagrams
from settled._output import emit
from settled._paths import OutputPathError, writable_dir
from settled._stores import StoreError, chosen, resolved_store
from settled._verify import SEED, Watch, check_allowances, phases, verify
from settled.conformance._profiles import PROFILES
from settled.model import MACHINES

# Plain text: a finding names guards in brackets ("[fresh_lease[holds a lease]]"), which
# rich would read as markup and drop.
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def _mark(ok: bool) -> str:
    return "[green]✓[/green]" if ok else "[red]✗[/red]"


def summary(result: dict[str, Any]) -> Table:
    """One column per machine, one row per check: 80 columns hold it (a CI log), a cell
    wraps to two lines at most."""
    machines = result["machines"]
    table = Table(title="settled verify", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                  caption=_caption(result), caption_justify="left")
    table.add_column("check", no_wrap=True)
    for name in machines:
        table.add_column(name)
    for label, cell in ROWS:
        table.add_row(label, *(cell(m) for m in machines.values()))
    return table


def _secs(value: Any) -> str:
    return f"{float(value or 0):.1f}"


def _lockstep_cell(ls: dict[str, Any]) -> str:
    return f"{_mark(ls['ok'])} {ls.get('examples', 0):,} runs"


def _fraction(ls: dict[str, Any], total: str, missed: str) -> str:
    declared = ls.get(total, 0)
    return f"{declared - len(ls.get(missed, []))}/{declared}"


def _progress_cell(m: dict[str, Any]) -> str:
    """Progress properties that hold of those declared (under the declared fairness), for
    the machine and its system."""
    cells = []
    for part in (m["explore"], m["system"]):
        props = part.get("progress", {}).get("properties", {})
        held = sum(v in ("holds", "stuck_at_bound") for v in props.values())
        cells.append(f"{held}/{len(props)}" if props else "NOT CHECKED")
    ok = all(part.get("progress", {}).get("ok", False) for part in (m["explore"], m["system"]))
    return f"{_mark(ok)} {cells[0]}, system {cells[1]}"


ROWS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("static", lambda m: _mark(not any(m["static"].values()))),
    ("explore", lambda m: f"{_mark(m['explore']['ok'])} {m['explore']['states']:,} states"),
    ("system", lambda m: _system_cell(m["system"])),
    ("  progress", _progress_cell),
    ("lockstep", lambda m: _lockstep_cell(m["lockstep"])),
    ("  steps", lambda m: f"{m['lockstep'].get('steps', 0):,}"),
    ("  edges", lambda m: _fraction(m["lockstep"], "edges", "unfired_edges")),
    ("  alternatives", lambda m: _fraction(m["lockstep"], "guard_alternatives",
                                           "unfired_guard_alternatives")),
    ("  refusals", lambda m: _fraction(m["lockstep"], "refusals", "unprobed_refusals")),
    ("  values", lambda m: _fraction(m["lockstep"], "parameter_values",
                                     "unfired_parameter_values")),
    ("  quiescence", lambda m: _quiescence_cell(m["lockstep"].get("quiescence", {}))),
    ("trace check", lambda m: f"{_mark(m['trace_check']['ok'])} "
                              f"{m['trace_check'].get('events', 0):,} events"),
    ("system lockstep", lambda m: _system_lockstep_cell(m.get("system_lockstep", {}))),
    ("  transitions", lambda m: (f"{m['system_lockstep']['fired']}/"
                                 f"{m['system_lockstep']['declared']}"
                                 if m.get("system_lockstep", {}).get("checked") else "")),
    ("  interactions", lambda m: _interactions_cell(m.get("system_lockstep", {}))),
    ("concurrent", lambda m: _concurrent_cell(m.get("concurrent", {}))),
    ("crash sweep", lambda m: f"{_mark(m.get('crash', {}).get('ok', False))} "
                              f"{m.get('crash', {}).get('crashed', 0)}/"
                              f"{m.get('crash', {}).get('boundaries', 0)}"),
    ("unchecked", lambda m: _unchecked_cell(m.get("unchecked", {}))),
    ("seconds", lambda m: _secs(sum(float(m.get(part, {}).get("seconds") or 0) for part in
                                    ("explore", "system", "lockstep", "system_lockstep",
                                     "concurrent")))),
    ("verdict", lambda m: "[green]✓ ok[/green]" if m["ok"] else "[red]✗ FAILED[/red]"),
]


def _unchecked_cell(un: dict[str, Any]) -> str:
    """Nothing left unchecked, or how many things were (refused: fails the run; allowed: named
    by --allow-unchecked and printed)."""
    refused, allowed = un.get("refused", []), un.get("allowed", [])
    if refused:
        return f"[red]✗ {len(refused)} NOT CHECKED[/red]"
    if allowed:
        return f"[yellow]✓ {len(allowed)} allowed[/yellow]"
    return "[green]✓ none[/green]"


def _caption(result: dict[str, Any]) -> str:
    views = result["views"]
    done = ("written" if "written" in views else
            f"{len(views.get('stale', []))} stale or missing" if views.get("stale") else "checked")
    stores = sorted({str(m["lockstep"].get("store")) for m in result["machines"].values()
                     if m["lockstep"].get("store")})
    return (f"views ({views.get('source', 'checkout')}): {_mark(views['ok'])} {done}; "
            f"lockstep on {escape(', '.join(stores) or 'no store')}; edges, alternatives, "
            "refusals, transitions: fired of those declared; seconds: the machine's "
            "explorations and campaigns")


def _system_cell(sy: dict[str, Any]) -> str:
    if "states" not in sy:
        return _mark(False)
    return f"{_mark(sy['ok'])} {sy['states']:,} states"



def _interactions_cell(sl: dict[str, Any]) -> str:
    """Cross-instance stories performed / reachable, and whether that set is the whole one."""
    stories = sl.get("interactions")
    if not sl.get("checked") or not stories:
        return ""
    partial = "" if stories["complete"] else " (bounded search: partial)"
    return (f"{_mark(not stories['missing'])} {stories['covered']}/{stories['reachable']}"
            f"{partial}")


def _quiescence_cell(q: dict[str, Any]) -> str:
    """The quiescence phase: instances settled and the largest bound, or NOT CHECKED."""
    if q.get("unsettled") or q.get("model_finding"):
        return _mark(False) + (" model" if q.get("model_finding") else " unsettled")
    if not q.get("checked"):
        return "[yellow]NOT CHECKED[/yellow]"
    return f"{_mark(True)} {q.get('instances', 0):,}, bound {q.get('max_bound', 0)}"


def _system_lockstep_cell(sl: dict[str, Any]) -> str:
    if not sl.get("checked"):
        return "[yellow]NOT CHECKED[/yellow]"
    return f"{_mark(sl['ok'])} {sl['examples']:,} runs"


def _concurrent_cell(cc: dict[str, Any]) -> str:
    if not cc.get("checked"):
        return "[yellow]NOT CHECKED[/yellow]"
    ops = cc["operations"]
    return f"{_mark(cc['ok'])} {ops['controlled']}+{ops['free']} ops"


def details(result: dict[str, Any]) -> None:
    """Every finding and every gap of a verify report, one line each, on stderr."""
    for name, m in result["machines"].items():
        cc = m.get("concurrent", {})
        if not cc.get("checked", True):
            err.print(f"{name}: concurrent campaign NOT CHECKED: {cc.get('why')}")
        elif cc.get("failure"):
            err.print(f"{name}: {cc['failure']}")
        for key, value in m["static"].items():
            if value:
                err.print(f"{name}: static {key}: {value}")
        if m["explore"]["findings"]:
            err.print(f"{name}: explorer findings {m['explore']['findings']}; run "
                      f"'settled explore {name}' for the counterexamples")
        if m["system"].get("findings"):
            err.print(f"{name}: system findings {m['system']['findings']}; run "
                      f"'settled explore {name} --queries 2' for the counterexamples")
        _system_lockstep_details(name, m.get("system_lockstep", {}))
        _lockstep_details(name, m["lockstep"])
        crash = m.get("crash", {})
        for failure in crash.get("failures", []):
            err.print(f"{name}: crash sweep: {failure}")
        for boundary in crash.get("never_crashed", []):
            err.print(f"{name}: the crash sweep never crashed {boundary}")
    _unchecked_details(result)
    _view_details(result)


def _system_lockstep_details(name: str, sl: dict[str, Any]) -> None:
    if not sl.get("checked", True):
        err.print(f"{name}: system lockstep NOT CHECKED: {sl.get('why')}")
    elif sl.get("failure") or sl.get("trace_check", {}).get("failure"):
        err.print(f"{name}: system lockstep: {sl.get('failure') or sl['trace_check']['failure']}")
    if sl.get("checked") and not sl.get("failure"):  # a failed run stops early
        for label in sl.get("unfired", []):
            err.print(f"{name}: the system campaign never fired {label}")
        stories = sl.get("interactions", {})
        for step, state in stories.get("missing", []):
            err.print(f"{name}: the system campaign never performed {step} while another "
                      f"instance was {state}")
        if stories and not stories.get("complete"):
            err.print(f"{name}: interactions PARTIAL: {stories.get('reachable')} found by a "
                      "bounded search of the system's space, not all that are reachable")


def _lockstep_details(name: str, ls: dict[str, Any]) -> None:
    if ls.get("failure"):
        err.print(f"{name}: {ls['failure']}")
    quiet = ls.get("quiescence", {})
    if quiet.get("model_finding"):
        err.print(f"{name}: quiescence: MODEL FINDING: {quiet['model_finding']}")
    elif not quiet.get("checked", True) and not ls.get("failure"):
        err.print(f"{name}: {quiet.get('text')}")
    if ls.get("unfired_transitions"):
        err.print(f"{name}: the campaign never fired {ls['unfired_transitions']}")
    for edge in ls.get("unfired_edges", []):
        err.print(f"{name}: the campaign never fired the edge {edge}")
    for case in ls.get("unfired_guard_alternatives", []):
        err.print(f"{name}: the campaign never fired the guard alternative {case}")
    for refusal in ls.get("unprobed_refusals", []):
        err.print(f"{name}: the campaign never asked for the refusal {refusal}")
    for value in ls.get("unfired_parameter_values", []):
        err.print(f"{name}: the campaign never took the parameter value {value}")
    for refusal in ls.get("refusals_never_alone", []):
        err.print(f"{name}: NOT PROBED ALONE: {refusal} (in no reachable state does it alone "
                  "refuse the trigger: another guard fails too, or another transition of the "
                  "trigger takes the step)")


def _view_details(result: dict[str, Any]) -> None:
    views = result["views"]
    for name in views.get("stale", []):
        folder = Path(views.get("directory") or Path(result.get("root") or ".") / "diagrams")
        what = "stale" if (folder / name).exists() else "missing"
        if views.get("source") == "installed package":
            err.print(f"{what} {folder / name}: the installed package's view does not match its "
                      "model; the package was built from a checkout whose views were stale")
        else:
            err.print(f"{what} diagrams/{name}: run 'settled verify --write' (or settled "
                      "diagrams / settled spec / settled review) and commit it")


def _why_unchecked(result: dict[str, Any], name: str) -> str:
    machine, _, part = name.partition(".")
    m = result["machines"].get(machine, {})
    if part == "system_lockstep":
        return m.get("system_lockstep", {}).get("why") or "no adapter drives the system"
    if part == "concurrent":
        return m.get("concurrent", {}).get("why") or "no concurrent campaign"
    return "the adapter declares it unobservable; the campaign never compared it with the model"


def _unchecked_details(result: dict[str, Any]) -> None:
    """Every unchecked thing by name: refused ones fail the run and say how to allow them;
    allowed ones are printed, so an exception is never silent."""
    un = result.get("unchecked", {})
    for name in un.get("refused", []):
        err.print(f"NOT CHECKED: {name} ({_why_unchecked(result, name)}); this fails the run: "
                  f"check it, or accept it by name with --allow-unchecked {name}")
    for name in un.get("allowed", []):
        err.print(f"ALLOWED UNCHECKED: {name} ({_why_unchecked(result, name)}); named by "
                  "--allow-unchecked")


def verify_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    write: Annotated[bool, typer.Option("--write", help="Regenerate diagrams, spec and coverage "
                                                         "instead of checking them.")] = False,
    root: Annotated[Path | None, typer.Option(
        help="The settled checkout whose diagrams/ and tests/ are checked. Default: the current "
             "folder if it is one, else the views shipped with the installed package.")] = None,
    profile: Annotated[str, typer.Option(help=f"Lockstep profile: {', '.join(PROFILES)}.")] = "ci",
    seed: Annotated[int, typer.Option(help="Lockstep seed.")] = SEED,
    store: Annotated[str | None, typer.Option(
        "--store", help="Where the lockstep campaigns keep their state: 'sqlite' (files, the "
                        "default), a postgresql:// URL, or 'temp-postgres' (a throwaway cluster). "
                        "Default: $SETTLED_STORE, else sqlite.")] = None,
    allow_unchecked: Annotated[list[str] | None, typer.Option(
        "--allow-unchecked", metavar="MACHINE.PART",
        help="Accept that this run leaves PART of MACHINE unchecked (a variable its adapter "
             "declares unobservable, system_lockstep, concurrent); repeat or comma-separate. "
             "Printed in the report. Without it anything unchecked fails the run.")] = None,
) -> None:
    """Static checks, exhaustive exploration, lockstep campaign, trace check and drift check."""
    if profile not in PROFILES:
        err.print(f"unknown profile {profile!r}; choose one of {sorted(PROFILES)}")
        raise typer.Exit(2)
    root = _checkout(root, write)
    if write and root is not None:
        _check_writable(root / "diagrams")
    allowed = [n.strip() for item in allow_unchecked or [] for n in item.split(",") if n.strip()]
    try:
        check_allowances(allowed, list(MACHINES))
    except ValueError as e:
        err.print(f"settled verify: {e}")
        raise typer.Exit(2) from None
    say = (lambda line: None) if as_json else (lambda line: err.print(f"… {line}"))
    try:
        with resolved_store(chosen(store)) as url, Bar(as_json) as bar:
            result = verify(root, write=write, profile_name=profile, seed=seed, say=say, store=url,
                            watch=bar, allow_unchecked=allowed)
    except StoreError as e:
        err.print(str(e))
        raise typer.Exit(2) from None
    except _diagrams.OutputError as e:
        err.print(str(e))
        raise typer.Exit(2) from None
    if as_json:
        emit(result, 0 if result["ok"] else 1)
    else:
        details(result)
        Console(highlight=False).print(summary(result))
        crashed = result.get("durable_boundaries", {})
        Console(highlight=False).print(f"durable boundaries crashed: {crashed.get('crashed', 0)} "
                                       f"of {crashed.get('boundaries', 0)}")
        Console(highlight=False).print(f"{'OK' if result['ok'] else 'FAILED'} in "
                                       f"{result['seconds']}s")
    raise typer.Exit(0 if result["ok"] else 1)


def _checkout(root: Path | None, write: bool) -> Path | None:
    """The checkout to check (None: the installed package's views); exit 2 for a --root that
    is not a checkout, or --write without one."""
    if root is not None and not _diagrams.is_project(root):
        err.print(f"--root {root}: not a settled checkout (no model/ and pyproject.toml of "
                  "settled there); pass the checkout's folder, or drop --root to check the views "
                  "shipped with the installed package")
        raise typer.Exit(2)
    if root is None and _diagrams.is_project(Path(".")):
        root = Path(".")
    if root is None and write:
        err.print("--write regenerates a checkout's views, and this folder is not a settled "
                  "checkout; run it in one or pass --root CHECKOUT")
        raise typer.Exit(2)
    return root


class Bar(Watch):
    """A progress bar on standard error over verify's phases, with the state count of an
    exploration; only when standard output is a terminal (never in CI logs or with --json)."""

    def __init__(self, as_json: bool) -> None:
        self.progress: Progress | None = None
        if not as_json and sys.stdout.isatty() and err.is_terminal:
            self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                     BarColumn(bar_width=20), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=err, transient=True,
                                     refresh_per_second=4)
        self.task: TaskID | None = None
        self.text = ""

    def __enter__(self) -> Bar:
        if self.progress is not None:
            self.progress.start()
            self.task = self.progress.add_task("starting", total=phases())
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def phase(self, text: str) -> None:
        if self.progress is None or self.task is None:
            return
        if self.text:
            self.progress.advance(self.task)
        self.text = text
        self.progress.update(self.task, description=escape(text))

    def explored(self, states: int, frontier: int, seconds: float) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, description=escape(
                f"{self.text}: {states:,} states, frontier {frontier:,}"))


def _check_writable(directory: Path) -> None:
    """--write must be able to write its files; say so before a minute of work, not after
    (the checkout exists; diagrams/ is made in it if need be, never a tree of folders)."""
    try:
        writable_dir(directory)
    except OutputPathError as e:
        err.print(f"{e}; choose a writable --root")
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    app.command("verify")(verify_command)
