"""The ledger runtime held to ``model/ledger.py`` by the lockstep kit, and its bugs caught.

A ci campaign on real files agrees with the model step for step and fires
every transition; each ledger mutant is killed with a short counterexample
that replays on a fresh mutant and passes on the real runtime; the
runtime's own event log passes the trace checker while a doctored copy does
not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from settled.conformance._bundled._ledger_adapter import FORBIDDEN, LedgerAdapter
from settled.conformance._bundled._suites import SUITES, ledger_suite
from settled.conformance._lockstep import Action, replay, run_lockstep, unfired, world
from settled.conformance._profiles import profile
from settled.conformance._trace import check_lines
from settled.conformance.mutants import all_mutants
from settled.conformance.mutants.ledger import MUTANTS
from settled.model import LEDGER


@pytest.fixture(autouse=True)
def counterexamples(tmp_path, monkeypatch):
    monkeypatch.setenv("SETTLED_COUNTEREXAMPLES", str(tmp_path))
    return tmp_path


def story(instance: int, kind: str, *triggers: str) -> list[Action]:
    return [Action(instance, "register", {"kind": kind}),
            *(Action(instance, t, {}) for t in triggers)]


@pytest.mark.rule("L1")
@pytest.mark.rule("L2")
@pytest.mark.rule("L3")
@pytest.mark.rule("L4")
@pytest.mark.rule("L5")
def test_a_dev_campaign_passes_and_fires_every_transition():
    _passes_and_fires_every_transition("dev")


@pytest.mark.slow
def test_the_ci_profile_campaign_passes_and_fires_every_transition():
    _passes_and_fires_every_transition("ci")


def _passes_and_fires_every_transition(name: str) -> None:
    record = run_lockstep(ledger_suite().lockstep(), profile(name), seed=20261203)
    assert record.failure is None, record.failure
    assert not unfired(LEDGER, record.fired), unfired(LEDGER, record.fired)
    assert record.examples >= profile(name).max_examples and record.trace_events > 0


def test_verify_and_mutants_find_the_ledger_suite():
    suite = SUITES["ledger"]()
    assert (suite.machine, suite.protocol, suite.forbidden) == ("ledger", LEDGER, FORBIDDEN)
    assert {m.name for m in MUTANTS} <= {m.name for m in all_mutants()}


def test_the_catalogue_covers_every_ledger_rule():
    assert {m.rule for m in MUTANTS} == {"L1", "L2", "L3", "L4", "L5"}
    assert all(m.name.startswith(f"{m.rule}-") and m.machine == "ledger" for m in MUTANTS)


@pytest.mark.parametrize("mutant", [pytest.param(m, marks=pytest.mark.rule(m.rule), id=m.name)
                                    for m in MUTANTS])
def test_each_mutant_is_killed_with_a_short_replayable_counterexample(mutant):
    suite = ledger_suite(mutant.adapter_class)
    record = run_lockstep(suite.lockstep(mutant.name), profile("dev"), seed=1)
    assert record.failure is not None, f"{mutant.name} survived the dev campaign"
    # No step at all when the quiescence phase alone shows it (the runtime's own recovery).
    assert len(record.steps) <= 8 and (record.steps or record.unsettled), record.failure
    assert replay(world(LEDGER, suite.instances), suite.adapter, FORBIDDEN, record.steps,
                  quiesce=True) is not None
    real = ledger_suite()
    assert replay(world(LEDGER, real.instances), real.adapter, FORBIDDEN, record.steps,
                  quiesce=True) is None
    assert json.loads(record.itf_path.read_text())["#meta"]["status"] == "violation"


# --- the exported trace ---------------------------------------------------------------------

STORIES = [
    story(0, "write", "run", "crash", "recover_pair", "continue"),
    story(1, "write", "contract_upgraded", "crash", "recover_pair", "continue"),
    story(2, "read", "crash", "resume", "run", "pair", "continue"),
]


@pytest.fixture
def trace() -> Iterator[list[dict[str, Any]]]:
    adapter = LedgerAdapter(3)
    try:
        for steps in STORIES:
            for a in steps:
                adapter.perform(a.instance, a.trigger, a.params)
        yield [json.loads(line) for line in adapter.trace_lines()]
    finally:
        adapter.close()


@pytest.mark.rule("L4")
def test_the_runtimes_exported_trace_conforms(trace):
    report = check_lines([json.dumps(e) for e in trace])
    assert report.ok, report.violations[0].text()
    assert report.instances == 6  # three modelled calls and their companions
    mine = [e for e in trace if e["instance"] == "call-1"]
    assert [e["trigger"] for e in mine] == ["register", "restart", "recover_pair", "continue"]
    assert mine[2]["vars"]["result"] == "unknown"


@pytest.mark.parametrize("doctor", [
    pytest.param(lambda e: e["trigger"] == "recover_pair" and e["vars"].update(
        {"result": "not_executed"}), id="upgraded-call-reported-not-executed"),
    pytest.param(lambda e: e["trigger"] == "restart" and e["vars"].update(
        {"operation_id": "new"}), id="restart-mints-an-operation-id"),
    pytest.param(lambda e: e["trigger"] == "continue" and e.update({"from": "registered"}),
                 id="continued-unpaired"),
])
def test_a_doctored_trace_is_rejected(trace, doctor):
    for e in trace:
        doctor(e)
    assert not check_lines([json.dumps(e) for e in trace]).ok
