"""``settled export --promela|--quint MACHINE``: the declared machine as a Promela model for
SPIN (``conformance/_explore/_promela.py``) or a Quint module for Quint and TLA+ users
(``conformance/_explore/_quint.py``), rendered from its expressions; with ``--queries N``
(N > 1, or a system's own sizes) the system (``_promela_system.py``, ``_quint_system.py``).

The format is a flag, not a word before the machine (``settled export quint query``): the
machine is the one positional argument, so ``settled export quint`` would name a machine
called "quint"; that mistake is answered with the flag to use."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from settled._bounds import Bounds, MaxEpoch, MaxTaskVersion
from settled._output import emit
from settled._paths import OutputPathError, writable_file
from settled.model import MACHINES, Protocol, System
from settled.model.systems import SYSTEMS

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def export_command(
    model: Annotated[str, typer.Argument(help=f"The machine: {', '.join(MACHINES)}.")],
    promela: Annotated[bool, typer.Option("--promela", help="Write Promela (for SPIN).")] = False,
    quint: Annotated[bool, typer.Option("--quint", help="Write a Quint module (for Quint, "
                                                        "TLA+).")] = False,
    out: Annotated[Path | None, typer.Option("-o", "--out",
                                             help="Write here (default: standard output).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report.")] = False,
    queries: Annotated[int, typer.Option(
        "--queries", "--instances", min=1,
        help="Instances of the declared system (N > 1 exports the system).")] = 1,
    workers: Annotated[int | None, typer.Option(
        help="Worker processes (the query system).")] = None,
    stock: Annotated[int | None, typer.Option(help="Units of stock (the approval system).")] = None,
    max_epoch: MaxEpoch = None,
    max_task_version: MaxTaskVersion = None,
) -> None:
    """Write the machine (or, with --queries N, the system) as a Promela model or a Quint
    module; exit 2 for an unknown machine, no or two formats, or an unwritable path, 3 when
    the renderer cannot write a declaration or (Quint) leaves a property out."""
    if model in ("promela", "quint") and not (promela or quint):
        err.print(f"settled export: the format is a flag: settled export --{model} MACHINE")
        raise typer.Exit(2)
    if promela == quint:
        err.print("settled export: name one format: --promela or --quint"
                  if not promela else "settled export: choose one format, not both")
        raise typer.Exit(2)
    fmt = "promela" if promela else "quint"
    bounds = Bounds(max_epoch, max_task_version)
    if queries > 1 or (model in SYSTEMS and (workers is not None or stock is not None)):
        from settled._cmd_spin_system import export_system, system_for

        system = system_for(model, queries, workers, stock, bounds)
        if out is not None:
            try:
                writable_file(out)
            except OutputPathError as e:
                err.print(str(e))
                raise typer.Exit(2) from None
        if quint:
            _export_quint_system(system, out, as_json)
        else:
            export_system(system, out, as_json)
        return
    if model not in MACHINES:
        extra = (f"; {model!r} with --queries N is a system" if model in SYSTEMS else "")
        err.print(f"unknown machine {model!r}; choose one of {sorted(MACHINES)}{extra}")
        raise typer.Exit(2)
    if out is not None:
        try:
            writable_file(out)
        except OutputPathError as e:
            err.print(str(e))
            raise typer.Exit(2) from None
    from settled._cmd_explore import machine_for

    protocol = machine_for(model, None, bounds.check(model))
    if quint:
        _export_quint(model, protocol, out, as_json)
        return
    from settled.conformance._explore._promela import ExportError, render_machine

    try:
        rendered = render_machine(protocol)
    except ExportError as e:
        err.print(f"cannot export {model}: {e}")
        raise typer.Exit(3) from None
    if out is not None:
        out.write_text(rendered.text, encoding="utf-8")
    if as_json:
        emit({"model": model, "format": fmt, "path": str(out) if out else None,
              "labels": len(rendered.labels), "checks": len(rendered.checks),
              "text": None if out else rendered.text}, 0)
    elif out is None:
        print(rendered.text, end="")
    else:
        err.print(f"wrote {out} ({len(rendered.labels)} labelled steps, "
                  f"{len(rendered.checks)} checks)")


def _export_quint(model: str, protocol: Protocol, out: Path | None, as_json: bool) -> None:
    """The Quint module of a machine (see :func:`_write_quint`)."""
    from settled.conformance._explore._quint import ExportError, render_module

    try:
        rendered = render_module(protocol)
    except ExportError as e:
        err.print(f"cannot export {model}: {e}")
        raise typer.Exit(3) from None
    _write_quint(rendered, out, as_json, {"model": model}, "")


def _export_quint_system(system: System, out: Path | None, as_json: bool) -> None:
    """A system's Quint module (see :func:`_write_quint`)."""
    from settled.conformance._explore._quint import ExportError
    from settled.conformance._explore._quint_system import render_system_module

    try:
        rendered = render_system_module(system)
    except ExportError as e:
        err.print(f"cannot export {system.name}: {e}")
        raise typer.Exit(3) from None
    _write_quint(rendered, out, as_json,
                 {"model": system.name, "system": True, "instances": system.instances},
                 f"{system.meaning}: ")


def _write_quint(rendered: Any, out: Path | None, as_json: bool, head: dict[str, Any],
                 meaning: str) -> None:
    """Write a rendered module; what it cannot express is printed loudly on standard error
    (and listed under ``not_expressed`` with --json), as it is written in the module's
    header, and the command then exits 3: written, but incomplete, never a silent success."""
    if out is not None:
        out.write_text(rendered.text, encoding="utf-8")
    for item in rendered.not_expressed:
        err.print(f"NOT EXPRESSED in Quint (left out of the module): {item}")
    if as_json:
        emit({**head, "format": "quint", "path": str(out) if out else None,
              "actions": list(rendered.actions), "invariants": list(rendered.invariants),
              "temporal": list(rendered.temporal),
              "not_expressed": list(rendered.not_expressed), "notes": list(rendered.notes),
              "text": None if out else rendered.text}, 3 if rendered.not_expressed else 0)
    elif out is None:
        print(rendered.text, end="")
    else:
        err.print(f"wrote {out} ({meaning}{len(rendered.actions)} actions, "
                  f"{len(rendered.invariants)} invariants, {len(rendered.temporal)} temporal "
                  "properties; quint run checks the invariants, not the temporal properties)")
    if rendered.not_expressed:
        raise typer.Exit(3)


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)
