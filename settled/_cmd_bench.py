"""``settled bench``: how fast the implementation and the checkers are, each next to a baseline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from settled._bench import run_bench

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)

SECTIONS = {
    "impl": "the SQLite implementation, end to end",
    "lockstep": "the lockstep kit against the implementation",
    "trace_check": "the trace checker",
    "explore": "the explorer",
    "approval": "the approval runtime",
}


def bench(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object; no progress.")] = False,
    quick: Annotated[bool, typer.Option("--quick", help="Small sizes, same keys: seconds, not minutes.")]
    = False,
    directory: Annotated[Path | None, typer.Option(
        "--dir", help="Where the temporary files go; a real disk, the commits are the point.")] = None,
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
    report = run_bench(quick=quick, directory=directory,
                       say=(lambda _: None) if as_json else (lambda line: err.print(line)))
    if as_json:
        print(json.dumps(report))
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
