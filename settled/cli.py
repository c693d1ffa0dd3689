"""The ``settled`` command line.

Each command lives in a small module (``settled/_cmd_*.py``) that exposes
``register(app)``; this file only assembles them, and imports a command's
module only when that command runs: the explorer, Hypothesis and networkx
are not loaded to print ``settled --help`` or ``settled --version``.

Exit codes, for every command: 0 everything held; 1 a check found a problem
(stale or missing file, violation, failed run); 2 the input could not be read
or the call was malformed (a bad option, a missing or unwritable path);
3 the work stopped before it was complete (``explore --max-states``) or an
internal error (``check``), said in one line; 130 interrupted (Ctrl-C), one line;
141 standard output closed early. ``-h`` is ``--help``. With ``--json`` every command
prints one JSON document with the exit code under ``exit_code``, errors included
(``settled/_output.py``).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from pathlib import Path

import typer

from settled import __version__, _output

app = typer.Typer(
    name="settled", no_args_is_help=True, add_completion=False, rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Specify, implement and check protocols that stay responsible for a side effect "
         "after 'I did not get an answer'.")

# name -> (module, one-line help shown by `settled --help`). The full help of a command comes
# from its module, which is imported only when the command is named.
COMMANDS: dict[str, tuple[str, str]] = {
    "verify": ("_cmd_verify", "Static checks, exhaustive exploration, lockstep campaign, "
                              "trace check and drift check."),
    "explore": ("_cmd_explore", "Explore every reachable state of a machine or a system."),
    "export": ("_cmd_export", "Write a machine as a Promela model for SPIN."),
    "check": ("_cmd_trace", "Replay a recorded trace through the model."),
    "export-trace": ("_cmd_trace", "Write an implementation's event log as settled.trace/1."),
    "lockstep": ("_cmd_lockstep", "Run the lockstep kit on any adapter (MODULE:FACTORY)."),
    "replay": ("_cmd_lockstep", "Run a saved lockstep counterexample again."),
    "mutants": ("_cmd_mutants", "Run the bug catalogue against the lockstep kit."),
    "demo": ("_cmd_demo", "Tell each source system's story on real files."),
    "bench": ("_cmd_bench", "Measure every part side by side in one run."),
    "diagrams": ("_cmd_views", "Write diagrams/<machine>.dot, .svg and .mmd from the tables."),
    "spec": ("_cmd_views", "Write diagrams/SPEC.md from the tables."),
    "review": ("_cmd_review", "Write the spec as a static site to review in a browser."),
}


def _show_version(value: bool) -> None:
    if value:
        print(f"settled {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_show_version,
                                       help="Print the version and exit.")) -> None:
    """Specify, implement and check protocols that stay responsible for a side effect
    after 'I did not get an answer'."""


def _stub(name: str, text: str) -> None:
    """A placeholder that lists ``name`` in ``settled --help`` without importing it."""
    def command() -> None:  # pragma: no cover - never invoked: a named command loads the real one
        raise typer.Exit(3)
    command.__doc__ = text
    app.command(name, help=text)(command)


def _load(argv: list[str]) -> None:
    named = next((a for a in argv if not a.startswith("-")), None)
    if named in COMMANDS:
        importlib.import_module(f"settled.{COMMANDS[named][0]}").register(app)
        return
    for name, (_module, text) in COMMANDS.items():
        _stub(name, text)


def main() -> None:
    # Hypothesis keeps its state in ./.hypothesis unless told otherwise; a user's folder is
    # not ours to write, so the lockstep campaigns keep it in the user's cache instead.
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(cache / "settled" / "hypothesis"))
    argv = sys.argv[1:]
    streams = _output.Streams(_output.wants_json(argv))

    def interrupted(signum: int, frame: object) -> None:
        # Ctrl-C: whatever unwinds now (a library's advice on how to reproduce the run, a
        # worker's traceback) prints nothing; the command line says one line at the end.
        streams.silence()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)
    try:
        _load(argv)
        code = _run(argv, streams)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader closed our standard output early (``settled explore --json | head``):
        # say nothing more, and exit 141 (128 + SIGPIPE), as the shell does for a closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141
    except KeyboardInterrupt:
        code = 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C does not cut the line
        streams.restore()
    streams.finish(code)
    sys.exit(code)


def _click_errors() -> tuple[type[Exception], type[Exception], type[Exception]]:
    """Click's UsageError, ClickException and Abort, found through Typer's public
    BadParameter and Abort (Typer may bundle its own copy of Click)."""
    by_name = {c.__name__: c for c in typer.BadParameter.__mro__}
    return by_name["UsageError"], by_name["ClickException"], typer.Abort


def _run(argv: list[str], streams: _output.Streams) -> int:
    """Run the command; a malformed call is one line on stderr and exit 2, not a panel."""
    usage_error, click_error, abort = _click_errors()
    try:
        result = app(args=argv, prog_name="settled", standalone_mode=False)
    except SystemExit:
        # Click answers a closed standard output (EPIPE) by wrapping stdout and exiting 1,
        # which would read as "a check found a problem": report the closed pipe instead.
        if type(sys.stdout).__name__ == "PacifyFlushWrapper":
            return 141
        raise
    except usage_error as e:
        ctx = getattr(e, "ctx", None)
        if type(e).__name__ == "NoArgsIsHelpError" and ctx is not None:
            print(ctx.get_help())  # `settled` (or `settled demo`) alone: the help, exit 2
            streams.kind = "usage"
            return 2
        where = ctx.command_path if ctx is not None else "settled"
        message = e.format_message() if hasattr(e, "format_message") else str(e)
        text = " ".join(message.split()).rstrip(".")
        print(f"{where}: {text}; see '{where} --help'", file=sys.stderr)
        streams.kind = "usage"
        return 2
    except click_error as e:
        message = e.format_message() if hasattr(e, "format_message") else str(e)
        print(f"settled: {' '.join(message.split())}", file=sys.stderr)
        return int(getattr(e, "exit_code", 2))
    except abort:  # Click's name for Ctrl-C (and end of input at a prompt)
        return 130
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


if __name__ == "__main__":
    main()
