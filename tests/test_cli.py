"""The command line's shell: version, help, and what it loads to print them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from settled import __version__
from settled._memory import MEASURED

PROBE = """
import sys
from pathlib import Path
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


def _settled(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "settled.cli", *args], capture_output=True,
                          text=True, check=False, cwd=cwd)


def test_an_exploration_cut_short_says_incomplete_and_exits_3() -> None:
    done = _settled("explore", "query", "--max-states", "50")
    assert done.returncode == 3
    assert "INCOMPLETE: stopped at" in done.stdout
    assert "no violations" not in done.stdout


@pytest.mark.parametrize("args", [("--queries", "99999999999999999999"), ("--workers", "9")])
def test_bounds_past_the_maximum_are_refused_before_any_work(args: tuple[str, ...]) -> None:
    done = _settled("explore", "query", *args)
    assert done.returncode == 2
    assert "over the maximum" in done.stderr and "Traceback" not in done.stderr


def test_an_exploration_says_how_much_memory_it_will_take() -> None:
    done = _settled("explore", "approval", "--json")
    assert done.returncode == 0
    assert "estimate: about 271 states" in done.stderr and "(measured)" in done.stderr
    report = json.loads(done.stdout)
    assert report["memory_estimate"]["states"] == 271 == report["states"]


def test_an_exploration_that_cannot_fit_in_memory_is_refused_before_any_work() -> None:
    # Three queries of the query system: hundreds of millions of states, far past any laptop.
    done = _settled("explore", "query", "--queries", "3")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "GB of memory (extrapolated" in done.stderr and "--max-states" in done.stderr
    assert done.stdout == ""


def test_the_memory_estimate_follows_measured_figures_and_caps_at_max_states() -> None:
    from settled._memory import estimate

    for (model, queries, workers), states in MEASURED.items():
        guess = estimate(model, queries, workers)
        assert guess is not None and guess.measured and guess.states == states
    assert estimate("a_machine_nobody_measured", 1, None) is None
    # Unasked, the query system has one worker process; three queries still cannot fit.
    huge = estimate("query", 3, None, limit=16 * 2**30)
    assert huge is not None and not huge.fits and huge.states > 100 * MEASURED[("query", 2, 1)]
    capped = estimate("query", 3, None, max_states=1000, limit=16 * 2**30)
    assert capped is not None and capped.fits and capped.states == 1000
    # Each worker and each instance only ever adds states.
    for model, workers in (("query", 1), ("query", 2), ("query", 3), ("approval", None),
                           ("ledger", None)):
        sizes = [getattr(estimate(model, n, workers), "states", None) for n in (1, 2, 3)]
        assert sizes == sorted(sizes), (model, workers, sizes)


def _reached(model: str, queries: int, workers: int | None) -> int:
    """The states ``settled explore`` reaches for a row of the memory table (its builders, its
    sizes: one worker process and one unit of stock unless asked)."""
    from settled._cmd_explore import machine_for
    from settled._cmd_spin_system import system_for
    from settled.conformance._explore import explore
    from settled.conformance._explore._system import explore_system

    if queries == 1:
        result = explore(machine_for(model, workers))
        assert result.complete
        return result.states
    result = explore_system(system_for(model, queries, workers, None))
    assert result.complete
    return result.states


SMALL_ROWS = [key for key, states in MEASURED.items() if states <= 110_000]


@pytest.mark.parametrize("row", SMALL_ROWS, ids=lambda r: f"{r[0]}-{r[1]}x{r[2]}")
def test_the_memory_tables_small_rows_are_the_states_explore_reaches_today(
        row: tuple[str, int, int | None]) -> None:
    """The estimate's table is measured, not remembered: a model change that moves a count
    fails here (the rows past 110,000 states: the slow tests that explore them)."""
    assert _reached(*row) == MEASURED[row]


def test_the_memory_tables_rows_are_each_checked_somewhere() -> None:
    """Every row of the table is one of the small rows above or one of the large rows a slow
    test explores (so a row added later is not left unchecked)."""
    large = {("query", 2, 1), ("query", 2, 2), ("approval", 3, None)}
    assert set(MEASURED) == set(SMALL_ROWS) | large
    assert not large & set(SMALL_ROWS)


@pytest.mark.slow
def test_the_memory_tables_three_call_approval_row_is_the_states_explore_reaches() -> None:
    assert _reached("approval", 3, None) == MEASURED[("approval", 3, None)]


