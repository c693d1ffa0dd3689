""".ci/run's stages: each is timed, and any failing one fails the run, pytest's "no test ran"
(exit 5) and a background stage included."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _stages(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    body = f"set -uo pipefail\n. {ROOT / '.ci' / 'stages.sh'}\n{script}\n"
    return subprocess.run(["bash", "-c", body], capture_output=True, text=True, check=False,
                          cwd=tmp_path, timeout=120)


def test_every_stage_passing_passes_and_each_is_timed(tmp_path: Path) -> None:
    done = _stages('run "one" true\nstart "two" echo hello\nstart "three" exits 3 '
                   'bash -c "exit 3"\njoin\nfinish', tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("one", "two", "three"):
        assert f"=== stage '{name}': ok in " in done.stdout
    assert "hello" in done.stdout and "CI passed" in done.stdout
    assert "=== 3 stages in" in done.stdout


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="no /proc/stat on this machine")
def test_a_foreground_stage_says_how_busy_the_cores_were(tmp_path: Path) -> None:
    """A stage that only sleeps leaves the cores as busy as the rest of the machine makes
    them; one that computes shows on the line as a share of busy cores between 0 and 100."""
    done = _stages('run "spin" python3 -c "sum(range(3_000_000))"\nfinish', tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    m = re.search(r"=== stage 'spin': ok in \d+ s \(cores (\d+) % busy, (\d+) % waiting on the "
                  r"disk\)", done.stdout)
    assert m is not None, done.stdout
    assert 0 <= int(m.group(2)) <= int(m.group(1)) + int(m.group(2)) <= 100
    assert re.search(r"ok +spin \(cores \d+ % busy", done.stdout), done.stdout


@pytest.mark.parametrize("script", [
    'run "bad" false\nrun "good" true\nfinish',
    'start "bad" false\nstart "good" true\njoin\nfinish',
    'run "bad" exits 1 true\nfinish',  # a planted bug that was not caught
    'finish',  # nothing ran at all
])
def test_any_failing_stage_fails_the_run(tmp_path: Path, script: str) -> None:
    done = _stages(script, tmp_path)
    assert done.returncode == 1, done.stdout
    assert "CI passed" not in done.stdout


def test_pytest_running_no_test_fails_the_stage(tmp_path: Path) -> None:
    (tmp_path / "test_nothing.py").write_text("")
    done = _stages('run "empty" tests -q -p no:cacheprovider test_nothing.py\nfinish', tmp_path)
    assert done.returncode == 1
    assert "no test ran (exit 5)" in done.stdout and "FAILED (exit 5)" in done.stdout


def test_ci_runs_its_campaigns_on_both_cores_and_its_stages_through_the_helpers() -> None:
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ". .ci/stages.sh" in text and text.rstrip().endswith("finish")
    assert 'tests -n 2' in text and 'tests -m slow -n 2 --dist worksteal' in text
    # every command runs as a stage: no bare pytest or settled line escapes the verdict
    for line in text.replace("\\\n", " ").splitlines():
        bare = line.strip()
        if bare.startswith(("pytest", "settled")):
            raise AssertionError(f"a command outside a stage: {line}")


def test_the_slow_stage_starts_both_workers_on_its_longest_tests() -> None:
    from types import SimpleNamespace

    from conftest import LONGEST, longest_first_in_both_halves

    bench, wheel, catalogue = list(LONGEST)[:3]
    names = ["tests/test_a.py::one", f"{catalogue}_and_passes_the_baseline", "tests/test_a.py::two",
             f"{bench}", "tests/test_b.py::one", "tests/test_b.py::two",
             f"{wheel}_checks_the_views_and_passes", "tests/test_c.py::one"]
    items: Any = [SimpleNamespace(nodeid=n) for n in names]
    got = [i.nodeid for i in longest_first_in_both_halves(items)]
    half = len(got) // 2  # worksteal's first worker takes got[:half], the second the rest
    assert got[:half] == [bench, f"{catalogue}_and_passes_the_baseline", "tests/test_a.py::one",
                          "tests/test_a.py::two"]
    assert got[half:] == [f"{wheel}_checks_the_views_and_passes", "tests/test_b.py::one",
                          "tests/test_b.py::two", "tests/test_c.py::one"]
    assert sorted(got) == sorted(names)
    plain: Any = [SimpleNamespace(nodeid=n) for n in ("tests/test_a.py::one", "tests/test_a.py::two")]
    assert longest_first_in_both_halves(plain) == plain  # no long test: the order stands
