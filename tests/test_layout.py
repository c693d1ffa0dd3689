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


LAYERS = ("settled", "model", "impl", "conformance")
LINKS = {"conformance", "impl", "model", "views"}  # settled/'s links to the other layers


def _package_modules() -> list[Path]:
    """Every module of the shipped package, each once (settled/'s links to the other layers
    are seen under the layers' own names)."""
    return [path for layer in LAYERS for path in sorted((ROOT / layer).rglob("*.py"))
            if not (layer == "settled" and path.relative_to(ROOT / layer).parts[0] in LINKS)]


# Rooms a reader can hold in mind: no module of the package over about 500 lines, but these,
# each with why.
OVER_500: dict[str, str] = {
    "model/query.py": "the query machine's declaration table (one edge a line), read as a spec",
    "model/approval.py": "the approval machine's declaration table (one edge a line), read as a spec",
}


def test_no_module_of_the_package_is_over_500_lines_unless_listed_with_why() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in _package_modules()}
    assert len(sizes) > 150, f"saw only {len(sizes)} modules: is the walk broken?"
    assert {name.split("/")[0] for name in sizes} == set(LAYERS)
    over = {p for p, n in sizes.items() if n > 500}
    assert over <= set(OVER_500), f"split these, or list them with why: {sorted(over - set(OVER_500))}"
    shrunk = set(OVER_500) - over
    assert not shrunk, f"these are 500 lines or fewer now: take them off OVER_500: {sorted(shrunk)}"


# What impl/ may take from the model: the names of the states it records (each write is gated
# on a declared edge) and the declarations that gate them. Never a constant of the protocol (a
# budget, a set of states): one name on both sides is one the lockstep kit cannot hold apart.
IMPL_FROM_MODEL = {"settled.model", "settled.model.MACHINES", "settled.model.query",
                   "settled.model.query.QueryState", "settled.model.approval",
                   "settled.model.approval.ApprovalState"}


def test_the_implementation_owns_its_constants() -> None:
    from_model = {f"{p.relative_to(ROOT)}: {name}" for p in (ROOT / "impl").rglob("*.py")
                  for name in _imports(p) if name.startswith("settled.model")}
    assert any(n.endswith("settled.model.query.QueryState") for n in from_model), \
        f"saw no import of the model's states in impl/: is the walk broken? {sorted(from_model)}"
    taken = {n for n in from_model if n.split(": ", 1)[1] not in IMPL_FROM_MODEL}
    assert not taken, f"define these in impl/ (lockstep holds them to the model's): {sorted(taken)}"
    probe = _imports(ROOT / "impl" / "query" / "_probe.py",  # never written
                     "from ...model.query import MAX_SUBMISSIONS\n")
    assert "settled.model.query.MAX_SUBMISSIONS" in probe - IMPL_FROM_MODEL


def test_the_kit_and_the_command_line_use_only_the_models_public_names() -> None:
    bad = {f"{p.relative_to(ROOT)}: {name}" for layer in ("conformance", "settled")
           for p in (ROOT / layer).rglob("*.py") for name in _imports(p)
           if name.startswith("settled.model._")}
    assert not bad, f"export the name from settled.model (or settled.model.expr): {sorted(bad)}"


def test_the_public_model_check_sees_a_private_import() -> None:
    probe = ROOT / "conformance" / "_probe.py"  # never written
    assert "settled.model._core.Value" in _imports(probe, "from ..model._core import Value\n")


def _private_names(sources: list[str]) -> tuple[set[str], set[str]]:
    """(the private attribute names these sources define, the private ones they read): a
    name is defined by ``self._x = ...``, a class-level ``_x`` or a method ``def _x``."""
    defined: set[str] = set()
    read: set[str] = set()
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        defined.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        defined.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        defined.update(t.id for t in item.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.Attribute):
                (defined if isinstance(node.ctx, ast.Store) else read).add(node.attr)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id == "getattr" and len(node.args) >= 2
                  and isinstance(node.args[1], ast.Constant)
                  and isinstance(node.args[1].value, str)):
                read.add(node.args[1].value)
    private = {n for n in defined | read if n.startswith("_") and not n.startswith("__")}
    return defined & private, read & private


def _reads_of_model_privates(layer_sources: list[str]) -> tuple[set[str], set[str]]:
    """(the model's private attributes that a layer reads, among them the names the layer
    also defines itself): a name both define cannot be told apart by name alone."""
    model, _ = _private_names([p.read_text() for p in (ROOT / "model").rglob("*.py")])
    own, read = _private_names(layer_sources)
    return read & model, read & model & own


# Private names both the model and the kit define, each read in the kit only on the kit's own
# objects (checked by hand): a name that joins this list must be checked the same way.
SHARED_PRIVATE_NAMES = {"_index", "_lock", "_space"}


