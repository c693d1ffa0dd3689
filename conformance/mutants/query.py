# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""The query machine's bug catalogue: the bundled implementation, each time broken once.

Every mutant is a small subclass of the real :class:`~settled.impl.query._worker.Worker`
or :class:`~settled.impl.query._store.QueryStore` that overrides the one method
where the bug would live, written the way an engineer who missed that rule
would plausibly write it (the docstring says how). The reference adapter
drives it unchanged: a mutant only sets ``worker_class`` or ``store_class``.
Nothing in ``impl/`` knows about mutants.

The kit must kill every one of them; ``settled mutants`` and
``tests/test_mutants.py`` check that it does.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from settled.conformance._bundled._query_adapter import QueryAdapter
from settled.impl.platform._platform import CancelAnswer, PlatformStatus, SubmitAnswer
from settled.impl.query._events import append_event, apply_step
from settled.impl.query._store import (
    CONFIRM_PARAMS,
    Message,
    Query,
    QueryStatus,
    QueryStore,
    Task,
    _check_message,
    _check_versions,
    iso,
    message_row,
    query_row,
    task_row,
)
from settled.impl.query._values import (
    _DRAFT_STATES,
    PHASE_EXECUTING,
    PHASE_OPEN,
    _json,
    _why_not,
    require_conditions,
    require_version,
)
from settled.impl.query._worker import Worker
from settled.impl.shared._db import write
from settled.impl.shared._errors import (
    InvalidInput,
    MessagePending,
    NotAllowed,
    StaleLease,
    StaleVersion,
)
from settled.impl.shared._ids import require_id
from settled.model.query import LIVE, MAX_SUBMISSIONS, QueryState
from settled.model.query import QueryState as S

from . import Mutant

__all__ = [
    "MUTANTS",
    "BusyIsRejection",
    "CancelOverridesSuccess",
    "CancelWithoutEvidence",
    "ConditionUpdateKeepsDrafts",
    "FailedCancelDropsRequest",
    "FailedCancelIsCancelled",
    "FourthSubmission",
    "LateResultMovesPhase",
    "LookupTimeoutIsNotFound",
    "LostResponseIsFailed",
    "NotificationAuthorizes",
    "PartialQuoteAccepted",
    "ReconfirmRequeues",
    "RecoveryResubmits",
    "RetryUnderNewId",
    "StaleEpochWriteAccepted",
    "SubmittingAfterCall",
]


# --------------------------------------------------------------------------- worker mutants
class LostResponseIsFailed(Worker):
    """Q14 broken: a submit call that got no answer is recorded as ``failed``.

    How it gets written: the ``except PlatformUnavailable`` branch around the
    submit call shares the error path of an explicit rejection ("the submit
    did not work"), so a lost answer, whose submission the platform may well
    have stored and be running, ends ``failed`` and is never looked up.
    """

    def _step(self, conn: sqlite3.Connection, row: sqlite3.Row, trigger: str, to_state: S,
              updates: Mapping[str, Any] | None = None, fault: str | None = None) -> S:
        # Hooked where the outcome is recorded: the same effect as the buggy
        # except branch in call_submit, without copying the whole call.
        if trigger == "submit_unanswered":  # bug
            return self._settle(conn, row, "submit_rejected", S.FAILED,
                                error="the platform did not answer the submission")
        return super()._step(conn, row, trigger, to_state, updates, fault)


class RetryUnderNewId(Worker):
    """Q1 broken: a resubmission goes to the platform under a fresh id.

    How it gets written: after an explicit not-found the engineer worries that
    the platform's de-duplication will hand back the lost first attempt, so
    each retry gets an attempt suffix (``q_…-retry1``). The platform then
    runs a query that nobody ever looks up under its real ``query_id``: its
    ledger has nothing under the query's id while the row says it is running.
    """

    def call_submit(self, query_id: str) -> S:
        row = self._held_row(self._conn, query_id)
        self._require(row, "call_submit", S.SUBMITTING)
        if row["submit_epoch"] != row["lease_epoch"]:
            raise NotAllowed(f"query {query_id!r} was left submitting by lease_epoch "
                             f"{row['submit_epoch']}: it is possibly submitted, look it up "
                             "before any resubmission (Q13)")
        attempt = row["submissions"] - 1  # bug
        platform_id = query_id if attempt == 0 else f"{query_id}-retry{attempt}"  # bug
        # bug; shipped: answer, fault = self._submit(query_id, row["sql"])
        answer, fault = self._submit(platform_id, row["sql"])
        self._crash.hit("after_platform_stored")
        with self._fenced(query_id) as (conn, row):
            self._require(row, "call_submit", S.SUBMITTING)
            if answer is None:
                state = self._step(conn, row, "submit_unanswered", S.UNKNOWN, fault=fault)
            elif answer.accepted:
                state = self._step(conn, row, "submit_answered", S.RUNNING)
            else:
                state = self._settle(conn, row, "submit_rejected", S.FAILED, error=answer.reason)
        return self._after_commit(query_id, state)


class LookupTimeoutIsNotFound(Worker):
    """Q15 broken: a lookup that timed out is recorded as an explicit not-found.

    How it gets written: ``except PlatformUnavailable: answer =
    LookupAnswer(found=False, …)`` — "no answer, so it is not there". The
    not-found then licenses a resubmission of a query the platform may be
    running.
    """

    def _step(self, conn: sqlite3.Connection, row: sqlite3.Row, trigger: str, to_state: S,
              updates: Mapping[str, Any] | None = None, fault: str | None = None) -> S:
        # Hooked where the outcome is recorded, as above: lookup() itself is unchanged.
        if trigger == "lookup_timeout":  # bug
            return super()._step(conn, row, "lookup_not_found", S.NOT_FOUND, updates)
        return super()._step(conn, row, trigger, to_state, updates, fault)


