"""The lockstep kit's quiescence phase: once faults stop, every progress property must be met
within the model's quiescence bound (conformance/_lockstep/_quiesce.py).

The catalogue's quiescence mutants are killed by the slow catalogue test in test_mutants.py;
here the phase is shown to fail (and to be what fails them), to pass the
implementation, and to say loudly when it checked nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from settled.conformance._bundled._suites import SUITES, approval_suite, ledger_suite, query_suite
from settled.conformance._lockstep import run_lockstep
from settled.conformance._lockstep._campaign import replay, run_tour
from settled.conformance._lockstep._quiesce import QuiescenceStats, unmet_progress
from settled.conformance._lockstep._runner import Runner
from settled.conformance._lockstep._world import world
from settled.conformance._profiles import profile
from settled.conformance.mutants import Mutant, all_mutants
from settled.model import QUERY
from settled.model.progress import query_liveness

QUIESCENCE_MUTANTS = ("Q16-polls-after-explicit-not-found",
                      "L4-recovery-stops-at-the-first-unpaired-call",
                      "A2-recovery-pass-skips-calls-older-than-its-window")


def _mutant(name: str) -> Mutant:
    return next(m for m in all_mutants() if m.name == name)


@pytest.mark.rule("Q16")
def test_the_phase_fails_a_worker_that_polls_after_not_found_naming_the_property() -> None:
    mutant = _mutant("Q16-polls-after-explicit-not-found")
    suite = query_suite(mutant.adapter_class)
    record = run_lockstep(suite.lockstep(mutant.name), profile("dev"), seed=1)
    assert record.failure is not None and record.unsettled, record.failure
    assert "did not settle once faults stopped" in record.failure
    assert "not_found_resubmitted" in record.failure and "Q16" in record.failure
    assert "caught in a cycle" in record.failure
    machine = world(suite.protocol, suite.instances)
    assert replay(machine, suite.adapter, suite.forbidden, record.steps, quiesce=True)
    assert replay(machine, query_suite().adapter, suite.forbidden, record.steps,
                  quiesce=True) is None


def test_only_the_phase_catches_the_polling_worker() -> None:
    """Without the phase the directed tour passes it: each step the kit asks for is right."""
    mutant = _mutant("Q16-polls-after-explicit-not-found")
    assert run_tour(query_suite(mutant.adapter_class).lockstep(quiesce=False)) is None


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("name", QUIESCENCE_MUTANTS)
def test_a_quiescence_mutant_is_killed_by_the_phase_on_seeds_1_to_3(name: str, seed: int) -> None:
    mutant = _mutant(name)
    suite = SUITES[mutant.machine](mutant.adapter_class)
    record = run_lockstep(suite.lockstep(mutant.name), profile("ci"), seed=seed)
    assert record.failure is not None and record.unsettled, record.failure
    survived = run_lockstep(suite.lockstep(mutant.name, quiesce=False), profile("ci"), seed=seed)
    assert survived.failure is None, survived.failure


@pytest.mark.rule("L4")
def test_the_phase_fails_a_recovery_that_stops_at_the_first_unpaired_call() -> None:
    mutant = _mutant("L4-recovery-stops-at-the-first-unpaired-call")
    suite = ledger_suite(mutant.adapter_class)
    record = run_lockstep(suite.lockstep(mutant.name), profile("dev"), seed=1)
    assert record.failure is not None and record.unsettled, record.failure
    assert "registered_call_paired" in record.failure and "L4" in record.failure
    assert run_tour(suite.lockstep(quiesce=False)) is None  # without the phase: unseen


@pytest.mark.rule("A2")
def test_the_phase_fails_a_recovery_pass_that_skips_calls_older_than_its_window() -> None:
    mutant = _mutant("A2-recovery-pass-skips-calls-older-than-its-window")
    suite = approval_suite(mutant.adapter_class)
    record = run_lockstep(suite.lockstep(mutant.name), profile("dev"), seed=1)
    assert record.failure is not None and record.unsettled, record.failure
    assert "approval_decided_or_expired" in record.failure and "A2" in record.failure
    machine = world(suite.protocol, suite.instances)
    assert replay(machine, suite.adapter, suite.forbidden, record.steps, quiesce=True)
    assert replay(machine, approval_suite().adapter, suite.forbidden, record.steps,
                  quiesce=True) is None
    assert run_tour(suite.lockstep(quiesce=False)) is None  # without the phase: unseen


@pytest.mark.rule("A7")
def test_the_approval_runtime_settles_every_instance_within_its_bound() -> None:
    """The runtime's own turns (the call it is inside going on, its recovery pass) settle
    every call once faults stop, a call cancelled after it started included (A7, A8)."""
    record = run_lockstep(approval_suite().lockstep(), profile("dev"), seed=1)
    assert record.failure is None and record.model_finding is None, record.failure
    q = record.quiescence
    assert q.problem is None and q.runs > 0 and q.max_bound > 0, q.text()
    assert q.steps_total <= q.bound_total and q.implementation_turns > 0


def test_the_ledger_runtime_settles_every_instance_within_its_bound() -> None:
    record = run_lockstep(ledger_suite().lockstep(), profile("dev"), seed=1)
    assert record.failure is None and record.model_finding is None, record.failure
    q = record.quiescence
    assert q.problem is None and q.runs > 0 and q.max_bound > 0, q.text()
    assert q.steps_total <= q.bound_total and q.implementation_turns > 0
    assert q.text().startswith("quiescence: ") and "bound up to" in q.text()
    assert q.to_json()["checked"] is True


def test_an_unmet_progress_property_is_named_only_when_its_goal_never_follows() -> None:
    progress = query_liveness().progress
    not_found = QUERY.config("not_found")
    unmet = {p.name for p in unmet_progress(QUERY, progress, [not_found])}
    assert "not_found_resubmitted" in unmet
    met = {p.name for p in unmet_progress(QUERY, progress,
                                          [not_found, QUERY.config("succeeded")])}
    assert not met


def test_a_phase_that_checked_nothing_says_so() -> None:
    assert "NOT CHECKED: no run reached the phase" in QuiescenceStats().text()
    vacuous = QuiescenceStats(runs=3, instances=9, max_bound=0)
    assert vacuous.text().startswith("quiescence NOT CHECKED: vacuous")
    assert vacuous.to_json()["checked"] is False and "bound 0" in vacuous.to_json()["not_checked"]
    missing = QuiescenceStats(runs=3, instances=9, max_bound=4, not_checked="no own_turn()")
    assert missing.to_json()["checked"] is False and "NOT CHECKED" in missing.text()


def test_a_machine_with_no_progress_property_is_not_checked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from settled.model import progress as declared

    real = declared.liveness_of
    monkeypatch.setattr(declared, "liveness_of", lambda p: replace(real(p), progress=()))
    suite = ledger_suite()
    run = Runner(world(suite.protocol, suite.instances), suite.adapter, suite.forbidden, True)
    run.finish()
    assert run.quiet.not_checked is not None
    assert "declares no progress property" in run.quiet.not_checked and not run.quiet.runs


def test_an_adapter_without_its_own_turn_is_not_checked() -> None:
    from settled.conformance._bundled._approval_adapter import ApprovalAdapter

    class NoOwnTurn(ApprovalAdapter):
        own_turn = None  # type: ignore[assignment]

    suite = approval_suite(NoOwnTurn)
    run = Runner(world(suite.protocol, suite.instances), suite.adapter, suite.forbidden, True)
    run.finish()
    assert run.quiet.not_checked is not None and "own_turn" in run.quiet.not_checked


def test_settled_lockstep_reports_the_phase_in_text_and_json(tmp_path) -> None:  # type: ignore[no-untyped-def]
    base = [sys.executable, "-m", "settled.cli", "lockstep", "examples.query_adapter:correct",
            "--profile", "dev", "--seed", "1", "--out", str(tmp_path)]
    doc = json.loads(subprocess.run([*base, "--json"], capture_output=True, text=True,
                                    check=False).stdout)
    # The example's worker takes its own turns: the phase checked it, by its own scheduler.
    assert doc["quiescence"]["checked"] is True and doc["model_finding"] is None
    assert doc["quiescence"]["implementation_turns"] > 0, doc["quiescence"]
    text = subprocess.run(base, capture_output=True, text=True, check=False).stdout
    assert "settled with every progress property met" in text and "NOT CHECKED" not in text


def test_an_adapter_without_its_own_turn_is_reported_not_checked() -> None:
    from examples.query_adapter import InMemoryQueryAdapter
    from settled.conformance import lockstep

    class NoOwnTurn(InMemoryQueryAdapter):
        own_turn = None  # type: ignore[assignment]

    report = lockstep(NoOwnTurn, "query", profile="dev", seed=1)
    assert report.to_json()["quiescence"]["checked"] is False
    assert "own_turn" in report.to_json()["quiescence"]["not_checked"]
    assert "quiescence NOT CHECKED" in report.text() and "own_turn" in report.text()
    # unchecked is not green: incomplete (exit 3) until the caller accepts it by name
    assert not report.ok and report.exit_code == 3 and report.unchecked == ("quiescence",)
    assert "--allow-unchecked quiescence" in report.text()
    allowed = lockstep(NoOwnTurn, "query", profile="dev", seed=1, allow_unchecked=["quiescence"])
    assert allowed.ok and allowed.exit_code == 0 and "ALLOWED UNCHECKED: quiescence" in allowed.text()
    with pytest.raises(ValueError, match="quiescence"):  # a phase that runs cannot be waived
        lockstep(InMemoryQueryAdapter, "query", profile="dev", seed=1,
                 allow_unchecked=["quiescence"])


def test_the_api_report_carries_a_checked_phase() -> None:
    from settled.conformance import lockstep

    report = lockstep(ledger_suite().adapter, "ledger", profile="dev", seed=1)
    assert report.ok, report.text()
    assert report.to_json()["quiescence"]["checked"] is True
    assert "settled with every progress property met" in report.text()
