"""``settled demo query``: the data-agent article's story, told on real files by the real implementation.

The article's example: task A asks for January 2026 net revenue of every
channel in yuan (condition version 1, draft Q1). The user answers the draft
with "只看 app，再执行": the conditions move to version 2 (Q1 is invalidated),
the app-only draft Q2 is checked and confirmed with the user's whole message.
The worker submits Q2, the platform stores it but the answer is lost, so Q2 is
``submission_unknown`` until a lookup finds it running. Meanwhile the user
says "再按天展开，先给我 SQL": version 3 and a by-day draft Q3. Then Q2
finishes with 16 yuan. That late result keeps its own version 2, moves
nothing about version 3, and its notification says it is the earlier app
monthly total.

Everything runs on a fixed story clock and the store's ids are replaced by
the article's labels (A, Q1, Q2, Q3) in what is returned and narrated, so two
runs print the same thing. The store file is left in ``directory`` under
:data:`STORE_FILE`; checking its event log against the model is the CLI's
job (``impl/`` never imports the conformance kit).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from settled.impl.platform._platform import (
    APP_DAILY_SQL,
    APP_MONTHLY_SQL,
    MONTHLY_BY_CHANNEL_SQL,
    SyntheticPlatform,
)
from settled.impl.platform._platform_answers import Fault
from settled.impl.query._store import Notification, QueryStore
from settled.impl.query._worker import Worker
from settled.impl.shared._errors import CallerError, InvalidInput

__all__ = ["ASK", "DAILY", "EXECUTE", "PARTIAL_QUOTE", "STORE_FILE", "demo_query"]

Say = Callable[[str], None]

STORE_FILE: Final = "query-store.db"
PLATFORM_DIR: Final = "platform"
SESSION, USER, WORKER = "demo-session", "demo-user", "demo-worker"
ZONE: Final = "Asia/Shanghai"
START: Final = datetime(2026, 2, 3, 2, 0, tzinfo=UTC)  # 10:00 in Shanghai, the month after January
LEASE_SECONDS: Final = 30

ASK: Final = "查 2026 年 1 月各渠道净收入，金额用元"
EXECUTE: Final = "只看 app，再执行"
PARTIAL_QUOTE: Final = "再执行"  # "execute" cut out of the message: never an authorization (Q5)
DAILY: Final = "再按天展开，先给我 SQL"


class _StoryClock:
    """A clock that stands still until the story moves it on."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class _Story:
    store: QueryStore
    platform: SyntheticPlatform
    worker: Worker
    clock: _StoryClock
    tell: Say
    labels: dict[str, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)  # label -> the store's id

    def name(self, label: str, real_id: str) -> str:
        self.labels[real_id], self.ids[label] = label, real_id
        return real_id

    def plain(self, text: str) -> str:
        """``text`` with the store's random ids replaced by the article's labels."""
        for real_id, label in self.labels.items():
            text = text.replace(real_id, label)
        return text

    def say(self, line: str) -> None:
        self.tell(self.plain(line))

    def user_says(self, text: str, message_id: str) -> str:
        """A user message, received with its request clock (M1) and attributed to task A."""
        self.clock.advance(60)
        self.store.receive_message(SESSION, USER, text, (self.clock(), ZONE), message_id=message_id)
        self.store.attribute_message(message_id, self.ids["A"])
        self.say(f"user ({message_id}): “{text}”")
        return message_id


