"""Model mutants, found by both engines: each safety mutant (a guard dropped, an effect
altered, a bound off by one) with the same findings by our explorer and by SPIN; each
liveness mutant as a lasso by both, and by no safety check of either.

The query machine's mutants compile a large pan.c (about 6 s each) and run its LTL search;
they are marked slow. Without SPIN these tests skip in one line, except under CI=true.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from conftest import need_spin

from settled.conformance.mutants._model import (
    BOUND_OFF_BY_ONE,
    EFFECT_ALTERED,
    GUARD_DROPPED,
    LIVENESS,
    ModelMutant,
    catalogue,
    check,
)
from settled.model import LEDGER, MACHINES

CATALOGUE = catalogue()


def _param(m: ModelMutant) -> object:
    marks = [pytest.mark.slow] if m.machine == "query" else []
    return pytest.param(m, id=m.name, marks=marks)


def test_the_catalogue_has_each_kind_on_each_machine_where_it_makes_sense() -> None:
    kinds = {(m.machine, m.kind) for m in CATALOGUE}
    for machine in ("approval", "query"):
        assert {(machine, k) for k in (GUARD_DROPPED, EFFECT_ALTERED, BOUND_OFF_BY_ONE)} <= kinds
    # the ledger has no numeric limit in any guard, so no bound to put off by one
    assert {("ledger", GUARD_DROPPED), ("ledger", EFFECT_ALTERED)} <= kinds
    assert not any("<" in g.text or ">" in g.text for t in LEDGER.transitions for g in t.guards)
    assert sorted(m.progress for m in CATALOGUE if m.kind == LIVENESS) == [
        "approval_decided_or_expired", "not_found_resubmitted", "uncertain_write_resolved"]
    assert len({m.name for m in CATALOGUE}) == len(CATALOGUE)


@pytest.mark.parametrize("m", CATALOGUE, ids=[m.name for m in CATALOGUE])
def test_each_mutant_is_one_change_said_from_its_expressions(m: ModelMutant) -> None:
    """The mutant differs from its machine in its transitions alone, and the change names
    the expressions it touched, rendered as the spec renders them."""
    base = MACHINES[m.machine]
    assert dataclasses.replace(m.protocol, transitions=base.transitions) == base
    changed = [t for t in m.protocol.transitions if t not in base.transitions]
    gone = [t for t in base.transitions if t not in m.protocol.transitions]
    assert changed or gone
    for t in changed:
        old = next(o for o in base.transitions if (o.trigger, o.source, o.dest)
                   == (t.trigger, t.source, t.dest) and o.meaning == t.meaning)
        texts = [g.text for g in (*old.guards, *t.guards)] + [old.effect.text, t.effect.text]
        assert any(f"`{s}`" in m.change for s in texts if s), m.change


@pytest.mark.parametrize("m", [_param(m) for m in CATALOGUE])
def test_each_model_mutant_is_found_by_both_engines(m: ModelMutant) -> None:
    need_spin()
    result = check(m)
    assert result.found, result.problems
    if m.kind == LIVENESS:
        assert result.ours == result.spin == []
        assert result.ours_progress == result.spin_progress == "violated"
        assert result.ours_lasso and result.spin_lasso
    else:
        assert result.ours == result.spin and set(m.finds) <= {tuple(f) for f in result.ours}
    assert result.agreement.agree and result.agreement.ours["states"] > 0


def test_a_mutant_neither_engine_finds_fails_the_check() -> None:
    """The unmutated ledger dressed as a mutant that breaks ``executed_at_most_once``: both
    engines find nothing, and the check says so for each."""
    need_spin()
    fake = ModelMutant("ledger-unchanged", "ledger", GUARD_DROPPED, ("L4",), "nothing",
                       LEDGER, (("invariant", "executed_at_most_once"),))
    result = check(fake)
    assert not result.found
    assert any(p.startswith("ours did not find") for p in result.problems)
    assert any(p.startswith("SPIN did not find") for p in result.problems)


def test_a_liveness_mutant_a_safety_check_finds_fails_the_check() -> None:
    """A safety mutant passed off as a liveness mutant: the safety checks of both engines
    find it, so it is not a liveness mutant, and the check says so."""
    need_spin()
    safety = next(m for m in CATALOGUE if m.name == "ledger-upgraded-write-paired-not-executed")
    fake = dataclasses.replace(safety, kind=LIVENESS, finds=(),
                               progress="registered_call_paired")
    result = check(fake)
    assert not result.found
    assert any(p.startswith("a safety check of ours") for p in result.problems)
    assert any(p.startswith("a safety check of SPIN") for p in result.problems)


# --------------------------------------------------------------------------
# settled mutants --model
# --------------------------------------------------------------------------
def _cli(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "settled.cli", "mutants", "--model", *args],
                          capture_output=True, text=True, env=env)


def test_settled_mutants_model_reports_both_engines_in_json() -> None:
    need_spin()
    done = _cli("--only", "ledger-resume-despite-receipt", "--json")
    doc = json.loads(done.stdout)
    assert done.returncode == doc["exit_code"] == 0 and doc["found"] == doc["total"] == 1
    [m] = doc["model_mutants"]
    assert m["found"] and m["ours"] == m["spin"] and m["kind"] == GUARD_DROPPED
    assert "`receipt == none` dropped" in m["change"]


def test_settled_mutants_model_exits_1_for_a_mutant_not_found(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    need_spin()
    import typer
    from typer.testing import CliRunner

    from settled import _cmd_mutants
    from settled.conformance.mutants import _model as _model_mutants

    fake = ModelMutant("ledger-unchanged", "ledger", GUARD_DROPPED, ("L4",), "nothing",
                       LEDGER, (("invariant", "executed_at_most_once"),))
    monkeypatch.setattr(_model_mutants, "catalogue", lambda: (fake,))
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """settled (only the mutants command)."""

    _cmd_mutants.register(app)
    done = CliRunner().invoke(app, ["mutants", "--model"])
    assert done.exit_code == 1, done.output
    assert "NOT FOUND" in done.output and "PROBLEM: ours did not find" in done.output


def test_settled_mutants_model_without_spin_is_one_line_exit_3() -> None:
    done = _cli("--only", "ledger-resume-despite-receipt", path=os.path.dirname(sys.executable))
    assert done.returncode == 3
    assert done.stderr.strip().count("\n") == 0 and "apt-get install spin" in done.stderr
