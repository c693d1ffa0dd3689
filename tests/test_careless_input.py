"""Every command, given what a careless user gives it (a missing, unwritable, empty, binary
or hostile input, a malformed call), answers with one line on stderr and a documented exit
code, never a traceback, and changes nothing it was not asked to change."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def settled(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "settled.cli", *args], capture_output=True,
                          text=True, check=False, cwd=cwd)


def _lines(stderr: str) -> list[str]:
    # Fontconfig may complain about the machine's configuration when Graphviz loads.
    return [line for line in stderr.splitlines() if line.strip() and "Fontconfig" not in line]


@pytest.fixture
def junk(tmp_path: Path) -> Path:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "binary.bin").write_bytes(bytes(range(256)) * 16)
    (tmp_path / "deep.jsonl").write_text("[" * 200_000 + "\n")
    (tmp_path / "null.jsonl").write_text("null\n")
    (tmp_path / "a-file").write_text("x\n")
    (tmp_path / "a-folder").mkdir()
    return tmp_path


# Every command under each class of careless input: missing, unwritable (a path under a
# file: the tests run as root, whom permissions do not stop), empty, binary, hostile or
# malformed, and an unknown option. (arguments, exit code, words the one line says)
CASES = [
    # check
    (("check", "missing.jsonl"), 2, "No such file"),
    (("check", "a-folder"), 2, "Is a directory"),
    (("check", "binary.bin"), 2, "line 1: not"),  # not JSON, or not UTF-8 text
    (("check", "empty.jsonl"), 2, "no events"),
    (("check", "deep.jsonl"), 2, "nested"),
    (("check", "null.jsonl"), 2, "object"),
    (("check", "--no-such-option"), 2, "No such option"),
    # export-trace
    (("export-trace", "missing.db", "-o", "out.jsonl"), 2, "no such file"),
    (("export-trace", "binary.bin", "-o", "out.jsonl"), 2, "not a SQLite file"),
    (("export-trace", "empty.jsonl", "-o", "out.jsonl"), 2, "empty"),
    (("export-trace", "a-folder", "-o", "out.jsonl"), 2, "folder"),
    (("export-trace", "binary.bin", "-o", "a-file/out.jsonl"), 2, "not a folder"),
    (("export-trace", "binary.bin", "-o", "no/such/out.jsonl"), 2, "does not exist"),
    (("export-trace", "binary.bin"), 2, "Missing option"),
    (("export-trace", "binary.bin", "-o", "-", "--json"), 2, "both write to standard output"),
    (("export-trace", "--no-such-option"), 2, "No such option"),
    # explore
    (("explore", "nonsense"), 2, "unknown model"),
    (("explore", ""), 2, "unknown model"),
    (("explore", "query'; DROP TABLE"), 2, "unknown model"),
    (("explore", "query", "--max-states", "0"), 2, "--max-states"),
    (("explore", "query", "--workers", "-1"), 2, "at least 1"),
    (("explore", "query", "--workers", "abc"), 2, "--workers"),
    (("explore", "approval", "--workers", "2"), 2, "only the query machine"),
    (("explore", "approval", "--queries", "2", "--graph", "g.json"), 2, "--graph"),
    (("explore", "query", "--graph", "a-folder", "--max-states", "5"), 2, "is a folder"),
    (("explore", "query", "--itf", "a-file", "--max-states", "5"), 2, "cannot write into"),
    (("explore", "query", "--itf", "no/such", "--max-states", "5"), 2, "does not exist"),
    (("explore", "query", "--graph", "binary.bin/g.json"), 2, "not a folder"),
    (("explore", "--no-such-option"), 2, "No such option"),
    (("explore", "ledger", "--engine", "nope"), 2, "--engine"),
    (("explore", "ledger", "--engine", "spin", "--cores", "0"), 2, "at least 1"),
    (("explore", "ledger", "--engine", "spin", "--cores", "-3"), 2, "at least 1"),
    (("explore", "ledger", "--engine", "spin", "--cores", "4096"), 2, "processor"),
    (("explore", "ledger", "--engine", "spin", "--cores", "two"), 2, "--cores"),
    (("explore", "ledger", "--cores", "2"), 2, "add --engine spin"),
    (("explore", "ledger", "--bitstate"), 2, "add --engine spin"),
    (("explore", "ledger", "--engine", "spin", "--cores", "2", "--bitstate"), 2, "bound nothing"),
    (("explore", "nonsense", "--engine", "spin", "--queries", "2"), 2, "unknown system"),
    (("explore", "ledger", "--engine", "spin", "--queries", "2", "--workers", "2"), 2,
     "only the query system has worker processes"),
    (("explore", "ledger", "--engine", "spin", "--queries", "2", "--stock", "2"), 2,
     "only the approval system has stock"),
    (("explore", "approval", "--engine", "spin", "--queries", "2", "--stock", "-1"), 2,
     "only the approval system has stock"),
    (("explore", "ledger", "--queries", "2", "--stock", "1"), 2, "only the approval system"),
    (("explore", "query", "--engine", "spin", "--queries", "4"), 2, "over the maximum"),
    # export
    (("export", "nonsense", "--promela"), 2, "unknown machine"),
    (("export", "ledger"), 2, "--promela"),
    (("export", "ledger", "--promela", "-o", "a-folder"), 2, "is a folder"),
    (("export", "ledger", "--promela", "-o", "no/such/x.pml"), 2, "does not exist"),
    (("export", "ledger", "--promela", "-o", "binary.bin/x.pml"), 2, "not a folder"),
    (("export", "--no-such-option"), 2, "No such option"),
    (("export", "nonsense", "--quint"), 2, "unknown machine"),
    (("export", "quint"), 2, "the format is a flag: settled export --quint MACHINE"),
    (("export", "ledger", "--promela", "--quint"), 2, "not both"),
    (("export", "ledger", "--quint", "-o", "a-folder"), 2, "is a folder"),
    (("export", "ledger", "--quint", "-o", "binary.bin/x.qnt"), 2, "not a folder"),
    (("export", "nonsense", "--promela", "--queries", "2"), 2, "unknown system"),
    (("export", "ledger", "--promela", "--queries", "0"), 2, "Invalid value"),
    (("export", "ledger", "--promela", "--queries", "2", "--workers", "2"), 2,
     "only the query system has worker processes"),
    (("export", "query", "--promela", "--queries", "2", "--stock", "1"), 2,
     "only the approval system has stock"),
    (("export", "ledger", "--promela", "--queries", "2", "-o", "a-folder"), 2, "is a folder"),
    # lockstep
    (("lockstep", "no_such_module:factory"), 2, "cannot import"),
    (("lockstep", ""), 2, "is not MODULE:FACTORY"),
    (("lockstep", "binary.bin"), 2, "is not MODULE:FACTORY"),
    (("lockstep", "examples.query_adapter:correct", "--profile", "x'; rm -rf /"), 2,
     "unknown profile"),
    (("lockstep", "examples.query_adapter:correct", "--machine", "nonsense"), 2,
     "unknown machine"),
    (("lockstep", "examples.query_adapter:correct", "--out", "a-file"), 2, "cannot write into"),
    (("lockstep", "examples.query_adapter:correct", "--out", "no/such"), 2, "does not exist"),
    (("lockstep", "--no-such-option"), 2, "No such option"),
    # replay
    (("replay", "missing.steps.json"), 2, "missing.steps.json"),
    (("replay", "empty.jsonl"), 2, "empty.jsonl"),
    (("replay", "binary.bin"), 2, "binary.bin"),
    (("replay", "a-folder"), 2, "a-folder"),
    (("replay", "null.jsonl"), 2, "null.jsonl"),
    (("replay", "--no-such-option"), 2, "No such option"),
    # mutants
    (("mutants", "--only", "nonexistent"), 2, "no mutant named"),
    (("mutants", "--profile", "nonsense"), 2, "nonsense"),
    (("mutants", "--out", "a-file"), 2, "cannot write into"),
    (("mutants", "--out", "no/such"), 2, "does not exist"),
    (("mutants", "--no-such-option"), 2, "No such option"),
    (("mutants", "--model", "--only", "nonexistent"), 2, "no model mutant named"),
    (("mutants", "--model", "--only", ""), 2, "no model mutant named"),
    (("mutants", "--model", "--seed", "3"), 2, "take none of them"),
    (("mutants", "--model", "--profile", "dev"), 2, "take none of them"),
    # demo
    (("demo", "nonsense"), 2, "No such command"),
    (("demo", "query", "--dir", "a-file"), 2, "cannot write into"),
    (("demo", "approval", "--dir", "no/such"), 2, "does not exist"),
    (("demo", "ledger", "--dir", "."), 2, "is not empty"),
    (("demo", "query", "--no-such-option"), 2, "No such option"),
    # bench
    (("bench", "--quick", "--dir", "a-file"), 2, "cannot write into"),
    (("bench", "--quick", "--dir", "no/such"), 2, "does not exist"),
    (("bench", "--quick", "--store", "x.db'; DROP"), 2, "is neither 'sqlite'"),
    (("bench", "--no-such-option"), 2, "No such option"),
    # diagrams and spec
    (("diagrams", "--root", "a-file"), 2, "cannot write"),
    (("diagrams", "--root", "no/such/root"), 2, "does not exist"),
    (("diagrams", "--root", "binary.bin"), 2, "cannot write"),
    (("diagrams", "--check"), 2, "not a settled checkout"),
    (("diagrams", "--no-such-option"), 2, "No such option"),
    (("spec", "--root", "a-file"), 2, "cannot write"),
    (("spec", "--root", "no/such/root"), 2, "does not exist"),
    (("spec", "--root", "binary.bin"), 2, "cannot write"),
    (("spec", "--check"), 2, "not a settled checkout"),
    (("spec", "--no-such-option"), 2, "No such option"),
    # review
    (("review", "--out", "a-file"), 2, "cannot write into a-file"),
    (("review", "--out", "no/such/site"), 2, "does not exist"),
    (("review", "--out", "binary.bin/site"), 2, "not a folder"),
    (("review", "--verify", "missing.json"), 2, "no such file"),
    (("review", "--verify", "binary.bin"), 2, "binary content"),
    (("review", "--verify", "empty.jsonl"), 2, "not JSON"),
    (("review", "--counterexamples", "binary.bin"), 2, "binary content"),
    (("review", "--check"), 2, "not a settled checkout"),
    (("review", "--no-such-option"), 2, "No such option"),
    # verify: every --root here is not a checkout (missing, a file, binary, an empty folder)
    (("verify", "--profile", "nonsense"), 2, "unknown profile"),
    (("verify", "--root", "no/such"), 2, "not a settled checkout"),
    (("verify", "--root", "a-file"), 2, "not a settled checkout"),
    (("verify", "--root", "binary.bin"), 2, "not a settled checkout"),
    (("verify", "--root", "a-folder"), 2, "not a settled checkout"),
    (("verify", "--write"), 2, "not a settled checkout"),
    (("verify", "--store", "mysql://x'; DROP"), 2, "is neither 'sqlite'"),
    (("verify", "--seed", "many"), 2, "--seed"),
    (("verify", "--no-such-option"), 2, "No such option"),
    (("verify", "--allow-unchecked", "query.nonsense"), 2, "--allow-unchecked names"),
    # the command line itself
    (("nonsense",), 2, "No such command"),
    (("-x",), 2, "No such option"),
]
COMMANDS = ["check", "export", "export-trace", "explore", "lockstep", "replay", "mutants", "demo", "bench",
            "diagrams", "spec", "review", "verify"]


def test_every_command_meets_every_class_of_careless_input() -> None:
    from settled.cli import COMMANDS as DECLARED

    assert sorted(COMMANDS) == sorted(DECLARED), "a command without careless-input cases"
    for command in COMMANDS:
        mine = [args for args, _, _ in CASES if args[0] == command]
        assert len(mine) >= 4 and any("--no-such-option" in a for a in mine), command


def _one_line_and_nothing_touched(junk: Path, done: subprocess.CompletedProcess[str],
                                  code: int, says: str, before: list[str]) -> None:
    lines = _lines(done.stderr)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    assert len(lines) == 1, lines
    assert says in lines[0], lines[0]
    # Nothing was created or turned into something else in the user's folder.
    assert sorted(p.name for p in junk.iterdir()) == before
    assert (junk / "binary.bin").read_bytes() == bytes(range(256)) * 16
    assert (junk / "empty.jsonl").read_bytes() == b""


@pytest.mark.parametrize(("args", "code", "says"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_careless_call_is_one_line_and_a_documented_exit_code(
        junk: Path, args: tuple[str, ...], code: int, says: str) -> None:
    before = sorted(p.name for p in junk.iterdir())
    done = settled(*args, cwd=junk)
    _one_line_and_nothing_touched(junk, done, code, says, before)
    if "--json" not in args:
        assert done.stdout == "", done.stdout  # the error is said on stderr only


# One careless call of each command, and each kind of error, again with --json: the same line
# on stderr, and on stdout one JSON document with the exit code under the one key.
JSON_CASES = [c for c in CASES if c[0][0] in ("nonsense", "-x")] + [
    next(c for c in CASES if c[0][0] == command and "--no-such-option" not in c[0])
    for command in COMMANDS] + [next(c for c in CASES if c[0][0] == command
                                     and "--no-such-option" in c[0]) for command in COMMANDS]


@pytest.mark.parametrize(("args", "code", "says"), JSON_CASES,
                         ids=[" ".join(c[0]) for c in JSON_CASES])
def test_a_careless_call_with_json_prints_a_json_error(
        junk: Path, args: tuple[str, ...], code: int, says: str) -> None:
    import json

    before = sorted(p.name for p in junk.iterdir())
    done = settled(*args, *(() if "--json" in args else ("--json",)), cwd=junk)
    _one_line_and_nothing_touched(junk, done, code, says, before)
    [line] = done.stdout.splitlines()
    doc = json.loads(line)
    assert doc["ok"] is False and doc["exit_code"] == code, doc
    assert "exit" not in doc  # one exit key, everywhere
    assert says in doc["message"] and doc["error"] in ("usage", "bad_input", "unreadable"), doc


def test_no_arguments_still_prints_the_help(junk: Path) -> None:
    done = settled(cwd=junk)
    assert done.returncode == 2 and "Commands" in done.stdout


def test_the_orders_sandbox_opens_a_relative_path(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``settled bench --dir RELATIVE`` reached the read-only sandbox with a relative path,
    which a file URI cannot express."""
    import sqlite3

    from settled.impl.platform._orders_data import Sandbox

    sqlite3.connect(tmp_path / "orders.db").close()
    monkeypatch.chdir(tmp_path)
    Sandbox(Path("orders.db"))


def test_export_trace_writes_through_a_symlink_and_to_a_device(tmp_path: Path) -> None:
    from settled._demo_query import demo_query

    demo_query(tmp_path)
    store = str(tmp_path / "query-store.db")
    (tmp_path / "link.jsonl").symlink_to("target.jsonl")
    done = settled("export-trace", store, "-o", "link.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "link.jsonl").is_symlink()
    assert (tmp_path / "target.jsonl").read_text().count("\n") == 11
    assert (tmp_path / "target.jsonl").stat().st_mode & 0o044  # not private like a temp file
    assert settled("export-trace", store, "-o", "/dev/null", cwd=tmp_path).returncode == 0
    assert Path("/dev/null").is_char_device()
    if Path("/dev/full").exists():
        full = settled("export-trace", store, "-o", "/dev/full", cwd=tmp_path)
        assert full.returncode == 2 and "No space left" in full.stderr
        assert Path("/dev/full").is_char_device()