class FourthSubmission(Worker):
    """Q16 broken: the retry limit is off by one, so a 4th submission is made.

    How it gets written: ``if submissions > MAX_SUBMISSIONS`` where ``>=`` was
    meant — "at most 3 retries" read as retries *after* the first submission.
    """

    def resubmit(self, query_id: str) -> S:
        with self._fenced(query_id) as (conn, row):
            self._require(row, "resubmit", S.NOT_FOUND)
            if row["cancel_state"] != "none":
                raise NotAllowed(f"cannot resubmit query {query_id!r}: a cancel is requested; "
                                 "settle the cancel instead (Q16, Q21)")
            if row["submissions"] > MAX_SUBMISSIONS:  # bug, >= was meant; shipped: if row["submissions"] >= MAX_SUBMISSIONS:  # noqa: E501
                state = self._settle(conn, row, "resubmit", S.EXHAUSTED)
            else:
                state = self._step(conn, row, "resubmit", S.SUBMITTING, {
                    "submissions": row["submissions"] + 1, "submit_epoch": row["lease_epoch"]})
        if state is S.SUBMITTING:
            self._crash.hit("after_submitting_commit")
        return self._after_commit(query_id, state)


class RecoveryResubmits(Worker):
    """Q13 broken: recovery finds ``submitting`` and submits again without a lookup.

    How it gets written: "a row left in submitting means the old worker died
    before its call", so the new lease re-commits submitting under its own
    epoch (counting a new attempt) and makes the call itself. But the old
    worker may have died *after* its call: the count drifts, and a query the
    platform never received is submitted where a lookup would have said
    not-found.
    """

    def lookup(self, query_id: str) -> S:
        row = self._held_row(self._conn, query_id)  # bug
        if row["execution_state"] != S.SUBMITTING or row["submit_epoch"] == row["lease_epoch"]:  # bug
            return super().lookup(query_id)
        with self._fenced(query_id) as (conn, row):  # bug
            self._step(conn, row, "begin_submit", S.SUBMITTING, {
                "submissions": row["submissions"] + 1, "submit_epoch": row["lease_epoch"]})
        return self.call_submit(query_id)  # bug; shipped: return super().lookup(query_id)


class SubmittingAfterCall(Worker):
    """Q12 broken: the platform is called first, ``submitting`` and the count committed after.

    How it gets written: "only count a submission that actually went out" —
    so ``begin_submit`` sends, then commits ``submitting`` and the count. A
    crash between the two leaves a submission on the platform that the rows
    call ``queued``, so the next worker submits it as new and never looks it
    up. (``call_submit`` then sends it again to record an answer; only the
    platform's de-duplication by ``query_id`` hides the second call.)
    """

    def begin_submit(self, query_id: str) -> S:
        row = self._held_row(self._conn, query_id)  # bug
        if row["execution_state"] == S.QUEUED:  # bug: sent before the commit
            # call_submit will send it again (de-duplicated) and record that answer
            self._submit(query_id, row["sql"])
        return super().begin_submit(query_id)


class StaleEpochWriteAccepted(Worker):
    """Q11 broken: a worker's write is fenced on "I claimed it", not on "my claim is current".

    How it gets written: the lease check compares the epochs the wrong way
    round ("my claim must not be older than... newer than the row"), so the
    epoch of a takeover, always greater than the worker's own, passes. A
    paused worker whose lease was taken over wakes up and overwrites the new
    owner's state.
    """

    def _held_row(self, conn: sqlite3.Connection, query_id: str) -> sqlite3.Row:
        require_id("query_id", query_id)
        row = query_row(conn, query_id)
        mine = self.held.get(query_id)
        if mine is None:
            raise NotAllowed(f"worker {self.name!r} holds no lease on query {query_id!r}; claim "
                             "it first (Q11)")
        if row["lease_epoch"] < mine:  # bug; shipped: if row["lease_epoch"] != mine:
            raise StaleLease(f"worker {self.name!r} claimed query {query_id!r} with lease_epoch "
                             f"{mine}, the row is at lease_epoch {row['lease_epoch']} (taken over "
                             f"by {row['lease_owner']!r}); nothing was written, leave the query to "
                             "the current owner (Q11)")
        return row


class CancelOverridesSuccess(Worker):
    """Q21 broken: with a cancel requested, the platform's success is recorded as cancelled.

    How it gets written: "the user asked to cancel, so they do not want the
    result": the evidence handler checks ``cancel_state`` first and records
    ``cancelled`` whatever the platform says, although the query ran and its
    effect (and cost) happened.
    """

    def _record_evidence(self, conn: sqlite3.Connection, row: sqlite3.Row, found: bool,
                         status: PlatformStatus | None, result: Mapping[str, Any] | None,
                         error: str | None) -> S:
        if row["cancel_state"] == "requested" and status is PlatformStatus.SUCCEEDED:  # bug
            return self._settle(conn, row, "cancel_confirmed", S.CANCELLED)
        return super()._record_evidence(conn, row, found, status, result, error)


