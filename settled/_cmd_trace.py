"""``settled check`` and ``settled export-trace``: the trace checker's command line."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from settled.conformance._trace import CheckerFault, CheckReport, TraceError, check_file

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)

EXIT_OK, EXIT_VIOLATIONS, EXIT_UNREADABLE, EXIT_INCOMPLETE = 0, 1, 2, 3


def check(
    trace: Annotated[str | None, typer.Argument(
        help="A settled.trace/1 JSON Lines file; - reads standard input.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as one JSON document.")] = False,
    first: Annotated[bool, typer.Option(
        "--first", help="Stop at the first instance that does not conform.")] = False,
) -> None:
    """Replay a recorded trace through the model, every instance judged.

    Exit 0 every instance conforms; 1 violations (including incomplete logs);
    2 unreadable input (named by line; an empty file has no events); 3 no
    verdict: an instance is undecided (the hidden-step search hit its limit)
    or the checker itself failed.
    """
    if trace is None:
        _fail(as_json, EXIT_UNREADABLE, "no trace given: name a settled.trace/1 file, or - to "
              "read standard input", 0, "usage")
    name = "standard input" if trace == "-" else trace
    try:
        report = check_file(trace, first=first)
    except TraceError as exc:
        _fail(as_json, EXIT_UNREADABLE, f"{name}: {exc}", exc.line, "unreadable")
    except CheckerFault as exc:
        _fail(as_json, EXIT_INCOMPLETE, f"{name}: {exc}", exc.line, "checker_fault")
    except Exception as exc:
        _fail(as_json, EXIT_INCOMPLETE, f"{name}: {CheckerFault(0, exc)}", 0, "checker_fault")
    _report(report, name, as_json)


def _fail(as_json: bool, code: int, message: str, line: int, kind: str) -> NoReturn:
    if as_json:
        print(json.dumps({"ok": False, "exit": code, "error": kind, "message": message,
                          "line": line}))
    else:
        err.print(message, markup=False)
    raise typer.Exit(code)


def _report(report: CheckReport, name: str, as_json: bool) -> NoReturn:
    code = report.exit_code
    if as_json:
        print(json.dumps(report.to_json(), sort_keys=True, default=str))
        raise typer.Exit(code)
    for v in (*report.violations, *report.undecided):
        out.print(v.text(), markup=False)
    verdicts = [f"{report.unjudged} not judged" if report.stopped_early
                else f"{report.conforming} conform"]
    if report.violations:
        verdicts.append(f"{len(report.violations)} violate")
    if report.undecided:
        verdicts.append(f"{len(report.undecided)} undecided (no verdict: exit 3)")
    stopped = "; stopped at the first problem (--first)" if report.stopped_early else ""
    out.print(f"{name}: {report.events} events, {report.instances} instances: "
              f"{', '.join(verdicts)}{stopped} ({report.seconds:.2f}s)", markup=False)
    raise typer.Exit(code)


def export_trace(
    db: Annotated[str, typer.Argument(help="A store file of the bundled implementation, or the "
                                           "postgresql:// URL of a query store.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The JSON Lines file to write.")],
) -> None:
    """Write an implementation's event log (query store, approval checkpoint or ledger session
    file) as settled.trace/1."""
    import psycopg

    from settled.impl import _checkpoint, _events, _ledger
    from settled.impl._errors import SettledError
    from settled.impl._pg import is_url, redact

    shown = redact(db) if is_url(db) else db
    try:
        lines = (_events.trace_lines(db) if is_url(db)
                 else _checkpoint.trace_lines(db) if _has_table(Path(db), "call_events")
                 else _ledger.trace_lines(db) if _has_table(Path(db), "ledger_events")
                 else _events.trace_lines(db))
        with output.open("w", encoding="utf-8", newline="\n") as out:
            count = sum(1 for line in lines if out.write(line + "\n"))
    except (SettledError, OSError, sqlite3.Error, psycopg.Error) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        err.print(f"cannot export {shown}: {first}")
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