def demo_query(directory: str | Path, say: Say | None = None) -> dict[str, Any]:
    """Tell the story in ``directory`` (created, must not hold a store yet); return its facts."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / STORE_FILE).exists():
        raise InvalidInput(f"{folder / STORE_FILE} already exists; the demo needs a fresh folder")
    clock = _StoryClock()
    with ExitStack() as stack:
        platform = stack.enter_context(SyntheticPlatform(folder / PLATFORM_DIR))
        store = stack.enter_context(QueryStore(folder / STORE_FILE, platform, clock=clock))
        worker = stack.enter_context(Worker(store.path, platform, WORKER, LEASE_SECONDS, clock))
        story = _Story(store, platform, worker, clock, say or (lambda line: None))
        return _tell(story)


def _tell(story: _Story) -> dict[str, Any]:
    _ask(story)
    _revise_to_app(story)
    refused = _confirm_q2(story)
    _submit_and_lose_the_answer(story)
    phase_before = _move_on_to_daily(story)
    notification = _late_result(story)
    facts = _facts(story, phase_before)
    return {"query": facts["query"], "task": facts["task"], "notification": notification,
            "draft_q1": facts["draft_q1"], "draft_q3": facts["draft_q3"],
            "partial_quote": {"quote": PARTIAL_QUOTE, "refused_with": refused}}


# --------------------------------------------------------------------------- the steps
def _ask(story: _Story) -> None:
    task = story.store.create_task(USER, SESSION, {"month": "2026-01", "metric": "net revenue",
                                                   "unit": "yuan"})
    story.name("A", task.task_id)
    story.say(f"task A created at condition version {task.condition_version} "
              f"({_listed(task.conditions)})")
    story.user_says(ASK, "msg-1")
    q1 = story.store.request_query(task.task_id, MONTHLY_BY_CHANNEL_SQL)
    story.name("Q1", q1.query_id)
    story.say(f"draft Q1 (all channels) checked by the platform, not run: {q1.state.value} at "
              f"condition version {q1.condition_version}")


def _revise_to_app(story: _Story) -> None:
    store, task_id = story.store, story.ids["A"]
    story.user_says(EXECUTE, "msg-2")
    task = store.update_conditions(task_id, 1, {"channel": "app"})
    q1 = store.query(story.ids["Q1"])
    story.say(f"conditions updated with expected_version 1 -> condition version "
              f"{task.condition_version} (channel=app merged, month and unit kept); Q1 is now "
              f"{q1.state.value} (T1, T2)")
    q2 = store.request_query(task_id, APP_MONTHLY_SQL)
    story.name("Q2", q2.query_id)
    story.say(f"draft Q2 (app only) checked: {q2.state.value}, draft_version {q2.draft_version}, "
              f"condition_version {q2.condition_version}")


def _confirm_q2(story: _Story) -> str:
    """Confirm Q2: first with a part of the message (refused, Q5), then with all of it."""
    store, q2 = story.store, story.store.query(story.ids["Q2"])
    run = store.start_run(SESSION)
    try:
        store.confirm(q2.query_id, q2.draft_version, q2.condition_version, PARTIAL_QUOTE,
                      "msg-2", run)
    except CallerError as exc:
        refused = type(exc).__name__
        story.say(f"confirm Q2 quoting only “{PARTIAL_QUOTE}”: refused with {refused}: {exc}")
    else:
        refused = "accepted"
        story.say(f"confirm Q2 quoting only “{PARTIAL_QUOTE}”: accepted, which Q5 forbids")
    q2 = store.confirm(q2.query_id, q2.draft_version, q2.condition_version, EXECUTE, "msg-2", run)
    story.say(f"confirm Q2 quoting the whole message “{EXECUTE}”: {q2.state.value}, authorized at "
              f"condition version {q2.authorized_version}, confirmation message "
              f"{q2.confirmation_message_id} (Q4-Q7)")
    return refused


def _submit_and_lose_the_answer(story: _Story) -> None:
    worker, platform, qid = story.worker, story.platform, story.ids["Q2"]
    worker.claim(qid)
    state = worker.begin_submit(qid)
    submissions = story.store.query(qid).submissions
    story.say(f"worker claims Q2 and commits {state.value} (submission {submissions}) before "
              "calling the platform (Q11, Q12)")
    platform.inject(Fault.LOST_RESPONSE)
    state = worker.call_submit(qid)
    story.say(f"the platform stored Q2 ({platform.submissions_received(qid)} submission received) "
              f"but its answer was lost: Q2 is {state.value}, not failed (Q14)")
    state = worker.lookup(qid)
    story.say(f"lookup of Q2 under the same query_id finds it on the platform: {state.value}; "
              "no resubmission (Q15)")


def _move_on_to_daily(story: _Story) -> str:
    store, task_id = story.store, story.ids["A"]
    story.user_says(DAILY, "msg-3")
    task = store.update_conditions(task_id, 2, {"granularity": "day"})
    q2 = store.query(story.ids["Q2"])
    story.say(f"conditions updated with expected_version 2 -> condition version "
              f"{task.condition_version}, phase {task.phase}; Q2 stays {q2.state.value} at its "
              f"authorized version {q2.authorized_version} (Q23)")
    q3 = store.request_query(task_id, APP_DAILY_SQL)
    story.name("Q3", q3.query_id)
    story.say(f"draft Q3 (app by day) checked: {q3.state.value} at condition version "
              f"{q3.condition_version}; it needs its own confirmation")
    return task.phase


def _late_result(story: _Story) -> dict[str, Any]:
    """Q2 finishes after the task moved on; returns what the notification told and allowed."""
    store, qid = story.store, story.ids["Q2"]
    story.clock.advance(60)
    story.platform.complete(qid)
    state = story.worker.lookup(qid)
    q2, task = store.query(qid), store.task(story.ids["A"])
    story.say(f"the platform finished Q2; the worker's lookup records {state.value} with "
              f"{_money(_yuan(_rows(q2.query_id, store)))} at condition version {q2.condition_version}")
    moved = "moved" if q2.phase_moved else "did not move"
    story.say(f"the result is late: task A is at condition version {task.condition_version}, not "
              f"{q2.condition_version}, so it {moved} the task's phase (still {task.phase}) (Q24)")
    (note,) = store.notifications(story.ids["A"])
    answer = _answer(store, note)
    story.say(f"notification for the agent: {note.text}")
    story.say(f"the agent can answer from it: {answer} (Q25, M2)")
    refused = _refused_as_authorization(store, story.ids["Q3"], note)
    story.say(f"confirming Q3 with the notification as the instruction: refused with {refused} "
              "(a notification carries no user intent, Q25)")
    return {"text": story.plain(note.text), "condition_version": note.condition_version,
            "answer": answer, "authorizes": refused is None}


def _refused_as_authorization(store: QueryStore, q3_id: str, note: Notification) -> str | None:
    """The error type that refuses the notification as Q3's authorization (None if accepted)."""
    q3 = store.query(q3_id)
    try:
        store.confirm(q3.query_id, q3.draft_version, q3.condition_version, note.text,
                      note.message_id, store.start_run(SESSION))
    except CallerError as exc:
        return type(exc).__name__
    return None


