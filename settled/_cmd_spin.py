"""``settled explore MACHINE --engine spin``: our explorer and SPIN on one machine, side by
side (a system goes on to ``_cmd_spin_system``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from settled._bounds import DEFAULTS, Bounds
from settled._cmd_explore import (
    INCOMPLETE,
    _bounds_text,
    _check_memory,
    _check_outputs,
    _check_usage,
    err,
    machine_for,
)
from settled._output import emit
from settled.conformance._explore import explore
from settled.conformance._itf import write_itf
from settled.conformance._liveness import check_machine


def _explore_spin(model: str, queries: int, workers: int | None, as_json: bool,
                  itf: Path | None, graph: Path | None, max_states: int | None,
                  cores: int = 1, bitstate: bool = False,
                  stock: int | None = None, bounds: Bounds = DEFAULTS) -> None:
    """Both engines on one machine, side by side: the safety checks and every progress
    property under the declared fairness (LTL). Exit 1 on any finding or disagreement, 3
    when SPIN is missing or fails (one line naming the Debian package) or left a search or
    a property unchecked, or when a bitstate search saw less than our explorer (a partial
    check). ``cores`` and ``bitstate`` set the safety search; each progress property is
    always an exhaustive single-core search (pan -a). A system (``queries`` > 1 or
    ``stock``) goes to ``_cmd_spin_system``."""
    if graph is not None or max_states is not None:
        err.print("--engine spin explores the whole space and writes no graph; drop --graph "
                  "and --max-states")
        raise typer.Exit(2)
    if bounds.kwargs():  # bounds of the user's own: run only what is known to fit
        _check_memory(model, queries, workers, None, bounds)
    if queries > 1 or stock is not None:
        from settled._cmd_spin_system import explore_system_spin, system_for

        system = system_for(model, queries, workers, stock, bounds)
        _check_outputs(itf, None)
        explore_system_spin(system, as_json, itf, cores, bitstate,
                            bounds.effective(model, queries), bounds.line(model, queries))
        return
    _check_usage(model, queries, workers, graph)
    _check_outputs(itf, graph)
    both = _machine_both(model, workers, cores, bitstate, bounds)
    if itf is not None:
        itf.mkdir(exist_ok=True)
        for f in both.found:
            if f.counterexample is not None:
                write_itf(itf / f"spin-{f.file_name}", f.counterexample.to_itf())
    if as_json:
        emit({"model": model, "engine": "spin", "model_bounds": bounds.effective(model, 1),
              **both.agreement.to_json(),
              "spin_seconds": both.spin.seconds,
              "spin_compile_seconds": both.spin.compile_seconds,
              "spin_compiler": both.spin.compiler,
              "our_seconds": both.ours.seconds, "spin_memory_mb": both.spin.memory_mb,
              "spin_complete": both.spin.complete, "spin_search": _spin_search(both.spin),
              "findings": [f.to_json() for f in both.found],
              "ours_only": [{"kind": f.kind, "name": f.name, "text": f.text}
                            for f in both.ours_only],
              "progress": [p.to_json() for p in both.progress]}, both.code)
        raise typer.Exit(both.code)
    _machine_text(model, both)
    _bounds_text(bounds, model, 1)
    raise typer.Exit(both.code)


@dataclass
class _MachineBoth:
    """Both engines' results on one machine."""

    ours: Any  # ExploreResult
    spin: Any  # SpinResult
    live: Any  # LivenessResult: our verdicts on the progress properties
    progress: list[Any]  # ProgressAgreement, one per progress property
    agreement: Any  # Agreement: the counts and safety findings side by side
    found: list[Any]  # SPIN's findings in our words

    @property
    def ours_only(self) -> list[Any]:
        """The checks SPIN has no counterpart for, made by our explorer in this run."""
        return [*self.ours.traps, *self.ours.unreached_states, *self.ours.unfired_transitions]

    @property
    def code(self) -> int:
        failed = (self.found or self.ours_only or self.live.violated or not self.agreement.agree
                  or any(p.checked and not p.agree for p in self.progress))
        unchecked = (not self.spin.complete or self.agreement.partial
                     or any(not p.checked for p in self.progress))
        return 1 if failed else (INCOMPLETE if unchecked else 0)


def _machine_both(model: str, workers: int | None, cores: int, bitstate: bool,
                  bounds: Bounds = DEFAULTS) -> _MachineBoth:
    from settled.conformance._explore._promela import (
        ExportError,
        SpinFailed,
        SpinUnavailable,
        compare,
        compare_progress,
        findings,
        render_machine,
        run_spin,
        tools,
    )
    from settled.model.progress import liveness_of

    try:
        tools()
        protocol = machine_for(model, workers, bounds)
        rendered = render_machine(protocol)
        ours = explore(protocol)
        spin = run_spin(rendered, cores=cores, bitstate=bitstate, expected_states=ours.states)
        declared = liveness_of(protocol)
        ours_live = check_machine(ours, declared)
        progress = compare_progress(rendered, ours_live, declared)
    except (SpinUnavailable, SpinFailed, ExportError) as e:
        err.print(f"settled explore --engine spin: {e}")
        raise typer.Exit(3) from None
    return _MachineBoth(ours, spin, ours_live, progress, compare(ours, spin),
                        findings(rendered, spin))


