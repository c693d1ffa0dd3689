"""The lockstep kit holds the SQLite implementation to the model, and catches a broken one."""

from __future__ import annotations

import json

import pytest

from settled.conformance._bundled._query_adapter import QueryAdapter
from settled.conformance._lockstep import (
    Action,
    make_lockstep,
    minimise_steps,
    replay,
    run_lockstep,
    tour,
    transition_label,
    unfired,
    unfired_cases,
    unfired_edges,
    unprobed_refusals,
    world,
)
from settled.conformance._lockstep import (
    history as model_history,
)
from settled.conformance._lockstep._shrink import cycles
from settled.conformance._profiles import profile
from settled.impl.query._events import apply_step
from settled.impl.query._worker import Worker
from settled.impl.shared._errors import PlatformUnavailable
from settled.model import QueryState, build_query_machine

MODEL = build_query_machine(workers=2)
FORBIDDEN = MODEL.refusable


def lockstep(adapter_class=QueryAdapter, name="query"):
    return make_lockstep(MODEL, lambda: adapter_class(3, 2), instances=3, forbidden=FORBIDDEN,
                         name=name)


@pytest.fixture(autouse=True)
def counterexamples(tmp_path, monkeypatch):
    monkeypatch.setenv("SETTLED_COUNTEREXAMPLES", str(tmp_path))
    return tmp_path


def test_the_tour_reaches_every_transition_of_the_model():
    paths = tour(MODEL)
    assert {transition_label(t) for p in paths for t in _transitions_of(p)} == {
        transition_label(t) for t in MODEL.transitions}


def test_the_tour_keeps_only_paths_that_start_no_other():
    texts = [tuple(a.text() for a in p) for p in tour(MODEL)]
    assert len(set(texts)) == len(texts)
    assert not {t[:k] for t in texts for k in range(1, len(t))} & set(texts)
    assert [len(t) for t in texts] == sorted(len(t) for t in texts)


def _transitions_of(path: list[Action]):
    config = MODEL.initial_config()
    for a in path:
        if a.forbidden:
            continue
        step = MODEL.fire(config, a.trigger, a.params)
        config = step.after
        yield step.transition


@pytest.mark.rule("Q11")
@pytest.mark.rule("Q13")
@pytest.mark.rule("Q14")
@pytest.mark.rule("Q16")
@pytest.mark.rule("Q21")
def test_a_short_campaign_passes_and_fires_every_edge():
    """The default run's campaign: the tour (every edge, guard alternative and refusal)
    and a few random runs; the full ci campaign below is marked slow."""
    record = run_lockstep(lockstep(), profile("dev"), seed=20261202)
    assert record.failure is None and record.adapter_error is None, record.failure
    assert unfired_edges(MODEL, record.edges) == []
    assert unfired_cases(MODEL, record.cases) == []
    assert unprobed_refusals(MODEL, MODEL.refusable, record.refusals) == []
    assert record.trace_events > 0


@pytest.mark.slow
def test_the_ci_campaign_passes_and_fires_every_transition():
    record = run_lockstep(lockstep(), profile("ci"), seed=20261202)
    assert record.failure is None, record.failure
    missing = unfired(MODEL, record.fired)
    assert not missing, f"the ci campaign never fired: {missing}"
    assert record.examples >= 50


class LostAnswerIsFailed(Worker):
    """Q14 broken: a submit call without an answer is recorded as failed."""

    def call_submit(self, query_id: str) -> QueryState:
        try:
            self.platform.submit(query_id, self._held_row(self._conn, query_id)["sql"])
        except PlatformUnavailable:
            with self._fenced(query_id) as (conn, row):
                return self._settle(conn, row, "submit_rejected", QueryState.FAILED,
                                    error="no answer")
        return super().call_submit(query_id)


class BrokenAdapter(QueryAdapter):
    worker_class = LostAnswerIsFailed


@pytest.mark.rule("Q14")
def test_a_broken_worker_is_caught_with_a_short_replayable_counterexample(counterexamples):
    record = run_lockstep(lockstep(BrokenAdapter, "lost-answer-is-failed"), profile("dev"), seed=1)
    assert record.failure is not None
    assert "differs from the model" in record.failure or "refused" in record.failure
    assert len(record.steps) <= 8
    # The minimised steps replay to the same divergence on a fresh implementation ...
    again = replay(world(MODEL, 3), lambda: BrokenAdapter(3, 2), FORBIDDEN, record.steps)
    assert again is not None
    # ... and agree on the real implementation.
    assert replay(world(MODEL, 3), lambda: QueryAdapter(3, 2), FORBIDDEN, record.steps) is None
    itf = json.loads(record.itf_path.read_text())
    assert itf["#meta"]["status"] == "violation"
    assert len(itf["states"]) == len(record.steps) + 1
    assert itf["states"][1]["mbt::actionTaken"] == record.steps[0].trigger


