"""Systems on SPIN: ``settled export --promela SYSTEM --queries N`` and ``settled explore
SYSTEM --queries N --engine spin`` (``conformance/_explore/_promela_system.py``).

A system is named as ``settled explore`` names it: the model's name with ``--queries N``
(N > 1; ``--instances`` is the same option) for the calls, queries or tool calls, plus
``--workers W`` (query) and ``--stock S`` (approval)."""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from settled._bounds import DEFAULTS, Bounds
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


def system_for(model: str, queries: int, workers: int | None, stock: int | None,
               bounds: Bounds = DEFAULTS) -> System:
    """The named system at the given sizes and bounds; a one-line error (exit 2) for what
    does not fit."""
    if model not in SYSTEMS:
        err.print(f"unknown system {model!r}; choose one of {sorted(SYSTEMS)}")
        raise typer.Exit(2)
    bounds.check(model)
    if workers is not None and (model != "query" or workers < 1):
        err.print(f"--workers {workers}: only the query system has worker processes (at least 1)")
        raise typer.Exit(2)
    if stock is not None and (model != "approval" or stock < 0):
        err.print(f"--stock {stock}: only the approval system has stock (0 or more)")
        raise typer.Exit(2)
    if model == "query":
        return build_query_system(queries=queries, workers=workers or 1, **bounds.kwargs())
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


@dataclass
class _Both:
    """Both engines' results on one system."""

    system: System
    ours: Any  # SystemResult, explored without symmetry
    spin: Any  # SpinResult of the safety search
    found: list[Any]  # SPIN's safety findings in our words
    agreement: Any  # the counts and safety findings side by side
    progress: list[Any]  # SystemProgress: each progress property, ours beside SPIN's
    compared: bool  # the counts and findings are comparable (see explore_system_spin)
    bitstate: bool
    cores: int

    @property
    def ours_only(self) -> list[Any]:
        """The checks SPIN has no counterpart for (traps, unreached states, unfired
        transitions), made by our explorer in this run."""
        from settled.conformance._explore._promela_system_findings import SAFETY

        return [f for f in self.ours.findings if f.kind not in SAFETY]

    @property
    def code(self) -> int:
        """1 on a finding, a violated property or a disagreement; 3 when something was
        left unchecked; else 0."""
        failed = (self.found or self.ours_only or (self.compared and not self.agreement.agree)
                  or any(p.ours == "violated" or (p.checked and not p.agree)
                         for p in self.progress))
        unchecked = (not self.spin.complete or not self.compared
                     or any(not p.checked for p in self.progress))
        return 1 if failed else (INCOMPLETE if unchecked else 0)


def _run_both(system: System, cores: int, bitstate: bool) -> _Both:
    """Our search without symmetry (so its count is SPIN's) and its fair-cycle check; pan's
    safety search (``cores``, ``bitstate``) and one exhaustive single-core acceptance-cycle
    search per progress property. SPIN missing or failing, or a declaration the renderer
    cannot write, is a one-line error (exit 3)."""
    from settled._memory import machine_limit
    from settled.conformance._explore._promela import (
        ExportError,
        SpinFailed,
        SpinUnavailable,
        run_spin,
        tools,
    )
    from settled.conformance._explore._promela_system import (
        compare_system,
        render_system,
        system_findings,
    )
    from settled.conformance._explore._spin_system_ltl import compare_system_progress
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
        # pan's hash table sized from our count when our search ended (else its default,
        # 2**24 slots); its memory limit what this machine allows (80 % of it) less what this
        # process has held at most (our graph is still alive), not a fixed 4 GB
        held = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10  # Linux: KiB
        spin = run_spin(rendered, cores=cores, bitstate=bitstate,
                        memory_mb=max(1024, (machine_limit() - held) >> 20),
                        expected_states=ours.states if ours.complete else None)
        found = system_findings(system, rendered, spin)
        progress = compare_system_progress(rendered, system, live, declared)
    except (SpinUnavailable, SpinFailed, ExportError) as e:
        err.print(f"settled explore --engine spin: {e}")
        raise typer.Exit(3) from None
    # else the counts cannot be set side by side: SPIN's stand alone (a bitstate search's
    # are lower bounds; a multi-core one's trails are not the shortest)
    compared = ours.complete and not bitstate and cores == 1
    return _Both(system, ours, spin, found, compare_system(ours, spin), progress, compared,
                 bitstate, cores)


def explore_system_spin(system: System, as_json: bool, itf: Path | None, cores: int = 1,
                        bitstate: bool = False, model_bounds: dict[str, int] | None = None,
                        bounds_line: str | None = None) -> None:
    """Both engines on one system, side by side: the safety checks (states, steps and
    findings) and every progress property under the declared fairness (LTL, pan -a), SPIN's
    verdict beside ours. Exit 1 on a finding, a violated property or a disagreement; 3 when
    SPIN is missing or fails, or leaves a search or a property unchecked (a bitstate or
    multi-core safety search is not compared, and says so)."""
    both = _run_both(system, cores, bitstate)
    if itf is not None:
        _write_itf(itf, both)
    if as_json:
        _emit_json(both, model_bounds or {})
    _print_text(both, bounds_line)
    raise typer.Exit(both.code)


