"""The synthetic platform (Q18): its ledger, its faults, its sandbox and the seed's 16 yuan."""

from __future__ import annotations

import math
import multiprocessing
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from settled.impl.platform._orders_data import STORY_APP_ORDERS, Sandbox, SqlRefused, generate
from settled.impl.platform._platform import (
    APP_DAILY_SQL,
    APP_MONTHLY_SQL,
    MAX_SQL_CHARS,
    MONTHLY_BY_CHANNEL_SQL,
    SyntheticPlatform,
)
from settled.impl.platform._platform_answers import (
    CancelAnswer,
    CheckAnswer,
    Fault,
    LookupAnswer,
    PlatformStatus,
    SubmitAnswer,
)
from settled.impl.shared._errors import (
    EnvironmentFault,
    InvalidInput,
    NotAllowed,
    NotFound,
    PlatformUnavailable,
)

# fork keeps the children cheap; each child opens its own platform on the directory.
FORK = multiprocessing.get_context("fork")

RUNNING = PlatformStatus.RUNNING
SUCCEEDED = PlatformStatus.SUCCEEDED


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[SyntheticPlatform]:
    with SyntheticPlatform(tmp_path / "platform") as opened:
        yield opened


def unavailable_text(call: Any) -> tuple[type[BaseException], str]:
    with pytest.raises(PlatformUnavailable) as caught:
        call()
    return type(caught.value), str(caught.value)


def orders_snapshot(platform: SyntheticPlatform) -> list[tuple[Any, ...]]:
    with sqlite3.connect(platform.orders_path) as conn:
        rows = conn.execute("SELECT * FROM orders ORDER BY order_id").fetchall()
        return rows + conn.execute("SELECT * FROM refunds ORDER BY refund_id").fetchall()


# --- de-duplication by query_id + payload fingerprint ----------------------------------------


@pytest.mark.rule("Q18")
def test_same_id_and_payload_returns_the_existing_submission(platform: SyntheticPlatform) -> None:
    first = platform.submit("q1", APP_MONTHLY_SQL)
    again = platform.submit("q1", APP_MONTHLY_SQL)
    assert first == SubmitAnswer(accepted=True, status=RUNNING)
    assert again == SubmitAnswer(accepted=True, deduplicated=True, status=RUNNING)
    assert platform.submissions_received("q1") == 2
    assert platform.lookup("q1").submissions_received == 2


@pytest.mark.rule("Q18")
def test_dedupe_answers_with_the_current_status_of_the_existing_submission(
    platform: SyntheticPlatform,
) -> None:
    platform.submit("q1", APP_MONTHLY_SQL)
    platform.complete("q1")
    assert platform.submit("q1", APP_MONTHLY_SQL).status is SUCCEEDED
    assert platform.executions("q1") == 1


@pytest.mark.rule("Q18")
@pytest.mark.rule("Q1")
@pytest.mark.parametrize(("sql", "extra"), [(APP_DAILY_SQL, ""), (APP_MONTHLY_SQL, "v2")])
def test_same_id_with_another_payload_is_refused(
    platform: SyntheticPlatform, sql: str, extra: str
) -> None:
    platform.submit("q1", APP_MONTHLY_SQL)
    answer = platform.submit("q1", sql, extra)
    assert not answer.accepted and answer.status is None
    assert answer.reason is not None
    assert "query_id 'q1' was submitted with another payload" in answer.reason
    platform.complete("q1")
    assert platform.result("q1").rows == (("app", 16.0),)  # the first payload is what ran


# --- lost response vs undelivered request -----------------------------------------------------


@pytest.mark.rule("Q18")
@pytest.mark.rule("Q14")
def test_lost_response_stores_the_submission_and_raises_platform_unavailable(
    platform: SyntheticPlatform,
) -> None:
    platform.inject(Fault.LOST_RESPONSE)
    unavailable_text(lambda: platform.submit("q1", APP_MONTHLY_SQL))
    assert platform.lookup("q1") == LookupAnswer(found=True, status=RUNNING, submissions_received=1)
    assert platform.pending_faults() == {}