def test_a_refusal_that_changes_the_implementation_is_caught():
    class LeakyCancel(QueryAdapter):
        def perform(self, instance, trigger, params):
            if trigger == "cancel" and self.items[instance].query_id is not None:
                qid = self.items[instance].query_id
                if self.store.query(qid).cancel_state == "requested":
                    # "refuses" but still writes an event and moves the lease epoch
                    from settled.impl.shared._db import write
                    with write(self.store._conn) as conn:
                        row = conn.execute("SELECT * FROM queries WHERE query_id = ?",
                                           (qid,)).fetchone()
                        apply_step(conn, qid, trigger="claim", params={"worker": "w0"},
                                   from_state=QueryState(row["execution_state"]),
                                   to_state=QueryState(row["execution_state"]), at="now",
                                   epoch=row["lease_epoch"],
                                   updates={"lease_epoch": row["lease_epoch"] + 1})
            return super().perform(instance, trigger, params)

    steps = [Action(0, "check_passed", {}),
             Action(0, "confirm", {"quote": "whole", "draft_version": "current",
                                   "condition_version": "current", "message": "attributed"}),
             Action(0, "claim", {"worker": 0}), Action(0, "begin_submit", {"worker": 0}),
             Action(0, "cancel", {}), Action(0, "cancel", {}, forbidden=True)]
    assert replay(world(MODEL, 3), lambda: QueryAdapter(3, 2), FORBIDDEN, steps) is None
    message = replay(world(MODEL, 3), lambda: LeakyCancel(3, 2), FORBIDDEN, steps)
    assert message is not None and "refuse q0 cancel: the refusal changed the implementation" in message


@pytest.mark.slow
@pytest.mark.rule("Q13")
@pytest.mark.rule("Q16")
@pytest.mark.rule("Q21")
@pytest.mark.parametrize("seed", [1, 2])
def test_a_long_campaign_finds_no_divergence(seed):
    """The thorough profile (or $SETTLED_PROFILE): many more and longer runs than ci."""
    import os

    record = run_lockstep(lockstep(), profile(os.environ.get("SETTLED_PROFILE", "thorough")),
                          seed=seed)
    assert record.failure is None, record.failure
    assert not unfired(MODEL, record.fired)


# --------------------------------------------------------------------------- shortest first
def test_the_tour_is_ordered_shortest_path_first():
    lengths = [len(p) for p in tour(MODEL, FORBIDDEN)]
    assert lengths == sorted(lengths)


def test_cycles_are_stretches_that_return_the_model_to_a_configuration():
    a, b = MODEL.initial_config(), MODEL.fire(MODEL.initial_config(), *_first(MODEL)).after
    history = [(a,), (b,), (a,), (b,)]
    found = cycles(history)
    assert set(found) == {(0, 2), (1, 3)}
    assert model_history(world(MODEL, 1), [Action(0, "no-such-trigger", {})]) is None


def _first(model):
    s = next(iter(model.enabled(model.initial_config())))
    return s.transition.trigger, s.params


@pytest.mark.rule("Q14")
def test_the_minimiser_cuts_cycles_and_scattered_padding_to_the_shortest_run():
    """A failing run padded with detours on other instances and refusals anywhere shrinks to
    the same length as the tour's shortest failing path."""
    factory = lambda: BrokenAdapter(3, 2)  # noqa: E731
    shortest = next(p for p in tour(MODEL, FORBIDDEN)
                    if replay(world(MODEL, 3), factory, FORBIDDEN, p) is not None)
    # Padding: another instance's story, interleaved step by step (non-adjacent steps), and
    # refusals of what the model forbids on a third.
    detour = next(d for p in reversed(tour(MODEL, FORBIDDEN))
                  if (d := [Action(1, a.trigger, a.params) for a in p if not a.forbidden])
                  and len(d) >= 4
                  and replay(world(MODEL, 3), factory, FORBIDDEN, d) is None)
    padded: list[Action] = []
    for n, step in enumerate(shortest):
        padded.extend(detour[n * 2:n * 2 + 2])
        padded.append(step)
    assert model_history(world(MODEL, 3), padded) is not None
    assert replay(world(MODEL, 3), factory, FORBIDDEN, padded) is not None
    steps = minimise_steps(world(MODEL, 3), factory, FORBIDDEN, padded)
    assert len(steps) <= len(shortest) < len(padded)
    assert replay(world(MODEL, 3), factory, FORBIDDEN, steps) is not None


