"""``--max-epoch`` and ``--max-task-version``: the query model's bounds from the command line
(``settled/_bounds.py``), for explore and export, and the memory estimate at other bounds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from settled._memory import MEASURED_AT_BOUNDS, estimate


def _settled(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "settled.cli", *args], capture_output=True,
                          text=True, check=False)


def test_the_machines_bounds_set_on_the_command_line_are_the_ones_explored() -> None:
    from settled.conformance._explore import explore
    from settled.model import build_query_machine

    done = _settled("explore", "query", "--max-epoch", "1", "--max-task-version", "1", "--json")
    report = json.loads(done.stdout)
    assert report["model_bounds"] == {"max_epoch": 1, "max_task_version": 1}
    low = explore(build_query_machine(max_epoch=1, max_task_version=1))
    assert report["states"] == low.states < json.loads(
        _settled("explore", "query", "--json").stdout)["states"]
    # At these bounds invalidated is never reached: said, so the exit is 1, not a silent 0.
    assert done.returncode == 1
    assert [f["name"] for f in report["unreached_states"]] == ["invalidated"]
    assert "no measured run of query with 1 instance(s) at --max-epoch 1" in done.stderr


def test_unasked_bounds_are_the_models_defaults_and_say_so() -> None:
    machine = json.loads(_settled("explore", "query", "--json").stdout)
    assert machine["model_bounds"] == {"max_epoch": 3, "max_task_version": 3}
    system = json.loads(_settled("explore", "query", "--queries", "2", "--max-states", "50",
                                 "--json").stdout)
    assert system["model_bounds"] == {"max_epoch": 2, "max_task_version": 2}
    assert json.loads(_settled("explore", "approval", "--json").stdout)["model_bounds"] == {}


def test_a_systems_bound_reaches_the_system_explored() -> None:
    done = _settled("explore", "query", "--queries", "2", "--workers", "1", "--max-epoch", "1",
                    "--max-task-version", "1", "--max-states", "3000", "--json")
    report = json.loads(done.stdout)
    assert report["model_bounds"] == {"max_epoch": 1, "max_task_version": 1}
    assert done.returncode == 3 and not report["complete"]  # --max-states: said incomplete


@pytest.mark.parametrize("args", [("explore", "approval", "--max-epoch", "2"),
                                  ("explore", "ledger", "--queries", "2",
                                   "--max-task-version", "1"),
                                  ("export", "--promela", "approval", "--max-epoch", "1"),
                                  ("export", "--quint", "ledger", "--queries", "2",
                                   "--max-epoch", "1")])
def test_a_bound_on_a_model_without_one_is_refused_in_one_line(args: tuple[str, ...]) -> None:
    done = _settled(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().count("\n") == 0 and "only the query model" in done.stderr


@pytest.mark.parametrize("value", ["0", "10", "x", ""])
def test_a_bound_out_of_range_is_a_usage_error(value: str) -> None:
    done = _settled("explore", "query", "--max-epoch", value)
    assert done.returncode == 2 and "--max-epoch" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_promela_export_is_rendered_at_the_bounds_asked(tmp_path: Path) -> None:
    low, default = tmp_path / "low.pml", tmp_path / "default.pml"
    assert _settled("export", "--promela", "query", "--max-epoch", "1", "-o", str(low)
                    ).returncode == 0
    assert _settled("export", "--promela", "query", "-o", str(default)).returncode == 0
    assert "v_lease_epoch <= 1)" in low.read_text() and "v_lease_epoch <= 1)" not in (
        default.read_text())


def test_the_memory_estimate_at_other_bounds_is_measured_or_none() -> None:
    for (model, queries, workers, epoch, version), states in MEASURED_AT_BOUNDS.items():
        guess = estimate(model, queries, workers, bounds=(epoch, version))
        assert guess is not None and guess.measured and guess.states == states
    # The defaults asked aloud are the defaults' figure; other bounds have none, not a guess.
    assert estimate("query", 2, 2, bounds=(2, 2)) == estimate("query", 2, 2)
    assert estimate("query", 1, 2, bounds=(3, None)) == estimate("query", 1, 2)
    assert estimate("query", 2, 2, bounds=(1, None)) is None
    assert estimate("query", 1, 2, bounds=(4, 4)) is None


@pytest.mark.slow
def test_the_rows_measured_at_other_bounds_are_the_states_explore_reaches() -> None:
    from settled.conformance._explore._system import explore_system
    from settled.model.systems import build_query_system

    for (model, queries, workers, epoch, version), states in MEASURED_AT_BOUNDS.items():
        assert model == "query"
        result = explore_system(build_query_system(queries, workers, max_epoch=epoch,
                                                   max_task_version=version))
        assert result.complete and result.states == states
