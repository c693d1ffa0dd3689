"""The public conformance kit: its names, its contract, and checks that cannot pass by omission.

Most campaigns here run on the in-memory example implementation
(``examples/``), which takes milliseconds a run, with the ``dev`` profile.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import unittest
from pathlib import Path

import pytest

import settled.conformance as kit
from examples.inmemory_query import Worker
from examples.query_adapter import InMemoryQueryAdapter, buggy, correct
from settled.conformance import (
    Adapter,
    AdapterError,
    CounterexampleError,
    load_counterexample,
    lockstep,
    lockstep_case,
    replay_counterexample,
)
from settled.model import QUERY, DeclarationError

ROOT = Path(__file__).resolve().parent.parent


def run(factory, **kw):
    kw.setdefault("profile", "dev")
    kw.setdefault("seed", 0)
    return lockstep(factory, "query", **kw)


# ---------------------------------------------------------------------------- the public names
def test_every_public_name_resolves():
    for name in kit.__all__:
        assert getattr(kit, name) is not None, name
    assert "stable" in (kit.__doc__ or "")


# The bundled adapters' own parts, beside them: not the kit, so they may import them.
APPROVAL_PARTS = ("_approval_items", "_approval_observe", "_approval_worker", "_named")


def test_the_bundled_adapters_use_only_public_names_of_the_kit():
    for path in (ROOT / "conformance/_bundled/_query_adapter.py",
                 ROOT / "conformance/_bundled/_approval_adapter.py",
                 ROOT / "examples/query_adapter.py"):
        text = path.read_text()
        private = [m for m in re.findall(r"^from (\._\w+|settled\.conformance\.\w+) import",
                                         text, re.M) if m.lstrip(".") not in APPROVAL_PARTS]
        assert private == [], f"{path.name} imports private kit modules: {private}"
        assert "from settled.conformance import" in text
    for part in APPROVAL_PARTS:  # the parts use no kit module at all
        text = (ROOT / f"conformance/_bundled/{part}.py").read_text()
        kit = [m for m in re.findall(r"^from (\.\w*|settled\.conformance\b[.\w]*) import",
                                     text, re.M) if m.lstrip(".") not in APPROVAL_PARTS]
        assert kit == [], f"{part} imports kit modules: {kit}"


def test_a_run_folder_is_released_once_and_a_failed_drop_is_tried_again(monkeypatch):
    from settled.conformance._bundled import _scratch

    dropped = []

    def drop(url, kind):
        dropped.append(url)
        if len(dropped) == 1:
            raise OSError("the database server is gone")

    monkeypatch.setattr(_scratch, "release_store", drop)
    folder = _scratch.run_folder("settled-test-", None)
    folder.stores.append(("postgresql://localhost/scratch_1", "query"))
    with pytest.raises(OSError, match="gone"):
        folder.release()
    assert folder.path.exists() and not folder.released  # nothing given up on
    folder.release()
    assert dropped == ["postgresql://localhost/scratch_1"] * 2
    assert not folder.path.exists() and folder.released
    folder.release()  # once released, a second call does nothing
    assert len(dropped) == 2


def test_refusable_triggers_are_declared_in_the_model():
    assert {"confirm", "cancel", "begin_submit"} <= QUERY.refusable
    with pytest.raises(DeclarationError, match="refusable names no trigger"):
        dataclasses.replace(QUERY, refusable=frozenset({"confirm", "teleport"}))


# ---------------------------------------------------------------------------- the pytest line
# The example observes every variable the model declares: it needs no exception.
TestInMemoryQueries = lockstep_case(correct, "query")


def test_a_lockstep_case_fails_on_a_planted_bug(tmp_path):
    case = lockstep_case(buggy, "query", out=tmp_path)
    result = unittest.TestResult()
    case("test_conforms_to_the_model").run(result)
    assert len(result.failures) == 1
    assert "DIVERGED" in result.failures[0][1]


# ---------------------------------------------------------------------------- observe() contract
class LeavesOutPlatform(InMemoryQueryAdapter):
    def observe(self, instance):
        out = dict(super().observe(instance))
        del out["platform"]
        return out


class MisspeltKey(InMemoryQueryAdapter):
    def observe(self, instance):
        out = dict(super().observe(instance))
        out["submission"] = out.pop("submissions")
        return out


class ReturnsAGhost(InMemoryQueryAdapter):
    def observe(self, instance):
        return {**super().observe(instance), "ids_submitted": 0}


class OutOfDomain(InMemoryQueryAdapter):
    def observe(self, instance):
        return {**super().observe(instance), "held": [0, 0]}  # a list; the domain holds tuples


class BoolForInt(InMemoryQueryAdapter):
    def observe(self, instance):
        return {**super().observe(instance), "submissions": False}


@pytest.mark.parametrize(("adapter", "says"), [
    (LeavesOutPlatform, r"left out \['platform'\]"),
    (MisspeltKey, r"left out \['submissions'\].*unknown key 'submission'"),
    (ReturnsAGhost, r"ghost variable 'ids_submitted'"),
    (OutOfDomain, r"held=\[0, 0\] \(list\), not a value of its kind"),
    (BoolForInt, r"submissions=False \(bool\), not a value of its kind"),
])
def test_a_bad_observation_is_an_adapter_error_never_a_pass(adapter, says):
    report = run(adapter)
    assert report.status == "adapter_error" and not report.ok and report.exit_code == 3
    assert re.search(says, report.adapter_error)
    assert "ADAPTER ERROR" in report.text()


class FourthSubmission(InMemoryQueryAdapter):
    """An implementation that counts three submissions too many: the first one reads 4."""

    def observe(self, instance):
        out = dict(super().observe(instance))
        if out["submissions"]:
            out["submissions"] += 3
        return out


def test_a_value_outside_the_models_domain_is_a_divergence_with_its_counterexample(tmp_path):
    report = run(FourthSubmission, out=tmp_path)
    assert report.status == "diverged" and report.exit_code == 1, report.text()
    assert "submissions=4 is outside its domain [0, 1, 2, 3]" in report.failure
    assert "at_most_three_submissions (rule Q16)" in report.failure  # the rule it broke
    assert report.steps and report.counterexample is not None and report.counterexample.exists()
    assert len(report.steps) <= 4, report.failure  # the shortest way to a first submission


class AcceptsCancelOfASuccess(InMemoryQueryAdapter):
    """Takes a user's cancel after the query succeeded: no transition of ``succeeded`` takes
    a cancel, so no guard is involved; the implementation answers as if it had."""

    def perform(self, instance, trigger, params):
        if trigger == "cancel" and super().observe(instance)["state"] == "succeeded":
            return  # accepted, and nothing changed
        super().perform(instance, trigger, params)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_step_the_model_has_no_transition_for_is_probed_and_must_be_refused(tmp_path, seed):
    report = run(AcceptsCancelOfASuccess, seed=seed, out=tmp_path)
    assert report.status == "diverged" and report.exit_code == 1, report.text()
    assert "did not refuse q0 cancel, which the model forbids: no cancel leaves state " \
           "succeeded" in report.failure
    assert report.steps[-1].forbidden and report.steps[-1].trigger == "cancel"


class IgnoresALookupTimeout(InMemoryQueryAdapter):
    """A ``perform`` that drops one trigger the model says changes nothing but is logged."""

    def perform(self, instance, trigger, params):
        if trigger == "lookup_timeout":
            return
        super().perform(instance, trigger, params)


def test_an_adapter_whose_perform_ignores_a_logged_trigger_fails_naming_it(tmp_path):
    report = run(IgnoresALookupTimeout, out=tmp_path)
    assert report.status == "diverged" and report.exit_code == 1, report.text()
    assert "misses steps the model logs: lookup_timeout (trigger lookup_timeout)" \
        in report.failure
    assert [a.trigger for a in report.steps][-1] == "lookup_timeout"


def test_the_refusal_count_means_one_thing_in_the_text_and_the_json():
    report = run(correct)
    doc = report.to_json()
    assert f"refusals {doc['refusals_probed']}/{doc['refusals_declared']}," in report.text()
    assert doc["refusals_probed"] == doc["refusals_declared"] > 0
    values = doc["parameter_values_declared"]
    assert f"parameter values {values}/{values}" in report.text() and not doc[
        "parameter_values_unfired"]


def test_a_planted_bug_is_not_hidden_by_an_adapter_that_leaves_out_a_variable(tmp_path):
    """The gap of a kit that compared only the keys it got: now the adapter is told, loudly."""

    class BuggyLeavesOut(LeavesOutPlatform):
        worker_class = buggy().worker_class  # type: ignore[attr-defined]

    report = run(BuggyLeavesOut, out=tmp_path)
    assert report.status == "adapter_error"


class Unobservable(InMemoryQueryAdapter):
    unobservable = frozenset({"platform", "held"})

    def observe(self, instance):
        out = dict(super().observe(instance))
        del out["platform"], out["held"]
        return out


def test_the_example_adapter_declares_nothing_unobservable():
    assert InMemoryQueryAdapter.unobservable == frozenset()


def test_declared_unobservable_variables_are_reported_not_checked():
    report = run(Unobservable, allow_unchecked=("held", "platform"))
    assert report.ok and report.exit_code == 0
    assert report.not_checked == ("held", "platform")
    assert "held" in report.text() and "NOT CHECKED" in report.text()
    assert "ALLOWED UNCHECKED: held" in report.text()
    assert report.to_json()["not_checked"] == ["held", "platform"]


def test_an_unobservable_variable_not_accepted_by_name_leaves_the_campaign_incomplete():
    """All green is not enough: a variable never compared fails the campaign (exit 3) until
    the caller names it, and the report says which."""
    report = run(Unobservable, allow_unchecked=("held",))
    assert report.status == "passed" and not report.ok and report.exit_code == 3
    assert report.unchecked == ("platform",)
    assert "INCOMPLETE (exit 3): platform never compared" in report.text()
    assert report.to_json()["unchecked"] == ["platform"]
    with pytest.raises(ValueError, match=r"names \['status'\]"):
        run(Unobservable, allow_unchecked=("status",))


class Lazy(InMemoryQueryAdapter):
    """Declares every variable unobservable and shows only the control state."""

    unobservable = frozenset(v.name for v in QUERY.variables if not v.ghost)

    def observe(self, instance):
        return {"state": super().observe(instance)["state"]}


def test_a_lazy_adapter_that_declares_every_variable_unobservable_fails():
    report = run(Lazy)
    assert report.status == "passed" and not report.ok and report.exit_code == 3
    assert report.unchecked == tuple(sorted(Lazy.unobservable))
    assert "INCOMPLETE (exit 3)" in report.text() and "payload" in report.text()


class AltersResubmittedSql(Worker):
    """Resubmits under the same query_id with SQL of its own (Q18)."""

    def resubmit(self, query_id):
        self.service.queries[query_id].sql += " LIMIT 10"
        return super().resubmit(query_id)


class ClockFromRedelivery(InMemoryQueryAdapter):
    """Takes a redelivered message's clock as the message's own (M1)."""

    def perform(self, instance, trigger, params):
        super().perform(instance, trigger, params)
        if trigger == "message_redelivered":
            item = self.items[instance]
            message = self.service.messages[item.message]
            message.request_clock = ("2026-03-01T08:00:00Z", "Europe/Berlin")


@pytest.mark.parametrize(("bug", "variable"), [
    (type("Payload", (InMemoryQueryAdapter,), {"worker_class": AltersResubmittedSql}), "payload"),
    (ClockFromRedelivery, "message_clock"),
])
def test_the_example_compares_content_a_lazy_adapter_would_declare_away(bug, variable, tmp_path):
    """What the six variables the example once declared unobservable let through: now a
    divergence naming the variable. With them declared away, the same bug is never a pass."""
    report = run(bug, out=tmp_path)
    assert report.status == "diverged" and report.exit_code == 1, report.text()
    assert variable in report.failure

    class Hidden(bug):  # type: ignore[misc,valid-type]
        unobservable = frozenset({variable})

        def observe(self, instance):
            out = dict(super().observe(instance))
            del out[variable]
            return out

    hidden = run(Hidden, out=tmp_path)
    assert hidden.exit_code == 3 and hidden.unchecked == (variable,), hidden.text()


def test_unobservable_must_name_observable_variables():
    class Wrong(InMemoryQueryAdapter):
        unobservable = frozenset({"not_found_seen"})  # a ghost: never observed anyway

    report = run(Wrong)
    assert report.status == "adapter_error" and "not_found_seen" in report.adapter_error


def test_a_factory_that_returns_no_adapter_is_an_adapter_error():
    report = lockstep(lambda: object(), "query", profile="dev", seed=0)  # type: ignore[arg-type,return-value]
    assert report.status == "adapter_error" and "not a settled.conformance.Adapter" in \
        report.adapter_error


# ---------------------------------------------------------------------------- the event log
class NoLog(InMemoryQueryAdapter):
    def trace_lines(self):
        return []


class OneInstanceLogged(InMemoryQueryAdapter):
    def trace_lines(self):
        first = self.items[0].query.query_id
        return [json.dumps(e) for e in self.service.log if e["instance"] == first]


class NotTheFormat(InMemoryQueryAdapter):
    def trace_lines(self):
        return [json.dumps({**e, "schema": "mine/1"}) for e in self.service.log]


@pytest.mark.parametrize(("adapter", "says"), [
    (NoLog, "the event log is empty"),
    (OneInstanceLogged, r"holds 1 instance\(s\) of query, but \d instance\(s\) took steps"),
    (NotTheFormat, "does not conform to settled.trace/1"),
])
def test_a_missing_or_malformed_log_is_an_adapter_error(adapter, says):
    report = run(adapter)
    assert report.status == "adapter_error", report.text()
    assert re.search(says, report.adapter_error)


# ---------------------------------------------------------------------------- whose fault
class TypoInTriggerMap(InMemoryQueryAdapter):
    def _worker_step(self, worker, qid, trigger):
        calls = {"claim": worker.claim}
        calls[trigger](qid)  # a KeyError for every other worker step: the adapter's fault


class ClaimBlowsUp(Worker):
    def claim(self, query_id):
        raise RuntimeError("lease table is corrupt")


class ImplementationRaises(InMemoryQueryAdapter):
    worker_class = ClaimBlowsUp


# ---------------------------------------------------------------------------- version() contract
class VersionNeverChanges(InMemoryQueryAdapter):
    """Says nothing observable ever changes: the kit would reuse stale observations."""

    def version(self):
        return 0


class CrossTalk(InMemoryQueryAdapter):
    """A planted bug across instances: checking q0's draft also drafts q1."""

    def perform(self, instance, trigger, params):
        super().perform(instance, trigger, params)
        if instance == 0 and trigger == "check_passed" and self.items[1].query.state == "drafted":
            super().perform(1, "check_passed", {})


