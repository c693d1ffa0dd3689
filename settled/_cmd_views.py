"""``settled diagrams`` and ``settled spec``: the generated views of the tables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from settled import _diagrams, _spec, _system_views
from settled.model import MACHINES
from settled.model.systems import SYSTEMS

Check = Annotated[bool, typer.Option("--check", help="Only compare; exit 1 naming each stale file.")]
Root = Annotated[Path, typer.Option("--root", help="Project folder holding diagrams/ and tests/.")]

err = Console(stderr=True, highlight=False, soft_wrap=True)
console = Console(stderr=True, soft_wrap=True)


def diagram_files() -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for machine in MACHINES.values():
        files.update(_diagrams.artefacts(machine))
    for system in SYSTEMS.values():
        files.update(_system_views.system_artefacts(system))
    return files


def spec_files(root: Path) -> dict[str, bytes]:
    text = _spec.render_spec(list(MACHINES.values()), root / "tests", list(SYSTEMS.values()))
    return {"SPEC.md": text.encode()}


def report(stale: list[str], check: bool, directory: Path) -> None:
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


def diagrams(check: Check = False, root: Root = Path(".")) -> None:
    """Write diagrams/<machine>.dot, .svg and .mmd from the declared tables."""
    _refuse_check_outside_project(check, root)
    directory = root / "diagrams"
    report(_write(diagram_files(), directory, check), check, directory)


def spec(check: Check = False, root: Root = Path(".")) -> None:
    """Write diagrams/SPEC.md: states, transitions, properties and the rule matrix."""
    _refuse_check_outside_project(check, root)
    directory = root / "diagrams"
    if not check:
        _writable(directory)  # before any warning: an unwritable root is the one error to say
    tests = root / "tests"
    if not any(tests.glob("test_*.py")):
        err.print(f"warning: no tests found in {tests}: every rule's test cell will say "
                  "'no test'; pass --root CHECKOUT to cite the project's tests")
    report(_write(spec_files(root), directory, check), check, directory)


def register(app: typer.Typer) -> None:
    app.command()(diagrams)
    app.command()(spec)
