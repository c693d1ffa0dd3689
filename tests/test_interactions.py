"""Cross-instance stories performed on purpose: every interaction the bounded search of a
declared system reaches (a step moving the shared state while another instance sits in a
control state) is performed by the system tour, and the kit counts and names the rest."""

from __future__ import annotations

import pytest

from settled.conformance._bundled._suites import approval_system_suite, query_system_suite
from settled.conformance._lockstep._campaign import run_tour
from settled.conformance._lockstep._interactions import (
    Reachable,
    coverage,
    reachable,
    reachable_once,
)


@pytest.mark.parametrize("make", [
    pytest.param(query_system_suite, id="query_system"),
    pytest.param(approval_system_suite, id="approval_system", marks=pytest.mark.slow)])
def test_the_tour_performs_every_interaction_the_search_reaches(make) -> None:
    suite = make()
    machine = suite.lockstep()
    assert run_tour(machine) is None, machine.record.failure
    found = reachable_once(suite.system, suite.forbidden)
    assert found.runs, "a declared system whose instances never meet"
    report = coverage(suite.system, suite.forbidden, machine.record.interactions)
    print(f"\n{suite.machine}: {report.text()} over {found.states} configurations")
    assert report.missing == ()
    assert report.covered == report.reachable == len(found.runs)
    # The search is bounded: the set is said to be partial, so the coverage is not "ok".
    assert not report.complete and not report.ok and "PARTIAL" in report.text()


def test_an_interaction_never_performed_is_named_and_fails() -> None:
    suite = query_system_suite()
    found = reachable_once(suite.system, suite.forbidden)
    performed = {k: 1 for k in found.runs}
    gone = sorted(found.runs)[0]
    del performed[gone]
    report = coverage(suite.system, suite.forbidden, performed)
    assert report.missing == (gone,) and report.covered == report.reachable - 1
    assert not report.ok and f"{gone[0]} while another is {gone[1]}" in report.text()
    assert coverage(suite.system, suite.forbidden, {}).covered == 0


def test_a_complete_search_with_everything_performed_is_ok(monkeypatch) -> None:
    suite = query_system_suite()
    found = reachable(suite.system, suite.forbidden, max_states=500)
    assert not found.complete
    whole = Reachable(found.runs, found.states, True)
    from settled.conformance._lockstep import _interactions

    monkeypatch.setattr(_interactions, "reachable_once", lambda *_: whole)
    report = coverage(suite.system, suite.forbidden, dict.fromkeys(found.runs, 1))
    assert report.ok and "PARTIAL" not in report.text() and "NOT PERFORMED" not in report.text()
    assert report.to_json()["ok"] is True
