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
        _unreadable(trace, str(exc), exc.line, as_json)
    except RecursionError:
        _unreadable(trace, "a JSON value nested too deeply to be an event", None, as_json)
    except MemoryError:
        _unreadable(trace, "too large to read into memory", None, as_json)
    if report.events == 0:
        # Nothing was checked: an empty log is not evidence that an implementation conforms.
        _unreadable(trace, "no events: the trace is empty, so nothing was checked", None, as_json)
    if as_json:
        print(json.dumps(report.to_json(), sort_keys=True))
    else:
        for v in report.violations:
            out.print(v.text())
        verdict = "conforms" if report.ok else f"{len(report.violations)} violation(s)"
        out.print(f"{trace}: {report.events} events, {report.instances} instances: {verdict} "
                  f"({report.seconds:.2f}s)")
    raise typer.Exit(0 if report.ok else 1)


def _unreadable(trace: Path, text: str, line: int | None, as_json: bool) -> NoReturn:
    if as_json:
        print(json.dumps({"ok": False, "error": text, "line": line}))
    else:
        err.print(f"{trace}: {text}")
    raise typer.Exit(2)


SQLITE_HEADER = b"SQLite format 3\x00"
# A settled store's event tables: the query store's and the approval checkpoint's.
STORE_TABLES = {"query_events": "query store", "call_events": "approval checkpoint"}


class NotAStore(ValueError):
    """The input is not a store file of the bundled implementation; nothing was written."""


def export_trace(
    db: Annotated[Path, typer.Argument(help="A store file of the bundled implementation "
                                            "(query store or approval checkpoint); read only.")],
    output: Annotated[Path, typer.Option("-o", "--output",
                                         help="The JSON Lines file to write; - for stdout.")],
) -> None:
    """Write an implementation's event log (query store or approval checkpoint) as settled.trace/1.

    The store is opened read-only and never changed; the output is written to a temporary
    file and renamed into place, so a failed export leaves an existing file untouched."""
    from settled._paths import OutputPathError, writable_file

    to_stdout = str(output) == "-"
    try:
        if not to_stdout:
            writable_file(output)  # before reading anything: a typo costs nothing
        lines = read_trace_lines(db)
    except (NotAStore, OutputPathError) as exc:
        err.print(f"cannot export {db}: {exc}")
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


def read_trace_lines(db: Path) -> list[str]:
    """The store's event log as settled.trace/1 lines, read through a read-only connection.
    Raises :class:`NotAStore` naming what is wrong with a missing, unreadable, empty,
    non-SQLite or foreign SQLite file."""
    from settled.impl import _checkpoint, _events

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
        raise NotAStore("a SQLite file without a query_events or call_events table, so not a "
                        "settled store" if not found else "a SQLite file with both a query and "
                        "a call log, not a store of the bundled implementation")
    try:
        rows = (_checkpoint.trace_rows(conn) if found[0] == "call_events"
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
