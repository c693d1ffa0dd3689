"""The trace checker replays recorded logs through the model and names what does not conform."""

from __future__ import annotations

import json
import os
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
             ("submit_unanswered", {"worker": "w-a"}, "submitting", "submission_unknown", {}),
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
    assert result.returncode == 2 and "no such file" in result.stderr
    assert not (tmp_path / "nope.db").exists()
    assert not (tmp_path / "t.jsonl").exists()


def _foreign_sqlite(path):
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()
    return path


def _fake_store(path):
    """A SQLite file with a query_events table that is not the one settled writes."""
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE query_events (query_id TEXT, seq INTEGER)")
    conn.execute("INSERT INTO query_events VALUES ('q', 1)")
    conn.commit()
    conn.close()
    return path


def _bytes(data):
    def make(path):
        path.write_bytes(data)
        return path
    return make


def _folder(path):
    path.mkdir()
    return path


BAD_STORES = {
    "empty": (_bytes(b""), "empty"),
    "binary": (_bytes(bytes(range(256)) * 8), "not a SQLite file"),
    "text": (_bytes(b"hello\n"), "not a SQLite file"),
    "corrupt sqlite": (_bytes(b"SQLite format 3\x00" + b"\xff" * 200), "cannot read it as SQLite"),
    "foreign sqlite": (_foreign_sqlite, "not a settled store"),
    "fake store": (_fake_store, "not the one a settled query store has"),
    "folder": (_folder, "folder"),
}


@pytest.mark.parametrize("case", sorted(BAD_STORES))
def test_export_trace_refuses_what_is_not_a_store_and_changes_nothing(tmp_path, case):
    make, says = BAD_STORES[case]
    store = make(tmp_path / "input.db")
    before = store.read_bytes() if store.is_file() else None
    out = tmp_path / "trace.jsonl"
    out.write_text("an earlier export\n")
    result = run_cli("export-trace", str(store), "-o", str(out))
    assert result.returncode == 2, result.stderr
    assert says in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # The input is not turned into a database, and no -wal/-shm files appear beside it.
    assert (store.read_bytes() if store.is_file() else None) == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["input.db", "trace.jsonl"]
    # A failed export neither truncates nor replaces the output.
    assert out.read_text() == "an earlier export\n"


def test_export_trace_to_stdout_with_dash(tmp_path):
    from settled.impl._demo_query import demo_query

    demo_query(tmp_path)
    result = run_cli("export-trace", str(tmp_path / "query-store.db"), "-o", "-")
    assert result.returncode == 0 and "wrote 11 events to stdout" in result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(rows) == 11 and {r["machine"] for r in rows} == {"query"}
    assert not (tmp_path / "-").exists()


def test_export_trace_leaves_the_store_byte_for_byte_unchanged(tmp_path):
    from settled.impl._demo_query import demo_query

    demo_query(tmp_path)
    store = tmp_path / "query-store.db"
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert run_cli("export-trace", str(store), "-o", str(tmp_path / "t.jsonl")).returncode == 0
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert after.pop("t.jsonl")
    # SQLite's shared-memory index of a WAL-mode store may appear beside it (a reader needs
    # one); the store itself and every other file are unchanged.
    for name in ("query-store.db-shm", "query-store.db-wal"):
        if name not in files:
            after.pop(name, None)
    assert after == files


def test_export_trace_to_an_unwritable_output_says_so_before_reading(tmp_path):
    from settled.impl._demo_query import demo_query

    demo_query(tmp_path)
    store = str(tmp_path / "query-store.db")
    (tmp_path / "a-file").write_text("")
    under_a_file = run_cli("export-trace", store, "-o", str(tmp_path / "a-file" / "t.jsonl"))
    assert under_a_file.returncode == 2 and "cannot write into" in under_a_file.stderr
    assert "Traceback" not in under_a_file.stderr
    folder = run_cli("export-trace", store, "-o", str(tmp_path))
    assert folder.returncode == 2 and "is a folder" in folder.stderr
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            return  # root writes anywhere: the file-as-folder case above stands for it
        result = run_cli("export-trace", store, "-o", str(locked / "t.jsonl"))
    finally:
        locked.chmod(0o700)
    assert result.returncode == 2 and "cannot write into" in result.stderr
    assert not (locked / "t.jsonl").exists()