@pytest.mark.rule("Q14")
@pytest.mark.rule("Q15")
def test_undelivered_request_stores_nothing_and_looks_exactly_like_a_lost_response(
    tmp_path: Path,
) -> None:
    """The caller gets the same type and the same text; only a lookup tells them apart."""
    lost, undelivered = SyntheticPlatform(tmp_path / "a"), SyntheticPlatform(tmp_path / "b")
    lost.inject(Fault.LOST_RESPONSE)
    undelivered.inject(Fault.UNDELIVERED)
    seen_lost = unavailable_text(lambda: lost.submit("q1", APP_MONTHLY_SQL))
    seen_undelivered = unavailable_text(lambda: undelivered.submit("q1", APP_MONTHLY_SQL))
    assert seen_lost == seen_undelivered
    assert undelivered.lookup("q1") == LookupAnswer(found=False, status=None, submissions_received=0)
    assert undelivered.submit("q1", APP_MONTHLY_SQL) == SubmitAnswer(accepted=True, status=RUNNING)


def test_a_lost_response_on_a_dedupe_hit_still_keeps_one_submission(
    platform: SyntheticPlatform,
) -> None:
    platform.submit("q1", APP_MONTHLY_SQL)
    platform.inject(Fault.LOST_RESPONSE)
    unavailable_text(lambda: platform.submit("q1", APP_MONTHLY_SQL))
    assert platform.submit("q1", APP_MONTHLY_SQL).deduplicated
    assert platform.submissions_received("q1") == 3


@pytest.mark.rule("Q17")
def test_reject_fault_is_an_explicit_rejection_that_stores_nothing(
    platform: SyntheticPlatform,
) -> None:
    platform.inject(Fault.REJECT)
    answer = platform.submit("q1", APP_MONTHLY_SQL)
    assert answer == SubmitAnswer(accepted=False, reason="permission denied for table orders")
    assert not platform.lookup("q1").found
    assert platform.executions("q1") == 0


@pytest.mark.rule("Q14")
@pytest.mark.parametrize(("before", "after", "kind"), [
    (Fault.UNDELIVERED, Fault.LOST_RESPONSE, "timeout"),
    (Fault.RESET_BEFORE, Fault.RESET_AFTER, "reset"),
])
def test_every_fault_kind_reads_the_same_stored_or_not(
    tmp_path: Path, before: Fault, after: Fault, kind: str,
) -> None:
    stored, unstored = SyntheticPlatform(tmp_path / "a"), SyntheticPlatform(tmp_path / "b")
    stored.inject(after)
    unstored.inject(before)
    seen_after = unavailable_text(lambda: stored.submit("q1", APP_MONTHLY_SQL))
    seen_before = unavailable_text(lambda: unstored.submit("q1", APP_MONTHLY_SQL))
    assert seen_after == seen_before
    assert stored.status("q1") is RUNNING and unstored.status("q1") is None
    with pytest.raises(PlatformUnavailable) as caught:
        stored.inject(after)
        stored.submit("q1", APP_MONTHLY_SQL)
    assert caught.value.kind == kind


@pytest.mark.rule("Q14")
@pytest.mark.parametrize(("fault", "kind", "stored"), [
    (Fault.MALFORMED, "malformed", True),
    (Fault.ERROR, "error", False),
    (Fault.BUSY, "busy", False),
])
def test_malformed_error_and_busy_answers_say_nothing_about_the_submission(
    platform: SyntheticPlatform, fault: Fault, kind: str, stored: bool,
) -> None:
    platform.inject(fault)
    with pytest.raises(PlatformUnavailable, match="may or may not have stored it") as caught:
        platform.submit("q1", APP_MONTHLY_SQL)
    assert caught.value.kind == kind
    assert (platform.status("q1") is RUNNING) == stored
    assert platform.pending_faults() == {}


