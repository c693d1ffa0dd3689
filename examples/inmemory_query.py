"""An in-memory implementation of the query protocol, written from docs/PROTOCOL.md alone.

It imports nothing from ``settled``: it stands for *your* implementation. A
service holds tasks, messages and queries; workers claim queries under a
lease epoch and talk to a platform that can lose answers. Every accepted
state change appends one event in the public ``settled.trace/1`` format.

The platform keeps the SQL it stored for each query_id and the result it
computed (Q18); the service keeps each message's request clock (M1), queues
a result notification with the budget message's clock when a worker records
an outcome (Q25, M2), and answers a status tool that withholds the result
from the message that confirmed the query (Q26).

Caller mistakes raise :class:`CallerError` and change nothing.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

MAX_SUBMISSIONS = 3
# A request clock: the UTC reference instant and the business time zone (M1).
Clock = tuple[str, str]
DEFAULT_CLOCK: Clock = ("2026-02-03T09:30:00Z", "Asia/Shanghai")
LIVE = ("queued", "submitting", "submission_unknown", "not_found", "running")
POSSIBLY_SUBMITTED = ("submitting", "submission_unknown", "not_found", "running")


class CallerError(Exception):
    """The caller asked for something the protocol does not allow; nothing changed."""


class NoAnswer(Exception):
    """The platform call got no answer (lost on the way there or back); ``kind`` says how."""

    def __init__(self, message: str, kind: str = "timeout") -> None:
        super().__init__(message)
        self.kind = kind


class Rejected(Exception):
    """The platform explicitly rejected the submission."""


class LookupTimeout(Exception):
    """The lookup got no answer (timed out, reset, garbled, ...); nothing was learnt."""

    def __init__(self, message: str, kind: str = "timeout") -> None:
        super().__init__(message)
        self.kind = kind


# --------------------------------------------------------------------------
# The outside platform
# --------------------------------------------------------------------------
class Platform:
    """An outside SQL platform: jobs by query_id, with faults that can be armed.

    A submission is stored once per query_id with its SQL; the same id with the same SQL is
    the existing submission, the same id with other SQL is rejected (Q18)."""

    def __init__(self) -> None:
        self.jobs: dict[str, str] = {}  # query_id -> running | succeeded | failed | cancelled
        self.sql: dict[str, str] = {}  # query_id -> the SQL stored with the submission
        self.results: dict[str, list[list[Any]]] = {}  # query_id -> rows of a success
        self.rejected: set[str] = set()
        # lose_answer, undeliverable, reject, lookup_timeout, cancel_lost, cancel_undeliverable
        self.faults: set[str] = set()
        self.fault_kind = "timeout"  # how an armed fault shows: timeout, reset, malformed, ...

    def submit(self, query_id: str, sql: str) -> None:
        if "undeliverable" in self.faults:
            self.faults.discard("undeliverable")
            raise NoAnswer("the request never arrived", self.fault_kind)
        if "reject" in self.faults:
            self.faults.discard("reject")
            self.rejected.add(query_id)
            raise Rejected("unsupported syntax")
        if self.sql.get(query_id, sql) != sql:
            raise Rejected(f"{query_id} was submitted with other SQL")
        self.sql.setdefault(query_id, sql)  # deduplicated by query_id and payload
        self.jobs.setdefault(query_id, "running")
        if "lose_answer" in self.faults:
            self.faults.discard("lose_answer")
            raise NoAnswer("the answer was lost", self.fault_kind)

    def lookup(self, query_id: str) -> str | None:
        if "lookup_timeout" in self.faults:
            self.faults.discard("lookup_timeout")
            raise LookupTimeout(query_id, self.fault_kind)
        return self.jobs.get(query_id)

    def cancel(self, query_id: str) -> bool:
        if "cancel_undeliverable" in self.faults:
            self.faults.discard("cancel_undeliverable")
            raise NoAnswer("the cancel never arrived", self.fault_kind)
        if self.jobs.get(query_id) == "running":
            self.jobs[query_id] = "cancelled"
        if "cancel_lost" in self.faults:
            self.faults.discard("cancel_lost")
            raise NoAnswer("the cancel was applied, its answer lost", self.fault_kind)
        return self.jobs.get(query_id) == "cancelled"

    def finish(self, query_id: str, ok: bool) -> None:
        if self.jobs.get(query_id) == "running":
            self.jobs[query_id] = "succeeded" if ok else "failed"
            if ok:  # rows computed from the stored SQL, so two queries' results differ
                self.results[query_id] = [[query_id, len(self.sql[query_id])]]

    def result(self, query_id: str) -> list[list[Any]] | None:
        return self.results.get(query_id)


# --------------------------------------------------------------------------
# The agent's side
# --------------------------------------------------------------------------
@dataclass
class Task:
    task_id: str
    session: str
    version: int = 1
    clarifying: bool = False


@dataclass
class Message:
    message_id: str
    session: str
    text: str
    kind: str = "user"  # user | notification
    attributed: bool = False
    request_clock: Clock = DEFAULT_CLOCK  # kept when the message is delivered again (M1)


@dataclass
class Notification:
    """A result notification for the agent: the query's SQL, outcome, result and conditions,
    with the request clock of the message the query's budget came from (Q25, M2)."""

    query_id: str
    task_id: str
    sql: str
    state: str
    result: list[list[Any]] | None
    condition_version: int
    request_clock: Clock


