"""The trace checker replays recorded logs through the model and names what does not conform."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from settled.conformance._trace import TraceError, check_lines, load_schema
from settled.conformance._trace._tracegen import trace_lines
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
    assert ("fresh_lease", "held[worker] > 0 and held[worker] == lease_epoch") in v.failed_guards


def test_only_the_first_violation_per_instance_is_reported():
    events = story()
    events[3]["vars"]["submissions"] = 2
    events[4]["vars"]["submissions"] = 5
    assert len(check_lines(lines(events)).violations) == 1


@pytest.mark.parametrize(("mangle", "message"), [
    (lambda ls: ls[:2] + ["{not json"] + ls[2:], "line 3: not JSON"),
    (lambda ls: [ls[0], json.dumps({k: v for k, v in json.loads(ls[1]).items() if k != "vars"})]
     + ls[2:], "line 2: Object missing required field `vars`"),
    (lambda ls: [x.replace('"query"', '"robot"', 1) for x in ls], "line 1: unknown machine 'robot'"),
    (lambda ls: [], "line 0: no events"),
    (lambda ls: ["", "  "], "line 2: no events"),
    (lambda ls: [ls[0].replace('"seq": 1', '"seq": "1"')] + ls[1:], "line 1: Expected `int`"),
    (lambda ls: [ls[0].replace('"params": {}', '"params": {"a": [1]}')] + ls[1:],
     "line 1: params: Expected `bool | int | str`, got `array`"),
    (lambda ls: [ls[0].replace('"params": {}', '"params": ' + "[" * 5000 + "]" * 5000)],
     "line 1: values nested 5001 deep, over the limit of 32"),
    (lambda ls: [ls[0], ls[1].encode()[:40] + b"\xff\xfe" + ls[1].encode()[40:]],
     "line 2: not UTF-8 text"),
])
def test_unreadable_input_is_one_line_error_with_its_line_number(mangle, message):
    with pytest.raises(TraceError) as info:
        check_lines(mangle(lines(story())))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("mangle", "line", "kind", "message"), [
    (lambda ls: [ls[0], ls[2], ls[1]] + ls[3:], 2, "incomplete_log", "seq 3 after seq 1"),
    (lambda ls: ls[1:], 1, "incomplete_log", "starts mid-stream"),
    (lambda ls: ls[:3] + ls[4:], 4, "incomplete_log", "event 4 is missing"),
    (lambda ls: ls[:3] + [ls[2]] + ls[3:], 4, "incomplete_log", "out of order or repeated"),
    (lambda ls: [ls[0].replace('"drafted"', '"limbo"')] + ls[1:], 1, "out_of_domain",
     "from state 'limbo' is not a state"),
    (lambda ls: [ls[0].replace('"check_passed"', '"teleport"')] + ls[1:], 1, "out_of_domain",
     "trigger 'teleport' is not a logged step"),
    (lambda ls: [ls[0].replace('"submissions"', '"mood"')] + ls[1:], 1, "out_of_domain",
     "variable 'mood' is not a logged variable"),
    (lambda ls: [ls[0].replace('"lease_epoch": 0', '"lease_epoch": "0"')] + ls[1:], 1,
     "out_of_domain", "variable 'lease_epoch' is \"0\", outside its domain (an integer >= 0)"),
    (lambda ls: [ls[0].replace('"lease_epoch": 0', '"lease_epoch": null')] + ls[1:], 1,
     "out_of_domain", "variable 'lease_epoch' is null, outside its domain"),
    (lambda ls: [ls[0].replace('"phase_moved": false', '"phase_moved": 0')] + ls[1:], 1,
     "out_of_domain", "variable 'phase_moved' is 0, outside its domain (one of false, true)"),
    (lambda ls: ls[:2] + [ls[2].replace('"w-a"', "true")] + ls[3:], 3, "out_of_domain",
     "param 'worker' of 'claim' is true"),
    (lambda ls: [ls[0], ls[1].replace('"whole"', '"most"')] + ls[2:], 2, "out_of_domain",
     "param 'quote' of 'confirm' is \"most\""),
    (lambda ls: [ls[0], ls[1].replace('"quote": "whole", ', "")] + ls[2:], 2, "out_of_domain",
     "params ['condition_version', 'draft_version', 'message'] do not fit 'confirm'"),
])
def test_a_bad_instance_is_a_violation_of_that_instance_with_its_line(mangle, line, kind, message):
    broken = mangle(lines(story()))
    other = [x.replace('"q7"', '"q8"') for x in lines(story())]
    report = check_lines(broken + other)
    [v] = report.violations
    assert (v.instance, v.line, v.kind) == ("q7", line, kind)
    assert message in v.message, v.message
    assert message in v.text()
    assert report.instances == 2 and report.conforming == 1


def test_every_instance_is_judged_and_first_stops_at_the_first():
    """A fourth submission in one query and a seq gap in another: both reported, in line order."""
    q1 = story()
    q1[3]["vars"]["submissions"] = 4
    q2 = [{**e, "instance": "q2"} for e in story()]
    del q2[2]
    mixed = [x for pair in zip(lines(q1), lines(q2), strict=False) for x in pair]
    report = check_lines(mixed)
    assert [(v.instance, v.kind) for v in report.violations] == [("q2", "incomplete_log"),
                                                                  ("q7", "out_of_domain")]
    assert "variable 'submissions' is 4" in report.violations[1].message
    assert report.exit_code == 1
    only = check_lines(mixed, first=True)
    assert len(only.violations) == 1 and only.stopped_early
    assert only.conforming == 0 and only.unjudged == 1  # q7 was read only in part


def test_a_bom_and_blank_lines_are_accepted_and_bytes_too():
    ls = lines(story())
    assert check_lines(["\ufeff" + ls[0], "", *ls[1:], "   "]).ok
    assert check_lines([("\ufeff" + x if i == 0 else x).encode() + b"\n"
                        for i, x in enumerate(ls)]).ok


def test_an_over_long_line_is_refused_by_the_limit():
    from settled.conformance._trace import MAX_LINE_BYTES

    event = story()[0]
    event["at"] = "x" * MAX_LINE_BYTES
    with pytest.raises(TraceError, match=r"line 1: the line is .* over the limit"):
        check_lines([json.dumps(event)])


@pytest.mark.rule("Q11")
def test_many_worker_names_taking_over_one_query_cost_no_more_than_two():
    """Worker names are interchangeable: nine (or ninety) takeovers replay a two-worker model."""
    events, v = story()[:2], dict(story()[1]["vars"])
    for n in range(1, 91):
        v = {**v, "lease_epoch": n}
        events.append({**events[0], "trigger": "claim", "params": {"worker": f"pod-{n}"},
                       "from": "queued", "to": "queued", "vars": dict(v)})
    events.append({**events[0], "trigger": "begin_submit", "params": {"worker": "pod-90"},
                   "from": "queued", "to": "submitting",
                   "vars": {**v, "submissions": 1, "submit_epoch": 90}})
    for seq, e in enumerate(events, start=1):
        e["seq"] = seq
    assert check_lines(lines(events)).ok
    events[-1]["params"] = {"worker": "pod-89"}  # a taken-over worker writes: stale
    [violation] = check_lines(lines(events)).violations
    assert violation.line == len(events)
    assert ("fresh_lease", "held[worker] > 0 and held[worker] == lease_epoch") in violation.failed_guards
    assert "Q11" in violation.rules


@pytest.mark.rule("Q21")
def test_cancelled_without_a_cancel_request_names_the_invariant_and_only_what_is_certain():
    """After lookup_running the platform may have succeeded or failed unseen; none of that is
    shown as fact. Every candidate fails the same guard and breaks the same invariant."""
    events = story()[:6]
    done = {**events[0], "seq": 7, "trigger": "lookup_cancelled", "params": {"worker": "w-a"},
            "from": "running", "to": "cancelled", "vars": {**events[5]["vars"], "phase_moved": True}}
    [v] = check_lines(lines([*events, done])).violations
    assert v.line == 7 and v.kind == "step"
    assert set(v.unlogged["platform"]) == {"running", "succeeded", "failed"}
    assert "platform" not in v.state_before and v.state_before["state"] == "running"
    assert ("platform_cancelled", "platform == cancelled") in v.failed_guards
    assert "cancelled_needs_evidence" in v.broken
    assert {"Q15", "Q21"} <= set(v.rules)
    assert "rules: " in v.text() and "breaks cancelled_needs_evidence" in v.text()


def test_an_undecided_instance_is_neither_pass_nor_violation():
    events = story()
    events[4] = {**events[4], "to": "failed"}
    report = check_lines(lines(events), closure_limit=1)
    assert not report.ok and not report.violations
    [u] = report.undecided
    assert u.kind == "undecided" and "limit of 1" in u.message
    assert report.exit_code == 3


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
    from settled._demo_query import demo_query

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
    from settled._demo_query import demo_query

    demo_query(tmp_path)
    result = run_cli("export-trace", str(tmp_path / "query-store.db"), "-o", "-")
    assert result.returncode == 0 and "wrote 11 events to stdout" in result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(rows) == 11 and {r["machine"] for r in rows} == {"query"}
    assert not (tmp_path / "-").exists()


def test_export_trace_leaves_the_store_byte_for_byte_unchanged(tmp_path):
    from settled._demo_query import demo_query

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
    from settled._demo_query import demo_query

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


@pytest.mark.rule("A4")
def test_export_trace_reads_an_approval_checkpoint_too(tmp_path):
    from settled._demo_approval import demo_approval

    demo_approval(tmp_path)
    [checkpoint] = tmp_path.glob("*/checkpoint.db")
    out = tmp_path / "approval.jsonl"
    assert run_cli("export-trace", str(checkpoint), "-o", str(out)).returncode == 0
    machines = {json.loads(line)["machine"] for line in out.read_text().splitlines()}
    assert machines == {"approval"}
    assert run_cli("check", str(out)).returncode == 0


def test_a_checker_defect_is_a_one_paragraph_report_naming_the_line(monkeypatch, tmp_path):
    import typer
    from typer.testing import CliRunner

    from settled import _cmd_trace
    from settled.conformance import _trace

    app = typer.Typer()
    app.callback()(lambda: None)
    _cmd_trace.register(app)

    def boom(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(_trace._Replayer, "step", boom)
    monkeypatch.setattr(_trace._replay, "REPLAYERS", {})  # no memo from earlier checks
    with pytest.raises(_trace.CheckerFault, match="while reading line 1 ") as info:
        check_lines(lines(story()))
    assert info.value.line == 1 and "ZeroDivisionError" in str(info.value)
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines(story())) + "\n")
    result = CliRunner().invoke(app, ["check", str(path)])
    assert result.exit_code == 3 and "Traceback" not in result.output
    assert "line 1" in result.output and "defect of the checker" in result.output
    result = CliRunner().invoke(app, ["check", str(path), "--json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 3 and doc["exit_code"] == 3 and doc["line"] == 1


def test_cli_reads_stdin_and_json_is_always_one_document():
    text = "\n".join(lines(story())) + "\n"
    ok = subprocess.run([sys.executable, "-m", "settled.cli", "check", "-", "--json"], input=text,
                        capture_output=True, text=True)
    assert ok.returncode == 0 and json.loads(ok.stdout)["verdicts"]["conforms"] == 1
    for given, code in (("", 2), ("{\n", 2),
                        (text.replace('"submissions": 1', '"submissions": 2'), 1)):
        result = subprocess.run([sys.executable, "-m", "settled.cli", "check", "-", "--json"],
                                input=given, capture_output=True, text=True)
        doc = json.loads(result.stdout)
        assert result.returncode == code == doc["exit_code"], result.stdout
        assert "Traceback" not in result.stderr
    empty = subprocess.run([sys.executable, "-m", "settled.cli", "check", "-"], input="",
                           capture_output=True, text=True)
    assert empty.returncode == 2 and "no events" in empty.stderr
    none = subprocess.run([sys.executable, "-m", "settled.cli", "check", "--json"],
                          capture_output=True, text=True)
    assert none.returncode == 2 and json.loads(none.stdout)["error"] == "usage"


def test_integral_numbers_the_schema_calls_integers_are_integers():
    """JSON Schema's integer includes 2.0 and 1e0; a fraction is unreadable, not a crash."""
    ls = [x.replace('"seq": 3', '"seq": 3.0').replace('"lease_epoch": 1', '"lease_epoch": 1e0')
          for x in lines(story())]
    assert check_lines(ls).ok
    with pytest.raises(TraceError, match=r"line 1: Expected `int`, got `float` - at `\$.seq`"):
        check_lines([ls[0].replace('"seq": 1', '"seq": 1.5')])
    with pytest.raises(TraceError, match=r"line 1: vars: .* got `float`"):
        check_lines([ls[0].replace('"lease_epoch": 0', '"lease_epoch": 0.5')])