class LateResultMovesPhase(Worker):
    """Q24 broken: a result moves the task's phase even after the task moved to a newer version.

    How it gets written: the settle code compares the task's version with
    "the current version" re-read from the task instead of the version stored
    on the query when it was authorized, so the check always passes (only the
    clarification check still bites) and last month's result lands as the
    answer to this month's question.
    """

    def _settle(self, conn: sqlite3.Connection, row: sqlite3.Row, trigger: str, to_state: S, *,
                result: Mapping[str, Any] | None = None, error: str | None = None) -> S:
        current = task_row(conn, row["task_id"])["condition_version"]  # bug
        as_read = {**dict(row), "authorized_version": current}  # bug: not the query's own version
        # bug; shipped: return super()._settle(conn, row, trigger, to_state, result=result, error=error)
        return super()._settle(conn, cast(sqlite3.Row, as_read), trigger, to_state, result=result,
                               error=error)


# --------------------------------------------------------------------------- store mutants
class CancelWithoutEvidence(QueryStore):
    """Q21 broken: a cancel after submission began is recorded as cancelled at once.

    How it gets written: the cancel tool treats every live query like a
    queued one ("mark it cancelled, the worker will stop"), so a query the
    platform is running, or may be running, is reported cancelled with no
    evidence that it stopped.
    """

    def cancel(self, query_id: str) -> Query:
        require_id("query_id", query_id)
        now = self._now()
        with write(self._conn) as conn:
            query = query_row(conn, query_id)
            state = QueryState(query["execution_state"])
            if state in (QueryState.AWAITING, QueryState.QUEUED):
                apply_step(conn, query_id, trigger="cancel", params={}, from_state=state,
                           to_state=QueryState.CANCELLED, at=now, updates={"settled_at": now})
            elif state in LIVE:
                if query["cancel_state"] == "requested":
                    raise NotAllowed(f"cannot cancel query {query_id!r}: a cancel is already "
                                     f"requested and it is {state.value}; wait for the worker to "
                                     "settle it on the platform's evidence (Q21)")
                apply_step(conn, query_id, trigger="cancel", params={}, from_state=state,
                           # bug: settled at once; shipped: to_state=state, at=now, updates={"cancel_state": "requested"})  # noqa: E501
                           to_state=QueryState.CANCELLED, at=now, updates={"cancel_state": "requested", "settled_at": now})  # noqa: E501
            else:
                raise NotAllowed(f"cannot cancel query {query_id!r}: it is {state.value}"
                                 f"{_why_not(state, '; it is settled, there is nothing to cancel')}")
        return self.query(query_id)



class ReconfirmRequeues(QueryStore):
    """Q8 broken: confirming an already confirmed query queues it again.

    How it gets written: the confirm tool checks versions and the quote, then
    runs the first-confirmation path for any authorized query ("confirming
    twice is harmless, it just queues"), so a network retry puts a running
    query back to ``queued`` at the task's current version, to be submitted
    again.
    """

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
        state = self.query(query_id).state  # bug
        if state in LIVE:  # bug: the first confirmation's path, again
            with write(self._conn) as conn:
                query = query_row(conn, query_id)
                _check_versions(query, draft_version, condition_version)
                _check_message(query, message_row(conn, message_id), instruction_quote)
                task = task_row(conn, query["task_id"])
                apply_step(conn, query_id, trigger="confirm", params=CONFIRM_PARAMS,
                           from_state=state, to_state=S.QUEUED, at=self._now(),
                           updates={"authorized_version": task["condition_version"],
                                    "confirmation_message_id": message_id,
                                    "budget_message_id": message_id})
            return self.query(query_id)
        return super().confirm(query_id, draft_version, condition_version, instruction_quote,
                               message_id, run_id)


class PartialQuoteAccepted(QueryStore):
    """Q5 broken: a quote that is only a part of the user's message authorizes.

    How it gets written: ``if quote in message.text`` instead of equality —
    "the model quoted the relevant bit" — so "execute" cut out of "don't
    execute yet" runs the query.
    """

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
        text = self.message(message_id).text  # bug
        if instruction_quote.strip() and instruction_quote.strip() in text:  # bug
            instruction_quote = text  # a part is taken for the whole
        return super().confirm(query_id, draft_version, condition_version, instruction_quote,
                               message_id, run_id)


class NotificationAuthorizes(QueryStore):
    """Q25 broken: a result notification, quoted whole, counts as the user's confirmation.

    How it gets written: a notification inherits the budget and the clock of
    the user message it was made for (M2), and the engineer extends that to
    intent: the execute entry resolves a quoted notification to that user
    message and confirms with it. A host-generated notice becomes an
    "execute".
    """

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
        # bug
        note = self._conn.execute("SELECT budget_message_id, text FROM notifications "
                                  "WHERE message_id = ?", (message_id,)).fetchone()
        if note is not None and instruction_quote.strip() == note["text"].strip():  # bug
            origin = self.message(note["budget_message_id"])  # the bug: its author speaks for it
            message_id, instruction_quote = origin.message_id, origin.text
        return super().confirm(query_id, draft_version, condition_version, instruction_quote,
                               message_id, run_id)


