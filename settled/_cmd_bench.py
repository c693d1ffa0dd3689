"""``settled bench``: how fast the implementation and the checkers are, each next to a baseline."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from settled._bench import run_bench
from settled._output import emit
from settled._stores import ENV, StoreError, reachable
from settled.impl.shared._pg import is_url

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
out = Console(highlight=False, soft_wrap=True, markup=False)

SECTIONS = {
    "impl": "the implementation end to end, on SQLite and PostgreSQL",
    "lockstep": "the lockstep kit against the implementation",
    "trace_check": "the trace checker",
    "explore": "the explorer",
    "approval": "the approval runtime",
    "ledger": "the tool-call ledger: turns and their recovery",
    "linearizability": "concurrent campaigns: the history checker and the race mutants by mode",
}


def bench(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object; no progress.")] = False,
    quick: Annotated[bool, typer.Option("--quick", help="Small sizes, same keys: seconds, not minutes.")]
    = False,
    directory: Annotated[Path | None, typer.Option(
        "--dir", help="Where the temporary files go; a real disk, the commits are the point.")] = None,
    store: Annotated[str | None, typer.Option(
        "--store", help="PostgreSQL for the impl.postgres figures: a postgresql:// URL, or "
                        "'sqlite' to skip them. Default: $SETTLED_STORE, else a throwaway "
                        "cluster when the server binaries are here.")] = None,
) -> None:
    """Measure every part side by side in one run and report rates with their ratios."""
    if directory is not None:
        from settled._paths import OutputPathError, writable_dir

        try:
            writable_dir(directory)
        except OutputPathError as e:
            err.print(f"{e}; pass a writable --dir")
            raise typer.Exit(2) from None
        directory = directory.resolve()
    value = store if store is not None else os.environ.get(ENV) or None
    if value not in (None, "sqlite") and not is_url(value):
        err.print(f"--store {value!r} is neither 'sqlite' nor a postgresql:// URL; pass e.g. "
                  "postgresql://user@host:5432/dbname")
        raise typer.Exit(2)
    try:
        if value is not None and is_url(value):
            reachable(value)
        report = run_bench(quick=quick, directory=directory, store=value,
                           say=(lambda _: None) if as_json else (lambda line: err.print(line)),
                           warn=lambda line: err.print(line))
    except StoreError as exc:
        err.print(str(exc))
        raise typer.Exit(2) from None
    if as_json:
        emit(report, 0)
        return
    for key, title in SECTIONS.items():
        out.print(section_table(f"{key}: {title}", report[key]))
    m = report["machine"]
    out.print(f"{m['cpus']} cpus, Python {m['python']}, {report['seconds']:.1f}s in all")


def section_table(title: str, figures: dict[str, Any]) -> Table:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in figures.items():
        table.add_row(name, _shown(value))
    return table


def _shown(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return json.dumps(value) if isinstance(value, dict) else str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:,.3f}".rstrip("0").rstrip(".")


def register(app: typer.Typer) -> None:
    app.command()(bench)
