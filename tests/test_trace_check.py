"""The trace checker replays recorded logs through the model and names what does not conform."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from settled.conformance._trace import TraceError, check_lines, load_schema
from settled.conformance._tracegen import trace_lines
from settled.model import QUERY

pytestmark = pytest.mark.rule("Q14")


def story() -> list[dict]:
    """A lost answer, a lookup that finds it running, the platform finishing (unlogged), success."""
    base = {"schema": "settled.trace/1", "machine": "query", "instance": "q7"}
    v = dict(submissions=0, cancel_state="none", lease_epoch=0, submit_epoch=0, task_version=1,
             authorized_version=0, phase_moved=False)
    steps = [("check_passed", {}, "drafted", "awaiting_confirmation", {}),
             ("confirm", {"quote": "whole", "draft_version": "current",
                          "condition_version": "current", "message": "attributed"},
              "awaiting_confirmation", "queued", {"authorized_version": 1}),
             ("claim", {"worker": "w-a"}, "queued", "queued", {"lease_epoch": 1}),
             ("begin_submit", {"worker": "w-a"}, "queued", "submitting",
              {"submissions": 1, "submit_epoch": 1}),
             ("submit_unanswered", {"worker": "w-a", "fault": "timeout"}, "submitting",
              "submission_unknown", {}),
             ("lookup_running", {"worker": "w-a"}, "submission_unknown", "running", {}),
             ("lookup_succeeded", {"worker": "w-a"}, "running", "succeeded", {"phase_moved": True})]
    out = []
    for seq, (trigger, params, src, dst, changes) in enumerate(steps, start=1):
        v = {**v, **changes}
        out.append({**base, "seq": seq, "trigger": trigger, "params": params, "from": src,
                    "to": dst, "vars": dict(v)})
    return out


def lines(events: list[dict]) -> list[str]:
    return [json.dumps(e) for e in events]


def test_a_story_with_unlogged_platform_progress_conforms():
    report = check_lines(lines(story()))
    assert report.ok and report.events == 7 and report.instances == 1


def test_model_written_traces_conform():
    report = check_lines(list(trace_lines(QUERY, 300, seed=11)))
    assert report.ok, report.violations[0].text()
    assert report.events > 1000


def test_a_lost_answer_recorded_as_failed_is_a_violation():
    events = story()
    events[4] = {**events[4], "to": "failed"}
    del events[5:]
    [v] = check_lines(lines(events)).violations
    assert v.line == 5 and v.instance == "q7"
    assert v.state_before["state"] == "submitting"
    assert ("to", "failed", "submission_unknown") in v.diffs
    assert "submit_unanswered" in v.enabled


def test_unseen_steps_are_allowed_only_as_far_as_the_evidence_goes():
    """The platform may have failed unseen, and a clarification may have been asked unseen:
    then lookup_failed conforms whether or not it moved the phase. A changed count does not."""
    events = story()
    events[5] = {**events[5], "trigger": "lookup_failed", "to": "failed",
                 "vars": {**events[5]["vars"], "phase_moved": True}}
    del events[6:]
    assert check_lines(lines(events)).ok
    events[5]["vars"]["phase_moved"] = False
    assert check_lines(lines(events)).ok
    events[5]["vars"]["submissions"] = 3
    [v] = check_lines(lines(events)).violations
    assert ("submissions", 3, 1) in v.diffs


@pytest.mark.rule("Q16")
def test_a_changed_variable_is_named_with_observed_and_expected():
    events = story()
    events[3]["vars"]["submissions"] = 2
    [v] = check_lines(lines(events)).violations
    assert v.line == 4
    assert ("submissions", 2, 1) in v.diffs
    assert "submissions: observed 2, model expects 1" in v.text()


@pytest.mark.rule("Q11")
def test_a_write_by_a_worker_without_the_lease_is_a_violation():
    events = story()
    events[3]["params"] = {"worker": "w-b"}  # w-b never claimed
    [v] = check_lines(lines(events)).violations
    assert ("fresh_lease", "worker holds the current lease_epoch") in v.failed_guards


def test_only_the_first_violation_per_instance_is_reported():
    events = story()
    events[3]["vars"]["submissions"] = 2
    events[4]["vars"]["submissions"] = 5
    assert len(check_lines(lines(events)).violations) == 1


@pytest.mark.parametrize(("mangle", "message"), [
    (lambda ls: ls[:2] + ["{not json"] + ls[2:], "line 3: not JSON"),
    (lambda ls: [ls[0], json.dumps({k: v for k, v in json.loads(ls[1]).items() if k != "vars"})]
     + ls[2:], "line 2: the event: must contain"),
    (lambda ls: [ls[0], ls[2], ls[1]] + ls[3:], "line 2: out-of-order sequence number"),
    (lambda ls: ls[1:], "line 1: an event for an instance that never started"),
    (lambda ls: [ls[0].replace('"drafted"', '"limbo"')] + ls[1:], "line 1: unknown state 'limbo'"),
    (lambda ls: [ls[0].replace('"check_passed"', '"teleport"')] + ls[1:],
     "line 1: unknown trigger 'teleport'"),
    (lambda ls: [ls[0].replace('"submissions"', '"mood"')] + ls[1:], "unknown variable(s) ['mood']"),
    (lambda ls: [x.replace('"query"', '"robot"', 1) for x in ls], "line 1: unknown machine 'robot'"),
])
def test_unreadable_input_is_one_line_error_with_its_line_number(mangle, message):
    with pytest.raises(TraceError) as info:
        check_lines(mangle(lines(story())))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_the_schema_is_shipped_with_the_package():
    schema = load_schema()
    assert schema["properties"]["schema"]["const"] == "settled.trace/1"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "settled.cli", *args], capture_output=True,
                          text=True)


def test_cli_exit_codes_say_conforming_violating_unreadable(tmp_path):
    good, bad, broken = tmp_path / "good.jsonl", tmp_path / "bad.jsonl", tmp_path / "broken.jsonl"
    good.write_text("\n".join(lines(story())) + "\n")
    events = story()
    events[3]["vars"]["submissions"] = 2
    bad.write_text("\n".join(lines(events)) + "\n")
    broken.write_text("{\n")
    assert run_cli("check", str(good)).returncode == 0
    result = run_cli("check", str(bad), "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["violations"][0]["line"] == 4
    assert report["violations"][0]["diffs"] == [{"field": "submissions", "observed": 2, "expected": 1}]
    failed = run_cli("check", str(broken))
    assert failed.returncode == 2 and "line 1: not JSON" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert run_cli("check", str(tmp_path / "missing.jsonl")).returncode == 2


def test_export_trace_writes_the_implementations_log_and_it_conforms(tmp_path):
    from settled.impl._demo_query import demo_query

    demo_query(tmp_path)
    out = tmp_path / "trace.jsonl"
    exported = run_cli("export-trace", str(tmp_path / "query-store.db"), "-o", str(out))
    assert exported.returncode == 0 and "wrote 11 events" in exported.stderr
    assert all(json.loads(line)["schema"] == "settled.trace/1" for line in out.read_text().splitlines())
    assert run_cli("check", str(out)).returncode == 0


def test_export_trace_of_a_missing_store_is_a_clear_error(tmp_path):
    result = run_cli("export-trace", str(tmp_path / "nope.db"), "-o", str(tmp_path / "t.jsonl"))
    assert result.returncode == 2 and "no query store" in result.stderr
    assert not (tmp_path / "nope.db").exists()


@pytest.mark.rule("A4")
def test_export_trace_reads_an_approval_checkpoint_too(tmp_path):
    from settled.impl._demo_approval import demo_approval

    demo_approval(tmp_path)
    [checkpoint] = tmp_path.glob("*/checkpoint.db")
    out = tmp_path / "approval.jsonl"
    assert run_cli("export-trace", str(checkpoint), "-o", str(out)).returncode == 0
    machines = {json.loads(line)["machine"] for line in out.read_text().splitlines()}
    assert machines == {"approval"}
    assert run_cli("check", str(out)).returncode == 0
