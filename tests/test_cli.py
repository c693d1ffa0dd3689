"""The command line's shell: version, help, and what it loads to print them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from settled import __version__

PROBE = """
import sys
sys.argv = ["settled", *sys.argv[1:]]
from settled import cli
try:
    cli.main()
except SystemExit as e:
    code = e.code
heavy = sorted(m for m in ("hypothesis", "networkx", "settled.conformance._explore",
                           "settled.impl") if m in sys.modules)
print("HEAVY", heavy, "CODE", code)
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          check=False)


def test_version_prints_the_package_version_and_exits_0() -> None:
    done = _run("--version")
    assert f"settled {__version__}" in done.stdout
    assert "CODE 0" in done.stdout


@pytest.mark.parametrize("args", [("--help",), ("--version",)])
def test_help_and_version_load_no_checker_library(args: tuple[str, ...]) -> None:
    done = _run(*args)
    assert "HEAVY [] CODE 0" in done.stdout, done.stdout + done.stderr


def test_help_lists_every_command() -> None:
    from settled import cli
    done = _run("--help")
    for name in cli.COMMANDS:
        assert name in done.stdout


def test_an_unknown_command_is_a_usage_error_with_exit_2() -> None:
    done = _run("nope")
    assert "No such command" in done.stderr
    assert "CODE 2" in done.stdout


def test_a_named_command_loads_its_real_help() -> None:
    done = _run("check", "--help")
    assert "--json" in done.stdout