class CrossTalkBehindAStaleVersion(CrossTalk, VersionNeverChanges):
    pass


def test_a_version_that_lies_never_turns_a_bug_into_a_pass(tmp_path):
    assert run(VersionNeverChanges, out=tmp_path).status == "passed"  # nothing to hide
    assert run(CrossTalk, out=tmp_path).status == "diverged"  # q1 observed after q0's step
    # The lie hides q1 for a while; q1's own next step, or the run's end, shows it.
    assert run(CrossTalkBehindAStaleVersion, out=tmp_path).status in ("diverged", "adapter_error")


def test_a_change_a_stale_version_hid_is_an_adapter_error_when_the_run_ends():
    """Only an instance no step acted on is ever reused; a change to it behind an unchanged
    version cannot outlive the run: its end observes every instance afresh."""
    from settled.conformance._lockstep import Action, Runner, world

    runner = Runner(world(QUERY, 3), CrossTalkBehindAStaleVersion, QUERY.refusable)
    runner.check()
    runner.apply(Action(0, "check_passed", {}))
    runner.check()  # q0 afresh; q1 reused on the version's word: it still looks untouched
    with pytest.raises(kit.AdapterError, match=r"version\(\) stayed 0, but observe\(q1\)"):
        runner.finish()


def test_a_refusal_that_changes_its_instance_is_caught_whatever_the_version_says():
    from settled.conformance._lockstep import Action, Runner, world
    from settled.conformance._lockstep._shrink import Divergence

    class WritesWhenRefused(VersionNeverChanges):
        def perform(self, instance, trigger, params):
            if trigger == "begin_submit":
                super().perform(instance, "check_passed", {})
            super().perform(instance, trigger, params)

    runner = Runner(world(QUERY, 3), WritesWhenRefused, QUERY.refusable)
    runner.check()
    with pytest.raises(Divergence, match="the refusal changed the implementation"):
        runner.apply(Action(0, "begin_submit", {"worker": 0}, forbidden=True))


