"""``settled export --promela MACHINE``: the declared machine as a Promela model for SPIN,
rendered from its expressions (``conformance/_explore/_promela.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from settled._output import emit
from settled._paths import OutputPathError, writable_file
from settled.model import MACHINES
from settled.model.systems import SYSTEMS

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def export_command(
    model: Annotated[str, typer.Argument(help=f"The machine: {', '.join(MACHINES)}.")],
    promela: Annotated[bool, typer.Option("--promela", help="Write Promela (for SPIN).")] = False,
    out: Annotated[Path | None, typer.Option("-o", "--out",
                                             help="Write here (default: standard output).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report.")] = False,
) -> None:
    """Write the machine as a Promela model; exit 2 for an unknown machine or an
    unwritable path, 3 when the renderer cannot write a declaration."""
    from settled.conformance._explore._promela import ExportError, render_machine

    if not promela:
        err.print("settled export: name the format: --promela (the only one so far)")
        raise typer.Exit(2)
    if model not in MACHINES:
        extra = (f"; {model!r} is a system, and systems are not exported to Promela yet"
                 if model in SYSTEMS else "")
        err.print(f"unknown machine {model!r}; choose one of {sorted(MACHINES)}{extra}")
        raise typer.Exit(2)
    if out is not None:
        try:
            writable_file(out)
        except OutputPathError as e:
            err.print(str(e))
            raise typer.Exit(2) from None
    try:
        rendered = render_machine(MACHINES[model])
    except ExportError as e:
        err.print(f"cannot export {model}: {e}")
        raise typer.Exit(3) from None
    if out is not None:
        out.write_text(rendered.text, encoding="utf-8")
    if as_json:
        emit({"model": model, "format": "promela", "path": str(out) if out else None,
              "labels": len(rendered.labels), "checks": len(rendered.checks),
              "text": None if out else rendered.text}, 0)
    elif out is None:
        print(rendered.text, end="")
    else:
        err.print(f"wrote {out} ({len(rendered.labels)} labelled steps, "
                  f"{len(rendered.checks)} checks)")


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)
