"""``settled check`` and ``settled export-trace``: the trace checker's command line."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from settled._output import emit
from settled.conformance._trace import CheckerFault, CheckReport, TraceError, check_file

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
out = Console(highlight=False, soft_wrap=True, markup=False)

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
    err.print(message, markup=False)
    if as_json:
        emit({"ok": False, "error": kind, "message": message, "line": line}, code)
    raise typer.Exit(code)


def _report(report: CheckReport, name: str, as_json: bool) -> NoReturn:
    code = report.exit_code
    if as_json:
        emit(report.to_json(), code)
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


SQLITE_HEADER = b"SQLite format 3\x00"
# A settled store's event tables: the query store's and the approval checkpoint's.
STORE_TABLES = {"query_events": "query store", "call_events": "approval checkpoint",
                "ledger_events": "ledger session file"}


class NotAStore(ValueError):
    """The input is not a store file of the bundled implementation; nothing was written."""


def export_trace(
    db: Annotated[str, typer.Argument(help="A store file of the bundled implementation (query "
                                           "store, approval checkpoint or ledger session file; "
                                           "read only), or the postgresql:// URL of a query "
                                           "store.")],
    output: Annotated[Path, typer.Option("-o", "--output",
                                         help="The JSON Lines file to write; - for stdout.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print what was written (events, "
                                          "file) as JSON; not with -o -.")] = False,
) -> None:
    """Write an implementation's event log (query store, approval checkpoint or ledger session
    file) as settled.trace/1.

    A store file is opened read-only and never changed; the output is written to a temporary
    file and renamed into place, so a failed export leaves an existing file untouched."""
    from settled._paths import OutputPathError, writable_file
    from settled.impl.shared._pg import is_url, redact

    to_stdout = str(output) == "-"
    shown = redact(db) if is_url(db) else db
    if to_stdout and as_json:
        err.print("--json and -o - would both write to standard output; write the trace to a "
                  "file with -o FILE, or drop --json")
        raise typer.Exit(2)
    try:
        if not to_stdout:
            writable_file(output)  # before reading anything: a typo costs nothing
        lines = _url_trace_lines(db) if is_url(db) else read_trace_lines(Path(db))
    except (NotAStore, OutputPathError) as exc:
        err.print(f"cannot export {shown}: {exc}")
        raise typer.Exit(2) from None
    if to_stdout:
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()
        err.print(f"wrote {len(lines)} events to stdout")
        return
    try:
        _replace(output, "".join(line + "\n" for line in lines))
    except OSError as exc:
        err.print(f"cannot write {output}: {exc.strerror or exc}; nothing was written")
        raise typer.Exit(2) from None
    err.print(f"wrote {len(lines)} events to {output}")
    if as_json:
        emit({"events": len(lines), "output": str(output), "source": shown}, 0)


def _url_trace_lines(url: str) -> list[str]:
    """A PostgreSQL query store's event log (the server keeps it; nothing is written)."""
    from settled.impl.query import _events
    from settled.impl.shared._errors import SettledError
    from settled.impl.shared._pg import PostgresMissing, psycopg_module

    try:
        psycopg = psycopg_module()
    except PostgresMissing as exc:
        raise NotAStore(str(exc)) from None
    try:
        return list(_events.trace_lines(url))
    except (SettledError, psycopg.Error) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise NotAStore(first) from exc


def read_trace_lines(db: Path) -> list[str]:
    """The store's event log as settled.trace/1 lines, read through a read-only connection.
    Raises :class:`NotAStore` naming what is wrong with a missing, unreadable, empty,
    non-SQLite or foreign SQLite file."""
    from settled.impl.approval import _checkpoint
    from settled.impl.ledger import _ledger
    from settled.impl.query import _events

    if not db.exists():
        raise NotAStore("no such file; pass the path of a store file")
    if db.is_dir():
        raise NotAStore("it is a folder; pass the path of a store file")
    try:
        with db.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise NotAStore(f"cannot read it: {exc.strerror or exc}") from exc
    if not head:
        raise NotAStore("the file is empty, not a settled store")
    if head != SQLITE_HEADER:
        raise NotAStore("not a SQLite file, so not a settled store")
    try:
        conn = sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise NotAStore(f"cannot open it read-only: {exc}") from exc
    conn.row_factory = sqlite3.Row
    try:
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as exc:
        conn.close()
        raise NotAStore(f"cannot read it as SQLite: {exc}") from exc
    found = [t for t in STORE_TABLES if t in tables]
    if len(found) != 1:
        conn.close()
        raise NotAStore("a SQLite file without a query_events, call_events or ledger_events "
                        "table, so not a settled store" if not found else "a SQLite file with "
                        "more than one event log, not a store of the bundled implementation")
    try:
        rows = (_checkpoint.trace_rows(conn) if found[0] == "call_events"
                else _ledger.trace_rows(conn) if found[0] == "ledger_events"
                else _events.events(conn))
    except (sqlite3.Error, KeyError, IndexError, ValueError, TypeError) as exc:
        raise NotAStore(f"its {found[0]} table is not the one a settled "
                        f"{STORE_TABLES[found[0]]} has ({type(exc).__name__}: {exc})") from exc
    finally:
        conn.close()
    return [json.dumps(row, ensure_ascii=False, separators=(",", ":")) for row in rows]


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file next to ``path`` and rename it over ``path``.

    A symbolic link is written through (its target is replaced, the link stays); a path
    that is not a regular file (``/dev/null``, a pipe) is written to directly."""
    if path.is_symlink():
        path = path.resolve()
    if path.exists() and not path.is_file():
        with path.open("w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".",
                               prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file private; give it the mode a plain open() would have (or
        # keep the mode of the file it replaces).
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def register(app: typer.Typer) -> None:
    app.command()(check)
    app.command("export-trace")(export_trace)
