"""The Promela export and SPIN as a second engine: SPIN's counts equal our explorer's on
every machine, and a planted violation is found by SPIN with a trail in our own labels.

Systems are NOT exported (the renderer writes one machine): they are not compared here.
Without SPIN these tests skip in one line, except under CI=true, where they fail.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import pytest

from settled.conformance._counterexample import TraceStep, replay
from settled.conformance._explore import explore
from settled.conformance._promela import compare, findings, render_machine, run_spin
from settled.model import LEDGER, MACHINES, Invariant, Protocol
from settled.model._expr import V


def need_spin() -> None:
    if shutil.which("spin") and (shutil.which("cc") or shutil.which("gcc")):
        return
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true and spin (Debian package spin) or cc is missing: SPIN must run in CI")
    pytest.skip("spin not installed (apt-get install spin)")


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


def cli(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
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


def test_without_spin_the_engine_is_a_one_line_error_naming_the_package() -> None:
    done = cli("explore", "ledger", "--engine", "spin", path=os.path.dirname(sys.executable))
    assert done.returncode == 3
    assert done.stderr.strip().count("\n") == 0 and "apt-get install spin" in done.stderr
