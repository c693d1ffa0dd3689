"""``settled diagrams`` and ``settled spec``: the generated views of the tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from settled import _diagrams, _spec, _system_views
from settled._output import emit
from settled.model import MACHINES
from settled.model.systems import SYSTEMS

Check = Annotated[bool, typer.Option("--check", help="Only compare; exit 1 naming each stale file.")]
Root = Annotated[Path, typer.Option("--root", help="Project folder holding diagrams/ and tests/.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the result as JSON: the files "
                                      "checked or written, and those stale or missing.")]

err = Console(stderr=True, highlight=False, soft_wrap=True)
console = Console(stderr=True, soft_wrap=True)


def diagram_files() -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for machine in MACHINES.values():
        files.update(_diagrams.artefacts(machine))
    for system in SYSTEMS.values():
        files.update(_system_views.system_artefacts(system))
    return files


# The rule -> tests index SPEC.md's matrix was made from: generated and drift-checked beside
# it, and shipped with it in the package, where there is no tests/ folder to read.
INDEX = "rule-tests.json"


def spec_files(root: Path | None, tests: dict[str, list[str]] | None = None) -> dict[str, bytes]:
    """SPEC.md and its rule -> tests index, from ``root``'s tests/ (or the ``tests`` index)."""
    index = _spec.rule_tests(root / "tests") if tests is None and root is not None else tests or {}
    text = _spec.render_spec(list(MACHINES.values()), index, list(SYSTEMS.values()))
    return {"SPEC.md": text.encode(),
            INDEX: (json.dumps(index, indent=1, sort_keys=True) + "\n").encode()}


def report(stale: list[str], check: bool, directory: Path, names: list[str],
           as_json: bool = False) -> None:
    if as_json:
        missing = sorted(n for n in stale if not (directory / n).exists()) if check else []
        emit({"directory": str(directory), "check": check, "files": sorted(names),
              "stale": sorted(set(stale) - set(missing)) if check else [],
              "missing": missing, "written": [] if check else sorted(stale)},
             1 if check and stale else 0)
    if check and stale:
        for name in stale:
            what = "stale" if (directory / name).exists() else "missing"
            console.print(f"[red]{what}[/red] {escape(str(directory / name))}: regenerate it "
                          "with the command without --check and commit it")
        raise typer.Exit(1)
    verb = "checked" if check else "wrote"
    changed = f" ({len(stale)} changed)" if stale and not check else ""
    console.print(f"{verb} {directory}{changed}")


def _refuse_check_outside_project(check: bool, root: Path) -> None:
    if check and not _diagrams.is_project(root):
        err.print(f"{root.resolve()} is not a settled checkout (no model/ and pyproject.toml "
                  "here): there are no committed diagrams to check; pass --root CHECKOUT")
        raise typer.Exit(2)


def _write(files: dict[str, bytes], directory: Path, check: bool) -> list[str]:
    try:
        return _diagrams.write_or_check(files, directory, check)
    except _diagrams.OutputError as e:
        err.print(str(e))
        raise typer.Exit(2) from None


def _writable(directory: Path) -> None:
    from settled._paths import OutputPathError, writable_dir

    try:
        writable_dir(directory)
    except OutputPathError as e:
        err.print(f"{e}; pass a writable --root")
        raise typer.Exit(2) from None


def diagrams(check: Check = False, root: Root = Path("."), as_json: AsJson = False) -> None:
    """Write diagrams/<machine>.dot, .svg and .mmd from the declared tables."""
    _refuse_check_outside_project(check, root)
    directory = root / "diagrams"
    if not check:
        _writable(directory)  # root must exist: a mistyped --root is an error, not a new tree
    files = diagram_files()
    report(_write(files, directory, check), check, directory, list(files), as_json)


def spec(check: Check = False, root: Root = Path("."), as_json: AsJson = False) -> None:
    """Write diagrams/SPEC.md: states, transitions, properties and the rule matrix."""
    _refuse_check_outside_project(check, root)
    directory = root / "diagrams"
    if not check:
        _writable(directory)  # before any warning: an unwritable root is the one error to say
    tests = root / "tests"
    if not any(tests.glob("test_*.py")):
        err.print(f"warning: no tests found in {tests}: every rule's test cell will say "
                  "'no test'; pass --root CHECKOUT to cite the project's tests")
    files = spec_files(root)
    report(_write(files, directory, check), check, directory, list(files), as_json)


def register(app: typer.Typer) -> None:
    app.command()(diagrams)
    app.command()(spec)
