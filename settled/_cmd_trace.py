"""``settled check`` and ``settled export-trace``: the trace checker's command line."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from settled.conformance._trace import TraceError, check_file

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


def check(
    trace: Annotated[Path, typer.Argument(help="A settled.trace/1 JSON Lines file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Replay a recorded trace through the model; exit 0 conforming, 1 violations, 2 unreadable."""
    try:
        report = check_file(trace)
    except TraceError as exc:
        if as_json:
            print(json.dumps({"ok": False, "error": str(exc), "line": exc.line}))
        else:
            err.print(f"{trace}: {exc}")
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps(report.to_json(), sort_keys=True))
    else:
        for v in report.violations:
            out.print(v.text())
        verdict = "conforms" if report.ok else f"{len(report.violations)} violation(s)"
        out.print(f"{trace}: {report.events} events, {report.instances} instances: {verdict} "
                  f"({report.seconds:.2f}s)")
    raise typer.Exit(0 if report.ok else 1)


def export_trace(
    db: Annotated[Path, typer.Argument(help="A store file of the bundled implementation.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The JSON Lines file to write.")],
) -> None:
    """Write an implementation's event log (query store, approval checkpoint or ledger session
    file) as settled.trace/1."""
    from settled.impl import _checkpoint, _events, _ledger
    from settled.impl._errors import SettledError

    try:
        lines = (_checkpoint.trace_lines(db) if _has_table(db, "call_events")
                 else _ledger.trace_lines(db) if _has_table(db, "ledger_events")
                 else _events.trace_lines(db))
        with output.open("w", encoding="utf-8", newline="\n") as out:
            count = sum(1 for line in lines if out.write(line + "\n"))
    except (SettledError, OSError, sqlite3.Error) as exc:
        err.print(f"cannot export {db}: {exc}")
        raise typer.Exit(2) from None
    err.print(f"wrote {count} events to {output}")


def _has_table(db: Path, table: str) -> bool:
    if not db.is_file():
        return False  # the exporter says what is missing
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                           (table,)).fetchone()
    finally:
        conn.close()
    return row is not None


def register(app: typer.Typer) -> None:
    app.command()(check)
    app.command("export-trace")(export_trace)
