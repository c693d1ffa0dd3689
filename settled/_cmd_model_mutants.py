"""``settled mutants --model``: the model mutants, each checked by both engines.

Each mutant is a declared machine with one change (a guard dropped, an effect altered, a
bound off by one; or, for liveness, a step or a way back removed). Our explorer and SPIN
must both find it: a safety mutant with the same findings, a liveness mutant as a lasso
and by no safety check. Exit 0 when every mutant is found so; 1 when one is not; 2 for an
unknown mutant name; 3 when SPIN is missing or fails (one line naming the package).
"""

from __future__ import annotations

import typer
from rich.console import Console

from settled._output import emit

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def run_model_mutants(as_json: bool, only: list[str] | None) -> None:
    from settled.conformance._explore._promela import SpinFailed, SpinUnavailable, tools
    from settled.conformance.mutants._model import LIVENESS, MutantCheck, catalogue, check

    every = catalogue()
    names = [m.name for m in every]
    unknown = [n for n in only or () if n not in names]
    if unknown:
        err.print(f"settled mutants --model: no model mutant named {unknown[0]!r}; choose from "
                  f"{', '.join(names)}")
        raise typer.Exit(2)
    chosen = [m for m in every if not only or m.name in only]
    out = Console(highlight=False, soft_wrap=True, markup=False)
    results: list[MutantCheck] = []
    try:
        tools()
        for m in chosen:
            if not as_json:
                err.print(f"[{len(results) + 1}/{len(chosen)}] {m.name}")
            results.append(check(m))
    except (SpinUnavailable, SpinFailed) as e:
        err.print(f"settled mutants --model: {e}")
        raise typer.Exit(3) from None
    found = sum(r.found for r in results)
    code = 0 if found == len(results) else 1
    if as_json:
        emit({"model_mutants": [r.to_json() for r in results], "found": found,
              "total": len(results)}, code)
        raise typer.Exit(code)
    for r in results:
        m = r.mutant
        out.print(f"{m.name} ({m.kind}, {', '.join(m.rules)}): "
                  f"{'FOUND by both engines' if r.found else 'NOT FOUND as required'} "
                  f"(ours {r.ours_seconds:.2f}s, SPIN {r.spin_seconds:.2f}s)")
        out.print(f"  change: {m.change}")
        if m.kind == LIVENESS:
            out.print(f"  {m.progress}: ours {r.ours_progress}"
                      f"{' (lasso)' if r.ours_lasso else ''}, SPIN {r.spin_progress}"
                      f"{' (lasso)' if r.spin_lasso else ''}; safety findings: ours "
                      f"{len(r.ours)}, SPIN {len(r.spin)}")
        else:
            shown = ", ".join(f"{k} {n}" for k, n in r.ours) or "none"
            out.print(f"  ours: {shown}")
            shown = ", ".join(f"{k} {n}" for k, n in r.spin) or "none"
            out.print(f"  SPIN: {shown}")
        for p in r.problems:
            out.print(f"  PROBLEM: {p}")
    out.print(f"{found} of {len(results)} model mutant(s) found by both engines as required")
    raise typer.Exit(code)