class ConditionUpdateKeepsDrafts(QueryStore):
    """T2 broken: a condition update carries pending drafts forward instead of invalidating them.

    How it gets written: "the user only tweaked a filter, don't make them
    re-draft": pending drafts are re-stamped with the new condition version.
    Their SQL was written for the old conditions, and they stay confirmable.
    """

    @staticmethod
    def _log_condition_update(conn: sqlite3.Connection, task_id: str, now: str) -> None:
        # Pending drafts lose their right to be confirmed (T2); authorized
        # queries keep their version and only see the task move on (Q23).
        rows = conn.execute("SELECT query_id, execution_state FROM queries WHERE task_id = ? "
                            "ORDER BY created_at, query_id", (task_id,)).fetchall()
        for row in rows:
            state = QueryState(row["execution_state"])
            if state in _DRAFT_STATES:
                # bug: re-stamped, not invalidated; shipped: target = QueryState.INVALIDATED
                conn.execute("UPDATE queries SET condition_version = (SELECT condition_version "
                             "FROM tasks WHERE task_id = ?) WHERE query_id = ?",
                             (task_id, row["query_id"]))
                continue  # bug
            elif state in LIVE:
                target = state
            else:
                continue
            apply_step(conn, row["query_id"], trigger="condition_updated", params={},
                       from_state=state, to_state=target, at=now)



class RerunDeduplicatedBySql(QueryStore):
    """Q2 broken: asking for the same SQL again returns the task's existing query.

    How it gets written: "de-duplicate drafts so a double click does not make
    two": request_query looks for a draft or live query of the task with the
    same SQL and hands it back. A deliberate rerun then never gets its own
    record or id.
    """

    def request_query(self, task_id: str, sql: str, replaces_query_id: str | None = None) -> Query:
        if replaces_query_id is None:  # bug
            states = tuple(s.value for s in (S.AWAITING, *LIVE))
            row = self._conn.execute(
                f"SELECT query_id FROM queries WHERE task_id = ? AND sql = ? AND execution_state "
                f"IN ({', '.join('?' * len(states))}) ORDER BY created_at LIMIT 1",
                (task_id, sql, *states)).fetchone()
            if row is not None:  # the bug: the same SQL is taken for the same query
                return self.query(row["query_id"])
        return super().request_query(task_id, sql, replaces_query_id)


class StatusShowsResult(QueryStore):
    """Q26 broken: the status tool gives the confirming message the result too.

    How it gets written: "the status tool should be helpful": it always
    includes the stored result, so the turn that confirmed the query reads
    and interprets it, and the result notification interprets it again.
    """

    def status(self, query_id: str, message_id: str) -> QueryStatus:
        answer = super().status(query_id, message_id)
        if not answer.result_withheld:  # bug
            return answer
        stored = query_row(self._conn, query_id)["result_json"]  # bug
        # bug: always handed over; shipped: return answer
        return dataclasses.replace(answer, result=json.loads(stored), result_withheld=False)


class RedeliveryTakesNewClock(QueryStore):
    """M1 broken: a redelivered message is stamped with the recovery's clock.

    How it gets written: the receive path is an upsert that refreshes the
    stored request clock ("keep the latest delivery's metadata"), so "last
    month" in a message recovered on another day means another month.
    """

    def receive_message(self, session_id: str, user_id: str, text: str,
                        clock: tuple[datetime, str], message_id: str | None = None,
                        task_id: str | None = None) -> Message:
        message = super().receive_message(session_id, user_id, text, clock, message_id, task_id)
        if message_id is not None:  # bug: the delivery's clock overwrites the first
            with write(self._conn) as conn:
                conn.execute("UPDATE messages SET request_clock_utc = ?, time_zone = ? "
                             "WHERE message_id = ?", (iso(clock[0]), clock[1], message_id))
        return self.message(message.message_id)  # bug; shipped: return message


class NotificationClockIsNow(Worker):
    """M2 broken: a result notification is stamped with the time it is queued.

    How it gets written: the notification is built like any new message,
    with a fresh request clock, instead of inheriting the clock of the message
    the query's budget came from; its dates then drift to the day the result
    arrived.
    """

    @staticmethod
    def _queue_in(conn: sqlite3.Connection, query_id: str, now: str) -> str | None:
        made = Worker._queue_in(conn, query_id, now)
        if made is not None:  # bug: the clock of the moment it is queued
            conn.execute("UPDATE notifications SET request_clock_utc = ? WHERE query_id = ?",
                         (now, query_id))
        return made


class SqlTaggedBeforeSubmit(Worker):
    """Q18 broken: the worker sends the platform other SQL than the user confirmed.

    How it gets written: an audit tag is appended to every statement on its
    way out ("so the platform's logs show who ran it"): the platform stores
    and runs SQL the user never saw, and its fingerprint no longer matches
    the confirmed payload.
    """

    def call_submit(self, query_id: str) -> S:
        platform = self.platform  # bug
        original = platform.submit  # bug

        # bug
        def tagged(qid: str, sql: str, fingerprint_extra: str = "") -> SubmitAnswer:
            return original(qid, f"{sql} -- settled worker {self.name}", fingerprint_extra)

        platform.submit = tagged  # type: ignore[method-assign,assignment]  # bug
        try:  # bug; shipped: return super().call_submit(query_id)
            return super().call_submit(query_id)
        finally:
            del platform.submit


class RejectionIsUnknown(Worker):
    """Q17 broken: an explicit rejection is recorded as an unknown outcome.

    How it gets written: every submit answer other than "accepted" goes down
    the no-answer path ("we did not get it running"), so a query the
    platform refused for good is looked up forever instead of ending failed.
    """

    def _settle(self, conn: sqlite3.Connection, row: sqlite3.Row, trigger: str, to_state: S, *,
                result: Mapping[str, Any] | None = None, error: str | None = None) -> S:
        if trigger == "submit_rejected":  # bug
            return self._step(conn, row, "submit_unanswered", S.UNKNOWN, fault="error")
        return super()._settle(conn, row, trigger, to_state, result=result, error=error)