@pytest.mark.rule("Q15")
@pytest.mark.parametrize(("fault", "kind"), [
    (Fault.LOOKUP_TIMEOUT, "timeout"), (Fault.RESET_BEFORE, "reset"), (Fault.RESET_AFTER, "reset"),
    (Fault.MALFORMED, "malformed"), (Fault.ERROR, "error"), (Fault.BUSY, "busy"),
])
def test_every_lookup_fault_learns_nothing(tmp_path: Path, fault: Fault, kind: str) -> None:
    platform = SyntheticPlatform(tmp_path, auto_complete_after_polls=1)
    platform.submit("q1", APP_MONTHLY_SQL)
    platform.inject(fault)
    with pytest.raises(PlatformUnavailable, match="stays unknown") as caught:
        platform.lookup("q1")
    assert caught.value.kind == kind
    assert platform.executions("q1") == 0  # not a poll
    assert platform.lookup("q1").status is SUCCEEDED


# --- lookup ---------------------------------------------------------------------------------


@pytest.mark.rule("Q15")
def test_lookup_timeout_raises_and_learns_nothing(tmp_path: Path) -> None:
    platform = SyntheticPlatform(tmp_path, auto_complete_after_polls=1)
    platform.submit("q1", APP_MONTHLY_SQL)
    platform.inject(Fault.LOOKUP_TIMEOUT)
    with pytest.raises(PlatformUnavailable, match="stays unknown"):
        platform.lookup("q1")
    assert platform.executions("q1") == 0  # the timed-out lookup was not a poll
    assert platform.lookup("q1").status is SUCCEEDED


@pytest.mark.rule("Q15")
def test_lookup_of_an_unknown_id_is_an_explicit_not_found(platform: SyntheticPlatform) -> None:
    assert platform.lookup("never-sent") == LookupAnswer(
        found=False, status=None, submissions_received=0
    )


def test_auto_complete_really_runs_the_sql_once_after_n_polls(tmp_path: Path) -> None:
    platform = SyntheticPlatform(tmp_path, auto_complete_after_polls=3)
    platform.submit("q1", APP_MONTHLY_SQL)
    assert [platform.lookup("q1").status for _ in range(4)] == [RUNNING, RUNNING, SUCCEEDED, SUCCEEDED]
    assert platform.executions("q1") == 1
    assert platform.result("q1").rows == (("app", 16.0),)


@pytest.mark.parametrize("polls", [0, -1, True, 1.5])
def test_auto_complete_needs_a_positive_int(tmp_path: Path, polls: Any) -> None:
    with pytest.raises(InvalidInput, match=repr(polls)):
        SyntheticPlatform(tmp_path, auto_complete_after_polls=polls)


# --- cancel ---------------------------------------------------------------------------------


@pytest.mark.rule("Q21")
def test_cancel_of_a_running_submission_is_evidence_and_nothing_runs(
    platform: SyntheticPlatform,
) -> None:
    platform.submit("q1", APP_MONTHLY_SQL)
    assert platform.cancel("q1") == CancelAnswer(found=True, status=PlatformStatus.CANCELLED)
    assert platform.complete("q1") is PlatformStatus.CANCELLED
    assert platform.executions("q1") == 0
    with pytest.raises(NotAllowed, match="cancelled"):
        platform.result("q1")


@pytest.mark.rule("Q21")
def test_cancel_after_success_leaves_the_success_standing(platform: SyntheticPlatform) -> None:
    platform.submit("q1", APP_MONTHLY_SQL)
    platform.complete("q1")
    assert platform.cancel("q1") == CancelAnswer(found=True, status=SUCCEEDED)
    assert platform.lookup("q1").status is SUCCEEDED
    assert platform.result("q1").rows == (("app", 16.0),)


@pytest.mark.rule("Q21")
def test_cancel_timeout_changes_nothing(platform: SyntheticPlatform) -> None:
    platform.submit("q1", APP_MONTHLY_SQL)
    platform.inject(Fault.CANCEL_TIMEOUT)
    with pytest.raises(PlatformUnavailable, match="only on evidence"):
        platform.cancel("q1")
    assert platform.lookup("q1").status is RUNNING


