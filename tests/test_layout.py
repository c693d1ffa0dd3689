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


# The kit's rooms, by concern: the generic ones (exploration, liveness, lockstep, trace
# checking) hold any implementation to a model; the bundled room adapts our own runtimes;
# the catalogue plants bugs in them. A generic room never reaches the two others.
GENERIC_ROOMS = ("_explore", "_liveness", "_lockstep", "_trace")
SPECIFIC = ("settled.conformance._bundled", "settled.conformance.mutants")
# The implementation's own instrumentation points that the generic kit drives: the crash
# hook (the crash sweep) and the transaction-boundary hook (controlled concurrent schedules).
IMPL_HOOKS = ("settled.impl.shared._crash", "settled.impl.shared._db")


def test_the_generic_rooms_never_import_the_bundled_adapters_or_the_catalogue() -> None:
    bad = {f"{p.relative_to(ROOT)}: {name}" for room in GENERIC_ROOMS
           for p in (ROOT / "conformance" / room).rglob("*.py") for name in _imports(p)
           if name.startswith(SPECIFIC)
           or (name.startswith("settled.impl") and name != "settled.impl.shared"
               and not name.startswith(IMPL_HOOKS))}
    assert not bad, f"move the code or pass it in: {sorted(bad)}"


def test_the_room_check_sees_a_generic_room_reaching_the_bundled_one() -> None:
    probe = ROOT / "conformance" / "_lockstep" / "_probe.py"  # never written
    names = _imports(probe, "from .._bundled._suites import SUITES\n")
    assert any(n.startswith(SPECIFIC) for n in names)


# Rooms a reader can hold in mind: no module over about 500 lines, but these, each with why.
OVER_500 = {
    "conformance/_explore/_system.py": "the system explorer's compiled space and its search",
    "conformance/_bundled/_query_adapter.py": "the query runtime's adapter",
    "conformance/mutants/query.py": "the query catalogue: one class a mutant, each the shipped "
                                    "method plus its marked bug",
    "conformance/mutants/approval.py": "the approval catalogue, as mutants/query.py",
    "conformance/_api.py": "the public API: lockstep, lockstep_case, the report and replay",
}


def test_no_module_of_the_kit_is_over_500_lines_unless_listed_with_why() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines())
             for p in (ROOT / "conformance").rglob("*.py")}
    over = {p for p, n in sizes.items() if n > 500}
    assert over <= set(OVER_500), f"split these, or list them with why: {sorted(over - set(OVER_500))}"
    shrunk = set(OVER_500) - over
    assert not shrunk, f"these are 500 lines or fewer now: take them off OVER_500: {sorted(shrunk)}"


def test_the_kit_and_the_command_line_use_only_the_models_public_names() -> None:
    bad = {f"{p.relative_to(ROOT)}: {name}" for layer in ("conformance", "settled")
           for p in (ROOT / layer).rglob("*.py") for name in _imports(p)
           if name.startswith("settled.model._")}
    assert not bad, f"export the name from settled.model (or settled.model.expr): {sorted(bad)}"


def test_the_public_model_check_sees_a_private_import() -> None:
    probe = ROOT / "conformance" / "_probe.py"  # never written
    assert "settled.model._core.Value" in _imports(probe, "from ..model._core import Value\n")
