"""Coverage counts edges (from, trigger, to) and guard alternatives, not transition names."""

from __future__ import annotations

import dataclasses

import pytest

from settled import _diagram_dot, _verify
from settled.conformance import explore
from settled.conformance._lockstep import (
    NO_TRANSITION,
    Record,
    declared_cases,
    declared_edges,
    declared_refusals,
    declared_values,
    edge_key,
    never_alone,
    refusal_goals,
    tour,
    tour_refusals,
    transition_label,
    unfired_cases,
    unfired_edges,
    unfired_values,
    unprobed_refusals,
)
from settled.model import APPROVAL, QUERY, build_query_machine

QUERY2 = build_query_machine(workers=2)


def _fired_by(protocol, paths):
    edges, cases = {}, {}
    for path in paths:
        c = protocol.initial_config()
        for a in path:
            if a.forbidden:
                continue
            step = protocol.fire(c, a.trigger, a.params)
            edges[edge_key(c, step)] = 1
            for g in step.transition.guards:
                if (case := g.case(protocol.view(c), a.params)) is not None:
                    cases[(transition_label(step.transition), g.name, case)] = 1
            c = step.after
    return edges, cases


@pytest.mark.parametrize("protocol", [QUERY2, APPROVAL], ids=["query", "approval"])
def test_the_tour_fires_every_edge_and_every_guard_alternative(protocol):
    edges, cases = _fired_by(protocol, tour(protocol, protocol.refusable))
    assert unfired_edges(protocol, edges) == []
    assert unfired_cases(protocol, cases) == []
    assert len(declared_edges(protocol)) > len(protocol.transitions) // 2


def test_the_query_machine_declares_guard_alternatives():
    assert ("cancel_confirmed: submission_unknown|running -> cancelled",
            "platform_running_or_cancelled", "platform == cancelled") in declared_cases(QUERY2)


def test_an_edge_that_never_fires_is_named():
    edges = {e: 1 for e in declared_edges(QUERY2)}
    del edges[("not_found", "cancelled", "confirm_cancel")]
    assert unfired_edges(QUERY2, edges) == ["confirm_cancel: not_found -> cancelled"]
    assert unfired_cases(QUERY2, {}) != []


def _with_dead_source(p):
    """The declaration as it once was: the platform 'finishing' from not_found."""
    ts = tuple(dataclasses.replace(t, source=(*t.source, "not_found"))
               if t.trigger in ("platform_succeeds", "platform_fails") else t
               for t in p.transitions)
    return dataclasses.replace(p, transitions=ts)


def test_the_explorer_finds_an_unreachable_edge_of_a_transition_that_fires_elsewhere():
    assert explore(QUERY2).ok
    result = explore(_with_dead_source(QUERY2))
    names = [f.name for f in result.unfired_transitions]
    assert names == ["platform_succeeds: not_found -> not_found",
                     "platform_fails: not_found -> not_found"]


def _campaign_missing(edge=None, refusal=None, value=None):
    """A stand-in for run_lockstep: a campaign that covered everything but ``edge``,
    ``refusal`` and ``value``."""
    def campaign(machine, settings, seed=None, **kw):
        record = Record()
        p = machine.spec[0].machine  # (system, factory, forbidden): a machine is a system
        record.fired = {transition_label(t): 1 for t in p.transitions}
        record.edges = {e: 1 for e in declared_edges(p) if e != edge}
        record.cases = {c: 1 for c in declared_cases(p)}
        record.refusals = {r: 1 for r in refusal_goals(p, p.refusable) if r != refusal}
        record.values = {v: 1 for v in declared_values(p, p.refusable) if v != value}
        record.trace_events = 1
        return record
    return campaign


def test_verify_fails_naming_an_edge_the_campaign_never_fired(monkeypatch):
    campaign = _campaign_missing(edge=("submission_unknown", "submission_unknown",
                                       "cancel_undelivered"))

    monkeypatch.setattr(_verify, "run_lockstep", campaign)
    lockstep, _trace, _record = _verify.check_lockstep("query", "dev", 1)
    assert not lockstep["ok"]
    assert lockstep["unfired_edges"] == ["cancel_undelivered: submission_unknown -> submission_unknown"]
    assert lockstep["unfired_transitions"] == []
    assert lockstep["not_checked"] == []
    approval, _trace, _record = _verify.check_lockstep("approval", "dev", 1)
    assert approval["not_checked"] == []  # retries_allowed is recorded now: every variable observed


def test_the_overlay_counts_guard_alternatives():
    edges = {e: 2 for e in declared_edges(QUERY2)}
    cases = {c: 1 for c in declared_cases(QUERY2)}
    label = "cancel_confirmed: submission_unknown|running -> cancelled"
    del cases[(label, "platform_running_or_cancelled", "platform == cancelled")]
    dot = _diagram_dot.to_dot(QUERY2, edges, cases)
    assert "platform == running ×1, platform == cancelled NEVER FIRED" in dot


# --------------------------------------------------------------------------
# Refusals: one probe per guard, and per part of a guard that declares parts
# --------------------------------------------------------------------------
BEGIN = "begin_submit: queued -> submitting"


