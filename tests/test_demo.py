"""``settled demo query`` and ``settled demo approval``: the seeds' stories hold end to end.

The query demo is seed 003's example on real files (store, worker, synthetic
platform); the approval demo is seed 000's ``04_idempotency.py``. Both are
checked through the ``demo`` sub-app on a fresh Typer app and, once
``settled/cli.py`` loads ``_cmd_demo``, through ``python -m settled.cli``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from settled import cli
from settled._cmd_demo import APPROVAL_STORY, approval_problems, query_problems, query_story, register
from settled._demo_query import EXECUTE, PARTIAL_QUOTE, STORE_FILE, demo_query
from settled.impl.shared._errors import InvalidInput

APPROVAL_JSON = ('{"observed_delta": 5, "replay_same_result": true, "lookup_status": "found", '
                 '"different_arguments": "idempotency_conflict"}')


def run_demo(*args: str) -> Any:
    app = typer.Typer()
    register(app)
    return CliRunner().invoke(app, ["demo", *args])


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    facts, _ = query_story(tmp_path_factory.mktemp("query-demo"))
    return facts


# --------------------------------------------------------------------------- the query story
@pytest.mark.rule("Q23")
@pytest.mark.rule("Q24")
def test_the_late_16_yuan_keeps_version_2_and_does_not_move_version_3(story: dict[str, Any]) -> None:
    query, task = story["query"], story["task"]
    assert (query["state"], query["result_yuan"]) == ("succeeded", 16.0)
    assert query["authorized_condition_version"] == 2
    assert task == {"label": "A", "condition_version": 3, "phase": "open",
                    "phase_moved_by_late_result": False}


@pytest.mark.rule("Q24")
@pytest.mark.rule("Q25")
def test_the_notification_says_it_is_the_earlier_app_monthly_total(story: dict[str, Any]) -> None:
    note = story["notification"]
    assert note["condition_version"] == 2
    assert "the earlier app monthly total of 2026-01 is 16 yuan" in note["answer"]
    assert "earlier question of task A at condition version 2" in note["text"]
    assert "not the current version 3" in note["text"] and "16 yuan" in note["text"]
    assert note["authorizes"] is False, "a notification never authorizes Q3"


@pytest.mark.rule("Q1")
@pytest.mark.rule("Q14")
@pytest.mark.rule("Q15")
def test_a_lost_answer_is_looked_up_and_the_query_runs_once(story: dict[str, Any]) -> None:
    query = story["query"]
    assert (query["submissions"], query["submissions_received_by_platform"],
            query["executions_on_platform"]) == (1, 1, 1)
    assert query["log"][-4:] == ["submit_unanswered: submitting -> submission_unknown",
                                 "lookup_running: submission_unknown -> running",
                                 "condition_updated: running -> running",
                                 "lookup_succeeded: running -> succeeded"]


@pytest.mark.rule("Q5")
@pytest.mark.rule("T2")
def test_a_partial_quote_is_refused_and_the_old_draft_is_invalidated(story: dict[str, Any]) -> None:
    assert story["partial_quote"] == {"quote": PARTIAL_QUOTE, "refused_with": "InvalidInput"}
    assert PARTIAL_QUOTE in EXECUTE and PARTIAL_QUOTE != EXECUTE
    assert story["draft_q1"] == {"state": "invalidated", "condition_version": 1}
    assert story["draft_q3"] == {"state": "awaiting_confirmation", "condition_version": 3}


@pytest.mark.rule("Q26")
def test_the_confirming_message_gets_status_and_a_later_one_the_result(story: dict[str, Any]) -> None:
    assert story["query"]["confirming_message_sees_result"] is False
    assert story["query"]["later_message_sees_result"] is True


def test_the_story_holds_and_its_event_log_conforms_to_the_model(story: dict[str, Any]) -> None:
    assert story["trace_conforms"] is True
    assert query_problems(story) == []


def test_a_broken_story_is_named(story: dict[str, Any]) -> None:
    broken = {**story, "trace_conforms": False,
              "task": {**story["task"], "phase_moved_by_late_result": True}}
    assert query_problems(broken) == [
        "expected: the late result did not move version 3's phase (Q24)",
        "expected: the event log conforms to the model"]


def test_the_query_demo_needs_a_fresh_folder(tmp_path: Path) -> None:
    (tmp_path / STORE_FILE).write_bytes(b"")
    with pytest.raises(InvalidInput, match="needs a fresh folder"):
        demo_query(tmp_path)


# --------------------------------------------------------------------------- the command line
@pytest.mark.rule("Q24")
def test_demo_query_json_prints_only_the_facts_and_is_the_same_every_run() -> None:
    first, second = run_demo("query", "--json"), run_demo("query", "--json")
    assert first.exit_code == 0, first.output
    assert first.stdout == second.stdout
    facts = json.loads(first.stdout)
    assert facts["trace_conforms"] is True
    assert facts["query"]["result_yuan"] == 16.0
    assert facts["task"]["phase_moved_by_late_result"] is False


def test_demo_query_narrates_states_and_versions_and_ends_with_a_summary() -> None:
    result = run_demo("query")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    for expected in ("condition version 2", "submission_unknown", "condition version 3",
                     "refused with InvalidInput", "16 yuan", "earlier app monthly total",
                     "trace check: 11 events of 3 queries: conforms"):
        assert any(expected in line for line in lines), expected
    assert lines[-1].startswith("story held: Q2 ran once on the platform")


@pytest.mark.rule("W2")
@pytest.mark.rule("W3")
@pytest.mark.rule("A3")
def test_demo_approval_json_is_exactly_the_seeds_output() -> None:
    result = run_demo("approval", "--json")
    assert result.exit_code == 0, result.output
    assert result.stdout == APPROVAL_JSON + "\n"
    assert json.loads(result.stdout) == APPROVAL_STORY


def test_demo_approval_narrates_and_ends_with_a_summary() -> None:
    result = run_demo("approval")
    assert result.exit_code == 0, result.output
    assert "reconciler lookup of the token: found" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("story held: stock changed by 5 once")


def test_an_approval_story_that_did_not_hold_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    import settled._cmd_demo as cmd

    monkeypatch.setattr(cmd, "demo_approval", lambda folder, say: {**APPROVAL_STORY,
                                                                   "observed_delta": 10})
    result = run_demo("approval")
    assert result.exit_code == 1
    assert "observed_delta: expected 5, got 10" in result.stdout
    assert approval_problems(APPROVAL_STORY) == []


# --------------------------------------------------------------------------- the installed CLI
wired = pytest.mark.skipif("demo" not in cli.COMMANDS,
                           reason="settled/cli.py does not load _cmd_demo yet")


def settled(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "settled.cli", *args], capture_output=True,
                          text=True, timeout=120)


@wired
@pytest.mark.rule("Q24")
@pytest.mark.rule("Q25")
def test_settled_demo_query_json_through_the_cli() -> None:
    run = settled("demo", "query", "--json")
    assert run.returncode == 0, run.stderr
    facts = json.loads(run.stdout)
    assert (facts["query"]["result_yuan"], facts["query"]["executions_on_platform"]) == (16.0, 1)
    assert facts["task"]["phase_moved_by_late_result"] is False
    assert "earlier app monthly total" in facts["notification"]["answer"]
    assert facts["trace_conforms"] is True


@wired
@pytest.mark.rule("W2")
@pytest.mark.rule("W3")
def test_settled_demo_approval_json_through_the_cli() -> None:
    run = settled("demo", "approval", "--json")
    assert run.returncode == 0, run.stderr
    assert run.stdout == APPROVAL_JSON + "\n"
