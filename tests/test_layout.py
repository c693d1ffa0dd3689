"""The layers: ``model/`` imports neither ``impl/`` nor ``conformance/``; ``impl/`` never imports
``conformance/``; every package folder is shipped in the wheel."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _imports(path: Path, text: str | None = None) -> set[str]:
    """The absolute names a module imports (relative imports resolved against its package)."""
    package = ["settled", *path.relative_to(ROOT).parent.parts]
    out: set[str] = set()
    source = path.read_text() if text is None else text
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            head = ".".join([*base, *([node.module] if node.module else [])])
            out.add(head)
            out.update(f"{head}.{a.name}" for a in node.names)
    return out


@pytest.mark.parametrize(("layer", "forbidden"), [
    ("model", ("settled.impl", "settled.conformance")),
    ("impl", ("settled.conformance",)),
])
def test_a_layer_never_imports_the_layers_above_it(layer: str, forbidden: tuple[str, ...]) -> None:
    bad = {f"{p.relative_to(ROOT)}: {name}" for p in (ROOT / layer).rglob("*.py")
           for name in _imports(p) if name.startswith(forbidden)}
    assert not bad


def test_the_check_sees_a_forbidden_import() -> None:
    probe = ROOT / "impl" / "query" / "_probe.py"  # never written: only its package matters
    assert "settled.conformance._lockstep" in _imports(probe, "from ...conformance import _lockstep\n")
    assert "settled.impl.shared._db" in _imports(probe, "from ..shared._db import write\n")


def test_every_package_folder_is_in_the_wheel() -> None:
    shipped = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                  ["packages"])
    folders = {"settled." + ".".join(p.parent.relative_to(ROOT).parts)
               for layer in ("model", "impl", "conformance") for p in (ROOT / layer).rglob("__init__.py")}
    assert folders <= shipped, f"add {sorted(folders - shipped)} to [tool.setuptools] packages"
