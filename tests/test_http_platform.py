"""The platform over HTTP: faults injected at the transport reach the worker as what its
client really raises, the worker classifies each one, and the kit catches a worker that
reads one of them as evidence (Q14, Q15, Q17)."""

from __future__ import annotations

import httpx
import hypothesis
import msgspec
import pytest

from settled.conformance._bundled._query_adapter import FAULTS, NoInjection, QueryAdapter, over_http
from settled.conformance._bundled._suites import query_suite, query_system_suite
from settled.conformance._lockstep import Action, make_lockstep, replay, run_lockstep, world
from settled.conformance._profiles import profile
from settled.impl.platform._http import PlatformServer, TransportFault, serve_platform
from settled.impl.platform._http_client import HttpPlatform
from settled.impl.platform._platform import APP_MONTHLY_SQL, SyntheticPlatform
from settled.impl.platform._platform_answers import CancelAnswer, LookupAnswer, PlatformStatus, SubmitAnswer
from settled.impl.query._worker import Worker, unanswered
from settled.impl.shared._errors import InvalidInput, NotFound, PlatformUnavailable
from settled.model import build_query_machine
from settled.model.query import LOOKUP_FAULTS, LOST_FAULTS, UNDELIVERED_FAULTS

MODEL = build_query_machine(workers=2)
FORBIDDEN = MODEL.refusable
WORLD = world(MODEL, 3)

# What each transport fault must reach the worker as, and whether the platform acted.
EXPECTED = {
    TransportFault.NEVER_ARRIVES: (httpx.ReadTimeout, "timeout", False),
    TransportFault.SLOW_ANSWER: (httpx.ReadTimeout, "timeout", True),
    TransportFault.RESET_BEFORE: (httpx.TransportError, "reset", False),
    TransportFault.RESET_AFTER: (httpx.TransportError, "reset", True),
    TransportFault.MALFORMED: (msgspec.DecodeError, "malformed", True),
    TransportFault.ERROR: (httpx.HTTPStatusError, "error", False),
    TransportFault.BUSY: (httpx.HTTPStatusError, "busy", False),
}


@pytest.fixture
def served(tmp_path):
    with serve_platform(tmp_path / "platform") as server, \
            HttpPlatform(server.url, timeout=0.2) as client:
        yield server, client, SyntheticPlatform(tmp_path / "platform")


@pytest.fixture(autouse=True)
def counterexamples(tmp_path, monkeypatch):
    monkeypatch.setenv("SETTLED_COUNTEREXAMPLES", str(tmp_path))


# --------------------------------------------------------------------------- the service
def test_the_http_platform_answers_as_the_in_process_one(served):
    server, client, platform = served
    assert server.url.startswith("http://127.0.0.1:")
    assert client.check(APP_MONTHLY_SQL) == platform.check(APP_MONTHLY_SQL)
    assert client.check("DROP TABLE orders") == platform.check("DROP TABLE orders")
    assert client.check(42) == platform.check(42)
    assert client.lookup("q-1") == LookupAnswer(found=False, status=None, submissions_received=0)
    assert client.submit("q-1", APP_MONTHLY_SQL) == SubmitAnswer(accepted=True,
                                                                  status=PlatformStatus.RUNNING)
    assert client.submit("q-1", APP_MONTHLY_SQL).deduplicated
    refused = client.submit("q-1", "SELECT 1")
    assert not refused.accepted and "another payload" in (refused.reason or "")
    platform.complete("q-1")
    assert client.lookup("q-1").status is PlatformStatus.SUCCEEDED
    assert client.result("q-1") == platform.result("q-1")
    assert client.cancel("q-1").status is PlatformStatus.SUCCEEDED


def test_a_callers_mistake_arrives_as_the_matching_error_not_as_a_fault(served):
    _server, client, _platform = served
    with pytest.raises(NotFound, match="no submission"):
        client.result("q-none")
    with pytest.raises(InvalidInput, match="query_id"):
        client.lookup("")