def test_the_bundled_sqlite_adapter_reuses_observations_after_a_refusal_and_stays_honest():
    from settled.conformance._bundled._suites import query_suite
    from settled.conformance._lockstep import Action, Runner, world

    suite = query_suite()
    runner = Runner(world(suite.protocol, suite.instances), suite.adapter, suite.forbidden)
    runner.apply(Action(0, "check_passed", {}))
    runner.check()
    version, reused = runner.version(), runner.reused
    # The store itself refuses: no lease is held (a transaction it rolls back).
    runner.apply(Action(0, "begin_submit", {"worker": 0}, forbidden=True))
    assert runner.version() == version  # nothing committed, nothing changed
    runner.check()
    assert runner.reused == reused + suite.instances - 1  # q0 afresh, the others reused
    runner.apply(Action(1, "check_passed", {}))
    reused = runner.reused
    runner.check()
    assert runner.reused == reused  # a step that commits moves the version: all afresh
    runner.finish()


def test_the_adapters_own_exception_is_told_apart_from_the_implementations(tmp_path):
    report = run(TypoInTriggerMap)
    assert report.status == "adapter_error"
    assert "the adapter's own code raised KeyError" in report.adapter_error
    assert "query_adapter" not in (report.failure or "")
    other = run(ImplementationRaises, out=tmp_path)
    assert other.status == "diverged"
    # Raised on a step the kit asked for, or in the implementation's own turn once faults
    # stopped: either way the implementation's, never the adapter's.
    assert re.search(r"(the implementation|own scheduler) raised RuntimeError", other.failure)
    assert "lease table is corrupt" in other.failure and other.adapter_error is None