def test_cancel_of_an_unknown_id_is_not_found(platform: SyntheticPlatform) -> None:
    assert platform.cancel("never-sent") == CancelAnswer(found=False, status=None)


# --- execution and results ------------------------------------------------------------------


@pytest.mark.rule("Q18")
def test_executions_stay_one_after_repeated_submits_and_completes(
    platform: SyntheticPlatform,
) -> None:
    for _ in range(3):
        platform.submit("q1", APP_MONTHLY_SQL)
        assert platform.complete("q1") is SUCCEEDED
        platform.lookup("q1")
    assert platform.executions("q1") == 1
    assert platform.submissions_received("q1") == 3


def test_exec_fail_fault_fails_the_next_completion_with_its_text(
    platform: SyntheticPlatform,
) -> None:
    platform.submit("q1", APP_MONTHLY_SQL)
    platform.inject(Fault.EXEC_FAIL)
    assert platform.complete("q1") is PlatformStatus.FAILED
    answer = platform.lookup("q1")
    assert answer.status is PlatformStatus.FAILED and "runtime error" in (answer.error or "")
    with pytest.raises(NotAllowed, match="runtime error"):
        platform.result("q1")
    assert platform.executions("q1") == 1


def test_a_query_that_runs_away_fails_on_the_execution_budget(platform: SyntheticPlatform) -> None:
    endless = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT max(x) FROM n"
    platform.submit("q1", endless)
    assert platform.complete("q1") is PlatformStatus.FAILED
    assert "execution budget" in (platform.lookup("q1").error or "")


@pytest.mark.rule("Q3")
def test_check_validates_without_running_the_query(platform: SyntheticPlatform) -> None:
    """The same endless query passes the check: planning it never reached the first row."""
    endless = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT max(x) FROM n"
    assert platform.check(endless) == CheckAnswer(ok=True, reason=None, columns=("max(x)",))


def test_result_of_a_running_or_unknown_query_is_a_typed_error(
    platform: SyntheticPlatform,
) -> None:
    platform.submit("q1", APP_MONTHLY_SQL)
    with pytest.raises(NotAllowed, match="'q1' has no result: it is running"):
        platform.result("q1")
    with pytest.raises(NotFound, match="'nope'"):
        platform.result("nope")
    with pytest.raises(NotFound, match="'nope'"):
        platform.complete("nope")


# --- the seed's story -------------------------------------------------------------------------


def run(platform: SyntheticPlatform, query_id: str, sql: str) -> tuple[tuple[Any, ...], ...]:
    assert platform.submit(query_id, sql).accepted
    assert platform.complete(query_id) is SUCCEEDED
    return platform.result(query_id).rows


def test_january_net_revenue_by_channel_has_the_app_at_16_yuan(
    platform: SyntheticPlatform,
) -> None:
    rows = dict(run(platform, "q1", MONTHLY_BY_CHANNEL_SQL))
    assert sorted(rows) == ["app", "store", "web"]
    assert rows["app"] == 16.0
    assert min(rows["store"], rows["web"]) > 16.0
    assert platform.check(MONTHLY_BY_CHANNEL_SQL).columns == ("channel", "net_revenue_yuan")


def test_app_only_january_query_returns_exactly_16_yuan(platform: SyntheticPlatform) -> None:
    assert run(platform, "q2", APP_MONTHLY_SQL) == (("app", 16.0),)


def test_app_daily_january_totals_add_up_to_the_16_yuan(platform: SyntheticPlatform) -> None:
    rows = run(platform, "q3", APP_DAILY_SQL)
    assert [day for day, _ in rows] == ["2026-01-03", "2026-01-09", "2026-01-15", "2026-01-22"]
    assert all(day.startswith("2026-01") for day, _ in rows)
    assert math.isclose(sum(value for _, value in rows), 16.0)