@pytest.mark.rule("Q14")
@pytest.mark.rule("Q15")
@pytest.mark.parametrize("fault", list(TransportFault), ids=lambda f: f.value)
def test_each_transport_fault_reaches_the_client_as_its_class(served, fault):
    server, client, platform = served
    raised, kind, acted = EXPECTED[fault]
    server.inject("submit", fault)
    with pytest.raises(raised) as caught:
        client.submit("q-f", APP_MONTHLY_SQL)
    assert server.wait_struck("submit", 10)
    assert unanswered(caught.value) == kind
    assert (platform.status("q-f") is PlatformStatus.RUNNING) is acted
    assert server.pending_faults() == {}
    # the next call is answered: a fault is one-shot and the client recovers
    assert client.lookup("q-f").found is acted


def test_an_explicit_answer_or_an_unknown_exception_is_never_no_answer():
    request = httpx.Request("POST", "http://127.0.0.1/submit")
    for status, kind in ((503, "busy"), (500, "error"), (502, "error"), (409, None), (400, None)):
        error = httpx.HTTPStatusError("x", request=request,
                                      response=httpx.Response(status, request=request))
        assert unanswered(error) == kind
    assert unanswered(NotFound("no such query")) is None
    assert unanswered(KeyError("bug")) is None
    assert unanswered(PlatformUnavailable("x", "busy")) == "busy"


def test_a_server_stops_with_its_block_and_then_refuses_connections(tmp_path):
    with PlatformServer(tmp_path / "p") as server, HttpPlatform(server.url, timeout=1) as client:
        assert not client.lookup("q-1").found
    with HttpPlatform(server.url, timeout=1) as late, pytest.raises(httpx.ConnectError) as caught:
        late.lookup("q-1")
    assert unanswered(caught.value) == "reset"


# --------------------------------------------------------------------------- the worker
def _running_worker(transport="http"):
    """An adapter whose query is claimed and committed submitting by worker w0."""
    adapter = QueryAdapter(1, 1, transport=transport)
    for trigger, params in (("check_passed", {}), ("confirm", {
            "quote": "whole", "draft_version": "current", "condition_version": "current",
            "message": "attributed"}), ("claim", {"worker": 0}), ("begin_submit", {"worker": 0})):
        adapter.perform(0, trigger, params)
    return adapter


@pytest.mark.rule("Q14")
@pytest.mark.parametrize(("trigger", "kind"), sorted(FAULTS["http"]))
def test_each_fault_the_model_names_reaches_the_worker_as_that_class(trigger, kind):
    adapter = _running_worker()
    cancelling = trigger.startswith("cancel_")
    try:
        if trigger == "lookup_timeout":
            adapter.perform(0, "submit_undelivered", {"worker": 0, "fault": "timeout"})
        if cancelling:  # running on the platform, with the user's cancel request recorded
            adapter.perform(0, "submit_answered", {"worker": 0})
            adapter.perform(0, "cancel", {})
        adapter.perform(0, trigger, {"worker": 0, "fault": kind})
        qid = adapter.items[0].query_id
        last = [e for e in adapter.store.events() if e["instance"] == qid][-1]
        logged = {"lookup_timeout": "lookup_timeout", "cancel_response_lost": "cancel_unanswered",
                  "cancel_undelivered": "cancel_unanswered"}.get(trigger, "submit_unanswered")
        assert (last["trigger"], last["params"].get("fault")) == (logged, kind)
        stored = adapter.platform.status(qid)
        if cancelling:  # the cancel applied exactly when it reached the platform
            assert stored is (PlatformStatus.CANCELLED if trigger == "cancel_response_lost"
                              else PlatformStatus.RUNNING)
        else:
            assert (stored is PlatformStatus.RUNNING) is (trigger == "submit_response_lost")
        assert adapter.server.pending_faults() == {}
    finally:
        adapter.close()


