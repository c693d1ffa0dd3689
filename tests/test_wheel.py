"""An installed wheel, no checkout: ``settled verify`` checks the views shipped in the wheel
against the model shipped in it (it used to skip them and still say OK), and a --root that is
not a checkout is exit 2.

The wheel is built from a copy of the source (``pip wheel --no-deps``; its build backend comes
from the package index, as for any user) and installed into a folder of its own. The installed
code runs with ``python -S`` and that folder first on the path: the checkout's own editable
install (a site-packages hook) is not loaded, so nothing can come from the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import postgres_missing

ROOT = Path(__file__).resolve().parents[1]
SKIP = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache",
                              ".hypothesis", "settled-counterexamples", "*.db")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("wheel")
    source = base / "src"
    shutil.copytree(ROOT, source, ignore=SKIP, symlinks=True)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                            str(base / "dist"), str(source)], capture_output=True, text=True,
                           check=False, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (base / "dist").glob("settled-*.whl")
    target = base / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                           str(target), str(wheel)], capture_output=True, text=True, check=False,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    yield target


def _run(target: Path, cwd: Path, *args: str, code: str | None = None,
         ) -> subprocess.CompletedProcess[str]:
    """The installed package only: no site hooks, the wheel's folder first, then the
    dependencies' folders."""
    paths = [str(target), *dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(paths)
    command = ["-c", code, *args] if code is not None else ["-m", "settled.cli", *args]
    return subprocess.run([sys.executable, "-S", *command], capture_output=True, text=True,
                          check=False, cwd=cwd, env=env, timeout=1800)


VIEW_CHECK = """
import json, sys
import settled
from settled import _verify
print(json.dumps({"from": settled.__file__, "shipped": str(_verify.SHIPPED),
                  "stale": _verify.check_views(None, write=False)}))
"""


def test_the_wheel_ships_its_views_and_checks_them_from_an_empty_folder(
        installed: Path, tmp_path: Path) -> None:
    done = _run(installed, tmp_path, code=VIEW_CHECK)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["from"].startswith(str(installed)), report  # not the checkout
    shipped = Path(report["shipped"])
    assert shipped.is_relative_to(installed) and (shipped / "SPEC.md").is_file()
    assert (shipped / "rule-tests.json").is_file() and (shipped / "query.svg").is_file()
    assert report["stale"] == []
    # The check can fail: a view that does not match the model is named.
    with (shipped / "query.dot").open("a") as f:
        f.write("// edited\n")
    (shipped / "ledger.mmd").unlink()
    done = _run(installed, tmp_path, code=VIEW_CHECK)
    assert json.loads(done.stdout)["stale"] == ["ledger.mmd", "query.dot"]
    assert not any(tmp_path.iterdir())  # nothing written in the user's folder


def test_the_wheel_refuses_a_root_that_is_not_a_checkout(installed: Path, tmp_path: Path) -> None:
    for args in (("verify", "--root", str(tmp_path)), ("verify", "--root", "nowhere"),
                 ("verify", "--write")):
        done = _run(installed, tmp_path, *args)
        assert done.returncode == 2, (args, done.stderr)
        lines = [line for line in done.stderr.splitlines() if "Fontconfig" not in line]
        assert len(lines) == 1 and "not a settled checkout" in lines[0], done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_settled_verify_from_the_wheel_in_an_empty_folder_checks_the_views_and_passes(
        installed: Path, tmp_path: Path) -> None:
    """The README's main job on PostgreSQL, from the wheel: ``.ci/run`` runs ``settled verify``
    on SQLite in the checkout, and this is its run on a throwaway cluster (one verify a store)."""
    missing = postgres_missing()
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and {missing}: verify on PostgreSQL must run in CI")
        pytest.skip(missing)
    done = _run(installed, tmp_path, "verify", "--store", "temp-postgres", "--profile", "dev",
                "--json")
    report = json.loads(done.stdout)
    assert done.returncode == report["exit_code"] == 0, done.stderr[-2000:]
    assert report["views"]["source"] == "installed package" and report["views"]["stale"] == []
    assert report["views"]["ok"] is True and "skipped" not in report["views"]
    for name in ("query", "approval"):  # the machines with a PostgreSQL store
        assert report["machines"][name]["lockstep"]["store"].startswith("PostgreSQL"), name
        assert report["machines"][name]["concurrent"]["store"] == "PostgreSQL", name
