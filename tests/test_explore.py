"""The explorer finds every property of the query machine broken by one small change.

Each mutant below changes one guard (or, where no guard can break the
property, one effect, destination or source) in a *copy* of the table and
pins the exact set of properties the explorer then reports and the length of
the shortest counterexample, counted by hand in the comment next to it. The
clean machine explores without any finding, and the fast search agrees with
the ``transitions`` oracle and with a naive reference search.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from settled.conformance._explore import (
    Counterexample,
    ExploreResult,
    TraceStep,
    explore,
    explore_via_transitions,
    parse_steps,
    replay,
)
from settled.conformance._itf import from_itf_value, itf_trace, read_itf, to_itf_value, write_itf
from settled.model import (
    QUERY,
    Effect,
    Guard,
    Protocol,
    State,
    Transition,
    Variable,
    build_query_machine,
)
from settled.model import query as q
from settled.model._expr import V

SMALL = build_query_machine(workers=1, max_epoch=2, max_task_version=2)


# --------------------------------------------------------------------------
# Mutants: a copy of the table with one change
# --------------------------------------------------------------------------
def rebuild(p: Protocol, transitions: list[Transition], states: tuple[State, ...] | None = None
            ) -> Protocol:
    return Protocol(name=p.name, meaning=p.meaning, states=states or p.states, initial=p.initial,
                    variables=p.variables, transitions=tuple(transitions),
                    invariants=p.invariants, step_properties=p.step_properties, actors=p.actors)


def mutate(pick: Callable[[Transition], bool], change: Callable[[Transition], Transition],
           states: tuple[State, ...] | None = None, base: Protocol = SMALL) -> Protocol:
    ts = list(base.transitions)
    hits = [i for i, t in enumerate(ts) if pick(t)]
    assert hits, "the mutant picked no transition"
    for i in hits:
        ts[i] = change(ts[i])
    return rebuild(base, ts, states)


def drop(guard: str, **more: Any) -> Callable[[Transition], Transition]:
    def change(t: Transition) -> Transition:
        assert guard in [g.name for g in t.guards], f"{t.trigger} has no guard {guard}"
        return dataclasses.replace(t, guards=tuple(g for g in t.guards if g.name != guard), **more)
    return change


def effect(updates: dict[str, Any]) -> Callable[[Transition], Transition]:
    return lambda t: dataclasses.replace(t, effect=Effect(updates))


def trigger(name: str, dest: object = "any") -> Callable[[Transition], bool]:
    return lambda t: t.trigger == name and (dest == "any" or t.dest == dest)


_COUNT_WITHOUT_SUBMISSION = {"submit_epoch": V.lease_epoch, "ids_submitted": 1}
_RESUBMIT_NEW_ID = {"submissions": V.submissions + 1, "submit_epoch": V.lease_epoch,
                    "ids_submitted": 2}


FAILED_NOT_TERMINAL = tuple(dataclasses.replace(s, terminal=False) if s.name == q.FAILED else s
                            for s in SMALL.states)

# Common prefix of most runs: 1 check_passed, 2 confirm, 3 claim, 4 begin_submit.
MUTANTS = [
    # (property, rule, mutant, {(kind, name) reported}, shortest length of the property's run)
    pytest.param(
        "at_most_three_submissions",
        # resubmit without under_limit (the resubmit that stops at the limit becomes a
        # trigger of its own, so the declaration stays unambiguous); 13 =
        # 4 (prefix, submission 1) + 3 x (submit_undelivered, lookup_not_found, resubmit).
        # The fourth submission is also outside the declared domain of submissions.
        mutate(trigger("resubmit", q.SUBMITTING), drop("under_limit"),
               base=mutate(trigger("resubmit", q.EXHAUSTED),
                           lambda t: dataclasses.replace(t, trigger="stop_resubmitting"))),
        {("invariant", "at_most_three_submissions"), ("domain", "submissions")}, 13,
        marks=pytest.mark.rule("Q16"), id="resubmit-ignores-limit"),
    pytest.param(
        "resubmission_follows_not_found",
        # a not found that leaves no trace: prefix, submit_undelivered, lookup_not_found, resubmit
        mutate(trigger("lookup_not_found"), effect({})),
        {("invariant", "resubmission_follows_not_found")}, 7,
        marks=pytest.mark.rule("Q16"), id="not-found-unrecorded"),
    pytest.param(
        "one_query_id",
        # resubmit under a new query id: prefix, submit_undelivered, lookup_not_found, resubmit
        mutate(trigger("resubmit", q.SUBMITTING), effect(_RESUBMIT_NEW_ID)),
        {("invariant", "one_query_id")}, 7,
        marks=pytest.mark.rule("Q1"), id="resubmit-new-id"),
    pytest.param(
        "failed_needs_evidence",
        # A guard drop (lookup_failed without platform_failed) also breaks success_stands; this
        # destination change breaks only this one: prefix, submit_undelivered -> failed.
        mutate(trigger("submit_undelivered"), lambda t: dataclasses.replace(t, dest=q.FAILED)),
        {("invariant", "failed_needs_evidence")}, 5,
        marks=pytest.mark.rule("Q17"), id="communication-error-fails"),
    pytest.param(
        "cancelled_needs_evidence",
        # cancel_confirmed that does not record the platform's cancel: prefix, submit_answered,
        # cancel (requested), cancel_confirmed -> cancelled while the platform runs
        mutate(trigger("cancel_confirmed"), effect({
            "phase_moved": (V.task_version == V.authorized_version) & ~V.clarifying})),
        {("invariant", "cancelled_needs_evidence")}, 7,
        marks=pytest.mark.rule("Q21"), id="cancel-without-evidence"),
    pytest.param(
        "success_stands",
        # A platform success overridden by a cancel: lookup_cancelled without platform_cancelled.
        # success_stands can never break alone (cancelled or failed with a platform success also
        # breaks cancelled_/failed_needs_evidence or unsubmitted_until_submitting).
        # cancelled_needs_evidence: prefix, submit_answered, lookup_cancelled (6);
        # success_stands: prefix, submit_answered, platform_succeeds, lookup_cancelled (7).
        mutate(trigger("lookup_cancelled"), drop("platform_cancelled")),
        {("invariant", "success_stands"), ("invariant", "cancelled_needs_evidence")}, 7,
        marks=pytest.mark.rule("Q21"), id="success-overridden-by-cancel"),
    pytest.param(
        "not_found_is_true",
        # lookup_not_found without platform_not_received: prefix, submit_response_lost,
        # lookup_not_found (6). The false not found then lets confirm_cancel cancel a running
        # (8) or succeeded (9) query.
        mutate(trigger("lookup_not_found"), drop("platform_not_received")),
        {("invariant", "not_found_is_true"), ("invariant", "cancelled_needs_evidence"),
         ("invariant", "success_stands")}, 6,
        marks=pytest.mark.rule("Q15"), id="not-found-while-running"),
    pytest.param(
        "late_result_keeps_out",
        # an outcome always moves the phase: prefix, submit_answered, condition_updated,
        # platform_succeeds, lookup_succeeded
        mutate(trigger("lookup_succeeded"), effect({"phase_moved": True, "result": q.RESULT_PLATFORM})),
        {("step_property", "late_result_keeps_out")}, 8,
        marks=pytest.mark.rule("Q24"), id="late-result-moves-phase"),
    pytest.param(
        "unsubmitted_until_submitting",
        # begin_submit that does not commit the count: prefix, submit_answered
        mutate(trigger("begin_submit"), effect(_COUNT_WITHOUT_SUBMISSION)),
        {("invariant", "unsubmitted_until_submitting")}, 5,
        marks=pytest.mark.rule("Q12"), id="call-before-count-commit"),
    pytest.param(
        "stale_lease_changes_nothing",
        # submit_answered without fresh_lease: prefix, crash, submit_answered by the dead lease
        mutate(trigger("submit_answered"), drop("fresh_lease")),
        {("step_property", "stale_lease_changes_nothing")}, 6,
        marks=pytest.mark.rule("Q11"), id="stale-lease-writes"),
    pytest.param(
        "terminal_absorbs",
        # Validation forbids exits from a terminal state, so the copy also declares failed
        # non-terminal: prefix, submit_rejected -> failed, revised -> superseded.
        mutate(trigger("revised"), lambda t: dataclasses.replace(t, source=(*t.source, q.FAILED)),
               states=FAILED_NOT_TERMINAL),
        {("step_property", "terminal_absorbs")}, 6,
        marks=pytest.mark.rule("Q16"), id="failed-is-revised"),
    pytest.param(
        "unknown_left_on_evidence",
        # Every exit from submission_unknown is an evidence trigger, so no guard can break this:
        # an unanswered cancel taken as cancelled. prefix, submit_response_lost, cancel,
        # cancel_response_lost -> cancelled. The lost answer may follow a platform that had
        # already finished, so the same step also ends a success or a failure as cancelled.
        mutate(trigger("cancel_response_lost"), lambda t: dataclasses.replace(t, dest=q.CANCELLED)),
        {("step_property", "unknown_left_on_evidence"), ("invariant", "success_stands"),
         ("invariant", "cancelled_needs_evidence")}, 7,
        marks=pytest.mark.rule("Q14"), id="unanswered-cancel-settles"),
    pytest.param(
        "call_after_submitting_commit",
        # submit_answered without own_call: prefix, crash, claim (epoch 2), submit_answered
        mutate(trigger("submit_answered"), drop("own_call")),
        {("step_property", "call_after_submitting_commit")}, 7,
        marks=pytest.mark.rule("Q13"), id="recovering-lease-submits"),
    pytest.param(
        "confirmation_needs_whole_current_quote",
        # first confirm without quote_whole: check_passed, confirm quote=part
        mutate(trigger("confirm", q.QUEUED), drop("quote_whole")),
        {("step_property", "confirmation_needs_whole_current_quote")}, 2,
        marks=pytest.mark.rule("Q5"), id="partial-quote-confirms"),
    pytest.param(
        "reconfirmation_changes_nothing",
        # a confirmation retry that withdraws the cancel request: prefix, cancel, confirm
        mutate(trigger("confirm", None), effect({"cancel_state": "none"})),
        {("step_property", "reconfirmation_changes_nothing")}, 6,
        marks=pytest.mark.rule("Q8"), id="retry-clears-cancel"),
    pytest.param(
        "cancel_after_submit_only_requests",
        # submitting treated as never sent: the local cancel, not the request-only one, leaves
        # submitting. prefix, cancel (5); the platform may hold it:
        # prefix, crash_after_platform_stored, cancel (6); or have finished it (7).
        mutate(trigger("cancel", q.CANCELLED),
               lambda t: dataclasses.replace(t, source=(*t.source, q.SUBMITTING)),
               base=mutate(trigger("cancel", None), lambda t: dataclasses.replace(
                   t, source=tuple(s for s in t.source if s != q.SUBMITTING)))),
        {("step_property", "cancel_after_submit_only_requests"),
         ("invariant", "cancelled_needs_evidence"), ("invariant", "success_stands")}, 5,
        marks=pytest.mark.rule("Q21"), id="cancel-while-submitting"),
    pytest.param(
        "authorization_is_fixed",
        # the query follows the task's version: check_passed, confirm, condition_updated
        mutate(trigger("condition_updated", None), effect({
            "task_version": V.task_version + 1, "authorized_version": V.task_version + 1})),
        {("step_property", "authorization_is_fixed")}, 3,
        marks=pytest.mark.rule("Q23"), id="authorization-follows-task"),
    pytest.param(
        "platform_runs_confirmed_sql",
        # the worker sends other SQL than the confirmed draft: prefix, submit_answered
        mutate(trigger("submit_answered"), effect({"platform": q.P_RUNNING, "payload": q.PAYLOAD_ALTERED})),
        {("invariant", "platform_runs_confirmed_sql")}, 5,
        marks=pytest.mark.rule("Q18"), id="altered-payload"),
    pytest.param(
        "result_is_platforms",
        # a success recorded with a result of its own: prefix, submit_answered,
        # platform_succeeds, lookup_succeeded
        mutate(trigger("lookup_succeeded"), effect({"result": q.RESULT_OTHER})),
        {("invariant", "result_is_platforms")}, 7,
        marks=pytest.mark.rule("Q25"), id="result-not-the-platforms"),
    pytest.param(
        "notice_keeps_budget_clock",
        # the notification of a rejection takes another clock: prefix, submit_rejected
        mutate(trigger("submit_rejected"), effect({"platform": q.P_REJECTED, "notice": q.NOTICE_OTHER})),
        {("invariant", "notice_keeps_budget_clock")}, 5,
        marks=pytest.mark.rule("M2"), id="notice-with-another-clock"),
    pytest.param(
        "status_withholds_result",
        # the confirming message's status reply shows the result: prefix, submit_answered,
        # platform_succeeds, lookup_succeeded
        mutate(trigger("lookup_succeeded"), effect({"result": q.RESULT_PLATFORM,
                                                     "status_reply": q.REPLY_SHOWN})),
        {("invariant", "status_withholds_result")}, 7,
        marks=pytest.mark.rule("Q26"), id="status-shows-result"),
    pytest.param(
        "message_keeps_clock",
        # a redelivery takes the recovery day's clock: message_redelivered from drafted
        mutate(trigger("message_redelivered"), effect({"message_clock": q.CLOCK_OTHER})),
        {("invariant", "message_keeps_clock")}, 1,
        marks=pytest.mark.rule("M1"), id="redelivery-new-clock"),
    pytest.param(
        "rerun_is_new_query",
        # a deliberate rerun deduplicated by SQL: check_passed, rerun
        mutate(trigger("rerun"), effect({"reruns": q.RERUN_SAME})),
        {("invariant", "rerun_is_new_query")}, 2,
        marks=pytest.mark.rule("Q2"), id="rerun-same-id"),
]


def test_every_property_of_the_query_machine_has_a_mutant() -> None:
    covered = {m.values[0] for m in MUTANTS}
    declared = {i.name for i in QUERY.invariants} | {s.name for s in QUERY.step_properties}
    assert covered == declared


@pytest.mark.parametrize(("prop", "mutant", "expected", "length"), MUTANTS)
def test_explorer_reports_the_broken_property_with_its_shortest_run(
        prop: str, mutant: Protocol, expected: set[tuple[str, str]], length: int) -> None:
    result = explore(mutant)
    assert {(f.kind, f.name) for f in result.violations} == expected
    finding = next(f for f in result.violations if f.name == prop)
    assert finding.counterexample is not None
    assert len(finding.counterexample) == length, finding.counterexample.steps_text()
    assert finding.instance == 0
    if finding.kind != "domain":
        declared = {i.name: i.rules for i in (*mutant.invariants, *mutant.step_properties)}
        assert finding.rules == declared[prop]
    assert not result.ok
    assert_replays_to_the_violation(mutant, finding.counterexample)


def assert_replays_to_the_violation(p: Protocol, cx: Counterexample) -> None:
    states = replay(p, cx.steps_text(), instances=cx.instances)
    assert states == list(cx.configs)
    inst, prop = cx.meta["instance"], cx.meta["property"]
    if cx.meta["kind"] == "invariant":
        assert prop in {i.name for i in p.broken_invariants(cx.configs[-1][inst])}
        assert all(prop not in {i.name for i in p.broken_invariants(c)}
                   for g in cx.configs[:-1] for c in g), "a shorter run breaks it already"
    elif cx.meta["kind"] == "step_property":
        last = cx.steps[-1]
        before = cx.configs[-2][inst]
        step = p.fire(before, last.trigger, last.params_dict)
        assert prop in {s.name for s in p.broken_step_properties(before, step)}


# --------------------------------------------------------------------------
# The clean machine
# --------------------------------------------------------------------------
def assert_clean(result: ExploreResult) -> None:
    assert result.complete
    assert result.findings == [], [f.to_json()["name"] for f in result.findings]
    assert result.ok


@pytest.mark.rule("Q16")
@pytest.mark.rule("Q21")
def test_default_query_machine_explores_clean_with_one_query() -> None:
    result = explore(QUERY)
    assert_clean(result)
    assert result.states == result.bounds["local_configs"]


def test_several_instances_of_a_bare_machine_are_refused_in_favour_of_the_system() -> None:
    with pytest.raises(ValueError, match="declared system"):
        explore(SMALL, instances=2)


# --------------------------------------------------------------------------
# Agreement: the transitions oracle and a naive reference search
# --------------------------------------------------------------------------
def steps_of(result: ExploreResult) -> set[tuple[Any, ...]]:
    return {(b, s, a) for b, s, a in result.iter_steps()}


@pytest.mark.parametrize("bounds", [(1, 2, 2), (2, 1, 1)])
def test_successor_function_and_transitions_oracle_agree_edge_for_edge(
        bounds: tuple[int, int, int]) -> None:
    p = build_query_machine(*bounds)
    table = explore(p)
    oracle = explore_via_transitions(p)
    assert steps_of(table) == steps_of(oracle)
    strip = {"seconds", "states_per_second", "bounds"}
    assert ({k: v for k, v in table.to_json().items() if k not in strip}
            == {k: v for k, v in oracle.to_json().items() if k not in strip})


def naive_search(p: Protocol) -> tuple[nx.DiGraph, Any]:
    """The definition, written the slow way: configs in a networkx graph."""
    start = p.initial_config()
    g = nx.DiGraph()
    g.add_node(start)
    frontier = [start]
    while frontier:
        state = frontier.pop()
        for step in p.enabled(state):
            if step.after not in g:
                frontier.append(step.after)
            g.add_edge(state, step.after)
    return g, start


COUNT = Guard("under_two", V.crashes < 2)
BUMP = Effect({"crashes": V.crashes + 1})


def leases() -> Protocol:
    """A lease that a crash and a release both drop the same way: two steps that join the
    same two states."""
    return Protocol(
        name="leases", meaning="parallel steps, hand-made", initial="idle",
        states=(State("idle", "free"), State("held", "leased"), State("done", "ends", terminal=True)),
        variables=(Variable("crashes", (0, 1, 2), 0, "lost leases"),),
        transitions=(Transition("take", ("idle",), "held", "claims", ("Q11",)),
                     Transition("release", ("held",), "idle", "drops", ("Q11",), guards=(COUNT,),
                                effect=BUMP),
                     Transition("crash", ("held",), "idle", "dies", ("Q11",), guards=(COUNT,),
                                effect=BUMP, actor="environment"),
                     Transition("finish", ("held",), "done", "ends", ("Q11",))))


@pytest.mark.parametrize("make", [
    lambda: build_query_machine(1, 1, 1), leases,
    lambda: tiny(Transition("spin", ("stuck",), None, "waits forever", ("Q1",)))])
def test_fast_search_matches_the_naive_definition(make: Callable[[], Protocol]) -> None:
    p = make()
    result = explore(p)
    g, _start = naive_search(p)
    assert result.states == g.number_of_nodes()
    assert result.edges == g.number_of_edges() == result.graph().number_of_edges()
    terminal = {s for s in g if s.state in p.terminal_states}
    g.add_edges_from((t, "settled") for t in terminal)
    settle = nx.ancestors(g, "settled")
    g.remove_node("settled")
    stuck = {s for s in g if s not in settle and g.out_degree(s) > 0}
    assert bool(stuck) == bool(result.traps)
    good = result._space.can_settle()
    assert good.count(0) == len(set(g) - settle)


# --------------------------------------------------------------------------
# Deadlocks and traps on hand-made machines
# --------------------------------------------------------------------------
FLAG = Guard("flag", V.flag)


def tiny(*extra: Transition) -> Protocol:
    states = (State("start", "begins"), State("stuck", "waits"), State("done", "ends", terminal=True))
    return Protocol(
        name="tiny", meaning="a hand-made machine", states=states, initial="start",
        variables=(Variable("flag", (False, True), False, "never set"),),
        transitions=(Transition("finish", ("start",), "done", "ends", ("Q1",)),
                     Transition("wander", ("start",), "stuck", "goes astray", ("Q1",)),
                     *extra))


def test_a_state_with_no_step_is_a_deadlock() -> None:
    p = tiny(Transition("leave", ("stuck",), "done", "needs the flag", ("Q1",), guards=(FLAG,)))
    result = explore(p)
    assert [(f.name, len(f.counterexample or ())) for f in result.deadlocks] == [("stuck", 1)]
    assert result.traps == []
    assert [f.name for f in result.unfired_transitions] == ["leave"]
    cx = result.deadlocks[0].counterexample
    assert cx is not None and cx.steps_text() == "1. q0 wander"


def test_a_state_that_can_only_loop_is_a_trap() -> None:
    p = tiny(Transition("spin", ("stuck",), None, "waits forever", ("Q1",)))
    result = explore(p)
    assert result.deadlocks == []
    assert [(f.name, len(f.counterexample or ())) for f in result.traps] == [("stuck", 1)]
    assert not result.ok


# --------------------------------------------------------------------------
# Output: JSON, graph, ITF
# --------------------------------------------------------------------------
def test_report_json_has_exactly_the_documented_keys() -> None:
    result = explore(MUTANTS[0].values[1])
    report = json.loads(json.dumps(result.to_json()))
    assert list(report) == ["model", "bounds", "states", "edges", "seconds", "states_per_second",
                            "violations", "deadlocks", "traps", "unreached_states",
                            "unfired_transitions", "lockstep_only"]
    v = report["violations"][0]
    assert v["steps"][2] == {"instance": 0, "trigger": "claim", "params": {"worker": 0}}
    assert len(v["states"]) == len(v["steps"]) + 1 == v["length"] + 1


def test_graph_nodes_carry_values_and_edges_carry_steps() -> None:
    result = explore(SMALL)
    g = result.graph()
    assert g.number_of_nodes() == result.states and g.number_of_edges() == result.edges
    assert g.nodes[0]["q0.state"] == q.DRAFTED and g.nodes[0]["q0.held"] == (0,)
    assert g.edges[0, 1]["trigger"] == "check_passed"
    text = json.dumps(result.graph_json(), sort_keys=True)
    assert text == json.dumps(explore(SMALL).graph_json(), sort_keys=True)


def walk(x: Any) -> Any:
    if isinstance(x, dict):
        for v in x.values():
            yield from walk(v)
    elif isinstance(x, list):
        for v in x:
            yield from walk(v)
    yield x


def test_itf_encodes_every_int_as_bigint_and_tuples_as_tup() -> None:
    assert to_itf_value(3) == {"#bigint": "3"}
    assert to_itf_value((0, 2)) == {"#tup": [{"#bigint": "0"}, {"#bigint": "2"}]}
    assert to_itf_value(frozenset({"b", "a"})) == {"#set": ["a", "b"]}
    assert to_itf_value({1: "x"}) == {"#map": [[{"#bigint": "1"}, "x"]]}
    assert to_itf_value(q.RUNNING) == "running"
    assert to_itf_value(True) is True
    assert to_itf_value(1.5) == {"#unserializable": "1.5"}
    for x in (7, (1, (2, "a")), frozenset({1, 2}), {"r": (1,)}, {(1, 2): frozenset({3})}, [1, 2]):
        assert from_itf_value(json.loads(json.dumps(to_itf_value(x)))) == x


def test_itf_trace_has_the_quint_mbt_variables() -> None:
    trace = itf_trace("m", ["x"], [{"x": 0}, {"x": 1}], [("inc", {"by": 1})], {"status": "ok"})
    assert trace["#meta"]["format"] == "ITF"
    assert trace["vars"] == ["x", "mbt::actionTaken", "mbt::nondetPicks"]
    first, second = trace["states"]
    assert first["mbt::actionTaken"] == "init"
    assert first["mbt::nondetPicks"] == {"by": {"tag": "None", "value": {"#tup": []}}}
    assert second["mbt::nondetPicks"] == {"by": {"tag": "Some", "value": {"#bigint": "1"}}}
    assert [s["#meta"]["index"] for s in trace["states"]] == [0, 1]


@pytest.mark.rule("Q16")
def test_counterexample_itf_file_round_trips_and_replays(tmp_path: Path) -> None:
    mutant = MUTANTS[0].values[1]
    result = explore(mutant)
    written = result.write_itf(tmp_path)
    names = sorted(p.name for p in written)
    assert names == ["domain-submissions.itf.json", "invariant-at_most_three_submissions.itf.json"]
    path = tmp_path / "invariant-at_most_three_submissions.itf.json"
    raw = json.loads(path.read_text())
    assert raw["#meta"]["status"] == "violation"
    assert raw["#meta"]["property"] == "at_most_three_submissions"
    assert raw["#meta"]["rules"] == ["Q16"]
    assert raw["#meta"]["generator"] == "settled explore"
    assert raw["#meta"]["bounds"]["instances"] == 1
    for state in raw["states"]:
        values = [v for k, v in state.items() if k != "#meta"]
        assert not any(isinstance(x, int) and not isinstance(x, bool) for x in walk(values))
        assert "#tup" in state["q0.held"]
    cx = result.violations[0].counterexample
    assert cx is not None
    back = read_itf(path)
    assert [{k: v for k, v in s.items() if not k.startswith(("#", "mbt::"))} for s in back["states"]] \
        == [cx.state_values(c) for c in cx.configs]
    assert [s["mbt::actionTaken"] for s in back["states"][1:]] == [s.trigger for s in cx.steps]
    # the file is deterministic, and its action list replays to the violating state
    assert write_itf(tmp_path / "again.itf.json", cx.to_itf()).read_text() == path.read_text()
    steps = [TraceStep(s["mbt::nondetPicks"]["instance"]["value"]
                       if s["mbt::nondetPicks"]["instance"]["tag"] == "Some" else None,
                       s["mbt::actionTaken"],
                       tuple((k, v["value"]) for k, v in s["mbt::nondetPicks"].items()
                             if k != "instance" and v["tag"] == "Some"))
             for s in back["states"][1:]]
    assert replay(mutant, steps)[-1] == cx.configs[-1]


def test_step_list_text_is_replayable() -> None:
    cx = explore(MUTANTS[0].values[1]).violations[0].counterexample
    assert cx is not None
    lines = cx.steps_text().splitlines()
    assert lines[0] == "1. q0 check_passed"
    assert lines[2] == "3. q0 claim worker=0"
    assert parse_steps(cx.protocol, cx.steps_text()) == list(cx.steps)


def test_max_states_stops_early_and_gives_no_coverage_verdict() -> None:
    result = explore(QUERY, max_states=5_000)
    assert not result.complete
    assert 5_000 <= result.states < 5_100
    assert result.unreached_states == [] and result.unfired_transitions == [] and result.traps == []


def test_progress_is_reported() -> None:
    calls: list[tuple[int, int, float]] = []
    explore(QUERY, progress=lambda s, f, t: calls.append((s, f, t)))
    assert calls and calls[-1][1] == 0 and calls[-1][0] == explore(QUERY).states


def test_the_collector_is_paused_during_a_search_and_left_as_it_was() -> None:
    import gc

    from settled.conformance._explore import _run
    from settled.conformance._paused import gc_paused

    seen: list[bool] = []
    machine = build_query_machine(workers=1)

    def successors(c: Any) -> Any:
        seen.append(gc.isenabled())
        return machine.enabled(c)

    assert gc.isenabled()
    _run(machine, successors, 1, None, None, "watched")
    assert gc.isenabled() and seen and not any(seen)  # paused while it searched, enabled after
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("a failing search")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller that paused it keeps it paused
    finally:
        gc.enable()


# --------------------------------------------------------------------------
# Properties exploring cannot fail are not reported as passing
# --------------------------------------------------------------------------
@pytest.mark.rule("M1")
@pytest.mark.rule("Q2")
def test_a_property_no_effect_can_break_is_reported_as_checked_by_lockstep_only() -> None:
    """No declared effect writes message_clock or reruns, so exploring cannot fail the two
    invariants that read them: the report says so instead of counting them as passing."""
    result = explore(SMALL)
    assert [x["name"] for x in result.lockstep_only] == ["message_keeps_clock",
                                                         "rerun_is_new_query"]
    assert result.to_json()["lockstep_only"][0]["reads"] == ["message_clock"]
    # Once an effect writes the variable, the explorer can fail the property, and does.
    broken = mutate(trigger("message_redelivered"), effect({"message_clock": q.CLOCK_OTHER}))
    found = explore(broken)
    assert "message_keeps_clock" not in [x["name"] for x in found.lockstep_only]
    assert "message_keeps_clock" in [f.name for f in found.violations]


def test_uncited_rules_are_computed_from_every_declaration(monkeypatch: pytest.MonkeyPatch) -> None:
    from settled.model import _graph
    from settled.model import query as query_module

    assert _graph.static_findings(query_module.QUERY)["uncited_rules"] == []
    monkeypatch.setattr(_graph, "RULES", {**_graph.RULES, "Q99": "a rule nobody models"})
    assert _graph.static_findings(query_module.QUERY)["uncited_rules"] == ["Q99"]


def test_a_system_reports_its_unbreakable_properties_too() -> None:
    from settled.conformance._explore._system import explore_system
    from settled.model.systems import build_approval_system

    result = explore_system(build_approval_system())
    assert result.ok
    assert [x["name"] for x in result.to_json()["lockstep_only"]] == [
        "draft_submitted_once", "replay_returns_first", "new_token_is_new_call",
        "retention_keeps_in_flight_tokens"]


@pytest.mark.parametrize("name", ["query", "approval", "ledger"])
def test_the_generated_successor_function_is_the_guard_by_guard_one(name: str) -> None:
    """``Protocol.enabled`` (and the explorer) run the functions generated per machine from the
    expressions; on every reachable configuration they give exactly the steps that evaluating
    each declaration's own compiled guard and effect gives, in the same order."""
    from settled.model import MACHINES

    p = MACHINES[name]
    local = explore(p)._space.local
    configs = local.configs
    assert configs and local.expanded == len(configs)
    for cid, c in enumerate(configs):
        generated = [(id(s.transition), dict(s.params), s.after) for s in p.enabled(c)]
        by_guards = [(id(s.transition), dict(s.params), s.after) for s in p.enabled_by_guards(c)]
        assert generated == by_guards, c
        # the explorer's own expansion functions record the same steps, in the same order
        recorded = [(id(local.labels[k][0]), dict(local.labels[k][1]), configs[local.label_dest[k]])
                    for k in local.labels_from(cid)]
        assert recorded == by_guards, c
        assert p.compiled().broken_invariants(c.state, c.values) == tuple(
            i for i, inv in enumerate(p.invariants) if not inv.fn(c.state, p.view(c)))