def test_the_fault_tables_name_every_fault_the_model_declares_and_no_other():
    # the values each trigger's guard lets through (the parameter's domain is shared)
    allowed = ({("submit_response_lost", k) for k in LOST_FAULTS}
               | {("submit_undelivered", k) for k in UNDELIVERED_FAULTS}
               | {("lookup_timeout", k) for k in LOOKUP_FAULTS}
               | {("cancel_response_lost", k) for k in LOST_FAULTS}
               | {("cancel_undelivered", k) for k in UNDELIVERED_FAULTS})
    declared = {(t.trigger, v) for t in MODEL.transitions for p in t.params if p.name == "fault"
                for v in p.domain}
    assert allowed <= declared and {t for t, _ in declared} == {t for t, _ in allowed}
    for transport, table in FAULTS.items():
        assert set(table) == allowed, transport
    # after the platform stored the submission exactly where the model says it may have
    assert {k for (t, k), (_route, f) in FAULTS["http"].items()
            if t.startswith("submit") and f.after} == set(LOST_FAULTS)
    assert {k for (t, k), (_route, f) in FAULTS["http"].items()
            if t.startswith("submit") and not f.after} == set(UNDELIVERED_FAULTS)
    # a cancel acts on the platform exactly where the model says it may have
    assert {k for (t, k), (_route, f) in FAULTS["http"].items()
            if t.startswith("cancel") and f.after} == set(LOST_FAULTS)
    assert {k for (t, k), (_route, f) in FAULTS["http"].items()
            if t.startswith("cancel") and not f.after} == set(UNDELIVERED_FAULTS)


@pytest.mark.parametrize("transport", ["inprocess", "http"])
def test_a_fault_with_no_injection_is_an_adapter_error(monkeypatch, transport):
    monkeypatch.setitem(FAULTS, transport, {k: v for k, v in FAULTS[transport].items()
                                            if k != ("submit_undelivered", "busy")})
    adapter = _running_worker(transport)
    try:
        with pytest.raises(NoInjection, match="submit_undelivered fault=busy"):
            adapter.perform(0, "submit_undelivered", {"worker": 0, "fault": "busy"})
    finally:
        adapter.close()


# --------------------------------------------------------------------------- the kit catches it
def _misreading(trigger: str, kind: str) -> type[QueryAdapter]:
    """An HTTP adapter whose worker reads the ``kind`` failure of ``trigger``'s call as the
    platform's word: a rejection for a submit, an explicit not-found for a lookup, a
    confirmed cancel for a cancel."""

    class Misreads(Worker):
        def _submit(self, query_id, sql):
            answer, fault = super()._submit(query_id, sql)
            if trigger.startswith("submit") and fault == kind:
                return SubmitAnswer(accepted=False, reason=f"the platform said {kind}"), None
            return answer, fault

        def _lookup(self, query_id):
            answer, fault = super()._lookup(query_id)
            if trigger == "lookup_timeout" and fault == kind:
                return LookupAnswer(found=False, status=None, submissions_received=0), None
            return answer, fault

        def _cancel(self, query_id):
            answer, fault = super()._cancel(query_id)
            if trigger.startswith("cancel") and fault == kind:
                return CancelAnswer(found=True, status=PlatformStatus.CANCELLED), None
            return answer, fault

    return type("MisreadsAdapter", (QueryAdapter,), {"worker_class": Misreads,
                                                      "transport": "http"})


def _steps(trigger: str, kind: str) -> list[Action]:
    steps = [Action(0, "check_passed", {}),
             Action(0, "confirm", {"quote": "whole", "draft_version": "current",
                                   "condition_version": "current", "message": "attributed"}),
             Action(0, "claim", {"worker": 0}), Action(0, "begin_submit", {"worker": 0})]
    if trigger == "lookup_timeout":
        steps.append(Action(0, "submit_response_lost", {"worker": 0, "fault": "timeout"}))
    if trigger.startswith("cancel"):  # running, with the user's cancel request recorded
        steps += [Action(0, "submit_answered", {"worker": 0}), Action(0, "cancel", {})]
    return [*steps, Action(0, trigger, {"worker": 0, "fault": kind})]


