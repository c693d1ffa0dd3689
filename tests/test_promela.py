"""The Promela export and SPIN as a second engine: SPIN's counts equal our explorer's on
every machine, and a planted violation is found by SPIN with a trail in our own labels.

Systems are compared in tests/test_promela_system.py.
Without SPIN these tests skip in one line, except under CI=true, where they fail.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest
from conftest import need_spin

from settled.conformance._counterexample import TraceStep, replay
from settled.conformance._explore import explore
from settled.conformance._explore._promela import compare, findings, render_machine, run_spin
from settled.model import LEDGER, MACHINES, Invariant, Protocol
from settled.model._expr import V


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_spin_counts_equal_the_explorers_on_every_machine(name: str) -> None:
    need_spin()
    p = MACHINES[name]
    ours, spin = explore(p), run_spin(render_machine(p))
    agreement = compare(ours, spin)
    assert spin.complete
    assert agreement.agree, agreement.disagreements
    assert (spin.states, spin.steps) == (ours.states, agreement.ours["steps"])
    assert spin.states > 100 and spin.no_step_states > 0  # a real space, with settled ends


def planted() -> Protocol:
    """The ledger machine with a planted invariant that pairing a result breaks."""
    bad = Invariant("planted_never_paired", "planted: no result is ever paired", ("L4",),
                    V.result == "none")
    return dataclasses.replace(LEDGER, invariants=(*LEDGER.invariants, bad))


def test_a_planted_violation_is_found_by_spin_with_a_trail_in_our_labels() -> None:
    need_spin()
    p = planted()
    rendered = render_machine(p)
    spin = run_spin(rendered)
    [f] = [f for f in spin.findings if f.check.name == "planted_never_paired"]
    assert f.check.kind == "invariant" and f.steps
    # The trail, in our triggers and parameters, replays through the table to a
    # configuration that breaks the invariant, as short as our explorer's counterexample.
    steps = [TraceStep(0, t.trigger, tuple(params.items())) for t, params in f.steps]
    last = replay(p, steps)[-1][0]
    assert last.state and p.view(last)["result"] != "none"
    ours = explore(p)
    [mine] = [v for v in ours.violations if v.name == "planted_never_paired"]
    assert mine.counterexample is not None
    assert len(f.steps) == len(mine.counterexample.steps)
    # ...and both engines agree, findings included; the unplanted machine has none.
    assert compare(ours, spin).agree
    [found] = [x for x in findings(rendered, spin) if x.name == "planted_never_paired"]
    assert found.counterexample is not None and "planted" in found.text


def test_a_count_disagreement_is_reported() -> None:
    need_spin()
    ours, spin = explore(LEDGER), run_spin(render_machine(planted()), trails=False)
    spin.stored += 1  # one state SPIN would have and we not
    agreement = compare(ours, spin)
    assert not agreement.agree
    assert any(d.startswith("states:") for d in agreement.disagreements)
    assert any(d.startswith("findings:") for d in agreement.disagreements)


def cli(*args: str, path: str | None = None,
        cc: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("CC", None)
    if path is not None:
        env["PATH"] = path
    if cc is not None:
        env["CC"] = cc
    return subprocess.run([sys.executable, "-m", "settled.cli", *args], capture_output=True,
                          text=True, env=env)


def test_export_writes_the_promela_of_a_machine(tmp_path: object) -> None:
    from pathlib import Path

    out = Path(str(tmp_path)) / "ledger.pml"
    done = cli("export", "--promela", "ledger", "-o", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "active proctype machine()" in text and text == render_machine(LEDGER).text
    refused = cli("export", "--promela", "nope")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1


def test_explore_engine_spin_sets_both_engines_side_by_side() -> None:
    need_spin()
    done = cli("explore", "ledger", "--engine", "spin", "--json")
    doc = json.loads(done.stdout)
    assert done.returncode == 0 and doc["agree"], done.stdout + done.stderr
    assert doc["ours"]["states"] == doc["spin"]["states"] == explore(LEDGER).states
    # every progress property, decided by both engines alike, and nothing only ours found
    from settled.model.progress import liveness_of

    names = [p.name for p in liveness_of(LEDGER).progress]
    assert [p["property"] for p in doc["progress"]] == names and names
    assert all(p["checked"] and p["agree"] for p in doc["progress"]), doc["progress"]
    assert doc["ours_only"] == []


def test_explore_engine_spin_exits_3_when_spin_left_a_property_unchecked(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    need_spin()
    import typer
    from typer.testing import CliRunner

    from settled import _cmd_explore
    from settled.conformance._explore import _spin_ltl

    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """settled (only the explore command)."""

    _cmd_explore.register(app)
    real = _spin_ltl.run_ltl
    monkeypatch.setattr(_spin_ltl, "run_ltl", lambda m, live, prop: real(m, live, prop, depth=5))
    done = CliRunner().invoke(app, ["explore", "ledger", "--engine", "spin"])
    assert done.exit_code == 3, done.output
    assert "NOT CHECKED" in done.output and "depth" in done.output


def test_without_spin_the_engine_is_a_one_line_error_naming_the_package() -> None:
    done = cli("explore", "ledger", "--engine", "spin", path=os.path.dirname(sys.executable))
    assert done.returncode == 3
    assert done.stderr.strip().count("\n") == 0 and "apt-get install spin" in done.stderr


# --------------------------------------------------------------------------
# Progress properties: LTL under the declared fairness, SPIN's verdict against ours
# --------------------------------------------------------------------------
def _ours_and_spins(p: Protocol, live: Any = None) -> list[tuple[str, str, str]]:
    """(property, our verdict as SPIN would give it, SPIN's verdict) for every property our
    check decided; a property either engine did not check fails the test."""
    from settled.conformance._explore._promela import compare_progress
    from settled.conformance._liveness import HOLDS, check_protocol
    from settled.model.progress import liveness_of

    live = live or liveness_of(p)
    out = []
    for a in compare_progress(render_machine(p), check_protocol(p, live), live):
        assert a.checked, (a.name, a.ours, a.spin.verdict, a.spin.why)
        out.append((a.name, "holds" if a.ours == HOLDS else "violated", a.spin.verdict))
    return out


@pytest.mark.parametrize("name", [
    "ledger", "approval", pytest.param("query", marks=pytest.mark.slow)])
def test_spins_progress_verdicts_equal_ours_on_every_machine(name: str) -> None:
    need_spin()
    verdicts = _ours_and_spins(MACHINES[name])
    assert verdicts and all(ours == spin for _, ours, spin in verdicts), verdicts


def test_without_fairness_every_ledger_progress_property_fails_for_both_engines() -> None:
    """The ledger's fairness declared away (every group ``never``): a run may stop anywhere,
    so every progress property is violated, by our check and by SPIN, with a lasso whose
    cycle is a stutter. With the fairness, the same properties hold (the test above): the
    LTL check can fail, and its fairness is not vacuous."""
    need_spin()
    from settled.model._liveness import NEVER, Liveness
    from settled.model.progress import liveness_of

    live = liveness_of(LEDGER)
    unfair = Liveness(live.target, tuple(dataclasses.replace(f, kind=NEVER)
                                         for f in live.fairness), live.progress)
    verdicts = _ours_and_spins(LEDGER, unfair)
    assert verdicts and all(ours == spin == "violated" for _, ours, spin in verdicts), verdicts


def test_a_step_left_out_of_the_fairness_is_a_lasso_for_both_engines() -> None:
    """The ledger's runtime fairness without its ``continue`` step: a paired call may stay
    paired forever, so both engines find ``paired_continues`` violated, SPIN with a lasso
    in our labels whose prefix replays through the table to a paired call."""
    need_spin()
    from settled.conformance._explore._promela import run_ltl
    from settled.conformance._liveness import check_protocol
    from settled.model._liveness import Liveness
    from settled.model.progress import liveness_of

    live = liveness_of(LEDGER)
    fairness = tuple(dataclasses.replace(f, steps=dataclasses.replace(
        f.steps, triggers=tuple(t for t in f.steps.triggers if t != "continue")))
        if f.name == "runtime" else f for f in live.fairness)
    assert fairness != live.fairness
    weaker = Liveness(live.target, fairness, live.progress)
    prop = next(x for x in weaker.progress if x.name == "paired_continues")
    ours = next(v for v in check_protocol(LEDGER, weaker).verdicts if v.prop is prop)
    spin = run_ltl(render_machine(LEDGER), weaker, prop)
    assert ours.verdict == "violated" and spin.verdict == "violated", spin.why
    assert spin.cycle and spin.prefix and spin.prefix[0] is not None
    steps = [TraceStep(0, t.trigger, tuple(params.items())) for t, params in
             (s for s in spin.prefix if s is not None)]
    configs = replay(LEDGER, steps)
    assert any(prop.premise.holds_in(c[0].state, LEDGER.view(c[0])) for c in configs)


def test_a_search_pan_cut_short_is_not_checked() -> None:
    """A depth bound too small for the search: the property is NOT CHECKED, with pan's
    reason, never ``holds``."""
    need_spin()
    from settled.conformance._explore._promela import run_ltl
    from settled.model.progress import liveness_of

    live = liveness_of(LEDGER)
    spin = run_ltl(render_machine(LEDGER), live, live.progress[0], depth=5)
    assert spin.verdict == "not_checked" and "depth" in spin.why, spin


def test_a_liveness_mutant_is_a_lasso_for_both_engines() -> None:
    """The approval machine with its fair expiry step removed: both engines find
    ``approval_decided_or_expired`` violated, SPIN with a lasso in our labels."""
    need_spin()
    from settled.conformance._explore._promela import run_ltl
    from settled.conformance._liveness import check_protocol
    from settled.model import APPROVAL
    from settled.model.progress import liveness_of

    mutant = dataclasses.replace(APPROVAL, transitions=tuple(
        t for t in APPROVAL.transitions if t.trigger != "expire"))
    live = liveness_of(mutant)
    prop = next(x for x in live.progress if x.name == "approval_decided_or_expired")
    ours = next(v for v in check_protocol(mutant, live).verdicts if v.prop is prop)
    spin = run_ltl(render_machine(mutant), live, prop)
    assert ours.verdict == "violated" and spin.verdict == "violated"
    assert spin.cycle and spin.prefix[0] is not None and spin.prefix[0][0].trigger == "propose"
    # The prefix reaches the premise: replayed through the table, it ends pending approval.
    steps = [TraceStep(0, t.trigger, tuple(params.items())) for t, params in
             (s for s in spin.prefix if s is not None)]
    configs = replay(mutant, steps)
    assert any(c[0].state == "pending_approval" for c in configs)


# --------------------------------------------------------------------------
# SPIN's multi-core and bitstate searches
# --------------------------------------------------------------------------
def test_a_multi_core_search_splits_the_query_machine_and_counts_what_one_core_counts() -> None:
    """pan compiled with -DNCORE=2: both cores store states of the query machine (its paths
    reach the hand-off depth), and the shared table's counts, steps and findings equal our
    explorer's, as the single-core search's do."""
    need_spin()
    from settled.model import QUERY

    ours, spin = explore(QUERY), run_spin(render_machine(QUERY), cores=2)
    agreement = compare(ours, spin)
    assert spin.complete and spin.cores == 2 and spin.handoff_depth == 20
    assert agreement.agree and agreement.bound == "equal", agreement.disagreements
    assert len(spin.core_states) == 2 and all(n > 0 for n in spin.core_states), spin.core_states
    # pan prints each core's share rounded (%g): together they are the states stored
    assert abs(sum(spin.core_states) - spin.stored) <= 0.01 * spin.stored


def test_a_multi_core_search_finds_a_planted_violation_with_a_shortest_trail() -> None:
    need_spin()
    p = planted()
    spin = run_spin(render_machine(p), cores=2)
    [f] = [f for f in spin.findings if f.check.name == "planted_never_paired"]
    mine = next(v for v in explore(p).violations if v.name == "planted_never_paired")
    assert mine.counterexample is not None
    # the trail comes from a single-core breadth-first search of that check alone
    assert len(f.steps) == len(mine.counterexample.steps)
    assert compare(explore(p), spin).agree


def test_a_bitstate_search_with_a_tiny_hash_array_is_partial_and_says_so() -> None:
    """2^10 bits for the approval machine's 271 states: hash collisions make pan take new
    states for seen ones. Its counts are lower than ours, the hash factor and the coverage
    estimate say so, and the agreement is 'at most ours': it holds, and is partial."""
    need_spin()
    from settled.model import APPROVAL

    ours = explore(APPROVAL)
    tiny = run_spin(render_machine(APPROVAL), bitstate=True, hash_bits=10)
    agreement = compare(ours, tiny)
    assert tiny.states < ours.states and tiny.hash_bits == 10 and tiny.bits_per_state == 3
    assert tiny.hash_factor is not None and tiny.hash_factor < 100
    cov = tiny.coverage_estimate
    assert cov is not None and cov < 0.999
    assert agreement.bound == "at_most" and agreement.agree and agreement.partial
    assert any(m.startswith("states: SPIN saw") for m in agreement.missed)
    # the default array (2^28 bits) sees every state: equal counts, not partial
    full = run_spin(render_machine(APPROVAL), bitstate=True)
    whole = compare(ours, full)
    assert full.states == ours.states and whole.agree and not whole.partial
    assert full.coverage_estimate is not None and full.coverage_estimate > 0.999999
    # ...and a bitstate search that saw MORE than we did disagrees
    full.stored += 1
    assert not compare(ours, full).agree


def test_explore_engine_spin_bitstate_partial_exits_3_loudly(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    need_spin()
    import typer
    from typer.testing import CliRunner

    from settled import _cmd_explore
    from settled.conformance._explore import _promela

    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """settled (only the explore command)."""

    _cmd_explore.register(app)
    real = _promela.run_spin
    monkeypatch.setattr(_promela, "run_spin",
                        lambda m, **kw: real(m, **{**kw, "hash_bits": 10}))
    done = CliRunner().invoke(app, ["explore", "approval", "--engine", "spin", "--bitstate"])
    assert done.exit_code == 3, done.output
    assert "LOWER BOUNDS" in done.output and "PARTIAL" in done.output
    assert "estimated coverage" in done.output and "hash factor" in done.output
    done = CliRunner().invoke(app, ["explore", "approval", "--engine", "spin", "--bitstate",
                                    "--json"])
    doc = json.loads(done.output)
    assert done.exit_code == doc["exit_code"] == 3 and doc["partial"] and doc["agree"]
    assert doc["bound"] == "at_most" and doc["spin_search"]["counts_are_lower_bounds"]
    assert doc["spin_search"]["coverage_estimate"] < 0.999


def test_explore_engine_spin_cores_and_bitstate_each_agree_on_the_ledger() -> None:
    need_spin()
    done = cli("explore", "ledger", "--engine", "spin", "--bitstate", "--json")
    doc = json.loads(done.stdout)
    assert done.returncode == 0 and doc["agree"] and not doc["partial"], done.stdout
    search = doc["spin_search"]
    assert search["cores"] == 1 and search["bitstate"] and search["hash_bits"] == 28
    assert search["coverage_estimate"] > 0.999999
    done = cli("explore", "ledger", "--engine", "spin", "--cores", "2", "--json")
    doc = json.loads(done.stdout)
    assert done.returncode == 0 and doc["agree"] and doc["bound"] == "equal", done.stdout
    assert doc["spin_search"]["cores"] == 2 and len(doc["spin_search"]["core_states"]) == 2
    text = cli("explore", "ledger", "--engine", "spin", "--cores", "2")
    # the ledger's paths are shorter than the hand-off depth: said, not hidden
    assert text.returncode == 0 and "took no work" in text.stdout, text.stdout


def test_bitstate_on_several_cores_is_refused() -> None:
    """pan's multi-core bitstate search can store a state twice (its shared bits have no
    lock), so its counts bound nothing: refused by the API and the command line alike."""
    with pytest.raises(ValueError, match="bound nothing"):
        run_spin(render_machine(LEDGER), bitstate=True, cores=2)


def test_a_spin_build_that_fails_under_cores_is_a_one_line_error(tmp_path: Any) -> None:
    """A C compiler that cannot build pan (here one that always fails): exit 3, one line
    naming the failing tool, whatever --cores asked for."""
    from pathlib import Path

    need_spin()
    bin_dir = Path(str(tmp_path))
    cc = bin_dir / "cc"
    cc.write_text("#!/bin/sh\necho 'pan.c: error: NCORE needs shared memory' >&2\nexit 1\n")
    cc.chmod(0o755)
    spin = shutil.which("spin")
    assert spin is not None
    (bin_dir / "spin").symlink_to(spin)
    path = f"{bin_dir}:{os.path.dirname(sys.executable)}:/usr/bin:/bin"
    done = cli("explore", "ledger", "--engine", "spin", "--cores", "2", path=path, cc="cc")
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "cc failed" in done.stderr


# --------------------------------------------------------------------------
# The C compiler for pan: $CC, else tcc, else cc
# --------------------------------------------------------------------------
def _fake_tools(tmp_path: Any, *names: str) -> str:
    """A PATH holding only executables called ``names`` (they are never run)."""
    from pathlib import Path

    bin_dir = Path(str(tmp_path))
    for name in names:
        (bin_dir / name).write_text("#!/bin/sh\nexit 1\n")
        (bin_dir / name).chmod(0o755)
    return str(bin_dir)


def test_pan_is_compiled_with_dollar_cc_else_tcc_else_cc(tmp_path: Any,
                                                                 monkeypatch: Any) -> None:
    from settled.conformance._explore._spin_run import tools

    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", _fake_tools(tmp_path, "spin", "cc", "tcc", "gcc"))
    assert os.path.basename(tools()[1]) == "tcc"
    monkeypatch.setenv("CC", "gcc")
    assert os.path.basename(tools()[1]) == "gcc"
    assert os.path.basename(tools("cc")[1]) == "cc"  # an explicit compiler wins over $CC
    (tmp_path / "tcc").unlink()
    monkeypatch.delenv("CC")
    assert os.path.basename(tools()[1]) == "cc"


def test_a_cc_that_names_no_compiler_is_a_one_line_error_naming_it(tmp_path: Any) -> None:
    need_spin()
    done = cli("explore", "ledger", "--engine", "spin", cc="no-such-cc")
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().count("\n") == 0
    assert "'no-such-cc' (CC) is not on the PATH" in done.stderr


def test_tcc_and_gcc_build_pans_that_count_the_same() -> None:
    """The default compiler (tcc, when installed) changes nothing but the build's time."""
    need_spin()
    if not shutil.which("tcc"):
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true and tcc (Debian package tcc) is missing: pan is built with it")
        pytest.skip("tcc not installed (apt-get install tcc)")
    model = render_machine(LEDGER)
    quick, slow = run_spin(model, compiler="tcc"), run_spin(model, compiler="gcc")
    assert (quick.compiler, slow.compiler) == ("tcc", "gcc")
    assert (quick.stored, quick.transitions, quick.errors) == (
        slow.stored, slow.transitions, slow.errors)
    assert compare(explore(LEDGER), quick).agree


def test_an_exhaustive_search_sizes_pans_hash_table_from_the_states_expected() -> None:
    """pan's -w: twice the states expected, within 2^18..2^28 slots; pan's own report says
    the table it used, and the counts are the same as at its default 2^24."""
    from settled.conformance._explore._spin_run import TABLE_BITS, table_bits

    assert table_bits(0) == table_bits(1_000) == TABLE_BITS[0] == 18
    assert table_bits(3_000_000) == 23 and table_bits(32_514_552) == 26
    assert table_bits(10**12) == TABLE_BITS[1] == 28
    assert all(2**table_bits(n) >= 2 * n for n in (131_073, 5_000_000, 100_000_000))
    need_spin()
    sized = run_spin(render_machine(LEDGER), expected_states=138)
    default = run_spin(render_machine(LEDGER))
    assert sized.table_bits == 18 and "hash table (-w18)" in sized.raw
    assert default.table_bits is None and "hash table (-w24)" in default.raw
    assert (sized.states, sized.steps) == (default.states, default.steps) == (138, default.steps)