def _approval_log(path: list[str], *, blind: bool) -> list[str]:
    """The approval machine's events along ``path`` (model steps by trigger). ``blind``: the
    log names the state it last logged as ``from`` (and a self-loop's ``to``), as an
    implementation that cannot see the unlogged business commit would."""
    from settled.model import APPROVAL

    p, c = APPROVAL, APPROVAL.initial_config()
    logged = c.state
    lines, seq = [], 0
    for trigger in path:
        params = {"retry_safe": True} if trigger == "propose" else {}
        step = p.fire(c, trigger, params)
        t, after = step.transition, step.after
        if t.observable is not None:
            seq += 1
            v = p.view(after)
            source = logged if blind else c.state
            dest = source if blind and after.state == c.state else after.state
            lines.append(json.dumps({
                "schema": "settled.trace/1", "machine": "approval", "instance": "call-1",
                "seq": seq, "trigger": t.observable, "params": params, "from": str(source),
                "to": str(dest), "vars": {x.name: v[x.name] for x in p.variables if x.observable}}))
            logged = dest
        c = after
    return lines


COMMITTED_THEN_RETRIED = ["propose", "show", "approve", "execute", "commit", "retry",
                          "save_result", "answer"]


@pytest.mark.parametrize("blind", [False, True], ids=["sees-the-commit", "last-logged-state"])
def test_an_event_after_an_unlogged_step_may_name_either_state(blind):
    """README: steps a log cannot see are not logged, and the checker considers every way
    they could have happened. After the approval's unlogged commit, a retry (a self-loop)
    may be logged where the log last was (executing -> executing) or where the commit went,
    and the saved result from either state."""
    lines = _approval_log(COMMITTED_THEN_RETRIED, blind=blind)
    assert any('"from": "executing"' in x and '"trigger": "save_result"' in x
               for x in lines) == blind
    report = check_lines(lines)
    assert report.ok, [v.message for v in report.violations]


def test_a_from_state_neither_logged_nor_reachable_unlogged_is_a_violation():
    lines = _approval_log(COMMITTED_THEN_RETRIED, blind=True)
    lines[-2] = lines[-2].replace('"from": "executing"', '"from": "approved"')
    report = check_lines(lines)
    assert not report.ok and report.violations[0].kind == "step"


def test_a_step_with_a_destination_must_name_it_after_an_unlogged_step():
    """Only a step that stays where it is may be logged where the log believes it is."""
    lines = _approval_log(COMMITTED_THEN_RETRIED, blind=True)
    lines[-2] = lines[-2].replace('"to": "result_checkpointed"', '"to": "executing"')
    assert not check_lines(lines).ok