def test_an_unwritable_itf_folder_is_refused_before_the_exploration(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    done = _settled("explore", "query", "--itf", str(blocker / "sub"))
    assert done.returncode == 2
    assert "cannot write into" in done.stderr and "Traceback" not in done.stderr
    assert "states" not in done.stdout  # nothing was explored


def test_checking_diagrams_outside_a_checkout_says_so_and_exits_2(tmp_path: Path) -> None:
    for command in ("diagrams", "spec"):
        done = _settled(command, "--check", cwd=str(tmp_path))
        assert done.returncode == 2
        assert "not a settled checkout" in done.stderr
    assert not any(tmp_path.iterdir())  # and nothing was written


def test_a_missing_view_in_a_checkout_is_called_missing_not_stale(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    for name in ("pyproject.toml",):
        (tmp_path / name).write_text((root / name).read_text())
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "query.py").write_text("")
    done = _settled("spec", "--check", "--root", str(tmp_path))
    assert done.returncode == 1
    assert "missing" in done.stderr and "stale" not in done.stderr


def test_writing_views_into_an_unwritable_place_is_one_line_with_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    done = _settled("diagrams", "--root", str(blocker))
    assert done.returncode == 2
    assert "cannot write" in done.stderr and "Traceback" not in done.stderr


def test_a_demo_keeps_its_databases_in_dir_for_export_trace(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    done = _settled("demo", "query", "--dir", str(keep))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"databases kept in {keep}" in done.stdout
    store = keep / "query-store.db"
    assert store.is_file()
    exported = _settled("export-trace", str(store), "-o", str(tmp_path / "t.jsonl"))
    assert exported.returncode == 0
    again = _settled("demo", "query", "--dir", str(keep))
    assert again.returncode == 2 and "is not empty" in again.stderr


def test_a_store_that_is_no_store_is_one_line_with_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    for command in (["verify", "--store", "mysql://x"], ["bench", "--quick", "--store", "x.db"]):
        done = _settled(*command)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "is neither 'sqlite'" in done.stderr and "Traceback" not in done.stderr
    monkeypatch.setenv("SETTLED_STORE", "nonsense")
    done = _settled("verify")
    assert done.returncode == 2 and "'nonsense'" in done.stderr


def test_a_closed_pipe_is_exit_141_and_silent(tmp_path: Path) -> None:
    """The reader stops early (``| head``): no traceback, the shell's code for a closed pipe."""
    import subprocess
    import sys

    reader = subprocess.Popen(
        [sys.executable, "-m", "settled.cli", "explore", "query", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    assert reader.stdout is not None
    reader.stdout.read(10)
    reader.stdout.close()  # like head -c 10
    _, err = reader.communicate(timeout=300)
    assert reader.returncode in (0, 141), err
    assert b"Traceback" not in err and b"BrokenPipe" not in err


def test_an_output_file_in_a_missing_folder_is_refused_not_created(tmp_path: Path) -> None:
    import subprocess
    import sys

    target = tmp_path / "no" / "such" / "folder" / "graph.json"
    out = subprocess.run([sys.executable, "-m", "settled.cli", "explore", "approval", "--graph",
                          str(target)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr
    assert "does not exist" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "no").exists()


def test_an_output_folder_under_a_missing_folder_is_an_error_not_a_new_tree(tmp_path: Path) -> None:
    missing = tmp_path / "typo" / "kept"
    done = _settled("demo", "query", "--dir", str(missing))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "does not exist" in done.stderr
    assert not (tmp_path / "typo").exists()  # nothing was created


WITHOUT_PSYCOPG = """
import sys
sys.modules["psycopg"] = None  # as on an installation without the postgres extra
sys.argv = ["settled", *sys.argv[1:]]
from settled import cli
cli.main()
"""


@pytest.mark.parametrize("args", [("verify", "--store", "postgresql://u@localhost/db"),
                                  ("verify", "--store", "temp-postgres"),
                                  ("export-trace", "postgresql://u@localhost/db", "-o", "-")])
def test_postgresql_without_its_extra_is_one_line_naming_the_extra(
        tmp_path: Path, args: tuple[str, ...]) -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_PSYCOPG, *args], capture_output=True,
                          text=True, check=False, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'settled[postgres]'" in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_the_library_without_psycopg_names_the_extra() -> None:
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "from settled.impl.shared._pg import PgConnection, PostgresMissing\n"
            "try:\n    PgConnection('postgresql://u@h/db', 'SERIALIZABLE', 1.0)\n"
            "except PostgresMissing as e:\n    print('MISSING', e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert "MISSING PostgreSQL support needs psycopg" in done.stdout, done.stderr
    assert "settled[postgres]" in done.stdout


# --------------------------------------------------------------------------- the uniform shell
def test_every_command_takes_h_as_help_and_shows_plain_flags() -> None:
    from settled import cli

    for name in [*cli.COMMANDS, "demo query"]:
        short = _settled(*name.split(), "-h")
        long = _settled(*name.split(), "--help")
        assert short.returncode == long.returncode == 0, (name, short.stderr)
        assert short.stdout == long.stdout and "Usage: settled" in short.stdout, name
        assert "<bool>" not in short.stdout and "-h, --help" in short.stdout, short.stdout
    assert "-h, --help" in _settled("-h").stdout


def test_every_report_command_has_json_with_the_one_exit_key(tmp_path: Path) -> None:
    """--json on the commands that had none (export-trace, diagrams, spec), and the exit key
    of a report is the same one as an error's."""
    root = Path(__file__).resolve().parents[1]
    for command in ("diagrams", "spec"):
        done = _settled(command, "--check", "--json", "--root", str(root))
        doc = json.loads(done.stdout)
        assert done.returncode == doc["exit_code"] == 0 and doc["ok"] is True, done.stderr
        assert doc["stale"] == doc["missing"] == [] and doc["files"], doc
    written = _settled("spec", "--json", "--root", str(tmp_path))
    doc = json.loads(written.stdout)
    assert doc["exit_code"] == 0 and "SPEC.md" in doc["written"] and "rule-tests.json" in doc["files"]
    stale = _settled("spec", "--check", "--json", "--root", str(root / "tests"))  # not a checkout
    assert stale.returncode == 2 and json.loads(stale.stdout)["exit_code"] == 2
    from settled._demo_query import demo_query

    demo_query(tmp_path)
    exported = _settled("export-trace", str(tmp_path / "query-store.db"), "-o",
                        str(tmp_path / "t.jsonl"), "--json")
    doc = json.loads(exported.stdout)
    assert exported.returncode == doc["exit_code"] == 0 and doc["events"] == 11, exported.stderr
    assert (tmp_path / "t.jsonl").read_text().count("\n") == 11


def test_a_stale_view_is_exit_1_in_the_json_too(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "diagrams").mkdir()
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "query.py").write_text("")
    (tmp_path / "pyproject.toml").write_text((root / "pyproject.toml").read_text())
    (tmp_path / "diagrams" / "SPEC.md").write_text("old\n")
    done = _settled("spec", "--check", "--json", "--root", str(tmp_path))
    doc = json.loads(done.stdout)
    assert done.returncode == doc["exit_code"] == 1 and doc["ok"] is False
    assert doc["stale"] == ["SPEC.md"] and doc["missing"] == ["rule-tests.json"]


SLOW_ADAPTER = '''
import pathlib
import time

from examples.query_adapter import correct


def slow():
    adapter = correct()
    perform = adapter.perform

    def slowly(*args, **kwargs):
        pathlib.Path("started").touch()
        time.sleep(0.02)
        return perform(*args, **kwargs)

    adapter.perform = slowly
    return adapter
'''


@pytest.mark.parametrize("as_json", [False, True])
def test_ctrl_c_is_one_line_and_exit_130(tmp_path: Path, as_json: bool) -> None:
    """Interrupted inside a Hypothesis campaign with no --seed (Hypothesis then offers its
    @seed advice): one line, exit 130, nothing else; with --json, the error document too."""
    import os
    import signal
    import time

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "slow_adapter.py").write_text(SLOW_ADAPTER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root),
                                                        os.environ.get("PYTHONPATH", "")])}
    run = subprocess.Popen([sys.executable, "-m", "settled.cli", "lockstep", "slow_adapter:slow",
                            "--out", str(tmp_path / "out"), *(["--json"] if as_json else [])],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           cwd=tmp_path, env=env)
    deadline = time.monotonic() + 120
    while not (tmp_path / "started").exists() and run.poll() is None:
        assert time.monotonic() < deadline, "the campaign never started"
        time.sleep(0.05)
    time.sleep(1.0)  # well inside the campaign
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 130, (out, err)
    assert err.strip().splitlines() == ["settled: interrupted (Ctrl-C); nothing more was checked"]
    assert "@seed" not in out + err and "Traceback" not in out + err
    if as_json:
        doc = json.loads(out)
        assert doc == {"ok": False, "exit_code": 130, "error": "interrupted",
                       "message": "interrupted (Ctrl-C)"}
    else:
        assert out == ""


