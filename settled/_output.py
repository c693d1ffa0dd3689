"""What every command prints as JSON, and what the command line prints when a run ends badly.

With ``--json`` a command prints one JSON document on standard output, and every document
carries the process's exit code under one key, :data:`EXIT_KEY`. A command that ends
non-zero without printing its document (a usage error, a bad path, Ctrl-C) still prints
one: ``{"ok": false, "exit_code": N, "error": KIND, "message": LINE}``, where LINE is the
one-line message the command wrote on standard error. The command line (``settled/cli.py``)
watches the two streams for that; the commands only call :func:`emit`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Final, TextIO

EXIT_KEY: Final = "exit_code"

# The exit code's meaning, named in an error document's "error" when the command gave none.
KINDS: Final = {1: "failed", 2: "bad_input", 3: "incomplete", 130: "interrupted"}


def wants_json(argv: list[str]) -> bool:
    """True when the call asks for JSON (``--json`` before any ``--``)."""
    return "--json" in (argv[:argv.index("--")] if "--" in argv else argv)


def document(doc: dict[str, Any], code: int) -> str:
    """``doc`` with ``ok`` (unless it says) and the exit code, as one line of JSON."""
    return json.dumps({"ok": code == 0, **doc, EXIT_KEY: code}, sort_keys=True, default=str)


def emit(doc: dict[str, Any], code: int) -> None:
    """Print the command's JSON document; the caller then exits with ``code``."""
    print(document(doc, code))


class _Seen:
    """A stream that remembers whether anything was written to it (standard output)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.written = False

    def write(self, text: str) -> int:
        if text:
            self.written = True
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _Tee:
    """A stream that keeps its last lines (standard error: the one-line message)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.tail = ""

    def write(self, text: str) -> int:
        self.tail = (self.tail + text)[-4096:]
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def last_line(self) -> str:
        lines = [line.strip() for line in self.tail.splitlines()
                 if line.strip() and "Fontconfig" not in line]
        return lines[-1] if lines else ""


class Streams:
    """The process's standard output and error for one command: watched with ``--json``,
    silenced on Ctrl-C (so what unwinds, a library's advice included, says nothing)."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.stdout, self.stderr = sys.stdout, sys.stderr
        self.seen = _Seen(sys.stdout) if as_json else None
        self.tee = _Tee(sys.stderr) if as_json else None
        if self.seen is not None and self.tee is not None:
            sys.stdout, sys.stderr = self.seen, self.tee
        self.kind: str | None = None  # the error's kind when the command line knows it

    def silence(self) -> None:
        null = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives to the exit
        sys.stdout = sys.stderr = null

    def restore(self) -> None:
        sys.stdout, sys.stderr = self.stdout, self.stderr

    def finish(self, code: int) -> None:
        """After the command: the Ctrl-C line, and the error document a failed ``--json``
        call did not print itself."""
        if code == 130:
            print("settled: interrupted (Ctrl-C); nothing more was checked", file=self.stderr)
        if not self.as_json or code in (0, 141) or (self.seen is not None and self.seen.written):
            return
        message = ("interrupted (Ctrl-C)" if code == 130
                   else self.tee.last_line() if self.tee is not None else "")
        kind = "interrupted" if code == 130 else self.kind or KINDS.get(code, "failed")
        print(document({"ok": False, "error": kind, "message": message}, code), file=self.stdout)