def test_orders_data_are_generated_deterministically_and_stay_small(tmp_path: Path) -> None:
    assert generate() == generate()
    first, second = SyntheticPlatform(tmp_path / "a"), SyntheticPlatform(tmp_path / "b")
    assert orders_snapshot(first) == orders_snapshot(second)
    orders, refunds = generate()
    assert 200 <= len(orders) + len(refunds) <= 600
    assert {o.created_at[:7] for o in orders} == {"2025-12", "2026-01", "2026-02"}
    app_january = {o.created_at for o in orders if o.channel == "app" and o.created_at[:7] == "2026-01"}
    assert app_january == {day for day in STORY_APP_ORDERS if day.startswith("2026-01")}


# --- check: bad SQL is an answer with a reason ----------------------------------------------

BAD_SQL = [
    pytest.param("", "empty", id="empty"),
    pytest.param("  -- nothing\n ; ", "empty", id="only-comment"),
    pytest.param("SELECT 1 " + "x" * MAX_SQL_CHARS, "limit is 20,000", id="oversized"),
    pytest.param(42, "must be a str, got int 42", id="not-str"),
    pytest.param(None, "must be a str, got NoneType", id="none"),
    pytest.param("SELECT 1; SELECT 2", "2 statements", id="two-statements"),
    pytest.param("SELECT 1; DROP TABLE orders", "2 statements", id="select-then-drop"),
    pytest.param("INSERT INTO orders VALUES (1)", "starts with 'INSERT'", id="insert"),
    pytest.param("update orders SET amount_fen = 0", "starts with 'UPDATE'", id="update"),
    pytest.param("DELETE FROM refunds", "starts with 'DELETE'", id="delete"),
    pytest.param("DROP TABLE orders", "starts with 'DROP'", id="drop"),
    pytest.param("ATTACH 'x.db' AS x", "starts with 'ATTACH'", id="attach"),
    pytest.param("PRAGMA writable_schema = 1", "starts with 'PRAGMA'", id="pragma"),
    pytest.param("/* hi */ VACUUM", "starts with 'VACUUM'", id="vacuum-after-comment"),
    pytest.param(
        "WITH d AS (SELECT 1) DELETE FROM orders", "not read-only: it needs DELETE", id="with-delete"
    ),
    pytest.param("SELECT * FROM customers", "no such table: customers", id="unknown-table"),
    pytest.param("SELECT nope FROM orders", "no such column: nope", id="unknown-column"),
    pytest.param("SELECT * FROM sqlite_master", "'sqlite_master' is not part of", id="schema-table"),
    pytest.param("SELECT * FROM dataset_info", "'dataset_info' is not part of", id="bookkeeping"),
    pytest.param("SELECT 1) UNION SELECT (2", "syntax error", id="unbalanced"),
]


@pytest.mark.rule("Q3")
@pytest.mark.parametrize(("sql", "reason"), BAD_SQL)
def test_check_rejects_bad_sql_with_a_reason_naming_the_problem(
    platform: SyntheticPlatform, sql: Any, reason: str
) -> None:
    answer = platform.check(sql)
    assert not answer.ok and answer.columns == ()
    assert reason in (answer.reason or "")


@pytest.mark.rule("Q17")
@pytest.mark.parametrize(
    ("sql", "reason"),
    [p for p in BAD_SQL if p.id in {"empty", "oversized", "not-str", "select-then-drop", "insert",
                                    "with-delete", "unknown-table"}],
)
def test_submit_with_bad_sql_is_an_explicit_rejection(
    platform: SyntheticPlatform, sql: Any, reason: str
) -> None:
    answer = platform.submit("q1", sql)
    assert not answer.accepted and reason in (answer.reason or "")
    assert not platform.lookup("q1").found
    assert platform.submissions_received("q1") == 1


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1;",
        "SELECT 'a;b' -- trailing; comment",
        "select [order_id], \"channel\" from orders /* done */ ;",
        "WITH t AS (SELECT amount_fen FROM orders) SELECT count(*) FROM t",
    ],
)
def test_check_accepts_one_read_only_statement_and_names_its_columns(
    platform: SyntheticPlatform, sql: str
) -> None:
    answer = platform.check(sql)
    assert answer.ok and answer.reason is None and answer.columns


