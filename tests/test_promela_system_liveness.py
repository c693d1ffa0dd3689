"""Systems' progress properties on SPIN: every declared system's progress properties, as LTL
under its declared fairness, get the same verdict from pan's acceptance-cycle search as from
our fair-cycle check; a system-level liveness mutant is a lasso for both engines (in our
instance labels, replayed through the system) and no safety check finds it; the command
reports a disagreement (exit 1) and says what a bitstate search did not check.

Without SPIN these tests skip in one line, except under CI=true, where they fail.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import typer
from conftest import need_spin
from typer.testing import CliRunner

from settled.conformance._explore._promela import run_spin
from settled.conformance._explore._promela_system import render_system
from settled.conformance._explore._spin_system_ltl import (
    compare_system_progress,
    render_system_ltl,
    run_system_ltl,
    system_lasso,
)
from settled.conformance._explore._system import explore_system
from settled.conformance._liveness import check_system, system_classifier
from settled.model import Effect, Guard, Refinement, System, Variable
from settled.model.expr import S, when
from settled.model.progress import liveness_of
from settled.model.systems import build_approval_system, build_ledger_system, build_query_system

# Two instances of the ledger and the approval systems. The query system is cut to one query,
# one lease epoch and one condition version: with two queries pan's acceptance-cycle search of
# `every_confirmed_query_settles` under its fairness stores 2.0 million states (91 million
# transitions) in 151 s of tcc's pan here, and the test took 254 s in CI, against 8 s for our
# side. The query system's own transitions (a later message, the other task) and their
# fairness are in the one-query system; premises over two instances are the ledger's and the
# approval's.
SMALL = {
    "ledger": lambda: build_ledger_system(calls=2),
    "approval": lambda: build_approval_system(calls=2, stock=1),
    "query": lambda: build_query_system(queries=1, workers=1, max_epoch=1, max_task_version=1),
}


def verdicts(system: System) -> list[tuple[str, str, str, bool]]:
    """(property, ours, SPIN's, both decided) for every progress property of ``system``."""
    live = liveness_of(system)
    ours = explore_system(system, symmetry=False, classify=system_classifier(live))
    assert ours.complete
    mine = check_system(ours, live)
    return [(p.name, p.ours, p.spin.verdict, p.checked)
            for p in compare_system_progress(render_system(system), system, mine, live)]


@pytest.mark.parametrize("name", [
    "ledger",
    pytest.param("approval", marks=pytest.mark.slow),
    "query"])
def test_spins_progress_verdicts_equal_ours_on_every_system(name: str) -> None:
    need_spin()
    system = SMALL[name]()
    got = verdicts(system)
    assert [g[0] for g in got] == [p.name for p in liveness_of(system).progress]
    assert all(checked and ours == spin for _, ours, spin, checked in got), got


def test_every_instance_is_in_the_premise_and_the_goal() -> None:
    """``some`` instance recovering is the disjunction over q0 and q1; ``every`` instance
    outside is the conjunction: no instance is left to a symmetry argument."""
    system = SMALL["ledger"]()
    live = liveness_of(system)
    prop = next(p for p in live.progress if p.name == "turn_recovered_whole")
    text = render_system_ltl(render_system(system), system, live, prop)
    premise = next(ln for ln in text.splitlines() if ln.startswith("#define premise"))
    goal = next(ln for ln in text.splitlines() if ln.startswith("#define goal"))
    assert "st_q0 == k_recovering" in premise and "st_q1 == k_recovering" in premise
    assert " || " in premise.split("started && ", 1)[1]
    assert "!(st_q0 == k_recovering" in goal and "!(st_q1 == k_recovering" in goal
    assert "ltl progress" in text and "assert(fail" not in text


def odd_restarts_block_recovery() -> System:
    """The ledger system (two calls) whose recovery pairs a call only after an even number of
    restarts: a synchronised crash flips ``restarts_odd``, and ``recover_pair``'s refinement
    needs it 0. After one crash a receipted call is stuck recovering until the world crashes
    again, which fairness never requires (restarts are finite). A terminal state stays
    reachable from everywhere (another crash), so no deadlock, trap or invariant finds it."""
    s = build_ledger_system(calls=2)
    even = Guard("even_restarts", S.restarts_odd == 0)
    refs = tuple(dataclasses.replace(r, guards=(*r.guards, even)) if r.trigger == "recover_pair"
                 else r for r in s.refinements)
    flip = Refinement("crash", ("L4",),
                      effect=Effect({"restarts_odd": when(S.restarts_odd == 0, 1, 0)}))
    odd = Variable("restarts_odd", (0, 1), 0, "an odd number of restarts so far (planted)")
    return dataclasses.replace(s, variables=(*s.variables, odd), refinements=(*refs, flip))


def test_a_system_liveness_mutant_is_a_lasso_for_both_engines_and_no_safety_finding() -> None:
    need_spin()
    system = odd_restarts_block_recovery()
    live = liveness_of(system)
    prop = next(p for p in live.progress if p.name == "turn_recovered_whole")
    ours = explore_system(system, symmetry=False, classify=system_classifier(live))
    assert ours.complete and not ours.findings  # no invariant, deadlock, trap or unfired step
    rendered = render_system(system)
    safety = run_spin(rendered, trails=False)
    assert safety.complete and not safety.findings and safety.states == ours.states_unreduced
    mine = next(v for v in check_system(ours, live).verdicts if v.prop is prop)
    assert mine.verdict == "violated" and mine.lasso is not None
    spin = run_system_ltl(rendered, system, live, prop)
    assert spin.verdict == "violated" and not spin.why, spin
    lasso = system_lasso(system, spin)  # replayed through System.enabled: our labels
    text = lasso.steps_text()
    assert text.startswith("1. ") and "then forever" in text and "all crash" in text
    doc = lasso.to_itf()
    assert doc["loop"] == lasso.loop and len(doc["states"]) == len(lasso.states)
    # the lasso's prefix reaches the premise: some instance recovering
    assert any(v == "recovering" for st in lasso.states[lasso.loop:]
               for k, v in st.items() if k.endswith(".state"))


def cli() -> typer.Typer:
    from settled import _cmd_explore

    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """settled (only the explore command)."""

    _cmd_explore.register(app)
    return app


def test_a_deliberately_different_spin_verdict_is_a_disagreement_and_exit_1(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """SPIN's verdict flipped to ``violated`` on a property both engines hold: the command
    reports the two verdicts side by side, the disagreement, and exits 1."""
    need_spin()
    from settled.conformance._explore import _spin_system_ltl

    real = _spin_system_ltl.run_system_ltl

    def flipped(model: Any, system: Any, live: Any, prop: Any) -> Any:
        got = real(model, system, live, prop)
        assert got.verdict == "holds", got
        return dataclasses.replace(got, verdict="violated")

    monkeypatch.setattr(_spin_system_ltl, "run_system_ltl", flipped)
    done = CliRunner().invoke(cli(), ["explore", "ledger", "--queries", "2", "--engine", "spin",
                                      "--json"])
    assert done.exit_code == 1, done.output
    report = json.loads(done.output)
    assert report["agree"]  # the safety search agrees: the exit is the progress verdicts'
    assert report["progress"] and all(p["ours"] == "holds" and p["spin"] == "violated"
                                      and p["checked"] and not p["agree"]
                                      for p in report["progress"]), report["progress"]
    done = CliRunner().invoke(cli(), ["explore", "ledger", "--queries", "2", "--engine", "spin"])
    assert done.exit_code == 1 and "DISAGREE" in done.output, done.output


def test_a_bitstate_search_says_what_it_did_not_compare_and_still_checks_progress() -> None:
    need_spin()
    done = CliRunner().invoke(cli(), ["explore", "ledger", "--queries", "2", "--engine", "spin",
                                      "--bitstate", "--json"])
    report = json.loads(done.output)
    assert done.exit_code == 3 and not report["compared"], report
    assert "bitstate" in report["spin_search"]["not_compared"]
    assert report["spin_search"]["progress_search"].startswith("exhaustive, one core")
    assert report["progress"] and all(p["spin"] == "holds" and p["agree"]
                                      for p in report["progress"])
