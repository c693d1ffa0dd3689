"""The query worker: claims authorized queries and stays responsible for them.

Theory of operation. One public method per model step, so the lockstep kit
can drive single steps, and :meth:`Worker.run_once` / :meth:`Worker.run_until_idle`
chain them for normal operation.

- :meth:`Worker.claim` takes a queued query, or a live one whose lease
  expired, and increments ``lease_epoch`` (Q11). The worker remembers the
  epoch it claimed with; every later write is ``UPDATE … WHERE lease_epoch =
  <that epoch>`` inside ``BEGIN IMMEDIATE``, and a worker whose lease was
  taken over gets :class:`StaleLease` naming both epochs and changes nothing.
- :meth:`Worker.begin_submit` commits ``submitting`` and the count *before*
  the platform is called (Q12): if the process dies after that commit,
  recovery sees "possibly submitted" and looks up instead of resubmitting
  (Q13). :meth:`Worker.call_submit` then calls the platform outside any
  transaction and records its answer; no answer is ``submission_unknown``,
  never ``failed`` (Q14, Q17).
- :meth:`Worker.lookup` resolves unknown only on evidence; a lookup timeout
  proves nothing and is logged as a self-loop (Q15). :meth:`Worker.resubmit`
  is allowed only after an explicit not-found, at most 3 submissions in all
  (Q16), always under the same ``query_id`` (Q1).
- :meth:`Worker.settle_cancel` turns a cancel request into the platform's
  evidence: cancelled, or the outcome that already happened (Q21).

A terminal outcome and its result notification commit in one transaction,
so no crash can leave a settled query without its notification
(``after_terminal_stored`` is the instant after that commit).
:meth:`Worker.recover_notifications` (run at the start of every
:meth:`Worker.run_once`) still queues one for a settled query that has none,
e.g. in a store written by an older version.

Durable commits on the happy path: :meth:`Worker.run_once` claims a queued
query and takes its ``begin_submit`` in one transaction (both events logged,
in order), records the submit answer in a second and the settling evidence
with its notification in a third. Every commit that precedes a platform call
is durable before the call (``synchronous=FULL``; ``synchronous_commit=on``
on PostgreSQL).

This module holds the steps and every transaction the worker commits. The lease it holds
(construction, the fenced step records, which queries are claimable) is in
:mod:`._worker_lease`; the result notification (the phase a settled query moves its task
to, the queued message and its text) in :mod:`._worker_notify`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Final

import httpx
import msgspec

from ...model.query import QueryState as S
from ..platform._platform_answers import (
    CancelAnswer,
    LookupAnswer,
    PlatformStatus,
    SubmitAnswer,
)
from ..shared._db import write
from ..shared._errors import NotAllowed, PlatformUnavailable
from ..shared._ids import require_id
from ..shared._pg import WriteConflict
from ._events import apply_step
from ._values import MAX_SUBMISSIONS, iso, query_row, task_row
from ._worker_lease import WorkerLease
from ._worker_notify import SETTLED_PHASE, WorkerNotices

__all__ = ["Worker", "unanswered"]

_TERMINAL: Final = (*SETTLED_PHASE, S.CHECK_FAILED, S.INVALIDATED, S.SUPERSEDED)
_MAX_CHAIN: Final = 12  # steps advance() takes on one query before yielding


def unanswered(exc: BaseException) -> str | None:
    """The kind of a platform call that got no answer, or None: ``exc`` is not one.

    A call with no answer proves nothing about what the platform did (Q14,
    Q15): the request may never have arrived, or the platform may have stored
    it and lost the answer. The kind is logged, never read as evidence:

    - ``timeout``: the client gave up waiting (``httpx.TimeoutException``);
    - ``reset``: the connection failed, refused, reset or closed before a whole
      answer came (every other ``httpx.TransportError``);
    - ``malformed``: an answer came that cannot be decoded into one the platform
      gives (``msgspec.DecodeError``, ``httpx.DecodingError``);
    - ``busy``: 503; ``error``: any other 5xx (``httpx.HTTPStatusError``);
    - the in-process platform's :class:`PlatformUnavailable` names its kind itself.

    None for everything else (a 4xx is the caller's mistake and arrives as a
    :class:`~..shared._errors.CallerError`; anything unknown is a bug): the caller
    re-raises it rather than guess.
    """
    if isinstance(exc, PlatformUnavailable):
        return exc.kind
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.TransportError):
        return "reset"
    if isinstance(exc, msgspec.DecodeError | httpx.DecodingError):
        return "malformed"
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        return "busy" if status == 503 else "error" if status >= 500 else None
    return None


class Worker(WorkerLease, WorkerNotices):
    """One worker process's view: a name, the lease epochs it holds, a connection."""

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- fenced writes, settling
    @contextmanager
    def _fenced(self, query_id: str) -> Iterator[tuple[sqlite3.Connection, sqlite3.Row]]:
        with write(self._conn) as conn:
            yield conn, self._held_row(conn, query_id)

    def _settle(self, conn: sqlite3.Connection, row: sqlite3.Row, trigger: str, to_state: S, *,
                result: Mapping[str, Any] | None = None, error: str | None = None) -> S:
        # Q24: the outcome carries query_id, task_id and condition_version (on
        # the row); it moves the task's phase only if the task is still at
        # the version the query was authorized at and not waiting for a
        # clarification. A late result changes nothing about the current task.
        task = task_row(conn, row["task_id"])
        moved = (task["condition_version"] == row["authorized_version"]
                 and not task["awaiting_clarification"])
        if moved:
            conn.execute("UPDATE tasks SET phase = ? WHERE task_id = ?",
                         (SETTLED_PHASE[to_state], row["task_id"]))
        ref = (f"{self.platform.TARGET}/{self.platform.TARGET_VERSION}/{row['query_id']}"
               if result is not None else None)
        state = self._step(conn, row, trigger, to_state, {
            "phase_moved": int(moved), "result_ref": ref,
            "result_json": None if result is None else json.dumps(result, ensure_ascii=False),
            "error": error, "settled_at": iso(self._now())})
        # The notification commits with the outcome it tells (Q24, Q25): one
        # commit, and no settled query without its notification after a crash.
        self._queue_in(conn, row["query_id"], iso(self._now()))
        return state

    def _after_commit(self, query_id: str, state: S) -> S:
        if state in SETTLED_PHASE:
            self._crash.hit("after_terminal_stored")
        return state

    # The platform calls: an answer, or None and the kind of failure that left none.
    # Each classifies what the client raised (``unanswered``) and re-raises the rest.
    def _submit(self, query_id: str, sql: str) -> tuple[SubmitAnswer | None, str | None]:
        try:
            return self.platform.submit(query_id, sql), None
        except Exception as exc:
            return None, self._unanswered(exc)

    def _lookup(self, query_id: str) -> tuple[LookupAnswer | None, str | None]:
        try:
            return self.platform.lookup(query_id), None
        except Exception as exc:
            return None, self._unanswered(exc)

    def _cancel(self, query_id: str) -> tuple[CancelAnswer | None, str | None]:
        try:
            return self.platform.cancel(query_id), None
        except Exception as exc:
            return None, self._unanswered(exc)

    def _fetch_result(self, query_id: str) -> tuple[dict[str, Any] | None, str | None]:
        try:
            found = self.platform.result(query_id)
        except Exception as exc:
            return None, self._unanswered(exc)
        return {"columns": list(found.columns), "rows": [list(r) for r in found.rows]}, None

    @staticmethod
    def _unanswered(exc: Exception) -> str:
        kind = unanswered(exc)
        if kind is None:
            raise exc  # an explicit answer (a CallerError) or a bug: never "no answer"
        return kind

    # ---------------------------------------------------------------- claim (Q11)
    def claim(self, query_id: str | None = None, *, begin_submit: bool = False) -> str | None:
        """Claim ``query_id`` (NotAllowed if it cannot be claimed) or the oldest claimable query.

        With ``begin_submit`` a claimed query that is ``queued`` also takes its
        ``begin_submit`` step in the same transaction: two model transitions,
        logged in order (claim, then begin_submit), one durable commit before
        the platform call (Q11, Q12). The commit is as durable as the two were
        apart; only the window between them, where nothing was learnt, is gone.
        """
        now = self._now()
        with write(self._conn) as conn:
            row = self._claim_target(conn, query_id, now)
            if row is None:
                return None
            epoch, submitting = self._take_lease(conn, row, now, begin_submit)
        return self._lease_taken(str(row["query_id"]), epoch, submitting)

    def _claim_target(self, conn: sqlite3.Connection, query_id: str | None,
                      now: datetime) -> sqlite3.Row | None:
        """The query a claim takes: ``query_id``, judged claimable now (NotAllowed if it is
        not), or the oldest claimable query (None where there is none). Under the claim's
        write lock, so that the judgment still holds when the lease is written (Q11)."""
        if query_id is None:
            return next((r for r in self._claimable(conn, now) if not self._unclaimable(r, now)),
                        None)
        row = self._claim_row(conn, require_id("query_id", query_id))
        reason = self._unclaimable(row, now)
        if reason:
            raise NotAllowed(f"worker {self.name!r} cannot claim query {query_id!r}: {reason}")
        return row

    def _take_lease(self, conn: sqlite3.Connection, row: sqlite3.Row, now: datetime,
                    begin_submit: bool) -> tuple[int, bool]:
        """The claim's step, fenced on the epoch the row was judged at (Q11), and with
        ``begin_submit`` a queued query's submission counted in the same transaction (Q12):
        the new epoch, and whether it is submitting."""
        epoch = row["lease_epoch"] + 1
        apply_step(conn, row["query_id"], trigger="claim", params=self._params,
                   from_state=S(row["execution_state"]), to_state=S(row["execution_state"]),
                   at=iso(now), epoch=row["lease_epoch"],
                   updates={"lease_epoch": epoch, "lease_owner": self.name,
                            "lease_expires_at": self._expiry(now)})
        submitting = begin_submit and S(row["execution_state"]) is S.QUEUED
        if submitting:
            claimed = query_row(conn, row["query_id"])
            self._step(conn, claimed, "begin_submit", S.SUBMITTING, {
                "submissions": claimed["submissions"] + 1, "submit_epoch": epoch})
        return epoch, submitting

    def _lease_taken(self, query_id: str, epoch: int, submitting: bool) -> str:
        """After the claim's commit: the worker holds the lease at ``epoch``; a submission
        committed with it is the point a crash test stops at."""
        self.held[query_id] = epoch
        if submitting:
            self._crash.hit("after_submitting_commit")
        return query_id

    # ---------------------------------------------------------------- submit (Q12, Q14, Q17)
    def begin_submit(self, query_id: str) -> S:
        """queued → submitting, submissions+1, submit_epoch; COMMIT, and nothing else (Q12)."""
        with self._fenced(query_id) as (conn, row):
            self._require(row, "begin_submit", S.QUEUED)
            state = self._step(conn, row, "begin_submit", S.SUBMITTING, {
                "submissions": row["submissions"] + 1, "submit_epoch": row["lease_epoch"]})
        self._crash.hit("after_submitting_commit")
        return state

    def call_submit(self, query_id: str) -> S:
        """Call the platform (outside any transaction) and record its answer."""
        row = self._held_row(self._conn, query_id)
        self._require(row, "call_submit", S.SUBMITTING)
        if row["submit_epoch"] != row["lease_epoch"]:
            raise NotAllowed(f"query {query_id!r} was left submitting by lease_epoch "
                             f"{row['submit_epoch']}: it is possibly submitted, look it up "
                             "before any resubmission (Q13)")
        answer, fault = self._submit(query_id, row["sql"])  # no answer: stored or not? (Q14)
        self._crash.hit("after_platform_stored")
        with self._fenced(query_id) as (conn, row):
            self._require(row, "call_submit", S.SUBMITTING)
            if answer is None:
                state = self._step(conn, row, "submit_unanswered", S.UNKNOWN, fault=fault)
            elif answer.accepted:
                state = self._step(conn, row, "submit_answered", S.RUNNING)
            else:  # an explicit rejection is the platform's word (Q17)
                state = self._settle(conn, row, "submit_rejected", S.FAILED, error=answer.reason)
        return self._after_commit(query_id, state)

    # ---------------------------------------------------------------- lookup (Q13, Q15)
    def lookup(self, query_id: str) -> S:
        """Ask the platform about ``query_id`` and record only what its answer proves."""
        # Checked before the call (no call without a lease) and again when recording.
        row = self._held_row(self._conn, query_id)
        state = S(row["execution_state"])
        recovering = state is S.SUBMITTING and row["submit_epoch"] != row["lease_epoch"]
        if state not in (S.UNKNOWN, S.RUNNING) and not recovering:
            own = "; finish its own submit call first" if state is S.SUBMITTING else ""
            raise NotAllowed(f"cannot look up query {query_id!r}: it is {state.value}{own}; "
                             "lookups resolve submission_unknown, a recovered submitting or "
                             "running (Q15)")
        answer, fault = self._lookup(query_id)  # no answer is not "not found" (Q15)
        result = None
        if answer is not None and answer.status is PlatformStatus.SUCCEEDED:
            result, fault = self._fetch_result(query_id)
            answer = None if fault is not None else answer  # the result did not come: nothing learnt
        with self._fenced(query_id) as (conn, row):
            self._require(row, "lookup", state)
            if answer is None:
                new = self._step(conn, row, "lookup_timeout", state, fault=fault)
            else:
                new = self._record_evidence(conn, row, answer.found, answer.status, result,
                                            answer.error)
        return self._after_commit(query_id, new)

    def _record_evidence(self, conn: sqlite3.Connection, row: sqlite3.Row, found: bool,
                         status: PlatformStatus | None, result: Mapping[str, Any] | None,
                         error: str | None) -> S:
        state = S(row["execution_state"])
        if not found:
            # Explicit not-found: resubmission may follow (Q16). A running
            # query the platform forgot is not a case the model knows: keep it.
            if state is S.RUNNING:
                return self._touch(conn, row)
            return self._step(conn, row, "lookup_not_found", S.NOT_FOUND)
        if status is PlatformStatus.RUNNING:
            if state is S.RUNNING:
                return self._touch(conn, row)
            return self._step(conn, row, "lookup_running", S.RUNNING)
        if status is PlatformStatus.SUCCEEDED:
            return self._settle(conn, row, "lookup_succeeded", S.SUCCEEDED, result=result)
        if status is PlatformStatus.FAILED:
            return self._settle(conn, row, "lookup_failed", S.FAILED,
                                error=error or "the platform reports the query failed")
        # Cancelled. Only our own cancel call cancels on this platform, and it is
        # never made from submitting; were it seen there anyway, the evidence is
        # still recorded (and the trace checker would flag the step).
        return self._settle(conn, row, "lookup_cancelled", S.CANCELLED)

    # ---------------------------------------------------------------- resubmit (Q16)
    def resubmit(self, query_id: str) -> S:
        """From an explicit not-found: submitting again (same id), or exhausted at 3."""
        with self._fenced(query_id) as (conn, row):
            self._require(row, "resubmit", S.NOT_FOUND)
            if row["cancel_state"] != "none":
                raise NotAllowed(f"cannot resubmit query {query_id!r}: a cancel is requested; "
                                 "settle the cancel instead (Q16, Q21)")
            if row["submissions"] >= MAX_SUBMISSIONS:
                state = self._settle(conn, row, "resubmit", S.EXHAUSTED)
            else:
                state = self._step(conn, row, "resubmit", S.SUBMITTING, {
                    "submissions": row["submissions"] + 1, "submit_epoch": row["lease_epoch"]})
        if state is S.SUBMITTING:
            self._crash.hit("after_submitting_commit")
        return self._after_commit(query_id, state)

    # ---------------------------------------------------------------- cancel (Q21)
    def settle_cancel(self, query_id: str) -> S:
        """Act on a cancel request: cancelled only on the platform's evidence; success stands."""
        row = self._held_row(self._conn, query_id)
        state = S(row["execution_state"])
        if row["cancel_state"] != "requested":
            raise NotAllowed(f"query {query_id!r} has no cancel request; nothing to settle, "
                             "look it up instead")
        if state is S.NOT_FOUND:  # the platform has nothing: cancel on that evidence
            with self._fenced(query_id) as (conn, row):
                self._require(row, "settle_cancel", S.NOT_FOUND)
                new = self._settle(conn, row, "confirm_cancel", S.CANCELLED)
            return self._after_commit(query_id, new)
        if state not in (S.UNKNOWN, S.RUNNING):
            raise NotAllowed(f"cannot settle the cancel of query {query_id!r} while it is "
                             f"{state.value}; finish the submit call or look it up first (Q13)")
        answer, fault = self._cancel(query_id)  # no answer: cancelled or not? (Q21, Q14)
        status = None if answer is None else answer.status
        result = None
        if status is PlatformStatus.SUCCEEDED:
            result, fault = self._fetch_result(query_id)
            answer = None if fault is not None else answer
        with self._fenced(query_id) as (conn, row):
            self._require(row, "settle_cancel", state)
            if answer is None:
                # The cancel may or may not have been applied: nothing learnt, the query and
                # its request stay as they are; the fault is logged, as a lookup's is.
                new = self._step(conn, row, "cancel_unanswered", state, fault=fault)
            elif status is PlatformStatus.CANCELLED:
                new = self._settle(conn, row, "cancel_confirmed", S.CANCELLED)
            else:
                new = self._record_evidence(conn, row, answer.found, status, result, None)
        return self._after_commit(query_id, new)

    # ---------------------------------------------------------------- notifications (Q24, Q25, M2)
    def queue_notification(self, query_id: str) -> str | None:
        """Queue the result notification of a settled query once; its id, or None if not due."""
        require_id("query_id", query_id)
        with write(self._conn) as conn:
            return self._queue_in(conn, query_id, iso(self._now()))

    def recover_notifications(self) -> list[str]:
        """Queue the notification of every settled query that has none (after a crash)."""
        marks = ", ".join("?" for _ in SETTLED_PHASE)
        rows = self._conn.execute(
            f"SELECT q.query_id FROM queries AS q LEFT JOIN notifications AS n "
            f"ON n.query_id = q.query_id WHERE n.query_id IS NULL AND q.submissions > 0 "
            f"AND q.budget_message_id IS NOT NULL AND q.execution_state IN ({marks}) "
            "ORDER BY q.created_at, q.query_id", [s.value for s in SETTLED_PHASE]).fetchall()
        queued = [self.queue_notification(row["query_id"]) for row in rows]
        return [n for n in queued if n is not None]

    # ---------------------------------------------------------------- normal operation
    def advance(self, query_id: str) -> S:
        """Take the steps a held query allows until it settles or waits on the platform."""
        state = S(query_row(self._conn, query_id)["execution_state"])
        for step in range(_MAX_CHAIN):
            if state in _TERMINAL:
                # A step that settled the query queued its notification already
                # (_after_commit); one settled before this call may have died first.
                if step == 0:
                    self.queue_notification(query_id)
                return state
            new = self._next_step(query_id)
            if new == state:
                return state  # waiting on the platform (or nothing learnt this time)
            state = new
        return state

    def _next_step(self, query_id: str) -> S:
        row = query_row(self._conn, query_id)
        state, cancel = S(row["execution_state"]), row["cancel_state"] == "requested"
        if state is S.QUEUED:
            self.begin_submit(query_id)
            return self.call_submit(query_id)
        if state is S.SUBMITTING:
            own = row["submit_epoch"] == row["lease_epoch"]
            return self.call_submit(query_id) if own else self.lookup(query_id)
        if cancel:
            return self.settle_cancel(query_id)
        if state is S.NOT_FOUND:
            return self.resubmit(query_id)
        return self.lookup(query_id)

    def run_once(self) -> bool:
        """One pass over the queries this worker holds or may claim; True if anything happened."""
        progress = bool(self.recover_notifications())
        now = self._now()
        for row in self._live(self._conn):
            qid = row["query_id"]
            mine = self.held.get(qid) == row["lease_epoch"]
            if not mine and self._unclaimable(row, now):
                continue  # another worker's lease runs: not ours to look at this pass
            before = self._event_count(qid)
            try:
                if not mine:
                    self.claim(qid, begin_submit=True)
                self.advance(qid)
            except NotAllowed:  # StaleLease included
                continue  # taken over or cancelled meanwhile: look again next pass
            except WriteConflict:
                progress = True  # PostgreSQL aborted a write for a concurrent one: nothing
                continue  # was written; the next pass looks at this query again
            progress = progress or self._event_count(qid) != before
        return progress

    def run_until_idle(self, max_passes: int = 50) -> int:
        """Repeat :meth:`run_once` until a pass changes nothing; returns the passes run."""
        for done in range(1, max_passes + 1):
            if not self.run_once():
                return done
        return max_passes

    def _event_count(self, query_id: str) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM query_events WHERE query_id = ?",
                                      (query_id,)).fetchone()[0])