def test_crafted_sql_cannot_change_the_data(platform: SyntheticPlatform) -> None:
    """Even past the shape check (straight into the sandbox), a write is refused."""
    before = orders_snapshot(platform)
    sandbox = Sandbox(platform.orders_path)
    attempts = [
        "DELETE FROM orders",
        "UPDATE orders SET amount_fen = 1",
        "WITH d AS (SELECT 1) INSERT INTO refunds SELECT 999, 1, 1, '2026-01-01' FROM d",
        "CREATE TABLE evil (x)",
        "ATTACH DATABASE ':memory:' AS evil",
        "PRAGMA journal_mode = DELETE",
    ]
    for sql in attempts:
        with pytest.raises(SqlRefused):
            sandbox.run(sql)
    sandbox.close()
    assert orders_snapshot(platform) == before


@pytest.mark.parametrize("query_id", ["", "   ", None, 7, b"q1"])
def test_a_query_id_that_is_not_a_non_empty_str_is_invalid_input(
    platform: SyntheticPlatform, query_id: Any
) -> None:
    calls = [
        lambda: platform.submit(query_id, APP_MONTHLY_SQL),
        lambda: platform.lookup(query_id),
        lambda: platform.cancel(query_id),
        lambda: platform.complete(query_id),
        lambda: platform.result(query_id),
    ]
    for call in calls:
        with pytest.raises(InvalidInput, match=re.escape(f"got {query_id!r}")):
            call()


def test_errors_sort_by_whose_fault_it_was() -> None:
    assert issubclass(PlatformUnavailable, EnvironmentFault)
    assert issubclass(InvalidInput, ValueError)


def test_answers_refuse_contradictions_when_built() -> None:
    with pytest.raises(InvalidInput):
        SubmitAnswer(accepted=False)
    with pytest.raises(InvalidInput):
        LookupAnswer(found=True, status=None, submissions_received=0)
    with pytest.raises(InvalidInput):
        CheckAnswer(ok=True, reason="but why")


# --- faults and processes -------------------------------------------------------------------


def test_faults_persist_across_instances_on_the_same_directory(tmp_path: Path) -> None:
    SyntheticPlatform(tmp_path).inject(Fault.LOST_RESPONSE, count=2)
    other = SyntheticPlatform(tmp_path)
    assert other.pending_faults() == {Fault.LOST_RESPONSE: 2}
    for query_id in ("q1", "q2"):
        unavailable_text(lambda q=query_id: other.submit(q, APP_MONTHLY_SQL))
    assert other.submit("q3", APP_MONTHLY_SQL).accepted
    assert SyntheticPlatform(tmp_path).pending_faults() == {}


def _submit_and_complete(directory: Path, barrier: Any, answers: Any) -> None:
    platform = SyntheticPlatform(directory)
    barrier.wait(timeout=10)
    try:
        answer = platform.submit("q1", APP_MONTHLY_SQL)
        answers.put(("answer", answer.accepted, answer.deduplicated))
    except PlatformUnavailable:
        answers.put(("unavailable", None, None))
    platform.complete("q1")


@pytest.mark.rule("Q18")
def test_two_processes_submitting_the_same_id_store_one_submission_and_run_it_once(
    tmp_path: Path,
) -> None:
    """The parent also arms one LOST_RESPONSE: exactly one child consumes it."""
    platform = SyntheticPlatform(tmp_path)  # files exist before the children race
    platform.inject(Fault.LOST_RESPONSE)
    barrier, answers = FORK.Barrier(2), FORK.Queue()
    children = [
        FORK.Process(target=_submit_and_complete, args=(tmp_path, barrier, answers))
        for _ in range(2)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=20)
    assert [child.exitcode for child in children] == [0, 0]
    seen = sorted([answers.get(timeout=5), answers.get(timeout=5)], key=str)
    assert ("unavailable", None, None) in seen
    assert platform.submissions_received("q1") == 2
    assert platform.lookup("q1").status is SUCCEEDED
    assert platform.executions("q1") == 1
    assert platform.pending_faults() == {}
