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


CASES = [
    # (arguments, exit code, words the one line says)
    (("check", "missing.jsonl"), 2, "No such file"),
    (("check", "a-folder"), 2, "Is a directory"),
    (("check", "binary.bin"), 2, "line 1: not"),  # not JSON, or not UTF-8 text
    (("check", "empty.jsonl"), 2, "no events"),
    (("check", "empty.jsonl", "--json"), 2, '"ok": false'),  # the line is JSON, on stdout
    (("check", "deep.jsonl"), 2, "nested"),
    (("check", "null.jsonl"), 2, "object"),
    (("export-trace", "binary.bin", "-o", "out.jsonl"), 2, "not a SQLite file"),
    (("export-trace", "empty.jsonl", "-o", "out.jsonl"), 2, "empty"),
    (("export-trace", "a-folder", "-o", "out.jsonl"), 2, "folder"),
    (("export-trace", "binary.bin"), 2, "Missing option"),
    (("explore", "nonsense"), 2, "unknown model"),
    (("explore", "query'; DROP TABLE"), 2, "unknown model"),
    (("explore", "query", "--max-states", "0"), 2, "--max-states"),
    (("explore", "query", "--workers", "-1"), 2, "at least 1"),
    (("explore", "query", "--workers", "abc"), 2, "--workers"),
    (("explore", "approval", "--workers", "2"), 2, "only the query machine"),
    (("explore", "approval", "--queries", "2", "--graph", "g.json"), 2, "--graph"),
    (("explore", "query", "--graph", "a-folder", "--max-states", "5"), 2, "is a folder"),
    (("explore", "query", "--itf", "a-file", "--max-states", "5"), 2, "cannot write into"),
    (("diagrams", "--root", "a-file"), 2, "cannot write"),
    (("spec", "--root", "a-file"), 2, "cannot write"),
    (("spec", "--root", "binary.bin"), 2, "cannot write"),
    (("verify", "--profile", "nonsense"), 2, "unknown profile"),
    (("mutants", "--only", "nonexistent"), 2, "no mutant named"),
    (("demo", "nonsense"), 2, "No such command"),
    (("demo", "query", "--dir", "a-file"), 2, "cannot write into"),
    (("bench", "--quick", "--dir", "a-file"), 2, "cannot write into"),
    (("nonsense",), 2, "No such command"),
    (("explore", "--no-such-option"), 2, "No such option"),
]


@pytest.mark.parametrize(("args", "code", "says"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_careless_call_is_one_line_and_a_documented_exit_code(
        junk: Path, args: tuple[str, ...], code: int, says: str | None) -> None:
    before = sorted(p.name for p in junk.iterdir())
    done = settled(*args, cwd=junk)
    lines = _lines(done.stdout if "--json" in args else done.stderr)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    assert len(lines) == 1, lines
    if says is not None:
        assert says in lines[0], lines[0]
    # Nothing was created or turned into something else in the user's folder.
    assert sorted(p.name for p in junk.iterdir()) == before
    assert (junk / "binary.bin").read_bytes() == bytes(range(256)) * 16
    assert (junk / "empty.jsonl").read_bytes() == b""


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