# ---------------------------------------------------------------------------- counterexamples
def test_a_counterexample_goes_into_out_and_replays(tmp_path):
    report = run(buggy, out=tmp_path)
    assert report.status == "diverged" and report.exit_code == 1
    assert report.counterexample == tmp_path / "lockstep-query.itf.json"
    for name in ("lockstep-query.itf.json", "lockstep-query.steps.json"):
        saved = load_counterexample(tmp_path / name)
        assert saved.machine == "query" and len(saved.steps) == len(report.steps)
        assert replay_counterexample(saved, buggy).divergence is not None
        assert replay_counterexample(saved, correct).divergence is None


def test_an_unwritable_counterexample_is_its_own_error_never_a_pass(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    report = run(buggy, out=blocker)
    assert report.status == "diverged" and report.failure
    assert report.counterexample is None and report.exit_code == 3
    assert "COUNTEREXAMPLE NOT SAVED" in report.text()


def test_the_default_counterexample_folder_is_under_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("SETTLED_COUNTEREXAMPLES", raising=False)
    monkeypatch.chdir(tmp_path)
    report = run(buggy)
    assert report.counterexample == tmp_path / "settled-counterexamples" / "lockstep-query.itf.json"


def test_a_file_that_is_no_counterexample_is_refused(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(CounterexampleError, match="neither a step list"):
        load_counterexample(bad)
    with pytest.raises(CounterexampleError, match="cannot read"):
        load_counterexample(tmp_path / "missing.json")


# ---------------------------------------------------------------------------- the command line
def _settled(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "settled.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_the_cli_passes_the_correct_example_and_catches_the_planted_bug(tmp_path):
    ok = _settled("lockstep", "examples.query_adapter:correct", "--profile", "dev", "--seed", "1",
                  "--out", str(tmp_path))
    assert ok.returncode == 0, ok.stdout + ok.stderr  # no exception needed: it observes all
    assert "PASSED" in ok.stdout and "NOT CHECKED" not in ok.stdout
    wrong = _settled("lockstep", "examples.query_adapter:correct", "--allow-unchecked", "payload")
    assert wrong.returncode == 2 and "does not declare unobservable" in wrong.stderr
    bad = _settled("lockstep", "examples.query_adapter:buggy", "--profile", "dev", "--seed", "1",
                   "--out", str(tmp_path), "--json")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    doc = json.loads(bad.stdout)
    assert doc["status"] == "diverged" and 0 < len(doc["steps"]) <= 8
    again = _settled("replay", str(tmp_path / "lockstep-query.steps.json"), "--adapter",
                     "examples.query_adapter:buggy")
    assert again.returncode == 1 and "STILL DIVERGES" in again.stdout
    fixed = _settled("replay", str(tmp_path / "lockstep-query.itf.json"), "--adapter",
                     "examples.query_adapter:correct")
    assert fixed.returncode == 0 and "now agree" in fixed.stdout


@pytest.mark.parametrize("args", [
    ("lockstep", "examples.query_adapter"),
    ("lockstep", "examples.no_such_module:correct"),
    ("lockstep", "examples.query_adapter:nope"),
    ("lockstep", "examples.query_adapter:correct", "--machine", "ledger9"),
    ("lockstep", "examples.query_adapter:correct", "--profile", "forever"),
    ("replay", "no-such-file.json"),
])
def test_bad_input_is_one_line_and_exit_2(args):
    done = _settled(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_an_adapter_error_exits_3():
    done = _settled("lockstep", "tests.test_conformance_api:LeavesOutPlatform", "--profile", "dev",
                    "--seed", "0")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "left out ['platform']" in done.stdout


def test_adapter_is_an_abstract_base():
    with pytest.raises(TypeError):
        Adapter()  # type: ignore[abstract]
    assert issubclass(AdapterError, Exception)


def test_a_factory_that_raises_or_returns_no_adapter_is_the_adapters_error() -> None:
    """What a user's factory raises, or a factory that returns something else, is an
    AdapterError naming it, for a machine and for a system; nothing half-built is left open."""
    from settled.conformance._adapter import AdapterError
    from settled.conformance._probe import probe, probe_system
    from settled.model.systems import build_ledger_system

    def raising() -> object:
        raise ValueError("no database here")

    closed: list[str] = []

    class NotAnAdapter:
        instances = 1

        def close(self) -> None:
            closed.append("closed")

    for call in (lambda f: probe(f, "query"), lambda f: probe_system(f, None)):
        with pytest.raises(AdapterError, match=r"the adapter factory raised ValueError: no database"):
            call(raising)
    with pytest.raises(AdapterError, match=r"returned NotAnAdapter, not a settled\.conformance"):
        probe(NotAnAdapter, "query")
    with pytest.raises(AdapterError, match=r"returned NotAnAdapter, not a settled\.conformance"):
        probe_system(NotAnAdapter, build_ledger_system(calls=1))
    assert closed == ["closed", "closed"]