class BusyIsRejection(Worker):
    """Q17 broken: a busy platform (503) is recorded as the platform's rejection.

    How it gets written: the client's error handling reads any answer with a
    status line as the platform's word ("it answered, it said no"), so a
    503, which says nothing was read, ends the query ``failed`` as if the
    platform had refused the SQL, and it is never submitted again.
    """

    def _submit(self, query_id: str, sql: str) -> tuple[SubmitAnswer | None, str | None]:
        answer_and_fault = super()._submit(query_id, sql)
        answer, fault = answer_and_fault  # bug
        if fault == "busy":  # bug: a status answer taken for a verdict
            return SubmitAnswer(accepted=False, reason="the platform answered 503"), None
        return answer, fault  # bug; shipped: return answer_and_fault


class FailedCancelIsCancelled(Worker):
    """Q21 broken: a cancel call that got no answer is recorded as cancelled.

    How it gets written: "we asked it to stop; a cancel that times out is one the
    platform is busy carrying out": the client's failure is read as the platform's
    consent, so a query whose cancel never arrived, or that had already succeeded,
    ends cancelled with no evidence.
    """

    def _cancel(self, query_id: str) -> tuple[CancelAnswer | None, str | None]:
        try:
            return self.platform.cancel(query_id), None
        except Exception:  # bug: the failure is not kept; shipped: except Exception as exc:
            # bug: no answer taken for "cancelled"; shipped: return None, self._unanswered(exc)
            return CancelAnswer(found=True, status=PlatformStatus.CANCELLED), None


class FailedCancelDropsRequest(Worker):
    """Q21 broken: a cancel call that got no answer clears the cancel request.

    How it gets written: the request is marked done once the cancel call was made
    ("we sent it, the platform will stop it"), so when the call failed before the
    platform saw it the query keeps running, nothing asks again, and a cancel the
    user requested is silently dropped.
    """

    def _step(self, conn: sqlite3.Connection, row: sqlite3.Row, trigger: str, to_state: S,
              updates: Mapping[str, Any] | None = None, fault: str | None = None) -> S:
        if trigger == "cancel_unanswered":  # bug
            updates = {**(updates or {}), "cancel_state": "none"}
        return super()._step(conn, row, trigger, to_state, updates, fault)


class WorkerClearsCancelIntent(Worker):
    """Q19 broken: the worker rewrites the cancel intent along with the execution state.

    How it gets written: the row is updated from the platform's answer as a
    whole ("running, nothing pending"), so a cancel request recorded while
    the query ran is wiped by the next lookup and never reaches the platform.
    """

    def _step(self, conn: sqlite3.Connection, row: sqlite3.Row, trigger: str, to_state: S,
              updates: Mapping[str, Any] | None = None, fault: str | None = None) -> S:
        if trigger in ("lookup_running", "lookup_timeout", "submit_answered"):  # bug
            updates = {**(updates or {}), "cancel_state": "none"}
        return super()._step(conn, row, trigger, to_state, updates, fault)


class QueuedCancelOnlyRequested(QueryStore):
    """Q20 broken: a queued, never submitted query is only marked for cancelling.

    How it gets written: one cancel path for every authorized query ("record
    the request, the worker will stop it"): a query nothing was sent for
    stays queued, and a worker still submits it.
    """

    def cancel(self, query_id: str) -> Query:
        require_id("query_id", query_id)
        now = self._now()
        with write(self._conn) as conn:
            query = query_row(conn, query_id)
            state = QueryState(query["execution_state"])
            if state is QueryState.AWAITING:  # bug; shipped: if state in (QueryState.AWAITING, QueryState.QUEUED):  # noqa: E501
                apply_step(conn, query_id, trigger="cancel", params={}, from_state=state,
                           to_state=QueryState.CANCELLED, at=now, updates={"settled_at": now})
            elif state in LIVE:
                if query["cancel_state"] == "requested":
                    raise NotAllowed(f"cannot cancel query {query_id!r}: a cancel is already "
                                     f"requested and it is {state.value}; wait for the worker to "
                                     "settle it on the platform's evidence (Q21)")
                apply_step(conn, query_id, trigger="cancel", params={}, from_state=state,
                           to_state=state, at=now, updates={"cancel_state": "requested"})
            else:
                raise NotAllowed(f"cannot cancel query {query_id!r}: it is {state.value}"
                                 f"{_why_not(state, '; it is settled, there is nothing to cancel')}")
        return self.query(query_id)



class FailedCheckAwaits(QueryStore):
    """Q3 broken: a draft whose check failed still waits for confirmation.

    How it gets written: the draft is saved as awaiting confirmation first and
    the check's verdict only stored beside it ("the user can decide"), so SQL
    the platform refused can be confirmed.
    """

    def request_query(self, task_id: str, sql: str, replaces_query_id: str | None = None) -> Query:
        query = super().request_query(task_id, sql, replaces_query_id)
        if query.state is S.CHECK_FAILED:  # bug
            with write(self._conn) as conn:
                conn.execute("UPDATE queries SET execution_state = ? WHERE query_id = ?",
                             (S.AWAITING.value, query.query_id))
        return self.query(query.query_id)  # bug; shipped: return query