def _machine_text(model: str, both: _MachineBoth) -> None:
    out = Console(highlight=False, soft_wrap=True, markup=False)
    agreement, ours, spin = both.agreement, both.ours, both.spin
    out.print(f"{model}: {'':8}{'ours':>12}{'SPIN':>12}")
    for key in ("states", "steps"):
        out.print(f"  {key:14}{agreement.ours[key]:>12,}{agreement.spin[key]:>12,}")
    out.print(f"  {'seconds':14}{ours.seconds:>12.3f}{spin.seconds:>12.3f}  (SPIN: pan's run; "
              f"generating and compiling pan.c with {spin.compiler} took "
              f"{spin.compile_seconds:.1f}s more)")
    for line in _spin_search_text(_spin_search(spin)):
        out.print(line)
    for f in both.found:
        out.print(f"SPIN: {f.kind} {f.name} ({', '.join(f.rules) or '-'}): {f.text}")
        if f.counterexample is not None:
            out.print(f.counterexample.steps_text())
    for line in agreement.disagreements:
        out.print(f"DISAGREE {line}")
    if not spin.complete:
        out.print("INCOMPLETE: pan did not finish the search")
    out.print(_agreement_line(agreement, spin))
    for p in both.progress:
        verdict = ("agree" if p.agree else "NOT CHECKED" if not p.checked else "DISAGREE")
        why = f" ({p.spin.why})" if p.spin.why else ""
        out.print(f"progress {p.name}: ours {p.ours}, SPIN {p.spin.verdict} in "
                  f"{p.spin.seconds:.2f}s: {verdict}{why}")
    for f in both.ours_only:
        out.print(f"ours only: {f.kind} {f.name}: {f.text}")
    out.print(f"checked by our explorer alone (SPIN has no such check): traps, unreached states "
              f"and unfired transitions, {len(both.ours_only)} found")


def _agreement_line(agreement: Any, spin: Any) -> str:
    if agreement.partial:
        return ("PARTIAL: SPIN's bitstate search saw less than our explorer ("
                + "; ".join(agreement.missed) + "): SPIN saw at most our counts and found "
                "nothing we did not, but what it did not see it did not check")
    if not agreement.agree:
        return "the engines DISAGREE"
    if spin.bitstate:
        return ("the engines agree: SPIN's bitstate search saw every one of our states and "
                "steps (none lost to hash collisions) and the same findings")
    return "the engines agree: same states, steps and findings"


def _spin_search(spin: object) -> dict[str, object]:
    """How pan searched: cores, hand-off depth and per-core states; bitstate's array size,
    hash factor and coverage estimate."""
    from settled.conformance._explore._promela import SpinResult

    assert isinstance(spin, SpinResult)
    doc: dict[str, object] = {"cores": spin.cores, "bitstate": spin.bitstate,
                              "counts_are_lower_bounds": spin.bitstate,
                              "progress_search": "exhaustive, one core (pan -a)"}
    if spin.cores > 1:
        doc.update(handoff_depth=spin.handoff_depth, core_states=list(spin.core_states))
    if spin.table_bits is not None:  # pan's -w, sized from the states our explorer reached
        doc.update(table_bits=spin.table_bits)
    if spin.bitstate:
        cov = spin.coverage_estimate
        doc.update(hash_bits=spin.hash_bits, bits_per_state=spin.bits_per_state,
                   hash_factor=spin.hash_factor,
                   coverage_estimate=None if cov is None else round(cov, 6))
    return doc


def _spin_search_text(search: dict[str, object]) -> list[str]:
    lines = []
    if search["cores"] != 1:
        shares = search["core_states"]
        assert isinstance(shares, list)
        lines.append(f"SPIN searched on {search['cores']} cores (multi-core depth-first, work "
                     f"handed on at depth {search['handoff_depth']}); states stored per core "
                     "(pan's figures, its start state included): "
                     + ", ".join(f"core {i} {n:,}" for i, n in enumerate(shares)))
        idle = [str(i) for i, n in enumerate(shares) if not n]
        if idle:
            lines.append(f"core(s) {', '.join(idle)} took no work: no path reached the "
                         f"hand-off depth {search['handoff_depth']}, so the search ran on "
                         "fewer cores than asked")
    if search["bitstate"]:
        cov = search["coverage_estimate"]
        shown = "none (pan printed no hash factor)" if cov is None else f"{cov:.4%}"
        lines.append(f"BITSTATE: SPIN's counts are LOWER BOUNDS (a state whose hash bits were "
                     f"already set is taken for seen); hash array 2^{search['hash_bits']} bits, "
                     f"{search['bits_per_state']} bits per state, hash factor "
                     f"{search['hash_factor']} (pan: best if > 100), estimated coverage "
                     f"{shown}; the counts are checked as 'SPIN saw at most ours'")
    if search["cores"] != 1 or search["bitstate"]:
        lines.append("--cores and --bitstate set the safety search only: each progress "
                     "property below is an exhaustive single-core search (pan -a)")
    return lines
