"""The ``settled`` command line.

Each command lives in a small module (``settled/_cmd_*.py``) that exposes
``register(app)``; this file only assembles them. Exit codes: 0 everything
held, 1 a check found a problem (stale file, violation, failed run), 2 the
input could not be read or the call was malformed.
"""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="settled", no_args_is_help=True, add_completion=False,
    help="Specify, implement and check protocols that stay responsible for a side effect "
         "after 'I did not get an answer'.")

COMMAND_MODULES = ("_cmd_views", "_cmd_trace", "_cmd_explore", "_cmd_verify", "_cmd_demo",
                   "_cmd_bench", "_cmd_mutants")
OPTIONAL_COMMAND_MODULES: tuple[str, ...] = ()


def _load() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"settled.{name}").register(app)


def main() -> None:
    _load()
    app()


if __name__ == "__main__":
    main()
