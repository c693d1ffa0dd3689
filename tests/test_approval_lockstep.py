"""The approval runtime held to ``model/approval.py`` by the lockstep kit, and its bugs caught.

Three things are checked: a ci campaign on real files agrees with the model
step for step and fires every transition of it; each mutant in the approval
catalogue is killed with a short counterexample that replays on a fresh
implementation (and passes on the real one); and the runtime's own event
log, exported as ``settled.trace/1``, passes the trace checker while a
doctored copy does not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from settled.conformance._bundled._approval_adapter import ApprovalAdapter
from settled.conformance._bundled._suites import SUITES, approval_suite
from settled.conformance._lockstep import (
    Action,
    replay,
    run_lockstep,
    unfired,
    unfired_cases,
    unfired_edges,
    world,
)
from settled.conformance._profiles import profile
from settled.conformance._trace import check_lines
from settled.conformance.mutants.approval import MUTANTS
from settled.model import APPROVAL

FORBIDDEN = APPROVAL.refusable


@pytest.fixture(autouse=True)
def counterexamples(tmp_path, monkeypatch):
    monkeypatch.setenv("SETTLED_COUNTEREXAMPLES", str(tmp_path))
    return tmp_path


def story(instance: int, retry_safe: bool, *triggers: str) -> list[Action]:
    return [Action(instance, "propose", {"retry_safe": retry_safe}),
            *(Action(instance, t, {}) for t in triggers)]


# --- the campaign ---------------------------------------------------------------------------


@pytest.mark.rule("A1")
@pytest.mark.rule("A2")
@pytest.mark.rule("A3")
@pytest.mark.rule("A4")
@pytest.mark.rule("A5")
@pytest.mark.rule("A7")
@pytest.mark.rule("R4")
@pytest.mark.rule("R5")
@pytest.mark.rule("R6")
def test_a_short_campaign_passes_and_fires_every_edge():
    """The default run's campaign: the tour (every edge, guard alternative and refusal)
    and a few random runs; the full ci campaign below is marked slow."""
    record = run_lockstep(approval_suite().lockstep(), profile("dev"), seed=20261202)
    assert record.failure is None and record.adapter_error is None, record.failure
    assert unfired_edges(APPROVAL, record.edges) == []
    assert unfired_cases(APPROVAL, record.cases) == []
    assert record.trace_events > 0


@pytest.mark.slow
def test_the_ci_campaign_passes_and_fires_every_transition():
    record = run_lockstep(approval_suite().lockstep(), profile("ci"), seed=20261202)
    assert record.failure is None, record.failure
    missing = unfired(APPROVAL, record.fired)
    assert not missing, f"the ci campaign never fired: {missing}"
    assert record.examples >= 50


def test_verify_and_mutants_find_the_approval_suite():
    suite = SUITES["approval"]()
    assert (suite.machine, suite.protocol, suite.forbidden) == ("approval", APPROVAL, FORBIDDEN)
    assert {m.machine for m in MUTANTS} == {"approval"}


# --- the mutants ----------------------------------------------------------------------------


def test_the_catalogue_covers_the_rules_it_is_meant_to():
    assert {m.rule for m in MUTANTS} >= {"L5", "W1", "W2", "W3", "W5", "W6", "W7", "W8", "A1", "A2", "A3",
                                         "A4", "A5", "A6", "A7", "R1", "R2", "R4", "R5", "R6"}
    assert all(m.name.startswith(f"{m.rule}-") for m in MUTANTS)
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)


# The default run checks a sample with each family of rules in it (approval, lookups, restarts,
# the write path, the purge); the slow run checks every mutant. That keeps
# the default suite within its CPU budget.
DEFAULT_SAMPLE = frozenset({"A1-recovery-with-a-new-token", "A3-failed-lookup-is-absent",
                            "A7-cancel-settles-a-started-call", "R1-restart-expires-unshown-approvals",
                            "R2-expired-approval-reaches-handler", "R5-recovery-reruns-without-lookup",
                            "W2-replayed-token-applied-again", "W6-token-record-in-its-own-transaction",
                            "W7-submitted-draft-ordered-again", "W8-purge-forgets-in-flight-tokens"})


def test_the_default_sample_names_real_mutants():
    assert {m.name for m in MUTANTS} >= DEFAULT_SAMPLE


@pytest.mark.parametrize("mutant", [
    pytest.param(m, id=m.name, marks=[pytest.mark.rule(m.rule)]
                 + ([] if m.name in DEFAULT_SAMPLE else [pytest.mark.slow]))
    for m in MUTANTS])
def test_each_mutant_is_killed_with_a_short_replayable_counterexample(mutant):
    suite = approval_suite(mutant.adapter_class)
    record = run_lockstep(suite.lockstep(mutant.name), profile("dev"), seed=1)
    assert record.failure is not None, f"{mutant.name} survived the dev campaign"
    assert 1 <= len(record.steps) <= 10, record.failure
    # The minimised steps replay to a divergence on a fresh mutant (with the quiescence phase
    # that ends every run: a mutant of the runtime's own scheduler is caught there) ...
    assert replay(world(APPROVAL, suite.instances), suite.adapter, FORBIDDEN, record.steps,
                  quiesce=True) is not None
    # ... and agree on the real implementation: the mutation is what the kit caught.
    real = approval_suite()
    assert replay(world(APPROVAL, real.instances), real.adapter, FORBIDDEN, record.steps,
                  quiesce=True) is None
    itf = json.loads(record.itf_path.read_text())
    assert itf["#meta"]["status"] == "violation"
    assert len(itf["states"]) == len(record.steps) + 1


# --- the exported trace ---------------------------------------------------------------------

# Stories whose logs need the committed episodes read back: a result saved by the handler
# (create_order), a commit then a cancel then a restart (adjust_stock), and a commit found
# only after a failed lookup and a person's resume (cancel_order, retry_safe).
STORIES = [
    story(0, False, "show", "approve", "execute", "commit", "save_result", "answer"),
    story(1, False, "show", "approve", "execute", "commit", "cancel", "crash_after_commit",
          "lookup_found", "crash_before_answer", "answer"),
    story(2, True, "show", "approve", "execute", "retry", "commit", "outcome_uncertain",
          "lookup_failed", "resume_lookup", "lookup_found", "answer"),
]


@pytest.fixture
def trace() -> Iterator[list[dict[str, Any]]]:
    adapter = ApprovalAdapter(3)
    try:
        for steps in STORIES:
            for a in steps:
                adapter.perform(a.instance, a.trigger, a.params)
        yield [json.loads(line) for line in adapter.trace_lines()]
    finally:
        adapter.close()


def _lines(events: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(e) for e in events]


@pytest.mark.rule("R5")
@pytest.mark.rule("A4")
def test_the_runtimes_exported_trace_conforms(trace):
    report = check_lines(_lines(trace))
    assert report.ok, report.violations[0].text()
    assert (report.instances, report.events) == (3, len(trace))
    # The business commit leaves no event: the checkpoint logs what followed it from
    # executing, the state it last saw, and the checker considers the unlogged commit.
    assert not any("committed" in (e["from"], e["to"]) for e in trace)
    assert sorted(e["trigger"] for e in trace if e["from"] == "executing") == [
        "cancel", "outcome_uncertain", "restart_while_executing", "retry", "save_result"]


@pytest.mark.parametrize("doctor", [
    pytest.param(lambda e: e["trigger"] == "save_result" and e.update({"from": "approved"}),
                 id="result-saved-before-execute"),
    pytest.param(lambda e: e["trigger"] == "save_result" and e.update({"to": "executing"}),
                 id="result-saved-and-still-executing"),
    pytest.param(lambda e: e["trigger"] == "approve" and e.update({"to": "executing"}),
                 id="approval-skips-execute"),
    pytest.param(lambda e: e["trigger"] == "show" and e["vars"].update({"shown": False}),
                 id="shown-request-logged-unshown"),
    pytest.param(lambda e: e["trigger"] == "lookup_found" and e.update({"trigger": "lookup_absent"}),
                 id="committed-call-looked-up-absent"),
])
def test_a_doctored_trace_is_rejected(trace, doctor):
    doctored = [json.loads(json.dumps(e)) for e in trace]
    assert any(doctor(e) is None for e in doctored)  # dict.update returns None: it hit
    assert not check_lines(_lines(doctored)).ok


