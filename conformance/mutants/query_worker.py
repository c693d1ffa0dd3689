# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""The query catalogue's worker mutants: each a subclass of the shipped
:class:`~settled.impl.query._worker.Worker` that overrides the one method where its bug
lives (submission, lookup, recovery, leases, cancellation, notifications). The catalogue,
with each mutant's name and rule, is ``query.py``."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any, cast

from settled.impl.platform._platform_answers import CancelAnswer, PlatformStatus, SubmitAnswer
from settled.impl.query._store import query_row, task_row
from settled.impl.query._values import MAX_SUBMISSIONS
from settled.impl.query._worker import Worker
from settled.impl.shared._errors import NotAllowed, StaleLease
from settled.impl.shared._ids import require_id
from settled.model.query import QueryState as S


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