def _write_itf(itf: Path, both: _Both) -> None:
    itf.mkdir(exist_ok=True)
    for f in both.found:
        if f.counterexample is not None:
            meta = {"property": f.name, "kind": f.kind, "rules": list(f.rules), "engine": "spin"}
            write_itf(itf / f"spin-{f.file_name}", f.counterexample.to_itf(meta))
    for p in both.progress:
        if p.lasso is not None:
            write_itf(itf / f"spin-liveness-{p.name}.itf.json", p.lasso.to_itf())


def _search(both: _Both) -> dict[str, Any]:
    """What the safety search was, and what it left unchecked, in words."""
    spin = both.spin
    doc: dict[str, Any] = {"cores": spin.cores, "bitstate": spin.bitstate,
                           "counts_are_lower_bounds": spin.bitstate,
                           "progress_search": "exhaustive, one core (pan -a), every property"}
    if spin.table_bits is not None:  # pan's -w, sized from the states our explorer reached
        doc["table_bits"] = spin.table_bits
    if not both.compared:
        doc["not_compared"] = (
            "a bitstate or multi-core SPIN search: its counts and findings are SPIN's alone "
            "(a bitstate count is a lower bound, a multi-core trail not the shortest); the "
            "progress properties are still an exhaustive single-core search each"
            if both.ours.complete else
            f"our search without symmetry stopped at {OURS_UNREDUCED_CAP:,} configurations: "
            "the counts are SPIN's alone and our progress verdicts are not_checked")
    return doc


def _emit_json(both: _Both, model_bounds: dict[str, int]) -> None:
    s, spin, ours = both.system, both.spin, both.ours
    emit({"model": s.name, "system": True, "instances": s.instances, "meaning": s.meaning,
          "model_bounds": model_bounds,
          "engine": "spin", **both.agreement.to_json(), "compared": both.compared,
          "spin_seconds": spin.seconds, "spin_compile_seconds": spin.compile_seconds,
          "spin_compiler": spin.compiler,
          "our_seconds": round(ours.seconds, 3), "spin_memory_mb": spin.memory_mb,
          "spin_complete": spin.complete, "spin_search": _search(both),
          "findings": [f.to_json() for f in both.found],
          "ours_only": [{"kind": f.kind, "name": f.name, "text": f.text}
                        for f in both.ours_only],
          "progress": [p.to_json() for p in both.progress]}, both.code)
    raise typer.Exit(both.code)


def _print_text(both: _Both, bounds_line: str | None = None) -> None:
    out = Console(highlight=False, soft_wrap=True, markup=False)
    s, ours, spin, agreement = both.system, both.ours, both.spin, both.agreement
    out.print(f"{s.name} ({s.meaning}), without symmetry reduction:")
    out.print(f"  {'':14}{'ours':>12}{'SPIN':>12}")
    for key in ("states", "steps"):
        mine = f"{agreement.ours[key]:,}" if both.compared else "-"
        out.print(f"  {key:14}{mine:>12}{agreement.spin[key]:>12,}")
    if not both.compared:
        out.print("NOT COMPARED: " + _search(both)["not_compared"])
    out.print(f"  {'seconds':14}{ours.seconds:>12.3f}{spin.seconds:>12.3f}  (SPIN: pan's run; "
              f"generating and compiling pan.c with {spin.compiler} took "
              f"{spin.compile_seconds:.1f}s more; "
              f"{spin.memory_mb:,.0f} MB)")
    for f in both.found:
        out.print(f"SPIN: {f.kind} {f.name} ({', '.join(f.rules) or '-'}): {f.text}")
        if f.counterexample is not None:
            out.print(f.counterexample.steps_text())
    for line in agreement.disagreements if both.compared else []:
        out.print(f"DISAGREE {line}")
    if not spin.complete:
        out.print("INCOMPLETE: pan did not finish the search")
    if both.compared:
        out.print("the engines agree: same states, steps and findings" if agreement.agree
                  else "the engines DISAGREE")
    _print_progress(out, both)
    for f in both.ours_only:
        out.print(f"ours only: {f.kind} {f.name}: {f.text}")
    out.print(f"checked by our explorer alone (SPIN has no such check): traps, unreached states "
              f"and unfired transitions, {len(both.ours_only)} found")
    if bounds_line is not None:
        out.print(bounds_line)


def _print_progress(out: Console, both: _Both) -> None:
    if both.cores != 1 or both.bitstate:
        out.print("--cores and --bitstate set the safety search only: each progress property "
                  "below is an exhaustive single-core search (pan -a)")
    for p in both.progress:
        verdict = "agree" if p.agree else "NOT CHECKED" if not p.checked else "DISAGREE"
        why = f" ({p.spin.why})" if p.spin.why else ""
        out.print(f"progress {p.name}: ours {p.ours}, SPIN {p.spin.verdict} in "
                  f"{p.spin.seconds:.2f}s ({p.spin.states:,} states): {verdict}{why}")
        if p.lasso is not None:
            out.print("SPIN's lasso, replayed through the system:")
            out.print(p.lasso.steps_text())
