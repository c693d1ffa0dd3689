"""mypy sees settled.model, settled.impl and settled.conformance as the packages they are.

The top-level folders are mapped into the ``settled`` package by symlinks
(``settled/model -> ../model`` and so on), which mypy follows; an import
across layers that mypy could not resolve would be ``Any`` and let any call
through. The wrong calls below must fail, and the right ones pass, so a
resolution that silently fell back to ``Any`` fails this test."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

WRONG = """\
from settled.model import build_query_machine
from settled.impl.query._store import QueryStore
from settled.conformance._explore import explore

x: int = build_query_machine(workers="two")
explore(build_query_machine(), instances="2")
QueryStore(42)
"""

RIGHT = """\
from settled.model import Protocol, build_query_machine
from settled.conformance._explore import ExploreResult, explore

machine: Protocol = build_query_machine(workers=2)
result: ExploreResult = explore(machine, instances=1, max_states=10)
"""


def _mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("mypy") is None and not _has_mypy():
        pytest.skip("mypy is not installed (pip install -e '.[dev]')")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(ROOT / ".mypy_cache"), "--no-error-summary", str(snippet)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)


def _has_mypy() -> bool:
    try:
        import mypy  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("link", ["model", "impl", "conformance"])
def test_the_layers_are_linked_into_the_package(link: str) -> None:
    path = ROOT / "settled" / link
    assert path.is_symlink() and path.resolve() == (ROOT / link).resolve()


def test_mypy_rejects_wrong_calls_across_layers(tmp_path: Path) -> None:
    out = _mypy(tmp_path, WRONG)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = [x for x in out.stdout.splitlines() if "snippet.py" in x]
    assert any(":5:" in x and "[assignment]" in x for x in lines), out.stdout
    assert any(":5:" in x and "[arg-type]" in x for x in lines), out.stdout
    assert any(":6:" in x and "[arg-type]" in x for x in lines), out.stdout
    assert any(":7:" in x for x in lines), out.stdout


def test_mypy_accepts_right_calls_across_layers(tmp_path: Path) -> None:
    out = _mypy(tmp_path, RIGHT)
    assert out.returncode == 0, out.stdout + out.stderr