class DraftVersionNotChecked(QueryStore):
    """Q4 broken: the confirm call checks the condition version but not the draft version.

    How it gets written: "the conditions are what matters": the draft_version
    the caller read is not compared, so a confirmation of an older draft
    authorizes whatever the draft is now.
    """

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
        current = self.query(query_id).draft_version  # bug: the caller's version is ignored
        # bug; shipped: return super().confirm(query_id, draft_version, condition_version, instruction_quote, message_id, run_id)  # noqa: E501
        return super().confirm(query_id, current, condition_version, instruction_quote,
                               message_id, run_id)


class PendingMessageIgnored(QueryStore):
    """Q10 broken: an unattributed newer message does not block the first confirmation.

    How it gets written: only the quoted message's attribution is checked
    ("that is the one that authorizes"); a newer message that may change the
    task ("wait, by day") is ignored and the old draft runs.
    """

    @staticmethod
    def _confirmable(conn: sqlite3.Connection, query: sqlite3.Row,
                     message: sqlite3.Row) -> sqlite3.Row:
        qid, task_id = query["query_id"], query["task_id"]
        if message["attribution"] != "attributed":
            raise MessagePending(f"cannot confirm query {qid!r}: message {message['message_id']!r} "
                                 f"is {message['attribution']}, not yet attributed to a task; "
                                 "attribute it, then ask for confirmation again (Q9)")
        if message["task_id"] != task_id:
            raise NotAllowed(f"cannot confirm query {qid!r}: message {message['message_id']!r} "
                             f"belongs to task {message['task_id']!r}, the query to {task_id!r}; "
                             "confirm a draft of the message's own task (Q6)")
        task = task_row(conn, task_id)
        if task["condition_version"] != query["condition_version"]:
            raise StaleVersion(f"cannot confirm query {qid!r}: it was drafted at condition version "
                               f"{query['condition_version']}, the task is at "
                               f"{task['condition_version']}; draft again (Q6)")
        blocking = conn.execute(
            "SELECT message_id, attribution FROM messages WHERE session_id = ? AND kind = 'user' "
            # bug: only the quoted message; shipped: "AND attribution IN ('pending', 'failed') AND message_id != ? ORDER BY seq",  # noqa: E501
            "AND attribution IN ('pending', 'failed') AND message_id = ? ORDER BY seq",
            (query["session_id"], message["message_id"])).fetchall()
        if blocking:
            names = ", ".join(f"{r['message_id']!r} ({r['attribution']})" for r in blocking)
            raise MessagePending(f"cannot confirm query {qid!r}: message(s) {names} of session "
                                 f"{query['session_id']!r} are not attributed yet; attribute them, "
                                 "then ask the user to confirm again (Q9, Q10)")
        if not query["check_ok"] or query["cancel_state"] != "none" or query["submissions"]:
            raise NotAllowed(f"cannot confirm query {qid!r}: it did not pass its check, has a "
                             "cancel request or was submitted (Q6)")
        return task



class AuthorizationFollowsTask(QueryStore):
    """Q23 broken: a condition update re-stamps authorized queries with the new version.

    How it gets written: "keep every query of the task at the task's
    version": live queries get the new version too, so a late result counts
    as current and the query seems authorized at conditions nobody confirmed.
    """

    @staticmethod
    def _log_condition_update(conn: sqlite3.Connection, task_id: str, now: str) -> None:
        QueryStore._log_condition_update(conn, task_id, now)
        version = task_row(conn, task_id)["condition_version"]  # bug
        states = tuple(s.value for s in LIVE)  # bug
        # bug
        conn.execute(f"UPDATE queries SET authorized_version = ? WHERE task_id = ? AND "
                     f"execution_state IN ({', '.join('?' * len(states))})",
                     (version, task_id, *states))


class RevisionKeepsOldDraft(QueryStore):
    """T3 broken: a SQL-only revision leaves the draft it replaces confirmable.

    How it gets written: the new draft records ``replaces_query_id`` for the
    history, but the old one is not superseded ("the user may want either"),
    so two drafts of one request can both be confirmed.
    """

    def request_query(self, task_id: str, sql: str, replaces_query_id: str | None = None) -> Query:
        # bug: the link is dropped; shipped: query = super().request_query(task_id, sql, replaces_query_id)
        query = super().request_query(task_id, sql, None)
        if replaces_query_id is not None:  # bug
            with write(self._conn) as conn:
                conn.execute("UPDATE queries SET replaces_query_id = ? WHERE query_id = ?",
                             (replaces_query_id, query.query_id))
        return self.query(query.query_id)  # bug; shipped: return query


class BudgetAttributedLater(QueryStore):
    """Q7 broken: the confirmation does not record its confirming message.

    How it gets written: the confirm transaction records the authorization,
    the budget and the queueing, and the confirming message's id is left to
    "the status tool, when it is first asked", which never does it: the
    status tool then cannot tell the confirming message from any other and
    hands it the result to interpret (Q26 depends on Q7's one transaction).
    """

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
        first = self.query(query_id).state is S.AWAITING  # bug
        query = super().confirm(query_id, draft_version, condition_version, instruction_quote,
                                message_id, run_id)
        if first and query.state is S.QUEUED:  # bug: not part of the confirmation
            with write(self._conn) as conn:
                conn.execute("UPDATE queries SET confirmation_message_id = NULL "
                             "WHERE query_id = ?", (query_id,))
        return self.query(query_id)  # bug; shipped: return query


