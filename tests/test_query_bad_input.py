"""Every bad call is a typed error naming the value and the fix, and changes no row.

One world is built per module (a task at condition version 2 with drafts in
every interesting state, a settled query with its notification, a running
query with a cancel request). Each case dumps every table of the store and of
the platform ledger, makes one bad call, checks the error's type and text,
and compares the dumps row for row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from settled.impl.platform._platform import APP_DAILY_SQL, APP_MONTHLY_SQL, SyntheticPlatform
from settled.impl.query._events import export_jsonl
from settled.impl.query._store import Query, QueryStore
from settled.impl.query._worker import Worker
from settled.impl.shared._crash import CrashPoints
from settled.impl.shared._errors import (
    CallerError,
    IdempotencyConflict,
    InvalidInput,
    MessagePending,
    NotAllowed,
    NotFound,
    StaleLease,
    StaleVersion,
)

SESSION, USER, EXECUTE = "s1", "u1", "只看 app，再执行"
CLOCK = (datetime(2026, 2, 3, 2, tzinfo=UTC), "Asia/Shanghai")


@dataclass
class World:
    store: QueryStore
    platform: SyntheticPlatform
    worker: Worker  # w1: its lease on ``running`` was taken over
    owner: Worker  # w2: holds ``running`` now
    task: str
    run: str
    old_run: str
    execute: str  # the user's attributed "execute" message
    awaiting: Query
    cancelled: Query
    superseded: Query
    invalidated: Query
    done: Query
    running: Query
    note_message: str
    note_text: str
    other_session: str
    other_user: str
    blocked_task: str
    blocked_draft: Query
    blocked_execute: str
    blocked_run: str


def _said(store: QueryStore, text: str, task: str | None, session: str = SESSION,
          user: str = USER) -> str:
    message = store.receive_message(session, user, text, CLOCK)
    if task is not None:
        store.attribute_message(message.message_id, task)
    return message.message_id


def _build(root: Path) -> World:
    platform = SyntheticPlatform(root / "platform", auto_complete_after_polls=1)
    store = QueryStore(root / "store.db", platform)
    task = store.create_task(USER, SESSION, {"month": "2026-01"}).task_id
    invalidated = store.request_query(task, APP_MONTHLY_SQL)
    store.update_conditions(task, 1, {"channel": "app"})
    execute = _said(store, EXECUTE, task)
    old_run = store.start_run(SESSION)
    run = store.start_run(SESSION)

    def confirmed() -> Query:
        draft = store.request_query(task, APP_MONTHLY_SQL)
        return store.confirm(draft.query_id, draft.draft_version, 2, EXECUTE, execute, run)

    cancelled = store.request_query(task, APP_MONTHLY_SQL)
    store.cancel(cancelled.query_id)
    superseded = store.request_query(task, APP_DAILY_SQL)
    store.request_query(task, APP_MONTHLY_SQL, replaces_query_id=superseded.query_id)
    done = confirmed()
    worker = Worker(store.path, platform, "w1", 30)
    worker.run_until_idle()
    running = confirmed()
    worker.claim(running.query_id)
    worker.begin_submit(running.query_id)
    worker.call_submit(running.query_id)
    store.cancel(running.query_id)
    later = datetime.now(UTC) + timedelta(hours=1)
    owner = Worker(store.path, platform, "w2", 30, clock=lambda: later)
    owner.claim(running.query_id)  # w1's lease expired: w2 takes over (epoch 2)
    awaiting = store.request_query(task, APP_MONTHLY_SQL)
    (note,) = store.notifications(task)
    other_task = store.create_task("u2", "s2", {}).task_id
    same_session_task = store.create_task("u2", SESSION, {}).task_id
    # A second session whose newer message is still undecided (Q9).
    blocked_task = store.create_task(USER, "s3", {}).task_id
    blocked_draft = store.request_query(blocked_task, APP_MONTHLY_SQL)
    blocked_execute = _said(store, EXECUTE, blocked_task, session="s3")
    _said(store, "等一下", None, session="s3")
    return World(
        store=store, platform=platform, worker=worker, owner=owner, task=task, run=run, old_run=old_run,
        execute=execute, awaiting=awaiting, cancelled=store.query(cancelled.query_id),
        superseded=store.query(superseded.query_id), invalidated=store.query(invalidated.query_id),
        done=store.query(done.query_id), running=store.query(running.query_id),
        note_message=note.message_id, note_text=note.text,
        other_session=_said(store, EXECUTE, other_task, session="s2", user="u2"),
        other_user=_said(store, EXECUTE, same_session_task, user="u2"),
        blocked_task=blocked_task, blocked_draft=blocked_draft, blocked_execute=blocked_execute,
        blocked_run=store.start_run("s3"))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    built = _build(tmp_path_factory.mktemp("bad-input"))
    yield built
    built.worker.close()
    built.owner.close()
    built.store.close()
    built.platform.close()


def dump(*paths: Path) -> dict[str, list[tuple[Any, ...]]]:
    tables: dict[str, list[tuple[Any, ...]]] = {}
    for path in paths:
        conn = sqlite3.connect(path)
        try:
            names = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            for name in names:
                rows = conn.execute(f"SELECT * FROM {name}").fetchall()
                tables[f"{path.name}:{name}"] = sorted(rows, key=repr)
        finally:
            conn.close()
    return tables


def confirm_with(w: World, query: Query | None = None, *, draft_version: Any = None,
                 condition_version: Any = None, quote: Any = EXECUTE, message: Any = None,
                 run: Any = None, query_id: Any = None) -> Any:
    q = query or w.awaiting
    return w.store.confirm(
        q.query_id if query_id is None else query_id,
        q.draft_version if draft_version is None else draft_version,
        q.condition_version if condition_version is None else condition_version,
        quote, w.execute if message is None else message, w.run if run is None else run)


Case = tuple[Callable[[World], Any], type[CallerError], tuple[str, ...]]

CASES: dict[str, Case] = {
    # unknown ids
    "confirm unknown query": (lambda w: confirm_with(w, query_id="q_nope"), NotFound,
                              ("'q_nope'", "request_query returned")),
    "confirm unknown message": (lambda w: confirm_with(w, message="msg_nope"), NotFound,
                                ("'msg_nope'", "receive_message returned")),
    "confirm unknown run": (lambda w: confirm_with(w, run="run_nope"), NotFound,
                            ("'run_nope'", "start_run returned")),
    "draft for unknown task": (lambda w: w.store.request_query("task_nope", APP_MONTHLY_SQL),
                               NotFound, ("'task_nope'", "create_task returned")),
    "update unknown task": (lambda w: w.store.update_conditions("task_nope", 1, {"a": 1}),
                            NotFound, ("'task_nope'",)),
    "cancel unknown query": (lambda w: w.store.cancel("q_nope"), NotFound, ("'q_nope'",)),
    "status of unknown query": (lambda w: w.store.status("q_nope", w.execute), NotFound,
                                ("'q_nope'",)),
    "attribute unknown message": (lambda w: w.store.attribute_message("msg_nope", w.task),
                                  NotFound, ("'msg_nope'",)),
    "replace unknown draft": (lambda w: w.store.request_query(w.task, APP_MONTHLY_SQL, "q_nope"),
                              NotFound, ("'q_nope'",)),
    "export a missing store": (lambda w: export_jsonl(w.store.path.with_name("nope.db"),
                                                      w.store.path.with_name("out.jsonl")),
                               NotFound, ("nope.db", "existing store file")),
    # stale versions (Q4, T1)
    "stale draft version": (lambda w: confirm_with(w, draft_version=w.awaiting.draft_version - 1),
                            StaleVersion, ("is stale", "re-read the draft")),
    "stale condition version": (lambda w: confirm_with(w, condition_version=1), StaleVersion,
                                ("condition_version 1", "draft's 2", "re-read")),
    "stale expected version": (lambda w: w.store.update_conditions(w.task, 1, {"unit": "yuan"}),
                               StaleVersion, ("expected_version 1 is stale, current is 2", "re-read")),
    # the quote (Q5, Q25)
    "partial quote": (lambda w: confirm_with(w, quote="再执行"), InvalidInput,
                      ("'再执行'", "not the whole message", "entire message")),
    "notification text as quote": (lambda w: confirm_with(w, quote=w.note_text), InvalidInput,
                                   ("not the whole message",)),
    "notification as message": (lambda w: confirm_with(w, message=w.note_message, quote=w.note_text),
                                InvalidInput, ("result notification", "user's own message")),
    # confirming what cannot be confirmed
    "confirm a cancelled draft": (lambda w: confirm_with(w, w.cancelled), NotAllowed,
                                  ("it is cancelled", "new query")),
    "confirm a superseded draft": (lambda w: confirm_with(w, w.superseded), NotAllowed,
                                   ("superseded", "confirm the new draft")),
    "confirm an invalidated draft": (lambda w: confirm_with(w, w.invalidated, condition_version=1),
                                     NotAllowed, ("invalidated", "draft again")),
    "confirm an already submitted and settled query": (
        lambda w: confirm_with(w, w.done), NotAllowed, ("it is succeeded", "new query (Q2)")),
    "confirm from a replaced run": (lambda w: confirm_with(w, run=w.old_run), NotAllowed,
                                    ("no longer holds the execution rights", "current run")),
    "confirm with a newer message undecided": (
        lambda w: w.store.confirm(w.blocked_draft.query_id, 1, 1, EXECUTE, w.blocked_execute,
                                  w.blocked_run),
        MessagePending, ("(pending)", "attribute them")),
    # someone else's message
    "message from another session": (lambda w: confirm_with(w, message=w.other_session), NotAllowed,
                                     ("session 's2'", "query owner's message")),
    "message from another user": (lambda w: confirm_with(w, message=w.other_user), NotAllowed,
                                  ("user 'u2'", "query owner's message")),
    "status from another session": (lambda w: w.store.status(w.done.query_id, w.other_session),
                                    NotAllowed, ("session 's2'", "own session")),
    "attribute to another user's task": (
        lambda w: w.store.attribute_message(w.other_user, w.task), NotAllowed,
        ("another session or user",)),
    # wrong types
    "draft version as str": (lambda w: confirm_with(w, draft_version="2"), InvalidInput,
                             ("draft_version must be an int", "'2'")),
    "draft version as bool": (lambda w: confirm_with(w, draft_version=True), InvalidInput,
                              ("draft_version", "True")),
    "condition version zero": (lambda w: confirm_with(w, condition_version=0), InvalidInput,
                               ("condition_version must be an int >= 1", "got 0")),
    "query id as int": (lambda w: confirm_with(w, query_id=7), InvalidInput,
                        ("query_id must be a non-empty str", "got 7")),
    "quote as None": (lambda w: confirm_with(w, quote=None), InvalidInput,
                      ("instruction_quote must be a str", "None")),
    "conditions as list": (lambda w: w.store.create_task(USER, SESSION, ["app"]),
                           InvalidInput, ("conditions must be a mapping", "['app']")),
    "empty patch": (lambda w: w.store.update_conditions(w.task, 2, {}), InvalidInput,
                    ("patch is empty",)),
    "patch with a set": (lambda w: w.store.update_conditions(w.task, 2, {"days": {1, 2}}),
                         InvalidInput, ("JSON values only", "set")),
    "naive clock": (lambda w: w.store.receive_message(SESSION, USER, "hi", (datetime(2026, 1, 1),
                                                                             "Asia/Shanghai")),
                    InvalidInput, ("aware datetime", "2026")),
    "unknown time zone": (lambda w: w.store.receive_message(SESSION, USER, "hi",
                                                            (CLOCK[0], "Mars/Olympus")),
                          InvalidInput, ("'Mars/Olympus'", "IANA name")),
    "empty message text": (lambda w: w.store.receive_message(SESSION, USER, "  ", CLOCK),
                           InvalidInput, ("text must be a non-empty str",)),
    "redelivered id with other text": (
        lambda w: w.store.receive_message(SESSION, USER, "别的", CLOCK, message_id=w.execute),
        IdempotencyConflict, ("received with other content", "needs a new id")),
    "clarification flag as str": (lambda w: w.store.set_awaiting_clarification(w.task, "yes"),
                                  InvalidInput, ("awaiting must be a bool", "'yes'")),
    # sql (checked before the platform is asked)
    "empty sql": (lambda w: w.store.request_query(w.task, " ;  -- nothing\n"), InvalidInput,
                  ("sql is empty", "read-only SELECT")),
    "oversized sql": (lambda w: w.store.request_query(w.task, "SELECT 1" + " " * 20_001),
                      InvalidInput, ("20,009 characters", "limit is 20,000")),
    "sql not a str": (lambda w: w.store.request_query(w.task, None), InvalidInput,
                      ("sql must be a str",)),
    "two statements": (lambda w: w.store.request_query(w.task, "SELECT 1; SELECT 2"), InvalidInput,
                       ("2 statements", "exactly one")),
    "a write statement": (lambda w: w.store.request_query(w.task, "DELETE FROM orders"),
                          InvalidInput, ("'DELETE'", "read-only")),
    "revise a queued query": (lambda w: w.store.request_query(w.task, APP_DAILY_SQL,
                                                              w.running.query_id),
                              NotAllowed, ("it is running", "without replaces_query_id")),
    # cancel and worker misuse
    "cancel twice": (lambda w: w.store.cancel(w.running.query_id), NotAllowed,
                     ("already requested", "wait for the worker")),
    "cancel a settled query": (lambda w: w.store.cancel(w.done.query_id), NotAllowed,
                               ("it is succeeded", "nothing to cancel")),
    "worker step without a lease": (
        lambda w: Worker(w.store.path, w.platform, "w9", 30).begin_submit(w.running.query_id),
        NotAllowed, ("'w9' holds no lease", "claim it first")),
    "worker step under a taken-over lease": (
        lambda w: w.worker.lookup(w.running.query_id), StaleLease,
        ("'w1' claimed query", "lease_epoch 1, the row is at lease_epoch 2", "current owner")),
    "worker resubmit of a running query": (lambda w: w.owner.resubmit(w.running.query_id),
                                           NotAllowed, ("it is running", "resubmit needs not_found")),
    "worker settles a cancel nobody asked for": (lambda w: w.worker.settle_cancel(w.done.query_id),
                                                 NotAllowed, ("no cancel request",)),
    "negative lease": (lambda w: Worker(w.store.path, w.platform, "w9", -1), InvalidInput,
                       ("lease_seconds", "-1")),
    "unknown crash point": (lambda w: CrashPoints(["before_everything"]), InvalidInput,
                            ("'before_everything'", "after_submitting_commit")),
}


@pytest.mark.rule("Q4")
@pytest.mark.rule("Q5")
@pytest.mark.rule("Q6")
@pytest.mark.rule("Q11")
@pytest.mark.rule("Q25")
@pytest.mark.rule("T1")
@pytest.mark.parametrize("name", list(CASES))
def test_a_bad_call_is_a_typed_error_and_changes_no_row(world: World, name: str) -> None:
    call, error, says = CASES[name]
    paths = (world.store.path, world.platform.ledger_path)
    before = dump(*paths)
    with pytest.raises(error) as caught:
        call(world)
    text = str(caught.value)
    for fragment in says:
        assert fragment in text, f"{name}: {fragment!r} not in {text!r}"
    assert "; " in text, f"{name}: the message names no fix: {text!r}"
    assert dump(*paths) == before, f"{name} changed rows"
    assert not world.store.path.with_name("nope.db").exists()
