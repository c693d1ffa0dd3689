"""The lockstep kit holds the SQLite implementation to the model, and catches a broken one."""

from __future__ import annotations

import json

import pytest

from settled.conformance._lockstep import (
    Action,
    make_lockstep,
    replay,
    run_lockstep,
    tour,
    transition_label,
    unfired,
    unfired_cases,
    unfired_edges,
)
from settled.conformance._profiles import profile
from settled.conformance._query_adapter import QueryAdapter
from settled.impl._errors import PlatformUnavailable
from settled.impl._events import apply_step
from settled.impl._worker import Worker
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
    assert {transition_label(_transition_of(p)) for p in paths} == {
        transition_label(t) for t in MODEL.transitions}


def _transition_of(path: list[Action]):
    config = MODEL.initial_config()
    for a in path[:-1]:
        config = MODEL.fire(config, a.trigger, a.params).after
    return MODEL.fire(config, path[-1].trigger, path[-1].params).transition


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
    again = replay(MODEL, lambda: BrokenAdapter(3, 2), 3, FORBIDDEN, record.steps)
    assert again is not None
    # ... and agree on the real implementation.
    assert replay(MODEL, lambda: QueryAdapter(3, 2), 3, FORBIDDEN, record.steps) is None
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
                    from settled.impl._db import write
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
    assert replay(MODEL, lambda: QueryAdapter(3, 2), 3, FORBIDDEN, steps) is None
    message = replay(MODEL, lambda: LeakyCancel(3, 2), 3, FORBIDDEN, steps)
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
