"""The query store: tasks, drafts, messages, confirmation, cancel and status (Q2–Q10, Q19–Q26, T, M).

Each test drives the real store on a real SQLite file next to a real
synthetic platform; none of them needs a worker except where a result or a
notification has to exist.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from settled.impl.platform._platform import (
    APP_DAILY_SQL,
    APP_MONTHLY_SQL,
    MONTHLY_BY_CHANNEL_SQL,
    SyntheticPlatform,
)
from settled.impl.query._events import export_jsonl
from settled.impl.query._store import CONFIRM_PARAMS, Query, QueryStore
from settled.impl.query._worker import Worker
from settled.impl.shared._errors import (
    IdempotencyConflict,
    InvalidInput,
    MessagePending,
    NotAllowed,
    NotFound,
    StaleVersion,
)
from settled.model.query import QueryState as S

SESSION, USER = "s1", "u1"
CLOCK = (datetime(2026, 2, 3, 2, 0, tzinfo=UTC), "Asia/Shanghai")
CONDITIONS = {"month": "2026-01", "metric": "net revenue", "unit": "yuan"}
EXECUTE = "只看 app，再执行"
BAD_COLUMN_SQL = "SELECT no_such_column FROM orders"


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[SyntheticPlatform]:
    with SyntheticPlatform(tmp_path / "platform", auto_complete_after_polls=1) as opened:
        yield opened


@pytest.fixture
def store(tmp_path: Path, platform: SyntheticPlatform) -> Iterator[QueryStore]:
    with QueryStore(tmp_path / "store.db", platform) as opened:
        yield opened


@pytest.fixture
def task_id(store: QueryStore) -> str:
    return store.create_task(USER, SESSION, CONDITIONS).task_id


def said(store: QueryStore, text: str, task_id: str | None = None, *, session: str = SESSION,
         user: str = USER) -> str:
    """A user message, attributed to ``task_id`` when given."""
    message = store.receive_message(session, user, text, CLOCK)
    if task_id is not None:
        store.attribute_message(message.message_id, task_id)
    return message.message_id


def confirm(store: QueryStore, query: Query, message_id: str, run_id: str,
            quote: str = EXECUTE) -> Query:
    return store.confirm(query.query_id, query.draft_version, query.condition_version, quote,
                         message_id, run_id)


def queued(store: QueryStore, task_id: str) -> Query:
    query = store.request_query(task_id, APP_MONTHLY_SQL)
    return confirm(store, query, said(store, EXECUTE, task_id), store.start_run(SESSION))


def triggers(store: QueryStore, query_id: str) -> list[str]:
    return [e["trigger"] for e in store.events(query_id)]


def settle(store: QueryStore, platform: SyntheticPlatform, query_id: str) -> None:
    with Worker(store.path, platform, "w", 30) as worker:
        worker.run_until_idle()
    assert store.query(query_id).state is S.SUCCEEDED


# --------------------------------------------------------------------------- tasks (T1, T2, Q23)
@pytest.mark.rule("T1")
def test_an_update_merges_the_patch_and_saves_version_plus_one(store: QueryStore,
                                                               task_id: str) -> None:
    updated = store.update_conditions(task_id, 1, {"channel": "app", "metric": None})
    assert updated.condition_version == 2
    assert updated.conditions == {"month": "2026-01", "unit": "yuan", "channel": "app"}
    assert store.conditions_at(task_id, 1) == CONDITIONS, "every version is kept"


@pytest.mark.rule("T1")
def test_an_update_against_a_stale_version_is_refused_and_the_caller_must_reread(
        store: QueryStore, task_id: str) -> None:
    store.update_conditions(task_id, 1, {"channel": "app"})
    with pytest.raises(StaleVersion, match="expected_version 1 is stale, current is 2; re-read"):
        store.update_conditions(task_id, 1, {"channel": "web"})
    assert store.task(task_id).conditions["channel"] == "app"


@pytest.mark.rule("T2")
def test_a_condition_update_invalidates_the_pending_drafts(store: QueryStore, task_id: str) -> None:
    draft = store.request_query(task_id, MONTHLY_BY_CHANNEL_SQL)
    store.update_conditions(task_id, 1, {"channel": "app"})
    assert store.query(draft.query_id).state is S.INVALIDATED
    last = store.events(draft.query_id)[-1]
    assert (last["trigger"], last["from"], last["to"]) == (
        "condition_updated", "awaiting_confirmation", "invalidated")
    with pytest.raises(NotAllowed, match="invalidated"):
        confirm(store, draft, said(store, EXECUTE, task_id), store.start_run(SESSION))


@pytest.mark.rule("Q23")
def test_an_authorized_query_keeps_its_version_while_the_task_moves_on(store: QueryStore,
                                                                       task_id: str) -> None:
    query = queued(store, task_id)
    store.update_conditions(task_id, 1, {"granularity": "day"})
    after = store.query(query.query_id)
    assert (after.state, after.condition_version, after.authorized_version) == (S.QUEUED, 1, 1)
    last = store.events(query.query_id)[-1]
    assert (last["trigger"], last["from"], last["to"]) == ("condition_updated", "queued", "queued")
    assert last["vars"]["task_version"] == 2 and last["vars"]["authorized_version"] == 1


# --------------------------------------------------------------------------- drafts (Q3, T3)
@pytest.mark.rule("Q3")
def test_a_draft_is_checked_by_the_platform_without_running(store: QueryStore,
                                                            platform: SyntheticPlatform,
                                                            task_id: str) -> None:
    draft = store.request_query(task_id, APP_MONTHLY_SQL)
    assert (draft.state, draft.check_ok, draft.draft_version) == (S.AWAITING, True, 1)
    assert platform.submissions_received(draft.query_id) == 0
    assert platform.executions(draft.query_id) == 0
    first = store.events(draft.query_id)[0]
    assert (first["seq"], first["trigger"], first["from"]) == (1, "check_passed", "drafted")


@pytest.mark.rule("Q3")
def test_a_draft_that_fails_its_check_can_never_be_confirmed(store: QueryStore, task_id: str) -> None:
    draft = store.request_query(task_id, BAD_COLUMN_SQL)
    assert (draft.state, draft.check_ok) == (S.CHECK_FAILED, False)
    assert draft.check_reason and "no_such_column" in draft.check_reason
    assert triggers(store, draft.query_id) == ["check_failed"]
    with pytest.raises(NotAllowed, match="check_failed; its check failed"):
        confirm(store, draft, said(store, EXECUTE, task_id), store.start_run(SESSION))


@pytest.mark.rule("T3")
def test_a_failed_revision_does_not_give_the_replaced_draft_back_its_right(
        store: QueryStore, task_id: str) -> None:
    old = store.request_query(task_id, APP_MONTHLY_SQL)
    new = store.request_query(task_id, BAD_COLUMN_SQL, replaces_query_id=old.query_id)
    assert new.state is S.CHECK_FAILED and new.replaces_query_id == old.query_id
    assert store.query(old.query_id).state is S.SUPERSEDED
    assert triggers(store, old.query_id) == ["check_passed", "revised"]
    run, message = store.start_run(SESSION), said(store, EXECUTE, task_id)
    with pytest.raises(NotAllowed, match="superseded; a revision replaced it"):
        confirm(store, old, message, run)


@pytest.mark.rule("T3")
def test_only_an_awaiting_draft_of_the_same_task_can_be_revised(store: QueryStore,
                                                                task_id: str) -> None:
    other_task = store.create_task(USER, SESSION, {}).task_id
    foreign = store.request_query(other_task, APP_MONTHLY_SQL)
    with pytest.raises(NotAllowed, match="belongs to task"):
        store.request_query(task_id, APP_DAILY_SQL, replaces_query_id=foreign.query_id)
    running = queued(store, task_id)
    with pytest.raises(NotAllowed, match="it is queued, only a draft awaiting"):
        store.request_query(task_id, APP_DAILY_SQL, replaces_query_id=running.query_id)


@pytest.mark.rule("Q2")
def test_the_same_sql_on_purpose_is_a_new_query_with_a_new_id(store: QueryStore,
                                                             task_id: str) -> None:
    first = store.request_query(task_id, APP_MONTHLY_SQL)
    second = store.request_query(task_id, APP_MONTHLY_SQL)
    assert first.query_id != second.query_id
    assert (first.draft_version, second.draft_version) == (1, 2)
    assert store.query(first.query_id).state is S.AWAITING, "not a revision: both stay awaiting"


# --------------------------------------------------------------------------- confirmation (Q4–Q10)
@pytest.mark.rule("Q4")
def test_draft_and_condition_versions_are_checked_separately(store: QueryStore, task_id: str) -> None:
    old = store.request_query(task_id, MONTHLY_BY_CHANNEL_SQL)
    new = store.request_query(task_id, APP_MONTHLY_SQL, replaces_query_id=old.query_id)
    assert (new.draft_version, new.condition_version) == (2, 1), "SQL changed, conditions did not"
    message, run = said(store, EXECUTE, task_id), store.start_run(SESSION)
    with pytest.raises(StaleVersion, match="draft_version 1 is stale, the query's is 2"):
        store.confirm(new.query_id, 1, 1, EXECUTE, message, run)
    with pytest.raises(StaleVersion, match="condition_version 2 does not match the draft's 1"):
        store.confirm(new.query_id, 2, 2, EXECUTE, message, run)
    assert store.confirm(new.query_id, 2, 1, EXECUTE, message, run).state is S.QUEUED


@pytest.mark.rule("Q5")
def test_only_the_users_whole_message_authorizes(store: QueryStore, task_id: str) -> None:
    draft = store.request_query(task_id, APP_MONTHLY_SQL)
    message, run = said(store, "只看 app，先别执行", task_id), store.start_run(SESSION)
    with pytest.raises(InvalidInput, match="'执行' is not the whole message"):
        confirm(store, draft, message, run, quote="执行")
    assert store.query(draft.query_id).state is S.AWAITING
    padded = said(store, EXECUTE, task_id)
    assert confirm(store, draft, padded, run, quote=f"\n  {EXECUTE} \t").state is S.QUEUED


@pytest.mark.rule("Q6")
def test_first_confirmation_needs_the_messages_task_and_the_current_runs_rights(
        store: QueryStore, task_id: str) -> None:
    draft = store.request_query(task_id, APP_MONTHLY_SQL)
    other_task = store.create_task(USER, SESSION, {}).task_id
    elsewhere = said(store, EXECUTE, other_task)
    old_run = store.start_run(SESSION)
    message = said(store, EXECUTE, task_id)
    with pytest.raises(NotAllowed, match="belongs to task"):
        confirm(store, draft, elsewhere, old_run)
    new_run = store.start_run(SESSION)
    with pytest.raises(NotAllowed, match=f"run '{old_run}' no longer holds the execution rights"):
        confirm(store, draft, message, old_run)
    store.end_run(new_run)
    with pytest.raises(NotAllowed, match="current run: none"):
        confirm(store, draft, message, new_run)
    foreign_run = store.start_run("s2")
    with pytest.raises(NotAllowed, match="belongs to session 's2'"):
        confirm(store, draft, message, foreign_run)
    assert triggers(store, draft.query_id) == ["check_passed"]
    assert confirm(store, draft, message, store.start_run(SESSION)).state is S.QUEUED


@pytest.mark.rule("Q7")
def test_confirmation_records_everything_in_one_transaction(store: QueryStore, task_id: str) -> None:
    draft = store.request_query(task_id, APP_MONTHLY_SQL)
    message, run = said(store, EXECUTE, task_id), store.start_run(SESSION)
    query = confirm(store, draft, message, run)
    assert (query.state, query.authorized_version) == (S.QUEUED, 1)
    assert query.confirmation_message_id == query.budget_message_id == message
    assert store.message(message).applied_to_task
    last = store.events(query.query_id)[-1]
    assert (last["trigger"], last["params"], last["from"], last["to"]) == (
        "confirm", CONFIRM_PARAMS, "awaiting_confirmation", "queued")


@pytest.mark.rule("Q7")
def test_a_worker_cannot_claim_a_draft_before_its_confirmation_commits(
        store: QueryStore, platform: SyntheticPlatform, task_id: str) -> None:
    draft = store.request_query(task_id, APP_MONTHLY_SQL)
    with Worker(store.path, platform, "w", 30) as worker:
        assert worker.claim() is None
        with pytest.raises(NotAllowed, match="awaiting_confirmation; only authorized"):
            worker.claim(draft.query_id)
        confirm(store, draft, said(store, EXECUTE, task_id), store.start_run(SESSION))
        assert worker.claim() == draft.query_id


@pytest.mark.rule("Q8")
def test_a_repeated_confirmation_returns_the_current_state_and_moves_nothing(
        store: QueryStore, task_id: str) -> None:
    query = queued(store, task_id)
    log = store.events(query.query_id)
    later = said(store, EXECUTE, task_id)
    again = confirm(store, query, later, store.start_run(SESSION))
    assert again == store.query(query.query_id) == query
    assert again.budget_message_id != later, "no budget moved to another message"
    assert not store.message(later).applied_to_task
    # The retry is witnessed in the log (the model's re-confirmation leaves an event), as a
    # step from queued to queued: it moves nothing.
    after = store.events(query.query_id)
    assert after[:len(log)] == log and len(after) == len(log) + 1
    assert (after[-1]["trigger"], after[-1]["from"], after[-1]["to"]) == ("confirm", "queued",
                                                                          "queued")
    with pytest.raises(StaleVersion):  # version checks come first
        store.confirm(query.query_id, 7, 1, EXECUTE, later, store.start_run(SESSION))


@pytest.mark.rule("Q9")
def test_a_newer_undecided_message_blocks_first_confirmation(store: QueryStore, task_id: str) -> None:
    draft = store.request_query(task_id, APP_MONTHLY_SQL)
    message, run = said(store, EXECUTE, task_id), store.start_run(SESSION)
    newer = said(store, "先别执行，改成按天")
    with pytest.raises(MessagePending, match=f"'{newer}' \\(pending\\)"):
        confirm(store, draft, message, run)
    assert store.query(draft.query_id).state is S.AWAITING
    store.attribute_message(newer, task_id)
    assert confirm(store, draft, message, run).state is S.QUEUED


@pytest.mark.rule("Q9")
def test_a_message_after_the_confirmation_cannot_rewrite_it(store: QueryStore, task_id: str) -> None:
    query = queued(store, task_id)
    newer = said(store, "先别执行，改成按天", task_id)
    store.update_conditions(task_id, 1, {"granularity": "day"})
    after = store.query(query.query_id)
    assert (after.state, after.authorized_version, after.budget_message_id) == (
        S.QUEUED, 1, query.budget_message_id)
    assert not store.message(newer).applied_to_task


@pytest.mark.rule("Q10")
def test_a_failed_attribution_blocks_and_unblocking_executes_nothing_by_itself(
        store: QueryStore, task_id: str) -> None:
    draft = store.request_query(task_id, APP_MONTHLY_SQL)
    message, run = said(store, EXECUTE, task_id), store.start_run(SESSION)
    timed_out = said(store, "再按天展开")
    store.fail_message(timed_out)
    with pytest.raises(MessagePending, match="\\(failed\\)"):
        confirm(store, draft, message, run)
    store.attribute_message(timed_out, task_id)
    assert store.query(draft.query_id).state is S.AWAITING, "unblocking does not execute"
    assert confirm(store, draft, message, run).state is S.QUEUED


@pytest.mark.rule("Q10")
def test_an_unattributed_confirming_message_is_pending(store: QueryStore, task_id: str) -> None:
    draft = store.request_query(task_id, APP_MONTHLY_SQL)
    with pytest.raises(MessagePending, match="not yet attributed"):
        confirm(store, draft, said(store, EXECUTE), store.start_run(SESSION))


@pytest.mark.rule("Q25")
def test_a_result_notification_never_authorizes(store: QueryStore, platform: SyntheticPlatform,
                                                task_id: str) -> None:
    done = queued(store, task_id)
    settle(store, platform, done.query_id)
    (note,) = store.notifications(task_id)
    draft = store.request_query(task_id, APP_DAILY_SQL)
    run = store.start_run(SESSION)
    with pytest.raises(InvalidInput, match="result notification and carries no user intent"):
        confirm(store, draft, note.message_id, run, quote=note.text)
    user_message = said(store, EXECUTE, task_id)
    with pytest.raises(InvalidInput, match="is not the whole message"):
        confirm(store, draft, user_message, run, quote=note.text)
    assert store.query(draft.query_id).state is S.AWAITING


# --------------------------------------------------------------------------- cancel (Q19–Q21)
@pytest.mark.rule("Q20")
@pytest.mark.parametrize("authorized", [False, True])
def test_a_query_never_submitted_is_cancelled_locally_at_once(store: QueryStore, task_id: str,
                                                              authorized: bool) -> None:
    query = queued(store, task_id) if authorized else store.request_query(task_id, APP_MONTHLY_SQL)
    cancelled = store.cancel(query.query_id)
    assert (cancelled.state, cancelled.cancel_state, cancelled.submissions) == (
        S.CANCELLED, "none", 0)
    assert triggers(store, query.query_id)[-1] == "cancel"
    with pytest.raises(NotAllowed, match="it is cancelled; it is settled, there is nothing"):
        store.cancel(query.query_id)


@pytest.mark.rule("Q19")
@pytest.mark.rule("Q21")
def test_from_submitting_on_a_cancel_is_only_a_request(store: QueryStore, platform: SyntheticPlatform,
                                                      task_id: str) -> None:
    query = queued(store, task_id)
    with Worker(store.path, platform, "w", 30) as worker:
        worker.claim(query.query_id)
        worker.begin_submit(query.query_id)
    requested = store.cancel(query.query_id)
    assert (requested.state, requested.cancel_state) == (S.SUBMITTING, "requested")
    last = store.events(query.query_id)[-1]
    assert (last["trigger"], last["from"], last["to"]) == ("cancel", "submitting", "submitting")
    with pytest.raises(NotAllowed, match="a cancel is already requested"):
        store.cancel(query.query_id)


# --------------------------------------------------------------------------- status (Q26)
@pytest.mark.rule("Q26")
def test_status_for_the_confirming_message_gives_no_result(store: QueryStore,
                                                           platform: SyntheticPlatform,
                                                           task_id: str) -> None:
    query = queued(store, task_id)
    settle(store, platform, query.query_id)
    assert query.confirmation_message_id is not None
    own = store.status(query.query_id, query.confirmation_message_id)
    assert (own.state, own.result, own.result_withheld) == (S.SUCCEEDED, None, True)
    other = store.status(query.query_id, said(store, "结果呢？", task_id))
    assert other.result == {"columns": ["channel", "net_revenue_yuan"], "rows": [["app", 16.0]]}


# --------------------------------------------------------------------------- messages (M1)
@pytest.mark.rule("M1")
def test_a_recovered_message_keeps_its_original_request_clock(store: QueryStore) -> None:
    first = store.receive_message(SESSION, USER, "上个月的净收入", CLOCK, message_id="m-1")
    next_month = (CLOCK[0] + timedelta(days=31), CLOCK[1])
    again = store.receive_message(SESSION, USER, "上个月的净收入", next_month, message_id="m-1")
    assert again == first and again.request_clock_utc == "2026-02-03T02:00:00.000000+00:00"
    assert again.time_zone == "Asia/Shanghai"
    with pytest.raises(IdempotencyConflict, match="'m-1' was received with other content"):
        store.receive_message(SESSION, USER, "这个月的净收入", CLOCK, message_id="m-1")


# --------------------------------------------------------------------------- the log
def test_the_log_exports_as_ordered_trace_lines(store: QueryStore, task_id: str,
                                                tmp_path: Path) -> None:
    query = queued(store, task_id)
    store.request_query(task_id, APP_DAILY_SQL)
    out = tmp_path / "trace.jsonl"
    assert export_jsonl(store.path, out) == 3
    lines = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    keys = [(line["instance"], line["seq"]) for line in lines]
    assert keys == sorted(keys)
    mine = [line for line in lines if line["instance"] == query.query_id]
    assert [line["trigger"] for line in mine] == ["check_passed", "confirm"]
    assert set(mine[0]) == {"schema", "machine", "instance", "seq", "trigger", "params", "from",
                            "to", "vars", "at"}
    assert (mine[0]["schema"], mine[0]["machine"]) == ("settled.trace/1", "query")
    assert mine[1]["vars"] == {"submissions": 0, "cancel_state": "none", "lease_epoch": 0,
                               "submit_epoch": 0, "task_version": 1, "authorized_version": 1,
                               "phase_moved": False}


def test_the_event_log_is_append_only(store: QueryStore, task_id: str) -> None:
    query = store.request_query(task_id, APP_MONTHLY_SQL)
    conn = sqlite3.connect(store.path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("UPDATE query_events SET trigger = 'x' WHERE query_id = ?",
                         (query.query_id,))
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("DELETE FROM query_events")
    finally:
        conn.close()


def test_observe_speaks_the_models_terms_like_the_log(store: QueryStore, task_id: str) -> None:
    store.update_conditions(task_id, 1, {"channel": "app"})
    query = queued(store, task_id)
    store.update_conditions(task_id, 2, {"granularity": "day"})
    seen = store.observe(query.query_id)
    assert seen == {"state": "queued", **store.events(query.query_id)[-1]["vars"]}
    assert (seen["task_version"], seen["authorized_version"]) == (2, 1), "counted from the draft"


# --------------------------------------------------------------------------- one commit (Q9)
@pytest.mark.rule("Q9")
def test_a_message_received_with_its_task_is_attributed_in_the_same_commit(
        store: QueryStore, task_id: str) -> None:
    message = store.receive_message(SESSION, USER, EXECUTE, CLOCK, task_id=task_id)
    assert (message.attribution, message.task_id) == ("attributed", task_id)
    # A redelivery under the same id and task changes nothing.
    again = store.receive_message(SESSION, USER, EXECUTE, CLOCK, message_id=message.message_id,
                                  task_id=task_id)
    assert again == message


def test_a_message_received_with_another_sessions_task_is_refused_and_not_stored(
        store: QueryStore, task_id: str) -> None:
    with pytest.raises(NotAllowed, match="another session or user"):
        store.receive_message("s2", "u2", EXECUTE, CLOCK, message_id="m-x", task_id=task_id)
    with pytest.raises(NotFound):
        store.message("m-x")