class PendingCheckedAfterQueueing(PendingMessageIgnored):
    """Q9 broken: an undecided newer message is noticed only after the query is queued.

    How it gets written: the pending-message check runs after the confirm
    transaction ("report message_pending to the caller"), so the caller is
    told message_pending while the query is already queued at the old
    conditions, and the newer message can no longer change what runs.
    """

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
        query = super().confirm(query_id, draft_version, condition_version, instruction_quote,
                                message_id, run_id)
        pending = self._conn.execute(  # bug
            "SELECT message_id FROM messages WHERE session_id = ? AND kind = 'user' AND "
            "attribution = 'pending' AND message_id != ?", (query.session_id, message_id)).fetchone()
        if pending is not None:  # bug: too late, the query is queued
            raise MessagePending(f"message {pending['message_id']!r} is not attributed yet (Q9)")
        return query


class StoppedRunCancels(QueryStore):
    """Q22 broken: stopping the agent's run requests a cancel of the queries it authorized.

    How it gets written: "the user stopped the run, so stop its work": the
    end-of-run hook records a cancel request on every live query the run
    confirmed, and the worker then cancels a query the user never cancelled.
    """

    def end_run(self, run_id: str) -> None:
        super().end_run(run_id)
        now = self._now()  # bug
        with write(self._conn) as conn:  # bug
            rows = conn.execute("SELECT query_id, execution_state FROM queries WHERE "
                                "confirmed_run_id = ? AND cancel_state = 'none'",
                                (run_id,)).fetchall()
            for row in rows:
                state = S(row["execution_state"])
                if state in LIVE and state is not S.QUEUED:  # a stop taken for a cancel
                    apply_step(conn, row["query_id"], trigger="cancel", params={},
                               from_state=state, to_state=state, at=now,
                               updates={"cancel_state": "requested"})


class VersionCountsEveryTask(QueryStore):
    """T1 broken: the next condition version is counted over the session's tasks.

    How it gets written: the count of ``task_conditions`` rows is joined to
    the session instead of filtered by ``task_id``: the first update of a task
    in a session with other tasks jumps its version, so version+1 is no longer what the update saves
    and every reader holding the current version is told it is stale.
    """

    def update_conditions(self, task_id: str, expected_version: int,
                          patch: Mapping[str, Any]) -> Task:
        require_id("task_id", task_id)
        require_version("expected_version", expected_version)
        changes = require_conditions("patch", patch, allow_empty=False)
        now = self._now()
        with write(self._conn) as conn:
            task = task_row(conn, task_id)
            current = task["condition_version"]
            if expected_version != current:
                raise StaleVersion(f"cannot update task {task_id!r}: expected_version "
                                   f"{expected_version} is stale, current is {current}; re-read "
                                   "the conditions and send the patch again (T1)")
            merged = json.loads(task["conditions"])
            for key, value in changes.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            # bug: the session's rows, not the task's; shipped: version = current + 1
            version = conn.execute(
                "SELECT COUNT(*) FROM task_conditions JOIN tasks USING (task_id) "
                "WHERE tasks.session_id = ?", (task["session_id"],)).fetchone()[0] + 1
            conn.execute("UPDATE tasks SET conditions = ?, condition_version = ?, phase = ? "
                         "WHERE task_id = ?", (_json(merged), version, PHASE_OPEN, task_id))
            conn.execute("INSERT INTO task_conditions (task_id, version, conditions, created_at) "
                         "VALUES (?, ?, ?, ?)", (task_id, version, _json(merged), now))
            self._log_condition_update(conn, task_id, now)
        return self.task(task_id)


class SupersededDraftConfirmable(QueryStore):
    """Q6 broken: a draft that a revision replaced can still be confirmed and queued.

    How it gets written: "pending confirmation" is read off the row's flags
    (it passed its check, has no cancel request, was never submitted) rather
    than off its state. A draft that a SQL-only revision replaced still has
    all three, so the old SQL is queued beside its replacement.
    """

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
        require_id("query_id", query_id)
        require_version("draft_version", draft_version)
        require_version("condition_version", condition_version)
        if not isinstance(instruction_quote, str):
            raise InvalidInput(f"instruction_quote must be a str, got {instruction_quote!r:.80}; "
                               "quote the user's whole message (Q5)")
        require_id("message_id", message_id)
        require_id("run_id", run_id)
        now = self._now()
        with write(self._conn) as conn:
            query = query_row(conn, query_id)
            message = message_row(conn, message_id)
            _check_versions(query, draft_version, condition_version)
            _check_message(query, message, instruction_quote)
            state = QueryState(query["execution_state"])
            if state in LIVE:  # Q8: a retry changes nothing, and the log says it came
                append_event(conn, query_id, "confirm", CONFIRM_PARAMS, state, state, now)
                return Query.from_row(query)
            # bug: the flags, not the state, say it awaits confirmation; shipped: if state is not QueryState.AWAITING:  # noqa: E501
            if state not in (QueryState.AWAITING, QueryState.SUPERSEDED):
                raise NotAllowed(f"cannot confirm query {query_id!r}: it is {state.value}"
                                 f"{_why_not(state)}")
            self._require_rights(conn, run_id, query["session_id"], query_id)
            task = self._confirmable(conn, query, message)
            # bug: "still a checked draft": confirmed from awaiting_confirmation
            conn.execute("UPDATE queries SET execution_state = ? WHERE query_id = ?",
                         (QueryState.AWAITING.value, query_id))
            apply_step(conn, query_id, trigger="confirm", params=CONFIRM_PARAMS,
                       from_state=QueryState.AWAITING, to_state=QueryState.QUEUED, at=now,
                       updates={"authorized_version": task["condition_version"],
                                "confirmation_message_id": message_id,
                                "budget_message_id": message_id, "confirmed_run_id": run_id})
            conn.execute("UPDATE messages SET applied_to_task = 1 WHERE message_id = ?",
                         (message_id,))
            conn.execute("UPDATE tasks SET phase = ? WHERE task_id = ?",
                         (PHASE_EXECUTING, query["task_id"]))
        return self.query(query_id)