@pytest.mark.rule("Q14")
@pytest.mark.rule("Q15")
@pytest.mark.rule("Q17")
@pytest.mark.rule("Q21")
@pytest.mark.parametrize(("trigger", "kind"), sorted(FAULTS["http"]))
def test_a_worker_misreading_a_transport_fault_is_caught_by_the_kit(trigger, kind):
    steps = _steps(trigger, kind)
    assert replay(WORLD, lambda: QueryAdapter(3, 2, transport="http"), FORBIDDEN,
                  steps) is None
    bad = _misreading(trigger, kind)
    message = replay(WORLD, lambda: bad(3, 2), FORBIDDEN, steps)
    assert message is not None and trigger in message


@pytest.mark.rule("Q17")
@pytest.mark.parametrize("transport", ["inprocess", "http"])
def test_the_catalogues_busy_as_rejection_mutant_is_killed_on_either_transport(transport):
    from settled.conformance.mutants.query import MUTANTS

    (mutant,) = [m for m in MUTANTS if m.name == "Q17-busy-platform-recorded-as-rejection"]
    steps = _steps("submit_undelivered", "busy")
    assert replay(WORLD, lambda: QueryAdapter(3, 2, transport=transport), FORBIDDEN,
                  steps) is None
    message = replay(WORLD, lambda: mutant.adapter_class(3, 2, transport=transport), FORBIDDEN, steps)
    assert message is not None and "submit_undelivered" in message


def test_the_http_factory_serves_its_platform_and_stops_it_on_close():
    adapter = over_http()
    assert adapter.transport == "http" and adapter.server is not None
    url = adapter.server.url
    adapter.close()
    with HttpPlatform(url, timeout=1) as late, pytest.raises(httpx.ConnectError):
        late.lookup("q-1")


def test_an_unknown_transport_is_refused():
    with pytest.raises(ValueError, match="transport must be one of"):
        QueryAdapter(1, 1, transport="carrier-pigeon")


# --------------------------------------------------------------------------- whole campaigns
@pytest.mark.slow
@pytest.mark.parametrize("seed", [2])  # seed 1: `.ci/run`, through `settled lockstep ...:over_http`
def test_the_http_platform_passes_the_lockstep_kit(seed):
    suite = query_suite(transport="http")
    record = run_lockstep(suite.lockstep(f"QueryOverHttp{seed}"), profile("ci"), seed=seed)
    assert record.failure is None and record.adapter_error is None, record.failure
    assert record.trace_failure is None and record.trace_events > 0


@pytest.mark.slow
def test_the_http_platform_passes_the_system_kit():
    suite = query_system_suite(transport="http")
    record = run_lockstep(suite.lockstep("QuerySystemOverHttp"), profile("dev"), seed=1)
    assert record.failure is None and record.adapter_error is None, record.failure
    assert record.trace_failure is None and record.trace_events > 0


def test_the_http_platform_passes_a_short_random_campaign():
    """The default suite's share: a few random runs (the tour and the long campaigns are
    the slow tests above, and ``.ci/run``)."""
    machine = make_lockstep(MODEL, over_http, instances=3, forbidden=FORBIDDEN,
                            name="QueryOverHttpShort")
    short = hypothesis.settings(profile("dev"), max_examples=4, stateful_step_count=25)
    record = run_lockstep(machine, short, seed=1, tour=False)
    assert record.failure is None and record.adapter_error is None, record.failure
    assert record.trace_failure is None and record.trace_events > 0
    assert sum(record.fired.values()) > 0