@dataclass
class Query:
    query_id: str
    task_id: str
    sql: str
    condition_version: int  # the task version it was drafted at
    state: str = "drafted"
    draft_version: int = 1
    cancel_state: str = "none"
    submissions: int = 0
    lease_epoch: int = 0
    submit_epoch: int = 0
    authorized_version: int = 0  # task version at authorization; 0 = not yet
    phase_moved: bool = False
    events: int = 0
    budget_message_id: str | None = None  # the confirming message (Q7); never moved (Q8)
    result: list[list[Any]] | None = None  # the platform's result, stored on success (Q15)


@dataclass
class QueryService:
    """Tasks, messages and queries, with every accepted change logged."""

    platform: Platform = field(default_factory=Platform)
    tasks: dict[str, Task] = field(default_factory=dict)
    messages: dict[str, Message] = field(default_factory=dict)
    queries: dict[str, Query] = field(default_factory=dict)
    log: list[dict[str, Any]] = field(default_factory=list)
    notifications: list[Notification] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def _id(self, kind: str) -> str:
        return f"{kind}-{next(self._ids)}"

    # -- users and tools ---------------------------------------------------------
    def create_task(self, session: str) -> Task:
        task = Task(self._id("task"), session)
        self.tasks[task.task_id] = task
        return task

    def receive(self, session: str, text: str, kind: str = "user",
                clock: Clock = DEFAULT_CLOCK, message_id: str | None = None) -> Message:
        """Store a message with its request clock; the same message delivered again (on
        recovery, maybe days later) is the stored one, clock included (M1)."""
        if message_id is not None and message_id in self.messages:
            return self.messages[message_id]
        message = Message(message_id or self._id("msg"), session, text, kind,
                          request_clock=clock)
        self.messages[message.message_id] = message
        return message

    def attribute(self, message_id: str) -> None:
        self.messages[message_id].attributed = True

    def draft(self, task_id: str, sql: str) -> Query:
        task = self.tasks[task_id]
        query = Query(self._id("q"), task_id, sql, condition_version=task.version)
        self.queries[query.query_id] = query
        return query

    def check_result(self, query_id: str, ok: bool) -> None:
        """The platform's dry-run check of the draft (Q3)."""
        q = self._query(query_id, "drafted")
        self._step(q, "check_passed" if ok else "check_failed", {},
                   "awaiting_confirmation" if ok else "check_failed")

    def update_conditions(self, task_id: str) -> None:
        """A new condition version (T1): pending drafts are invalidated (T2), live queries
        keep their authorized version (Q23)."""
        task = self.tasks[task_id]
        task.version += 1
        for q in self.queries.values():
            if q.task_id != task_id:
                continue
            if q.state in ("drafted", "awaiting_confirmation"):
                self._step(q, "condition_updated", {}, "invalidated")
            elif q.state in LIVE:
                self._step(q, "condition_updated", {}, q.state)

    def set_clarifying(self, task_id: str, clarifying: bool) -> None:
        self.tasks[task_id].clarifying = clarifying

    def revise(self, query_id: str, sql: str) -> Query:
        """A SQL-only revision supersedes an unconfirmed draft (T3)."""
        q = self._query(query_id, "awaiting_confirmation")
        self._step(q, "revised", {}, "superseded")
        return self.draft(q.task_id, sql)

    def confirm(self, query_id: str, *, draft_version: int, condition_version: int, quote: str,
                message_id: str) -> str:
        """The user's explicit confirmation (Q4–Q10); a retry returns the current state (Q8)."""
        q = self._query(query_id)
        task = self.tasks[q.task_id]
        if draft_version != q.draft_version or condition_version != q.condition_version:
            raise CallerError("stale draft or condition version")
        message = self.messages.get(message_id)
        if message is None or message.kind != "user" or message.text.strip() != quote.strip():
            raise CallerError("the quote must be the user's whole message")
        if q.state in LIVE:
            self._step(q, "confirm", self._confirm_params(), q.state)
            return q.state
        if q.state != "awaiting_confirmation":
            raise CallerError(f"cannot confirm a query in {q.state}")
        if any(m.session == task.session and not m.attributed for m in self.messages.values()):
            raise CallerError("a newer message is not attributed yet")
        q.authorized_version = task.version
        q.budget_message_id = message_id
        self._step(q, "confirm", self._confirm_params(), "queued")
        return q.state

    @staticmethod
    def _confirm_params() -> dict[str, str]:
        return {"quote": "whole", "draft_version": "current", "condition_version": "current",
                "message": "attributed"}

    def cancel(self, query_id: str) -> None:
        """Before submission: cancelled. After: only the request is recorded (Q19–Q21)."""
        q = self._query(query_id)
        if q.state in ("awaiting_confirmation", "queued"):
            self._step(q, "cancel", {}, "cancelled")
        elif q.state in POSSIBLY_SUBMITTED and q.cancel_state == "none":
            q.cancel_state = "requested"
            self._step(q, "cancel", {}, q.state)
        else:
            raise CallerError(f"cannot cancel a query in {q.state}")

    def status(self, query_id: str, message_id: str) -> dict[str, Any]:
        """The status tool: the confirming message gets the state only, the result is left
        to the result notification (Q26); any other message may see the result."""
        q = self._query(query_id)
        withheld = q.result is not None and message_id == q.budget_message_id
        return {"state": q.state, "result": None if withheld else q.result,
                "result_withheld": withheld}

    # -- helpers ------------------------------------------------------------------
    def _query(self, query_id: str, state: str | None = None) -> Query:
        q = self.queries.get(query_id)
        if q is None:
            raise CallerError(f"no query {query_id!r}")
        if state is not None and q.state != state:
            raise CallerError(f"query {query_id} is {q.state}, not {state}")
        return q

    def settle(self, q: Query, trigger: str, params: dict[str, Any], state: str,
               result: list[list[Any]] | None = None) -> None:
        """Record a terminal outcome (with the platform's result of a success); the task's
        phase moves only at its own version (Q24); queue the result notification (Q25, M2)."""
        task = self.tasks[q.task_id]
        q.phase_moved = task.version == q.authorized_version and not task.clarifying
        q.result = result
        self._step(q, trigger, params, state)
        budget = self.messages[q.budget_message_id] if q.budget_message_id else None
        self.notifications.append(Notification(
            q.query_id, q.task_id, q.sql, state, result, q.authorized_version,
            budget.request_clock if budget else DEFAULT_CLOCK))

    def _step(self, q: Query, trigger: str, params: dict[str, Any], to_state: str) -> None:
        before, q.state = q.state, to_state
        q.events += 1
        task = self.tasks[q.task_id]
        self.log.append({
            "schema": "settled.trace/1", "machine": "query", "instance": q.query_id,
            "seq": q.events, "trigger": trigger, "params": params, "from": before, "to": to_state,
            "vars": {"submissions": q.submissions, "cancel_state": q.cancel_state,
                     "lease_epoch": q.lease_epoch, "submit_epoch": q.submit_epoch,
                     "task_version": task.version - q.condition_version + 1,
                     "authorized_version": (q.authorized_version - q.condition_version + 1
                                            if q.authorized_version else 0),
                     "phase_moved": q.phase_moved}})