def test_the_tour_probes_a_stale_lease_alone_not_only_a_missing_one():
    """fresh_lease is "holds a lease AND it is the current one": each part gets a probe of
    its own, so a stale lease's write is asked for, not only a write with no lease at all."""
    probed = tour_refusals(QUERY2, QUERY2.refusable)
    assert {(BEGIN, "fresh_lease[held[worker] > 0]"),
            (BEGIN, "fresh_lease[held[worker] == lease_epoch]")} <= probed
    stale = [[a.text() for a in path] for path in tour(QUERY2, QUERY2.refusable)
             if path[-1].forbidden and path[-1].trigger == "begin_submit"
             and sum(a.trigger == "claim" for a in path) == 2]
    assert ["q0 check_passed",
            "q0 confirm quote=whole draft_version=current condition_version=current "
            "message=attributed", "q0 claim worker=0", "q0 claim worker=1",
            "refuse q0 begin_submit worker=0"] in stale


def test_a_refusal_that_never_happens_alone_is_said_not_hidden():
    alone = never_alone(QUERY2, QUERY2.refusable)
    # Below the limit or at it, another resubmit transition takes the step: never a refusal.
    assert "resubmit: not_found -> submitting [under_limit]" in alone
    assert len(declared_refusals(QUERY2, QUERY2.refusable)) == len(alone) + len(
        tour_refusals(QUERY2, QUERY2.refusable))


def test_verify_fails_naming_a_refusal_the_campaign_never_asked_for(monkeypatch):
    campaign = _campaign_missing(refusal=(BEGIN, "fresh_lease[held[worker] == lease_epoch]"))

    monkeypatch.setattr(_verify, "run_lockstep", campaign)
    lockstep, _trace, _record = _verify.check_lockstep("query", "dev", 1)
    assert not lockstep["ok"]
    assert lockstep["unprobed_refusals"] == [f"{BEGIN} [fresh_lease[held[worker] == lease_epoch]]"]
    assert lockstep["unfired_edges"] == [] and lockstep["unfired_guard_alternatives"] == []
    assert "resubmit: not_found -> submitting [under_limit]" in lockstep["refusals_never_alone"]
    assert unprobed_refusals(QUERY2, QUERY2.refusable, {}) != []  # nothing asked: all named


def test_verify_prints_guard_names_in_brackets_as_they_are(capsys):
    """A refusal names its guard part in brackets; the terminal output must not read them
    as markup and drop them (it once printed "[under_limit]" as nothing)."""
    from settled import _cmd_verify

    ls = {"unprobed_refusals": [f"{BEGIN} [fresh_lease[held[worker] == lease_epoch]]"],
          "refusals_never_alone": ["resubmit: not_found -> submitting [under_limit]"]}
    machine = {"static": {}, "explore": {"findings": []}, "system": {}, "system_lockstep": {},
               "lockstep": ls}
    _cmd_verify.details({"machines": {"query": machine}, "views": {}})
    err = capsys.readouterr().err
    assert f"the refusal {BEGIN} [fresh_lease[held[worker] == lease_epoch]]" in err
    assert "submitting [under_limit] (in no reachable state" in err


# --------------------------------------------------------------------------
# Refusals where no transition takes the trigger; parameter values
# --------------------------------------------------------------------------
def test_every_refusable_trigger_is_asked_for_where_no_transition_takes_it():
    goals = refusal_goals(QUERY2, QUERY2.refusable)
    assert ("cancel in succeeded", NO_TRANSITION) in goals  # a user's cancel after success
    assert ("confirm in failed", NO_TRANSITION) in goals
    # Every such goal is asked for by some tour run, after the shortest run to its state.
    texts = {a.text() for path in tour(QUERY2, QUERY2.refusable) for a in path if a.forbidden}
    assert "refuse q0 cancel" in texts
    assert "cancel in succeeded (no transition)" in unprobed_refusals(QUERY2, QUERY2.refusable, {})


def test_verify_fails_naming_a_refusal_no_transition_gives_that_was_never_asked(monkeypatch):
    campaign = _campaign_missing(refusal=("cancel in succeeded", NO_TRANSITION))

    monkeypatch.setattr(_verify, "run_lockstep", campaign)
    lockstep, _trace, _record = _verify.check_lockstep("query", "dev", 1)
    assert not lockstep["ok"]
    assert lockstep["unprobed_refusals"] == ["cancel in succeeded (no transition)"]


def test_every_value_of_every_parameter_of_every_edge_is_declared_and_toured():
    declared = declared_values(QUERY2, QUERY2.refusable)
    faults = {value for (_e, name, value) in declared if name == "fault"}
    assert {"'timeout'", "'reset'", "'error'", "'busy'"} <= faults
    assert unfired_values(QUERY2, QUERY2.refusable, {}) == [
        f"{name}={value} at {edge[2]}: {edge[0]} -> {edge[1]}" for edge, name, value in declared]


def test_verify_fails_naming_a_parameter_value_the_campaign_never_took(monkeypatch):
    busy = (("submitting", "submission_unknown", "submit_undelivered"), "fault", "'busy'")
    assert busy in declared_values(QUERY, QUERY.refusable)
    monkeypatch.setattr(_verify, "run_lockstep", _campaign_missing(value=busy))
    lockstep, _trace, _record = _verify.check_lockstep("query", "dev", 1)
    assert not lockstep["ok"]
    assert lockstep["unfired_parameter_values"] == [
        "fault='busy' at submit_undelivered: submitting -> submission_unknown"]
    assert lockstep["unfired_edges"] == [] and lockstep["unprobed_refusals"] == []
