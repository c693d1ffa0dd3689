"""``settled review``: write the specification as a static site to review in a browser.

One page per machine and per system (clickable diagram, side panel, counterexample
player, coverage layer), a rule index and an overview; every page opens from
``file://``. The committed site is ``diagrams/review/``, drift-checked with ``--check``.
Exit codes: 0 written (or up to date), 1 ``--check`` found a stale or missing file,
2 a report, a counterexample or the output folder cannot be used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from settled import _diagrams, _review, _review_inputs
from settled._output import emit
from settled._paths import OutputPathError, writable_dir

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
console = Console(stderr=True, highlight=False, soft_wrap=True)

SITE = Path("diagrams") / "review"


def review_files(root: Path) -> dict[str, bytes]:
    """The committed site (no reports, no counterexamples): what ``--check`` and ``settled
    verify``'s drift check compare ``diagrams/review/`` with."""
    return _review.build_site(root / "tests").files


def review(
    out: Annotated[Path | None, typer.Option("--out", help="Folder to write the site into "
                                             "(default: ROOT/diagrams/review, the committed "
                                             "site).")] = None,
    verify: Annotated[Path | None, typer.Option("--verify", metavar="REPORT.json",
                                                help="A 'settled verify --json' report: the "
                                                     "coverage layer.")] = None,
    mutants: Annotated[Path | None, typer.Option("--mutants", metavar="REPORT.json",
                                                 help="A 'settled mutants --json' report: each "
                                                      "mutant's kill status.")] = None,
    counterexamples: Annotated[Path | None, typer.Option(
        "--counterexamples", metavar="DIR",
        help="A folder of ITF counterexamples (settled-counterexamples/, explore --itf) or one "
             "*.itf.json file, embedded in the player.")] = None,
    check: Annotated[bool, typer.Option("--check", help="Only compare; exit 1 naming each stale "
                                                        "file.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a summary as JSON.")] = False,
    root: Annotated[Path, typer.Option("--root", help="Project folder holding tests/ (and "
                                                      "diagrams/review/).")] = Path("."),
) -> None:
    """Write the specification as a static site (one page per machine and system, the rule
    index, a counterexample player); opens from file:// with no server."""
    directory = out if out is not None else root / SITE
    if check and out is None and not _diagrams.is_project(root):
        err.print(f"{root.resolve()} is not a settled checkout (no model/ and pyproject.toml "
                  "here): there is no committed site to check; pass --root CHECKOUT or --out DIR")
        raise typer.Exit(2)
    try:
        report = _review_inputs.read_verify_report(verify) if verify is not None else None
        mutants_report = _review_inputs.read_mutants_report(mutants) if mutants is not None else None
        traces, skipped = (_review_inputs.read_traces(counterexamples) if counterexamples is not None
                           else ([], []))
        if not check:
            writable_dir(directory)
    except (_review_inputs.ReviewInputError, OutputPathError) as e:
        err.print(f"settled review: {e}")
        raise typer.Exit(2) from None
    tests = root / "tests"
    if not any(tests.glob("test_*.py")):
        err.print(f"warning: no tests found in {tests}: the rule index lists no test for any rule; "
                  "pass --root CHECKOUT to cite the project's tests")
    if skipped:
        err.print(f"note: {len(skipped)} file(s) in {counterexamples} are not ITF traces and are not "
                  f"embedded: {', '.join(skipped)}")
    site = _review.build_site(tests, report, mutants_report, traces)
    try:
        stale = _diagrams.write_or_check(site.files, directory, check)
    except _diagrams.OutputError as e:
        err.print(f"settled review: {str(e).replace('--root', '--out')}")
        raise typer.Exit(2) from None
    summary = {"out": str(directory), "pages": site.pages, "files": sorted(site.files), "bytes": site.size,
               "rules": len(site.rules), "rules_linked": len(site.rules_linked),
               "rules_backed_by_spec": len(site.rules_backed),
               "rules_backed_but_not_linked": sorted(set(site.rules_backed) - set(site.rules_linked)),
               "counterexamples": [t.file for t in traces], "skipped": skipped,
               "verify_report": report is not None, "mutants_report": mutants_report is not None,
               "stale" if check else "changed": stale}
    if as_json:
        emit(summary, 1 if check and stale else 0)
    if check and stale:
        for name in stale:
            what = "stale" if (directory / name).exists() else "missing"
            console.print(f"[red]{what}[/red] {escape(str(directory / name))}: regenerate it with "
                          "'settled review' (without --check) and commit it")
        raise typer.Exit(1)
    if not as_json:
        verb = "checked" if check else "wrote"
        changed = f" ({len(stale)} changed)" if stale and not check else ""
        console.print(f"{verb} {escape(str(directory))}{changed}: {len(site.pages)} pages, "
                      f"{site.size / 1024:.0f} KiB; {len(site.rules_linked)}/{len(site.rules)} rules "
                      f"link to a transition or property; open {escape(str(directory / 'index.html'))}")


def register(app: typer.Typer) -> None:
    app.command("review")(review)