# --------------------------------------------------------------------------
# Workers
# --------------------------------------------------------------------------
class Worker:
    """A worker process: the lease epochs it holds live only in its memory."""

    def __init__(self, service: QueryService, name: str) -> None:
        self.service, self.name = service, name
        self.held: dict[str, int] = {}

    def _fresh(self, query_id: str) -> Query:
        q = self.service._query(query_id)
        if q.lease_epoch == 0 or self.held.get(query_id) != q.lease_epoch:
            raise CallerError(f"{self.name} does not hold the current lease of {query_id}")
        return q

    def _params(self) -> dict[str, str]:
        return {"worker": self.name}

    def claim(self, query_id: str) -> None:
        """Claim a live query, or take over its lease (Q11)."""
        q = self.service._query(query_id)
        if q.state not in LIVE:
            raise CallerError(f"cannot claim a query in {q.state}")
        if q.lease_epoch and self.held.get(query_id) == q.lease_epoch:
            raise CallerError("already holding the current lease")
        q.lease_epoch += 1
        self.held[query_id] = q.lease_epoch
        self.service._step(q, "claim", self._params(), q.state)

    def begin_submit(self, query_id: str) -> None:
        """Commit submitting and the count before calling the platform (Q12)."""
        q = self._fresh(query_id)
        if q.state != "queued":
            raise CallerError(f"cannot submit a query in {q.state}")
        self._commit_submitting(q, "begin_submit")

    def _commit_submitting(self, q: Query, trigger: str) -> None:
        q.submissions += 1
        q.submit_epoch = q.lease_epoch
        self.service._step(q, trigger, self._params(), "submitting")

    def call_submit(self, query_id: str) -> str:
        """The platform call, only by the lease that committed submitting (Q12–Q14, Q17)."""
        q = self._fresh(query_id)
        if q.state != "submitting" or q.submit_epoch != q.lease_epoch:
            raise CallerError("only the lease that committed submitting may call the platform")
        try:
            self.service.platform.submit(query_id, q.sql)
        except NoAnswer as exc:
            return self.no_answer(q, exc.kind)
        except Rejected:
            self.service.settle(q, "submit_rejected", self._params(), "failed")
            return q.state
        self.service._step(q, "submit_answered", self._params(), "running")
        return q.state

    def no_answer(self, q: Query, kind: str = "timeout") -> str:
        """No answer is not a failure: the outcome is unknown until a lookup says (Q14)."""
        self.service._step(q, "submit_unanswered", {**self._params(), "fault": kind},
                           "submission_unknown")
        return q.state

    def lookup(self, query_id: str) -> str:
        """Ask the platform about this query_id; only its evidence moves the state (Q13, Q15)."""
        q = self._fresh(query_id)
        recovering = q.state == "submitting" and q.submit_epoch != q.lease_epoch
        if q.state not in ("submission_unknown", "running") and not recovering:
            raise CallerError(f"nothing to look up in {q.state}")
        try:
            status = self.service.platform.lookup(query_id)
        except LookupTimeout as exc:
            self.service._step(q, "lookup_timeout", {**self._params(), "fault": exc.kind},
                               q.state)
            return q.state
        if status is None:
            self.service._step(q, "lookup_not_found", self._params(), "not_found")
        elif status == "running":
            if q.state != "running":  # "still running" of a running query is no news
                self.service._step(q, "lookup_running", self._params(), "running")
        else:
            result = self.service.platform.result(query_id) if status == "succeeded" else None
            self.service.settle(q, f"lookup_{status}", self._params(), status, result)
        return q.state

    def resubmit(self, query_id: str) -> None:
        """After an explicit not found: again under the same query_id, at most 3 times (Q16)."""
        q = self._fresh(query_id)
        if q.state != "not_found" or q.cancel_state != "none":
            raise CallerError(f"cannot resubmit a query in {q.state}")
        if q.submissions >= MAX_SUBMISSIONS:
            self.service.settle(q, "resubmit", self._params(), "submission_retry_exhausted")
        else:
            self._commit_submitting(q, "resubmit")

    def run_once(self, query_id: str) -> str:
        """The worker's own pass over one query, as its loop runs in production: claim it
        unless this worker holds its current lease, then take the steps its state calls for
        until it settles or waits on the platform."""
        q = self.service._query(query_id)
        if q.state not in LIVE:
            return q.state
        if q.lease_epoch == 0 or self.held.get(query_id) != q.lease_epoch:
            self.claim(query_id)
        for _ in range(2 * MAX_SUBMISSIONS + 2):  # at most a submit and a lookup per try
            before = (q.state, q.events)
            if q.state not in LIVE:
                break
            self._next_step(q)
            if (q.state, q.events) == before or q.state in ("running", "submission_unknown"):
                break  # waiting on the platform, or nothing learnt this time
        return q.state

    def _next_step(self, q: Query) -> None:
        if q.state == "queued":
            self.begin_submit(q.query_id)
        elif q.state == "submitting":
            if q.submit_epoch == q.lease_epoch:
                self.call_submit(q.query_id)
            else:
                self.lookup(q.query_id)
        elif q.cancel_state == "requested":
            events = q.events
            self.settle_cancel(q.query_id)
            if q.events == events and q.state in ("submission_unknown", "running"):
                self.lookup(q.query_id)  # too late to cancel: the platform's outcome stands
        elif q.state == "not_found":
            self.resubmit(q.query_id)
        else:
            self.lookup(q.query_id)

    def settle_cancel(self, query_id: str) -> str:
        """Act on a cancel request, on the platform's evidence only (Q21)."""
        q = self._fresh(query_id)
        if q.cancel_state != "requested":
            raise CallerError("no cancel was requested")
        if q.state == "not_found":
            self.service.settle(q, "confirm_cancel", self._params(), "cancelled")
        elif q.state in ("submission_unknown", "running"):
            try:
                cancelled = self.service.platform.cancel(query_id)
            except NoAnswer as exc:  # applied or not, nobody knows: nothing learnt (Q21, Q14)
                self.service._step(q, "cancel_unanswered", {**self._params(), "fault": exc.kind},
                                   q.state)
                return q.state
            if cancelled:
                self.service.settle(q, "cancel_confirmed", self._params(), "cancelled")
        else:
            raise CallerError(f"cannot settle a cancel in {q.state}")
        return q.state