class PollsAfterNotFound(Worker):
    """Q16: after an explicit not found the worker keeps polling the platform instead of
    resubmitting: every pass asks again, learns "not found" again and records nothing.

    Each step the kit asks for is right (resubmit itself is untouched), so the lockstep
    campaign and the crash sweep cannot tell it from the implementation; only the worker's
    own choice of step, once faults stop, shows a query that never settles."""

    def _next_step(self, query_id: str) -> S:
        row = query_row(self._conn, query_id)  # bug
        # bug: "still not found": wait and ask again next pass instead of resubmitting
        if S(row["execution_state"]) is S.NOT_FOUND and row["cancel_state"] != "requested":
            self._lookup(query_id)
            return S.NOT_FOUND
        return super()._next_step(query_id)


# --------------------------------------------------------------------------- the catalogue
def _adapter(part: type[Worker] | type[QueryStore]) -> type[QueryAdapter]:
    """The reference adapter driving ``part`` in place of the real worker or store."""
    slot = "worker_class" if issubclass(part, Worker) else "store_class"
    return cast(type[QueryAdapter], type(f"{part.__name__}Adapter", (QueryAdapter,), {slot: part}))


def _mutant(name: str, part: type[Worker] | type[QueryStore]) -> Mutant:
    rule = name.split("-", 1)[0]
    doc = (part.__doc__ or "").strip()
    return Mutant(name=name, rule=rule, machine="query", description=doc.split("\n", 1)[0],
                  adapter_class=_adapter(part))


MUTANTS: list[Mutant] = [
    _mutant("Q14-lost-response-recorded-as-failed", LostResponseIsFailed),
    _mutant("Q1-retry-under-new-query-id", RetryUnderNewId),
    _mutant("Q15-lookup-timeout-is-not-found", LookupTimeoutIsNotFound),
    _mutant("Q16-fourth-submission-allowed", FourthSubmission),
    _mutant("Q13-recovery-resubmits-without-lookup", RecoveryResubmits),
    _mutant("Q12-submitting-committed-after-call", SubmittingAfterCall),
    _mutant("Q21-cancel-without-platform-evidence", CancelWithoutEvidence),
    _mutant("Q21-cancel-overrides-platform-success", CancelOverridesSuccess),
    _mutant("Q21-failed-cancel-call-recorded-as-cancelled", FailedCancelIsCancelled),
    _mutant("Q21-failed-cancel-call-drops-the-request", FailedCancelDropsRequest),
    _mutant("Q11-stale-epoch-write-accepted", StaleEpochWriteAccepted),
    _mutant("Q8-reconfirmation-queues-again", ReconfirmRequeues),
    _mutant("Q5-partial-quote-accepted", PartialQuoteAccepted),
    _mutant("Q24-late-result-moves-newer-phase", LateResultMovesPhase),
    _mutant("Q25-notification-authorizes", NotificationAuthorizes),
    _mutant("T2-condition-update-keeps-drafts", ConditionUpdateKeepsDrafts),
    _mutant("Q2-rerun-deduplicated-by-sql", RerunDeduplicatedBySql),
    _mutant("Q26-status-shows-result-to-confirming-message", StatusShowsResult),
    _mutant("M1-redelivery-takes-recovery-clock", RedeliveryTakesNewClock),
    _mutant("M2-notification-stamped-when-queued", NotificationClockIsNow),
    _mutant("Q18-submitted-sql-differs-from-confirmed", SqlTaggedBeforeSubmit),
    _mutant("Q17-rejection-recorded-as-unknown", RejectionIsUnknown),
    _mutant("Q17-busy-platform-recorded-as-rejection", BusyIsRejection),
    _mutant("Q19-worker-clears-cancel-intent", WorkerClearsCancelIntent),
    _mutant("Q20-queued-cancel-only-requested", QueuedCancelOnlyRequested),
    _mutant("Q3-failed-check-awaits-confirmation", FailedCheckAwaits),
    _mutant("Q4-draft-version-not-checked", DraftVersionNotChecked),
    _mutant("Q10-pending-message-ignored", PendingMessageIgnored),
    _mutant("Q23-authorization-follows-task", AuthorizationFollowsTask),
    _mutant("T3-revision-keeps-old-draft", RevisionKeepsOldDraft),
    _mutant("Q7-confirming-message-not-recorded", BudgetAttributedLater),
    _mutant("Q9-pending-message-checked-after-queueing", PendingCheckedAfterQueueing),
    _mutant("Q22-stopped-run-requests-cancel", StoppedRunCancels),
    _mutant("T1-version-counted-over-the-session", VersionCountsEveryTask),
    _mutant("Q6-superseded-draft-confirmable", SupersededDraftConfirmable),
    _mutant("Q16-polls-after-explicit-not-found", PollsAfterNotFound),
]