# --------------------------------------------------------------------------- verify's output
def _machine(states: int, ok: bool = True) -> dict[str, object]:
    lockstep = {"ok": ok, "examples": 1200, "steps": 1_234_567, "seconds": 612.3, "edges": 194,
                "unfired_edges": [] if ok else ["a -> b"], "guard_alternatives": 12,
                "unfired_guard_alternatives": [], "refusals": 14, "unprobed_refusals": [],
                "refusals_never_alone": ["x"], "store": "PostgreSQL postgresql://u@h/db"}
    return {"ok": ok, "static": {"unreachable": []},
            "explore": {"ok": True, "states": states, "seconds": 12.5, "findings": []},
            "system": {"ok": True, "states": states * 40, "states_unreduced": states * 400,
                       "seconds": 98.1, "findings": []},
            "lockstep": lockstep, "trace_check": {"ok": ok, "events": 9_876_543},
            "system_lockstep": {"checked": True, "ok": True, "examples": 4000, "steps": 10**6,
                                "fired": 142, "declared": 142, "seconds": 77.0, "unfired": [],
                                "trace_check": {"ok": True, "events": 10**6}}}


def _table_text(result: dict[str, object], width: int = 80) -> str:
    from rich.console import Console

    from settled._cmd_verify import summary

    console = Console(width=width, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(summary(result))
    return console.export_text()


import os  # noqa: E402


def test_verify_table_reads_at_80_columns_one_line_a_row() -> None:
    result = {"machines": {"query": _machine(1_234_567), "approval": _machine(27_165, ok=False),
                           "ledger": _machine(138)},
              "views": {"ok": True, "stale": [], "source": "checkout"}}
    text = _table_text(result)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, text
    from settled._cmd_verify import ROWS

    for label, _cell in ROWS:  # every row on one line
        assert sum(1 for line in lines if line.strip().startswith(label.strip())) >= 1, label
    body = [line for line in lines if line.strip() and not set(line.strip()) <= {"─", " "}]
    assert len(body) <= len(ROWS) + 6, text  # title, header, caption: no row wraps
    assert "✗ FAILED" in text and "193/194" in text and "1,234,567 states" in text
    assert "14/14" in text  # refusals: the goals (a part never refused alone is not one)


def test_verify_progress_bar_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    from settled import _cmd_verify

    assert _cmd_verify.Bar(False).progress is None  # pytest's stdout is no terminal
    monkeypatch.setattr(_cmd_verify, "err", Console(file=io.StringIO(), force_terminal=True))
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert _cmd_verify.Bar(True).progress is None  # --json: never
    bar = _cmd_verify.Bar(False)
    assert bar.progress is not None
    with bar:
        bar.phase("query: static checks")
        bar.explored(1000, 10, 0.5)
        bar.phase("query: exploring")
        assert bar.task is not None
        task = bar.progress.tasks[0]
        assert task.completed == 1 and task.total == _cmd_verify.phases()


def test_verify_announces_exactly_the_phases_its_bar_counts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from settled import _verify

    class Count(_verify.Watch):
        def __init__(self) -> None:
            self.seen: list[str] = []

        def phase(self, text: str) -> None:
            self.seen.append(text)

    ok = {"ok": True, "states": 1, "states_unreduced": 1, "seconds": 0.0, "findings": []}
    monkeypatch.setattr(_verify, "check_static", lambda p: {})
    monkeypatch.setattr(_verify, "check_explore", lambda p, watch=None: dict(ok))
    monkeypatch.setattr(_verify, "check_system", lambda s, watch=None: dict(ok))
    monkeypatch.setattr(_verify, "check_lockstep",
                        lambda *a, **k: ({"ok": True, "store": "SQLite files"}, {"ok": True}, None))
    monkeypatch.setattr(_verify, "check_system_lockstep", lambda *a: {"checked": False})
    monkeypatch.setattr(_verify, "check_views", lambda root, write: [])
    for machines in (None, ["ledger"], ["query", "approval"]):
        count = Count()
        result = _verify.verify(None, machines=machines, watch=count)
        assert len(count.seen) == _verify.phases(machines), count.seen
        assert result["views"]["source"] == "installed package"
