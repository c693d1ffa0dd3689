"""Systems on SPIN: every declared system, rendered to Promela from its expressions, has
exactly the states and steps of our explorer without symmetry reduction, and the same
safety findings; a planted system-level violation is found by both with a shortest trail
in our instance labels; the command line reports both engines side by side.

SPIN's verdicts on the progress properties of a system (LTL under the declared fairness)
are held to ours in tests/test_promela_system_liveness.py. Without SPIN these tests skip in
one line, except under CI=true, where they fail.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from conftest import need_spin

from settled.conformance._explore._promela import run_spin
from settled.conformance._explore._promela_system import compare_system, render_system, system_findings
from settled.conformance._explore._system import explore_system, replay_system
from settled.model._system import System
from settled.model.systems import build_approval_system, build_ledger_system, build_query_system

# The smallest size of each system where its instances interact: two instances each. The
# query system's bounds are cut to one lease epoch and one condition version so pan.c
# compiles and runs in seconds (its 2-worker, 2-version space is the slow case below).
SMALL = {
    "ledger": lambda: build_ledger_system(calls=2),
    "approval": lambda: build_approval_system(calls=2, stock=1),
    "query": lambda: build_query_system(queries=2, workers=1, max_epoch=1, max_task_version=1),
}


def both(system: System) -> tuple[object, object, object]:
    rendered = render_system(system)
    return rendered, explore_system(system, symmetry=False), run_spin(rendered)


@pytest.mark.parametrize("name", ["ledger", "approval"])
def test_spin_counts_equal_our_unreduced_counts_on_every_system(name: str) -> None:
    need_spin()
    _, ours, spin = both(SMALL[name]())
    agreement = compare_system(ours, spin)  # type: ignore[arg-type]
    assert spin.complete  # type: ignore[attr-defined]
    assert agreement.agree, agreement.disagreements
    assert spin.states == ours.states_unreduced > 1000  # type: ignore[attr-defined]


@pytest.mark.slow
def test_spin_counts_equal_our_unreduced_counts_on_the_query_system() -> None:
    need_spin()
    _, ours, spin = both(SMALL["query"]())
    agreement = compare_system(ours, spin)  # type: ignore[arg-type]
    assert agreement.agree, agreement.disagreements
    assert spin.states == ours.states_unreduced > 100_000  # type: ignore[attr-defined]


def test_our_count_without_symmetry_is_the_orbit_count_with_it() -> None:
    """The unreduced figure SPIN is held to is exact either way."""
    s = SMALL["ledger"]()
    assert explore_system(s).states_unreduced == explore_system(s, symmetry=False).states


def oversold() -> System:
    """The approval system with the stock check of a commit left out: two calls, one unit."""
    s = build_approval_system(calls=2, stock=1)
    return dataclasses.replace(s, refinements=())


def test_a_dropped_system_guard_is_found_by_both_engines_with_a_trail_in_our_labels() -> None:
    need_spin()
    system = oversold()
    rendered = render_system(system)
    spin = run_spin(rendered)
    found = {(f.kind, f.name): f for f in system_findings(system, rendered, spin)}
    f = found[("system_invariant", "no_oversell")]
    assert f.counterexample is not None
    text = f.counterexample.steps_text()
    assert text.startswith("1. q") and "commit" in text
    last = replay_system(system, text)[-1]  # our replay of SPIN's run breaks it too
    assert [i.name for i in system.broken_invariants(last)] == ["no_oversell"]
    ours = explore_system(system)
    [mine] = [g for g in ours.findings if g.name == "no_oversell"]
    assert mine.counterexample is not None
    assert len(mine.counterexample) == len(f.counterexample)  # both shortest


@pytest.mark.slow
def test_a_planted_step_property_is_checked_on_every_mover_of_a_sync_step() -> None:
    """A machine step property that a synchronised crash breaks is found by SPIN, as by ours."""
    from settled.model import StepProperty
    from settled.model._expr import T

    system = SMALL["ledger"]()
    never = StepProperty("planted_no_crash", "planted: nothing crashes", ("L4",),
                         T.trigger != "crash")
    m = dataclasses.replace(system.machine, step_properties=(
        *system.machine.step_properties, never))
    planted = dataclasses.replace(system, machine=m)
    need_spin()
    rendered = render_system(planted)
    spin = run_spin(rendered)
    agreement = compare_system(explore_system(planted, symmetry=False), spin)
    assert agreement.agree, agreement.disagreements
    assert ["step_property", "planted_no_crash"] in agreement.spin["findings"]


def test_export_and_explore_spin_name_the_system_and_its_sizes() -> None:
    done = subprocess.run([sys.executable, "-m", "settled.cli", "export", "approval", "--promela",
                           "--queries", "2", "--stock", "2", "--json"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["model"] == "approval_system" and report["instances"] == 2
    assert "short v_stock = 2;" in report["text"] and "st_q1" in report["text"]
    need_spin()
    done = subprocess.run([sys.executable, "-m", "settled.cli", "explore", "ledger", "--queries",
                           "2", "--engine", "spin", "--json"], capture_output=True, text=True)
    report = json.loads(done.stdout)
    # agree on every count and on every progress property, each decided by both engines
    assert report["agree"] and report["compared"], report
    assert done.returncode == 0, report
    assert report["progress"] and all(p["ours"] == p["spin"] == "holds" and p["agree"]
                                      for p in report["progress"]), report["progress"]
    # pan's hash table was sized from our count (a few thousand states: the smallest table)
    assert report["spin_search"]["table_bits"] == 18 and report["model_bounds"] == {}
