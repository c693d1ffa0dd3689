# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""The query machine's bug catalogue: the bundled implementation, each time broken once.

Every mutant is a small subclass of the real :class:`~settled.impl._worker.Worker`
or :class:`~settled.impl._store.QueryStore` that overrides the one method
where the bug would live, written the way an engineer who missed that rule
would plausibly write it (the docstring says how). The reference adapter
drives it unchanged: a mutant only sets ``worker_class`` or ``store_class``.
Nothing in ``impl/`` knows about mutants.

The kit must kill every one of them; ``settled mutants`` and
``tests/test_mutants.py`` check that it does.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Mapping
from typing import Any, cast

from settled.impl._db import write
from settled.impl._errors import NotAllowed, PlatformUnavailable
from settled.impl._events import apply_step
from settled.impl._platform import PlatformStatus, SubmitAnswer
from settled.impl._store import (
    CONFIRM_PARAMS,
    Query,
    QueryStore,
    _check_message,
    _check_versions,
    message_row,
    query_row,
    require_id,
    task_row,
)
from settled.impl._worker import Worker
from settled.model.query import LIVE, MAX_SUBMISSIONS
from settled.model.query import QueryState as S

from .._query_adapter import QueryAdapter
from . import Mutant

__all__ = [
    "MUTANTS",
    "CancelOverridesSuccess",
    "CancelWithoutEvidence",
    "ConditionUpdateKeepsDrafts",
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
        if trigger == "submit_unanswered":
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
            raise NotAllowed(f"query {query_id!r} is possibly submitted; look it up first (Q13)")
        attempt = row["submissions"] - 1
        platform_id = query_id if attempt == 0 else f"{query_id}-retry{attempt}"  # the bug
        answer: SubmitAnswer | None
        fault = None
        try:
            answer = self.platform.submit(platform_id, row["sql"])
        except PlatformUnavailable as exc:
            answer, fault = None, exc.kind
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
        if trigger == "lookup_timeout":
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
                raise NotAllowed(f"cannot resubmit query {query_id!r}: a cancel is requested")
            if row["submissions"] > MAX_SUBMISSIONS:  # the bug: >= was meant
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
        row = self._held_row(self._conn, query_id)
        if row["execution_state"] != S.SUBMITTING or row["submit_epoch"] == row["lease_epoch"]:
            return super().lookup(query_id)
        with self._fenced(query_id) as (conn, row):
            self._step(conn, row, "begin_submit", S.SUBMITTING, {
                "submissions": row["submissions"] + 1, "submit_epoch": row["lease_epoch"]})
        return self.call_submit(query_id)


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
        row = self._held_row(self._conn, query_id)
        if row["execution_state"] == S.QUEUED:
            # call_submit will send it again (de-duplicated) and record that answer
            with contextlib.suppress(PlatformUnavailable):
                self.platform.submit(query_id, row["sql"])  # the bug: before the commit
        return super().begin_submit(query_id)


class StaleEpochWriteAccepted(Worker):
    """Q11 broken: a worker's write is fenced on "I claimed it", not on "my claim is current".

    How it gets written: the lease check looks the query up in the worker's
    own ``held`` map and stops there; the epoch in the row is never compared.
    A paused worker whose lease was taken over wakes up and overwrites the
    new owner's state.
    """

    def _held_row(self, conn: sqlite3.Connection, query_id: str) -> sqlite3.Row:
        require_id("query_id", query_id)
        row = query_row(conn, query_id)
        if query_id not in self.held:
            raise NotAllowed(f"worker {self.name!r} holds no lease on query {query_id!r}")
        return row  # the bug: row["lease_epoch"] is never compared with held


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
        if row["cancel_state"] == "requested" and status is PlatformStatus.SUCCEEDED:
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
        current = task_row(conn, row["task_id"])["condition_version"]
        as_read = {**dict(row), "authorized_version": current}  # the bug: not the query's own
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
        state = self.query(query_id).state
        if state not in LIVE or state is S.QUEUED:
            return super().cancel(query_id)
        now = self._now()
        with write(self._conn) as conn:
            apply_step(conn, query_id, trigger="cancel", params={}, from_state=state,
                       to_state=S.CANCELLED, at=now,
                       updates={"cancel_state": "requested", "settled_at": now})
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
        state = self.query(query_id).state
        if state not in LIVE:
            return super().confirm(query_id, draft_version, condition_version, instruction_quote,
                                   message_id, run_id)
        with write(self._conn) as conn:
            query = query_row(conn, query_id)
            _check_versions(query, draft_version, condition_version)
            _check_message(query, message_row(conn, message_id), instruction_quote)
            task = task_row(conn, query["task_id"])
            apply_step(conn, query_id, trigger="confirm", params=CONFIRM_PARAMS, from_state=state,
                       to_state=S.QUEUED, at=self._now(),
                       updates={"authorized_version": task["condition_version"],
                                "confirmation_message_id": message_id,
                                "budget_message_id": message_id})
        return self.query(query_id)


class PartialQuoteAccepted(QueryStore):
    """Q5 broken: a quote that is only a part of the user's message authorizes.

    How it gets written: ``if quote in message.text`` instead of equality —
    "the model quoted the relevant bit" — so "execute" cut out of "don't
    execute yet" runs the query.
    """

    def confirm(self, query_id: str, draft_version: int, condition_version: int,
                instruction_quote: str, message_id: str, run_id: str) -> Query:
        text = self.message(message_id).text
        if instruction_quote.strip() and instruction_quote.strip() in text:
            instruction_quote = text  # the bug: a part is taken for the whole
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
        note = self._conn.execute("SELECT budget_message_id, text FROM notifications "
                                  "WHERE message_id = ?", (message_id,)).fetchone()
        if note is not None and instruction_quote.strip() == note["text"].strip():
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
        version = task_row(conn, task_id)["condition_version"]
        rows = conn.execute("SELECT query_id, execution_state FROM queries WHERE task_id = ? "
                            "ORDER BY created_at, query_id", (task_id,)).fetchall()
        for row in rows:
            state = S(row["execution_state"])
            if state in (S.DRAFTED, S.AWAITING):  # the bug: re-stamped, not invalidated
                conn.execute("UPDATE queries SET condition_version = ? WHERE query_id = ?",
                             (version, row["query_id"]))
            elif state in LIVE:
                apply_step(conn, row["query_id"], trigger="condition_updated", params={},
                           from_state=state, to_state=state, at=now)


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
    _mutant("Q11-stale-epoch-write-accepted", StaleEpochWriteAccepted),
    _mutant("Q8-reconfirmation-queues-again", ReconfirmRequeues),
    _mutant("Q5-partial-quote-accepted", PartialQuoteAccepted),
    _mutant("Q24-late-result-moves-newer-phase", LateResultMovesPhase),
    _mutant("Q25-notification-authorizes", NotificationAuthorizes),
    _mutant("T2-condition-update-keeps-drafts", ConditionUpdateKeepsDrafts),
]
