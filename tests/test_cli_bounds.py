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
    # lower bounds than the defaults: the defaults' measured figure is an upper bound
    assert "estimate: at most 18,054 states" in done.stderr
    assert "model bounds: max_epoch 1, max_task_version 1" in _settled(
        "explore", "query", "--max-epoch", "1", "--max-task-version", "1").stdout


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


def test_the_memory_estimate_at_other_bounds_is_measured_bounded_or_none() -> None:
    for (model, queries, workers, epoch, version), states in MEASURED_AT_BOUNDS.items():
        guess = estimate(model, queries, workers, bounds=(epoch, version))
        assert guess is not None and guess.measured and guess.states == states
        assert guess.bound == ""
    # The defaults asked aloud are the defaults' figure.
    assert estimate("query", 2, 2, bounds=(2, 2)) == estimate("query", 2, 2)
    assert estimate("query", 1, 2, bounds=(3, None)) == estimate("query", 1, 2)
    default = estimate("query", 1, 2)
    assert default is not None and default.fits
    # Below the defaults their figure bounds the space from above: known to fit when it fits.
    low = estimate("query", 1, 2, bounds=(1, None))
    assert low is not None and low.bound == "at most" and low.states == default.states
    assert low.fits and not low.cannot_fit
    # Above them, from below: never known to fit, known not to when even that does not.
    high = estimate("query", 1, 2, bounds=(4, 4))
    assert high is not None and high.bound == "at least" and high.states == default.states
    assert not high.fits and not high.cannot_fit
    huge = estimate("query", 3, 4, bounds=(9, 9))
    assert huge is not None and huge.bound == "at least" and huge.cannot_fit
    # One above and one below: nothing bounds it, unless --max-states caps the run.
    assert estimate("query", 1, 2, bounds=(9, 1)) is None
    capped = estimate("query", 1, 2, bounds=(9, 1), max_states=500)
    assert capped is not None and capped.states == 500 and capped.fits
    above = estimate("query", 1, 2, bounds=(4, 4), max_states=10**6)
    assert above is not None and above.bound == "at most" and above.fits


@pytest.mark.parametrize("args", [
    ("query", "--max-epoch", "4"),  # above the defaults: a lower bound only
    ("query", "--max-epoch", "9", "--max-task-version", "1"),  # one above, one below
    ("query", "--queries", "3", "--workers", "2", "--max-epoch", "2",
     "--max-task-version", "1"),  # below, but the defaults' figure does not fit
    ("query", "--max-epoch", "4", "--engine", "spin"),
])
def test_a_run_at_bounds_nothing_shows_to_fit_is_refused_in_one_line(args: tuple[str, ...]
                                                                      ) -> None:
    done = _settled("explore", *args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().count("\n") == 0 and "--max-states N" in done.stderr
    assert "Traceback" not in done.stderr


def test_max_states_lets_a_run_at_unmeasured_bounds_through_capped() -> None:
    done = _settled("explore", "query", "--max-epoch", "4", "--max-states", "300", "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 3 and not report["bounds"]["complete"]  # capped: incomplete
    assert report["memory_estimate"]["states"] == 300
    assert report["model_bounds"] == {"max_epoch": 4, "max_task_version": 3}


def test_an_unknown_model_with_a_bound_is_named_as_unknown() -> None:
    done = _settled("explore", "nosuch", "--max-epoch", "1")
    assert done.returncode == 2 and "unknown model 'nosuch'" in done.stderr


@pytest.mark.slow
def test_the_rows_measured_at_other_bounds_are_the_states_explore_reaches() -> None:
    from settled.conformance._explore._system import explore_system
    from settled.model.systems import build_query_system

    for (model, queries, workers, epoch, version), states in MEASURED_AT_BOUNDS.items():
        assert model == "query"
        result = explore_system(build_query_system(queries, workers, max_epoch=epoch,
                                                   max_task_version=version))
        assert result.complete and result.states == states
