"""Systems on SPIN: ``settled export --promela SYSTEM --queries N`` and ``settled explore
SYSTEM --queries N --engine spin`` (``conformance/_explore/_promela_system.py``).

A system is named as ``settled explore`` names it: the model's name with ``--queries N``
(N > 1; ``--instances`` is the same option) for the calls, queries or tool calls, plus
``--workers W`` (query) and ``--stock S`` (approval)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from settled._output import emit
from settled.conformance._itf import write_itf
from settled.model import System
from settled.model.systems import (
    SYSTEMS,
    build_approval_system,
    build_ledger_system,
    build_query_system,
)

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
INCOMPLETE = 3
# Our side of the comparison explores without symmetry reduction (SPIN's count); past this
# many configurations it stops and SPIN's figures stand alone, said so, with exit 3.
OURS_UNREDUCED_CAP = 3_000_000


def system_for(model: str, queries: int, workers: int | None, stock: int | None) -> System:
    """The named system at the given sizes; a one-line error (exit 2) for what does not fit."""
    if model not in SYSTEMS:
        err.print(f"unknown system {model!r}; choose one of {sorted(SYSTEMS)}")
        raise typer.Exit(2)
    if workers is not None and (model != "query" or workers < 1):
        err.print(f"--workers {workers}: only the query system has worker processes (at least 1)")
        raise typer.Exit(2)
    if stock is not None and (model != "approval" or stock < 0):
        err.print(f"--stock {stock}: only the approval system has stock (0 or more)")
        raise typer.Exit(2)
    if model == "query":
        return build_query_system(queries=queries, workers=workers or 1)
    if model == "approval":
        return build_approval_system(calls=queries, stock=1 if stock is None else stock)
    return build_ledger_system(calls=queries)


def export_system(system: System, out: Path | None, as_json: bool) -> None:
    """Write ``system`` as Promela (exit 3 when the renderer cannot write a declaration)."""
    from settled.conformance._explore._promela import ExportError
    from settled.conformance._explore._promela_system import render_system

    try:
        rendered = render_system(system)
    except ExportError as e:
        err.print(f"cannot export {system.name}: {e}")
        raise typer.Exit(3) from None
    if out is not None:
        out.write_text(rendered.text, encoding="utf-8")
    if as_json:
        emit({"model": system.name, "system": True, "instances": system.instances,
              "format": "promela", "path": str(out) if out else None,
              "labels": len(rendered.labels), "checks": len(rendered.checks),
              "text": None if out else rendered.text}, 0)
    elif out is None:
        print(rendered.text, end="")
    else:
        err.print(f"wrote {out} ({system.meaning}: {len(rendered.labels)} labelled steps, "
                  f"{len(rendered.checks)} checks)")


def explore_system_spin(system: System, as_json: bool, itf: Path | None, cores: int = 1,
                        bitstate: bool = False) -> None:
    """Both engines on one system: our search without symmetry reduction (so its count is
    SPIN's) and SPIN's, side by side. Exit 1 on a finding or a disagreement; 3 when SPIN is
    missing or fails, or leaves a search or a property unchecked (the progress properties of
    a system are checked by our explorer only, and said so)."""
    from settled.conformance._explore._promela import (
        ExportError,
        SpinFailed,
        SpinUnavailable,
        run_spin,
        tools,
    )
    from settled.conformance._explore._promela_system import compare_system, render_system, system_findings
    from settled.conformance._explore._system import explore_system
    from settled.conformance._liveness import check_system, system_classifier
    from settled.model.progress import liveness_of

    try:
        tools()
        rendered = render_system(system)
        declared = liveness_of(system)
        ours = explore_system(system, symmetry=False, classify=system_classifier(declared),
                              max_states=OURS_UNREDUCED_CAP)
        live = check_system(ours, declared)
        spin = run_spin(rendered, cores=cores, bitstate=bitstate)
        found = system_findings(system, rendered, spin)
    except (SpinUnavailable, SpinFailed, ExportError) as e:
        err.print(f"settled explore --engine spin: {e}")
        raise typer.Exit(3) from None
    agreement = compare_system(ours, spin)
    # else the counts cannot be set side by side: SPIN's stand alone (a bitstate search's
    # are lower bounds; a multi-core one's trails are not the shortest)
    compared = ours.complete and not bitstate and cores == 1
    safety = {"invariant", "system_invariant", "step_property", "domain", "deadlock"}
    ours_only = [f for f in ours.findings if f.kind not in safety]
    if itf is not None:
        itf.mkdir(exist_ok=True)
        for f in found:
            if f.counterexample is not None:
                meta = {"property": f.name, "kind": f.kind, "rules": list(f.rules),
                        "engine": "spin"}
                write_itf(itf / f"spin-{f.file_name}", f.counterexample.to_itf(meta))
    progress = [{"name": name, "ours": verdict, "spin": "not_checked",
                 "why": "progress properties of systems are not rendered as LTL yet"}
                for name, verdict in _verdicts(live)]
    failed = bool(found or ours_only or live.violated or (compared and not agreement.agree))
    unchecked = not spin.complete or not compared or bool(progress)
    code = 1 if failed else (INCOMPLETE if unchecked else 0)
    if as_json:
        emit({"model": system.name, "system": True, "instances": system.instances,
              "meaning": system.meaning, "engine": "spin", **agreement.to_json(),
              "compared": compared,
              "spin_seconds": spin.seconds, "spin_compile_seconds": spin.compile_seconds,
              "our_seconds": round(ours.seconds, 3), "spin_memory_mb": spin.memory_mb,
              "spin_complete": spin.complete, "findings": [f.to_json() for f in found],
              "ours_only": [{"kind": f.kind, "name": f.name, "text": f.text} for f in ours_only],
              "progress": progress}, code)
        raise typer.Exit(code)
    out = Console(highlight=False, soft_wrap=True, markup=False)
    out.print(f"{system.name} ({system.meaning}), without symmetry reduction:")
    out.print(f"  {'':14}{'ours':>12}{'SPIN':>12}")
    for key in ("states", "steps"):
        mine = f"{agreement.ours[key]:,}" if compared else "-"
        out.print(f"  {key:14}{mine:>12}{agreement.spin[key]:>12,}")
    if not compared:
        out.print("NOT COMPARED: " + ("a bitstate or multi-core SPIN search" if ours.complete
                                      else f"our search without symmetry stopped at "
                                           f"{OURS_UNREDUCED_CAP:,} configurations")
                  + "; the counts and findings above are SPIN's alone")
    out.print(f"  {'seconds':14}{ours.seconds:>12.3f}{spin.seconds:>12.3f}  (SPIN: pan's run; "
              f"generating and compiling pan.c took {spin.compile_seconds:.1f}s more; "
              f"{spin.memory_mb:,.0f} MB)")
    for f in found:
        out.print(f"SPIN: {f.kind} {f.name} ({', '.join(f.rules) or '-'}): {f.text}")
        if f.counterexample is not None:
            out.print(f.counterexample.steps_text())
    for line in agreement.disagreements if compared else []:
        out.print(f"DISAGREE {line}")
    if not spin.complete:
        out.print("INCOMPLETE: pan did not finish the search")
    if compared:
        out.print("the engines agree: same states, steps and findings" if agreement.agree
                  else "the engines DISAGREE")
    for p in progress:
        out.print(f"progress {p['name']}: ours {p['ours']}, SPIN NOT CHECKED ({p['why']})")
    for f in ours_only:
        out.print(f"ours only: {f.kind} {f.name}: {f.text}")
    out.print(f"checked by our explorer alone (SPIN has no such check): traps, unreached states "
              f"and unfired transitions, {len(ours_only)} found")
    raise typer.Exit(code)


def _verdicts(live: object) -> list[tuple[str, str]]:
    data = live.to_json()  # type: ignore[attr-defined]
    props = data.get("properties", []) if isinstance(data, dict) else []
    return [(str(p.get("name")), str(p.get("verdict"))) for p in props]