def test_the_kit_and_the_command_line_read_no_private_attribute_of_the_model() -> None:
    for layer in ("conformance", "settled"):
        read, shared = _reads_of_model_privates([p.read_text()
                                                 for p in (ROOT / layer).rglob("*.py")])
        assert read - shared == set(), (
            f"{layer}: give the model a public name for these: {sorted(read - shared)}")
        assert shared <= SHARED_PRIVATE_NAMES, (
            f"{layer} reads {sorted(shared - SHARED_PRIVATE_NAMES)}, which the model and the "
            "kit both define: check each read is of the kit's own object, then list it")


def test_the_private_attribute_check_sees_a_read_of_the_plan() -> None:
    assert _reads_of_model_privates(["def f(p):\n    return p._plan\n"]) == ({"_plan"}, set())
    assert _reads_of_model_privates(["def f(p):\n    return getattr(p, '_plan')\n"])[0] == {
        "_plan"}
    assert _reads_of_model_privates(["def f(p):\n    return p.plan\n"]) == (set(), set())
    own = "class K:\n    def __init__(self):\n        self._index = {}\n\ndef f(p):\n    return p._index\n"
    assert _reads_of_model_privates([own]) == ({"_index"}, {"_index"})


# Functions a reader can hold in mind: no function body over about 60 lines, but these, each
# with its length today: the three machine builders, which are declaration tables (one edge
# a line). A listed function may not grow past its length.
LONG_FUNCTION = 60
OVER_60 = {
    "model/query.py::build_query_machine": 250,  # declaration table
    "model/approval.py::build_approval_machine": 172,  # declaration table
    "model/ledger.py::build_ledger_machine": 88,  # declaration table
}


def _body_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's body in lines, from its first statement to the end of its last, the
    docstring left out (nested functions and classes count in the body that holds them)."""
    body = function.body
    if (len(body) > 1 and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
        body = body[1:]
    end = body[-1].end_lineno
    assert end is not None
    return end - body[0].lineno + 1


def _function_lengths(name: str, text: str) -> dict[str, int]:
    """``{"path::Class.method": body lines}`` for every function in one module, nested ones too."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[f"{name}::{prefix}{child.name}"] = _body_lines(child)
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(text, name), "")
    return out


def test_no_function_of_the_package_is_over_60_lines_unless_listed() -> None:
    """Every function in the shipped package (settled/, model/, impl/, conformance/): body lines
    are the last statement's ``end_lineno`` minus the first statement's ``lineno`` plus one, the
    docstring excluded. A listed function that is now 60 lines or fewer (or gone) fails too, so
    the list only shrinks."""
    lengths: dict[str, int] = {}
    for path in _package_modules():
        lengths.update(_function_lengths(str(path.relative_to(ROOT)), path.read_text()))
    assert len(lengths) > 1000, f"saw only {len(lengths)} functions: is the walk broken?"
    over = {name: n for name, n in lengths.items() if n > LONG_FUNCTION}
    unlisted = {name: n for name, n in over.items() if name not in OVER_60}
    assert not unlisted, f"split these, or list them with why: {sorted(unlisted.items())}"
    grown = {name: (n, OVER_60[name]) for name, n in over.items() if n > OVER_60.get(name, n)}
    assert not grown, f"longer than listed (now, listed): {grown}"
    shrunk = sorted(set(OVER_60) - set(over))
    assert not shrunk, f"{LONG_FUNCTION} lines or fewer now (or gone): take them off OVER_60: {shrunk}"


def test_the_function_length_check_counts_the_body_without_its_docstring() -> None:
    long_body = "".join(f"    x{i} = {i}\n" for i in range(61))
    text = f'class C:\n    def m(self):\n        """Doc."""\n{long_body.replace("    ", "        ")}'
    text += f"def f():\n    '''Doc\n    on two lines.'''\n{long_body}"
    text += "def g():\n    '''Only a docstring.'''\n"
    lengths = _function_lengths("probe.py", text)
    assert lengths == {"probe.py::C.m": 61, "probe.py::f": 61, "probe.py::g": 1}
    assert {n for n, k in lengths.items() if k > LONG_FUNCTION} == {"probe.py::C.m", "probe.py::f"}


def test_every_exploration_module_imports_first_in_a_fresh_interpreter() -> None:
    """No import cycle hides behind load order: each module of the exploration room, imported
    before any other in its own interpreter, loads."""
    import subprocess
    import sys

    names = sorted(p.stem for p in (ROOT / "conformance" / "_explore").glob("*.py")
                   if p.stem != "__init__")
    assert len(names) > 10, names
    running = {n: subprocess.Popen([sys.executable, "-c",
                                    f"import settled.conformance._explore.{n}"],
                                   stderr=subprocess.PIPE, text=True) for n in names}
    failed = {n: (p.communicate()[1].strip().splitlines() or ["?"])[-1]
              for n, p in running.items() if p.wait() != 0}
    assert not failed, failed
