"""The synthetic SQL platform the query worker submits to (Q18).

Theory of operation. The platform is the *other side* of the protocol: a
separate component with its own SQLite files, which the query store never
opens. ``platform-ledger.db`` keeps the submissions, their results and the
pending test faults; ``platform-orders.db`` is the synthetic orders database
(:mod:`._orders_data`), generated once and then only ever read.

Submit, lookup and cancel are remote calls: each is one short
``BEGIN IMMEDIATE`` transaction on the ledger, and a caller's own transaction
never spans one. Submissions are de-duplicated by ``query_id`` plus a
fingerprint of the payload (target, target version, SQL, extra): the same id
and payload is the existing submission, the same id with another payload is
refused. Completing a submission really runs its SQL, inside the ledger's
write lock, so across any number of processes the SQL of one ``query_id``
runs at most once. That is at-most-once per id on this platform, not a
production exactly-once guarantee.

Faults are one-shot and stored in the ledger, so a fault injected by a test
in one process is consumed by the worker in another. A lost response and an
undelivered request raise the very same exception with the very same text:
the caller cannot tell "stored, answer lost" from "never arrived", which is
the whole point of Q13-Q15.

User SQL only ever runs in the read-only sandbox of :mod:`._orders_data`.

The vocabulary of the calls (statuses, answers, faults, the client protocol) is
:mod:`._platform_answers`; the files, their schema and the observers' figures are
:mod:`._platform_ledger`, the base class of :class:`SyntheticPlatform`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Final

from ..shared._db import write
from ..shared._errors import Busy, InvalidInput, NotAllowed, NotFound, PlatformUnavailable
from ._orders_data import (
    APP_DAILY_SQL,
    APP_MONTHLY_SQL,
    MAX_RESULT_ROWS,
    MAX_SQL_CHARS,
    MONTHLY_BY_CHANNEL_SQL,
    SqlRefused,
    SqlValue,
    shape_problem,
    statement_body,
)
from ._platform_answers import (
    CANCEL_AFTER,
    CANCEL_BEFORE,
    FAULT_KIND,
    LOOKUP_FAULTS,
    SUBMIT_AFTER,
    SUBMIT_BEFORE,
    CancelAnswer,
    CheckAnswer,
    Fault,
    LookupAnswer,
    PlatformStatus,
    QueryResult,
    SubmitAnswer,
)
from ._platform_ledger import PlatformLedger, _require_query_id, _take_fault, _take_first

__all__ = [
    "APP_DAILY_SQL",
    "APP_MONTHLY_SQL",
    "MAX_RESULT_ROWS",
    "MAX_SQL_CHARS",
    "MONTHLY_BY_CHANNEL_SQL",
    "SqlValue",
    "SyntheticPlatform",
]


def _fingerprint(sql: str, extra: str) -> str:
    payload = [SyntheticPlatform.TARGET, SyntheticPlatform.TARGET_VERSION, sql, extra]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()


_WHAT: Final = {"timeout": "did not answer", "reset": "reset the connection on",
                "malformed": "sent an answer that cannot be decoded to",
                "error": "answered an internal error to", "busy": "reported its database busy on"}


def _unavailable_submit(query_id: str, kind: str = "busy") -> PlatformUnavailable:
    # One text per kind, whether the request was stored or not: nothing in the
    # error may tell the caller which one happened.
    return PlatformUnavailable(
        f"the platform {_WHAT[kind]} the submit of query {query_id!r}: it may or may not "
        "have stored it; look it up with the same query_id before any resubmission (Q13-Q15)",
        kind)


def _conflict(query_id: str, stored: str, offered: str | None) -> str:
    return (f"query_id {query_id!r} was submitted with another payload (fingerprint "
            f"{stored[:12]}…, this one {(offered or 'none')[:12]}…); a retry must resend "
            "the same SQL, a new query needs a new query_id (Q1, Q2, Q18)")


# --------------------------------------------------------------------------- the platform
class SyntheticPlatform(PlatformLedger):
    """The external SQL platform, on its own ledger and orders files in ``directory``."""

    TARGET: Final = "synthetic-sqlite"
    TARGET_VERSION: Final = 1

    def __enter__(self) -> SyntheticPlatform:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- remote calls
    def check(self, sql: object) -> CheckAnswer:
        """Validate ``sql`` without executing it (Q3); a bad statement is an answer, not an error."""
        problem = shape_problem(sql)
        if problem is not None:
            return CheckAnswer(ok=False, reason=problem)
        assert isinstance(sql, str)  # shape_problem refused everything else
        try:
            columns = self._sandbox().plan(statement_body(sql))
        except SqlRefused as exc:
            return CheckAnswer(ok=False, reason=f"sql does not plan against the orders schema: {exc}")
        return CheckAnswer(ok=True, reason=None, columns=columns)

    def submit(self, query_id: str, sql: str, fingerprint_extra: str = "") -> SubmitAnswer:
        """Store a new submission as RUNNING, or answer for the one already under ``query_id``."""
        _require_query_id(query_id)
        if not isinstance(fingerprint_extra, str):
            raise InvalidInput(f"fingerprint_extra must be a str, got {fingerprint_extra!r:.80}")
        # The check reads only the orders file, which never changes: run it
        # before the ledger transaction so that transaction stays short.
        verdict = self.check(sql)
        fingerprint = _fingerprint(sql, fingerprint_extra) if isinstance(sql, str) else None
        conn = self._ledger()
        answer: SubmitAnswer | None = None  # stays None when the request never arrived
        fault: Fault | None = None
        try:
            with write(conn):
                # A fault before processing: not stored, not even counted.
                fault = _take_first(conn, SUBMIT_BEFORE)
                if fault is None:
                    answer = self._receive(conn, query_id, sql, fingerprint, verdict)
                    fault = _take_first(conn, SUBMIT_AFTER)
        except Busy as exc:
            raise _unavailable_submit(query_id) from exc
        # Raised only after COMMIT: raising inside write() would roll back the
        # stored submission, and a lost response is exactly "stored, unanswered".
        if fault is not None:
            raise _unavailable_submit(query_id, FAULT_KIND[fault])
        if answer is None:  # unreachable: no fault means the request was processed
            raise _unavailable_submit(query_id)
        return answer

    def _receive(self, conn: sqlite3.Connection, query_id: str, sql: object,
                 fingerprint: str | None, verdict: CheckAnswer) -> SubmitAnswer:
        conn.execute(
            "INSERT INTO arrivals (query_id, received) VALUES (?, 1) "
            "ON CONFLICT (query_id) DO UPDATE SET received = received + 1",
            (query_id,),
        )
        row = conn.execute(
            "SELECT fingerprint, status FROM submissions WHERE query_id = ?", (query_id,)
        ).fetchone()
        if row is not None and row["fingerprint"] == fingerprint:
            return SubmitAnswer(accepted=True, deduplicated=True,
                                status=PlatformStatus(row["status"]))
        if row is not None:
            return SubmitAnswer(accepted=False, reason=_conflict(query_id, row["fingerprint"], fingerprint))
        return self._admit(conn, query_id, sql, fingerprint, verdict)

    def _admit(self, conn: sqlite3.Connection, query_id: str, sql: object,
               fingerprint: str | None, verdict: CheckAnswer) -> SubmitAnswer:
        """A first submission under ``query_id``: an explicit rejection, or stored as RUNNING."""
        if _take_fault(conn, Fault.REJECT):
            return SubmitAnswer(accepted=False, reason="permission denied for table orders")
        if not verdict.ok:
            return SubmitAnswer(accepted=False, reason=f"rejected by the platform: {verdict.reason}")
        conn.execute(
            "INSERT INTO submissions (query_id, fingerprint, target, target_version, sql, status) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (query_id, fingerprint, self.TARGET, self.TARGET_VERSION, sql,
             PlatformStatus.RUNNING.value),
        )
        return SubmitAnswer(accepted=True, status=PlatformStatus.RUNNING)

    def lookup(self, query_id: str) -> LookupAnswer:
        """The platform's evidence for ``query_id``; found=False is an explicit not-found (Q15)."""
        _require_query_id(query_id)
        conn = self._ledger()
        answer: LookupAnswer | None = None
        fault: Fault | None = None
        try:
            with write(conn):
                fault = _take_first(conn, LOOKUP_FAULTS)
                if fault is None:
                    answer = self._poll(conn, query_id)
        except Busy as exc:
            raise self._lookup_timeout(query_id, "busy") from exc
        if fault is not None:
            raise self._lookup_timeout(query_id, FAULT_KIND[fault])
        if answer is None:  # unreachable: no fault means the lookup was answered
            raise self._lookup_timeout(query_id, "busy")
        return answer

    @staticmethod
    def _lookup_timeout(query_id: str, kind: str = "timeout") -> PlatformUnavailable:
        # No answer is not "not found": it proves nothing, the query stays unknown.
        return PlatformUnavailable(
            f"the platform {_WHAT[kind]} the lookup of query {query_id!r}; nothing was "
            "learnt and the query stays unknown: look it up again, do not resubmit (Q15)", kind)

    def _poll(self, conn: sqlite3.Connection, query_id: str) -> LookupAnswer:
        arrived = conn.execute("SELECT received FROM arrivals WHERE query_id = ?",
                               (query_id,)).fetchone()
        received = 0 if arrived is None else int(arrived["received"])
        row = conn.execute("SELECT status, polls, sql, error FROM submissions WHERE query_id = ?",
                           (query_id,)).fetchone()
        if row is None:
            return LookupAnswer(found=False, status=None, submissions_received=received)
        # Only a lookup that reached a stored submission counts as a poll.
        conn.execute("UPDATE submissions SET polls = polls + 1 WHERE query_id = ?", (query_id,))
        status, error = PlatformStatus(row["status"]), row["error"]
        limit = self.auto_complete_after_polls
        if status is PlatformStatus.RUNNING and limit is not None and row["polls"] + 1 >= limit:
            status, error = self._finish(conn, query_id, row["sql"])
        return LookupAnswer(found=True, status=status, submissions_received=received, error=error)

    def cancel(self, query_id: str) -> CancelAnswer:
        """Cancel a RUNNING submission; a finished one keeps its outcome (Q21)."""
        _require_query_id(query_id)
        conn = self._ledger()
        answer: CancelAnswer | None = None
        fault: Fault | None = None
        try:
            with write(conn):
                fault = _take_first(conn, CANCEL_BEFORE)
                if fault is None:
                    answer = self._cancel(conn, query_id)
                    fault = _take_first(conn, CANCEL_AFTER)
        except Busy as exc:
            raise self._cancel_timeout(query_id, "busy") from exc
        # Raised after COMMIT: a cancel whose answer was lost still cancelled (Q21).
        if fault is not None:
            raise self._cancel_timeout(query_id, FAULT_KIND[fault])
        if answer is None:  # unreachable: no fault means the cancel was processed
            raise self._cancel_timeout(query_id, "busy")
        return answer

    @staticmethod
    def _cancel(conn: sqlite3.Connection, query_id: str) -> CancelAnswer:
        row = conn.execute("SELECT status FROM submissions WHERE query_id = ?",
                           (query_id,)).fetchone()
        if row is None:
            return CancelAnswer(found=False, status=None)
        if PlatformStatus(row["status"]) is PlatformStatus.RUNNING:
            conn.execute("UPDATE submissions SET status = ? WHERE query_id = ?",
                         (PlatformStatus.CANCELLED.value, query_id))
            return CancelAnswer(found=True, status=PlatformStatus.CANCELLED)
        return CancelAnswer(found=True, status=PlatformStatus(row["status"]))

    @staticmethod
    def _cancel_timeout(query_id: str, kind: str = "timeout") -> PlatformUnavailable:
        # One text per kind, whether the cancel was applied or not (as for submit).
        return PlatformUnavailable(
            f"the platform {_WHAT[kind]} the cancel of query {query_id!r}; whether it stopped "
            "is unknown: look it up, cancelled is recorded only on evidence (Q21)", kind)

    # ---------------------------------------------------------------- the platform's own work
    def complete(self, query_id: str) -> PlatformStatus:
        """Finish a RUNNING submission now by running its SQL; any other status is returned as is."""
        _require_query_id(query_id)
        conn = self._ledger()
        with write(conn):
            row = conn.execute("SELECT status, sql FROM submissions WHERE query_id = ?",
                               (query_id,)).fetchone()
            if row is None:
                raise NotFound(f"no submission for query {query_id!r} on the platform; "
                               "submit it before completing it")
            if PlatformStatus(row["status"]) is not PlatformStatus.RUNNING:
                return PlatformStatus(row["status"])
            return self._finish(conn, query_id, row["sql"])[0]

    def _finish(self, conn: sqlite3.Connection, query_id: str,
                sql: str) -> tuple[PlatformStatus, str | None]:
        # Called inside a write transaction that just read status RUNNING: the
        # ledger's write lock is held from that read to the status update, so
        # no other process can run the same submission in between.
        columns_json = rows_json = error = None
        if _take_fault(conn, Fault.EXEC_FAIL):
            error = "runtime error on the platform while executing the query (injected EXEC_FAIL)"
        else:
            try:
                columns, rows = self._sandbox().run(statement_body(sql))
                columns_json, rows_json = json.dumps(columns), json.dumps(rows)
            except SqlRefused as exc:
                error = f"query failed on the platform: {exc}"
        status = PlatformStatus.FAILED if error else PlatformStatus.SUCCEEDED
        # executions counts attempts, failed ones included: it is the
        # duplicate-execution figure, so it errs on the side of counting.
        conn.execute(
            "UPDATE submissions SET status = ?, error = ?, columns_json = ?, rows_json = ?, "
            "executions = executions + 1 WHERE query_id = ?",
            (status.value, error, columns_json, rows_json, query_id),
        )
        return status, error

    def result(self, query_id: str) -> QueryResult:
        """Columns and rows of a SUCCEEDED submission."""
        _require_query_id(query_id)
        row = self._ledger().execute(
            "SELECT status, error, columns_json, rows_json FROM submissions WHERE query_id = ?",
            (query_id,),
        ).fetchone()
        if row is None:
            raise NotFound(f"no submission for query {query_id!r} on the platform")
        status = PlatformStatus(row["status"])
        if status is not PlatformStatus.SUCCEEDED:
            detail = f" ({row['error']})" if row["error"] else ""
            raise NotAllowed(f"query {query_id!r} has no result: it is {status.value}{detail}; "
                             "results exist only for succeeded queries")
        rows = tuple(tuple(r) for r in json.loads(row["rows_json"]))
        return QueryResult(query_id, tuple(json.loads(row["columns_json"])), rows)

    # ---------------------------------------------------------------- test controls
    def inject(self, fault: Fault, count: int = 1) -> None:
        """Arm ``fault`` for the next ``count`` matching calls, in any process using this ledger."""
        if not isinstance(fault, Fault):
            raise InvalidInput(f"fault must be a Fault, got {fault!r:.80}")
        if type(count) is not int or count < 1:
            raise InvalidInput(f"count must be an int >= 1, got {count!r:.80}")
        conn = self._ledger()
        with write(conn):
            conn.execute(
                "INSERT INTO faults (fault, remaining) VALUES (?, ?) "
                "ON CONFLICT (fault) DO UPDATE SET remaining = remaining + excluded.remaining",
                (fault.value, count),
            )

    def clear_faults(self, fault: Fault | None = None) -> None:
        """Disarm ``fault`` (or every fault): for a test whose call never reached the platform."""
        with write(self._ledger()) as conn:
            if fault is None:
                conn.execute("DELETE FROM faults")
            else:
                conn.execute("DELETE FROM faults WHERE fault = ?", (fault.value,))