# --------------------------------------------------------------------------- the facts
def _facts(story: _Story, phase_before: str) -> dict[str, Any]:
    store, ids, platform = story.store, story.ids, story.platform
    q1, q2, q3 = (store.query(ids[label]) for label in ("Q1", "Q2", "Q3"))
    task = store.task(ids["A"])
    return {
        "query": {"label": "Q2", "state": q2.state.value, "result_yuan": _yuan(_rows(q2.query_id, store)),
                  "submissions": q2.submissions,
                  "submissions_received_by_platform": platform.submissions_received(q2.query_id),
                  "executions_on_platform": platform.executions(q2.query_id),
                  "authorized_condition_version": q2.authorized_version,
                  "log": [f"{e['trigger']}: {e['from']} -> {e['to']}" for e in store.events(q2.query_id)],
                  # Q26: the confirming message gets status only; a later one may read the result.
                  "confirming_message_sees_result": store.status(q2.query_id, "msg-2").result is not None,
                  "later_message_sees_result": store.status(q2.query_id, "msg-3").result is not None},
        "task": {"label": "A", "condition_version": task.condition_version, "phase": task.phase,
                 "phase_moved_by_late_result": q2.phase_moved or task.phase != phase_before},
        "draft_q1": {"state": q1.state.value, "condition_version": q1.condition_version},
        "draft_q3": {"state": q3.state.value, "condition_version": q3.condition_version},
    }


def _rows(query_id: str, store: QueryStore) -> list[list[Any]]:
    # Read from a later message's point of view, for which the result is not withheld (Q26).
    status = store.status(query_id, "msg-3")
    return [] if status.result is None else [list(r) for r in status.result["rows"]]


def _listed(conditions: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in sorted(conditions.items()))


def _yuan(rows: list[list[Any]]) -> float | None:
    """The one amount of a one-row result (its last column), else None."""
    return float(rows[0][-1]) if len(rows) == 1 else None


def _money(amount: float | None) -> str:
    return "no single amount" if amount is None else f"{amount:g} yuan"


def _question(conditions: dict[str, Any]) -> str:
    channel = conditions.get("channel", "all-channel")
    kind = "by-day breakdown" if conditions.get("granularity") == "day" else "monthly total"
    return f"{channel} {kind} of {conditions.get('month', 'the period')}"


def _answer(store: QueryStore, note: Notification) -> str:
    """What the agent may say from a notification: its query's own question, never the current one."""
    asked = store.conditions_at(note.task_id, note.condition_version)
    current = store.task(note.task_id)
    amount = _yuan([] if note.result is None else note.result["rows"])
    outcome = _money(amount) if amount is not None else note.outcome.value
    if current.condition_version == note.condition_version:
        return f"the {_question(asked)} is {outcome}"
    return (f"the earlier {_question(asked)} is {outcome} (condition version "
            f"{note.condition_version}); it does not answer the {_question(current.conditions)} "
            f"asked at version {current.condition_version}")