def _two_step_cycles(steps: list[Action]) -> list[Action]:
    """``steps`` with, wherever the model allows one, a two-step detour back to where it was
    (clarification asked, then answered) spliced in after each step."""
    out: list[Action] = []
    config = MODEL.initial_config()
    for a in steps:
        out.append(a)
        config = MODEL.fire(config, a.trigger, a.params).after
        for s1 in MODEL.enabled(config):
            back = next((s2 for s2 in MODEL.enabled(s1.after)
                         if s2.after == config and s1.after != config), None)
            if back is not None:
                out += [Action(0, s1.transition.trigger, s1.params),
                        Action(0, back.transition.trigger, back.params)]
                break
    return out


@pytest.mark.rule("Q14")
def test_the_minimiser_cuts_two_step_cycles():
    """Two-step cycles after every step: no single step of one can go (the model rejects the
    rest); cutting cycles by model configuration removes them."""
    factory = lambda: BrokenAdapter(3, 2)  # noqa: E731
    shortest = next(p for p in tour(MODEL, FORBIDDEN)
                    if replay(world(MODEL, 3), factory, FORBIDDEN, p) is not None)
    padded = _two_step_cycles(shortest)
    assert len(padded) >= len(shortest) + 4
    assert cycles(model_history(world(MODEL, 3), padded))
    steps = minimise_steps(world(MODEL, 3), factory, FORBIDDEN, padded)
    assert len(steps) <= len(shortest)
    assert replay(world(MODEL, 3), factory, FORBIDDEN, steps) is not None


# --------------------------------------------------------------------------- messages that explain
@pytest.mark.rule("Q14")
def test_a_divergence_names_the_step_rules_the_broken_invariant_and_the_recorded_error():
    factory = lambda: BrokenAdapter(3, 2)  # noqa: E731
    lost = next(p[:k + 1] for p in tour(MODEL, FORBIDDEN) for k, a in enumerate(p)
                if a.trigger == "submit_response_lost")  # the first lost answer of the tour
    message = replay(world(MODEL, 3), factory, FORBIDDEN, lost)
    assert message is not None
    assert "differs from the model" in message
    assert "the step was submit_response_lost (rules Q14" in message
    assert "invariant failed_needs_evidence (rules Q14" in message
    # The worker's own error text, not only the differing state.
    assert "the implementation recorded the error: no answer" in message


def test_an_unrefused_action_names_the_failing_guard_conjunct_and_its_rules():
    class AcceptsAnything(QueryAdapter):
        def perform(self, instance, trigger, params):
            if trigger == "confirm" and params.get("quote") == "part":
                return None  # neither refuses nor does anything
            return super().perform(instance, trigger, params)

    factory = lambda: AcceptsAnything(3, 2)  # noqa: E731
    probe = next(p for p in tour(MODEL, FORBIDDEN)
                 if p[-1].forbidden and p[-1].trigger == "confirm"
                 and p[-1].params.get("quote") == "part")
    message = replay(world(MODEL, 3), factory, FORBIDDEN, probe)
    assert message is not None and "did not refuse" in message
    assert "guard quote_whole fails" in message and "Q5" in message


def test_the_tour_walks_past_a_value_outside_its_domain_as_the_successor_function_does():
    """The tour walks the space ``Protocol.enabled`` gives, including configurations outside
    a declared domain (which the explorer reports and does not expand): a step possible only
    from there is still fired, and the refusals there are worked out from its real steps."""
    from settled.conformance import explore
    from settled.conformance._lockstep import directed_tour
    from settled.model import Effect, Guard, Protocol, State, Transition, Variable
    from settled.model._expr import V

    below = Guard("below_three", V.n < 3)
    at = Guard("at_three", V.n.isin(0, 1, 2) == False)  # noqa: E712  # n == 3, outside the domain
    counter = Protocol(
        name="counter", meaning="a count one past its declared domain", initial="counting",
        states=(State("counting", "counts"), State("done", "ends", terminal=True)),
        variables=(Variable("n", (0, 1, 2), 0, "the count"),),
        transitions=(
            Transition("bump", ("counting",), None, "counts one more", ("Q16",), guards=(below,),
                       effect=Effect({"n": V.n + 1}), actor="user"),
            Transition("reset", ("counting",), "done", "ends past the bound", ("Q16",),
                       guards=(at,), actor="user")),
        refusable=frozenset({"reset"}))
    assert [f.kind for f in explore(counter).findings if f.kind == "domain"]
    paths = [[a.trigger for a in path] for path in directed_tour(counter, counter.refusable)]
    # Fired (a tour keeps the runs no other run starts with: this one goes on to ask for a
    # reset in ``done``, where no transition takes it).
    assert ["bump", "bump", "bump", "reset", "reset"] in paths
