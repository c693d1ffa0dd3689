# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""Crash-window mutants: one durable write split in two, with no named crash point between.

Each is correct in every state a step leaves behind, so the lockstep campaign, which
observes only between steps and crashes only at the named points, cannot tell it from
the implementation. Only a crash between its two commits shows the half-done
operation: these mutants are run by the crash sweep (``campaign="crash_sweep"``), which
crashes every durable boundary of every operation, and must be killed by it.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Mapping
from typing import Any

from settled.conformance._bundled._approval_adapter import ApprovalAdapter
from settled.conformance._bundled._ledger_adapter import LedgerAdapter
from settled.conformance._bundled._query_adapter import QueryAdapter
from settled.impl.approval._approval import ApprovalRuntime, Call, CallState
from settled.impl.approval._business import BusinessStore, _record
from settled.impl.approval._business_normalize import JSON, canonical_json
from settled.impl.approval._business_rules import _APPLIERS
from settled.impl.ledger._ledger import LedgerRuntime
from settled.impl.ledger._ledger_values import Entry
from settled.impl.query._values import iso, task_row
from settled.impl.query._worker import Worker
from settled.impl.query._worker_notify import SETTLED_PHASE
from settled.impl.shared._db import write
from settled.impl.shared._errors import NotAllowed
from settled.model.query import QueryState as S

from . import Mutant
from .approval import runtime_opening

__all__ = ["MUTANTS"]


# -- query ---------------------------------------------------------------------------------------
class Q12CountedBeforeSubmitting(Worker):
    """Q12: the submission is counted and fenced (submissions + 1, submit_epoch) in one
    transaction, and queued -> submitting committed in a second: "reserve the budget first".
    Each step ends consistent; a crash between leaves a queued query that used a submission."""

    def begin_submit(self, query_id: str) -> S:
        with self._fenced(query_id) as (conn, row):
            self._require(row, "begin_submit", S.QUEUED)
            # bug: counted first; shipped: state = self._step(conn, row, "begin_submit", S.SUBMITTING, {"submissions": row["submissions"] + 1, "submit_epoch": row["lease_epoch"]})  # noqa: E501
            conn.execute("UPDATE queries SET submissions = ?, submit_epoch = ? WHERE query_id = ?",
                         (row["submissions"] + 1, row["lease_epoch"], query_id))
        # bug: the step in a second transaction
        with self._fenced(query_id) as (conn, row):
            state = self._step(conn, row, "begin_submit", S.SUBMITTING)
        self._crash.hit("after_submitting_commit")
        return state


class Q25NotificationAfterTheOutcome(Worker):
    """Q25: the terminal state commits, and its result notification is queued in a
    transaction of its own right after (before the named point after both): a crash between
    leaves a settled query nobody is ever told about."""

    _owed: list[str]

    def _settle(self, conn: sqlite3.Connection, row: sqlite3.Row, trigger: str, to_state: S, *,
                result: Mapping[str, Any] | None = None, error: str | None = None) -> S:
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
        # bug: owed, queued after the commit; shipped: self._queue_in(conn, row["query_id"], iso(self._now()))
        self._owed = [*getattr(self, "_owed", []), row["query_id"]]
        return state

    def _after_commit(self, query_id: str, state: S) -> S:
        owed, self._owed = getattr(self, "_owed", []), []  # bug
        for qid in owed:  # bug: each notification in a transaction of its own
            with write(self._conn) as conn:
                Worker._queue_in(conn, qid, iso(self._now()))
        return super()._after_commit(query_id, state)


# -- approval and ledger: the business store -------------------------------------------------------
class W6RecordAfterTheChangeUnhooked(BusinessStore):
    """W6: the change commits, then the token record in a second transaction; the store's
    crash hooks stay where they were (inside the first, after the second), so no named
    point falls between: a crash there keeps the change with no record of it."""

    def _apply(self, token: str, tool: str, normalized: JSON, wanted: str) -> tuple[JSON, bool]:
        with write(self._conn) as conn:
            first = self._first_result(conn, token, tool, wanted)
            if first is not None:
                return first, True
            # bug deleted; shipped: stored = self._change(conn, token, (tool, normalized, wanted))
            now = self._now()  # bug: the change alone
            result = _APPLIERS[tool](conn, normalized, now)  # bug
            self._hook("before_commit")
        with write(self._conn) as conn:  # bug: the record in a transaction of its own
            stored = _record(conn, token, (tool, normalized, wanted), result, now)
        return stored, False


# -- approval: the runtime -----------------------------------------------------------------------
class R6ResultAfterItsState(ApprovalRuntime):
    """R6: the result checkpoint moves the call to result_checkpointed, then stores the
    result in a second transaction (before the named point R6): a crash between leaves a
    checkpointed call with no result to answer with."""

    def _save(self, call: Call, event: str, allowed: frozenset[CallState],
              result: Mapping[str, Any]) -> Call:
        # bug: the state first; shipped: call = self._update(call, event, allowed, S.RESULT_CHECKPOINTED, result=result)  # noqa: E501
        call = self._update(call, event, allowed, CallState.RESULT_CHECKPOINTED)
        conn = self._checkpoints._conn  # bug
        with write(conn):  # bug: the result in a second transaction
            conn.execute("UPDATE calls SET result = ? WHERE call_id = ?",
                         (json.dumps(dict(result)), call.call_id))
        call = self.get(call.call_id)  # bug
        self._hook("R6")
        return self._answer(call)


# -- ledger: the runtime -------------------------------------------------------------------------
class L4PairedBeforeItsResult(LedgerRuntime):
    """L4: pairing marks the call paired, then writes its tool_result node in a second
    transaction (before the named point after both): a crash between leaves a paired call
    whose result is nowhere in the session."""

    def _pair(self, entry: Entry, event: str, source: str, result: Mapping[str, Any]) -> None:
        now = self._clock()
        with write(self._conn) as conn:
            self._owned(conn, entry.session_id, "pair a call")  # the fence, under the lock (L2)
            moved = conn.execute("UPDATE ledger SET state = 'paired' WHERE call_id = ? AND "
                                 "state = ?", (entry.call_id, entry.state)).rowcount
            if not moved:
                raise NotAllowed(f"call {entry.call_id!r} moved while it was being paired; "
                                 "nothing was changed, read it again")
        with write(self._conn) as conn:  # bug: the result node in a transaction of its own; shipped:
            leaf = conn.execute("SELECT leaf_id FROM sessions WHERE session_id = ?",
                                (entry.session_id,)).fetchone()["leaf_id"]
            node = f"node-{uuid.uuid4().hex[:16]}"
            conn.execute("INSERT INTO nodes (node_id, session_id, parent_id, role, call_id, "
                         "content, created_at) VALUES (?, ?, ?, 'tool_result', ?, ?, ?)",
                         (node, entry.session_id, leaf, entry.call_id, canonical_json(result),
                          now))
            conn.execute("UPDATE sessions SET leaf_id = ? WHERE session_id = ?",
                         (node, entry.session_id))
            self._log(conn, entry.call_id, event, source, "paired")
        self._hook("result_checkpointed", entry.position)


def _query(name: str, worker: type[Worker]) -> type[QueryAdapter]:
    return type(name, (QueryAdapter,), {"worker_class": worker})


def _approval(name: str, runtime: type[ApprovalRuntime]) -> type[ApprovalAdapter]:
    return type(name, (ApprovalAdapter,), {"runtime_class": runtime})


def _ledger(name: str, runtime: type[LedgerRuntime]) -> type[LedgerAdapter]:
    return type(name, (LedgerAdapter,), {"runtime_class": runtime})


class _LedgerRecordAfterTheChange(LedgerRuntime):
    business_class = W6RecordAfterTheChangeUnhooked


MUTANTS: list[Mutant] = [
    Mutant("Q12-counted-before-submitting", "Q12", "query",
           "begin_submit counts the submission in one transaction and moves to submitting in "
           "a second", _query("Q12CountedAdapter", Q12CountedBeforeSubmitting),
           campaign="crash_sweep"),
    Mutant("Q25-notification-after-the-outcome", "Q25", "query",
           "the terminal state commits, its result notification in a transaction after it",
           _query("Q25AfterAdapter", Q25NotificationAfterTheOutcome), campaign="crash_sweep"),
    Mutant("R6-result-after-its-state", "R6", "approval",
           "the result checkpoint commits the state, then the result in a second transaction",
           _approval("R6AfterAdapter", R6ResultAfterItsState), campaign="crash_sweep"),
    Mutant("W6-record-after-the-change-unhooked", "W6", "approval",
           "the business change commits, the token record in a second transaction, with no "
           "named crash point between", _approval("W6UnhookedAdapter",
                                                  runtime_opening(W6RecordAfterTheChangeUnhooked)),
           campaign="crash_sweep"),
    Mutant("L4-paired-before-its-result", "L4", "ledger",
           "pairing commits the paired state, then the tool_result node in a second transaction",
           _ledger("L4PairedAdapter", L4PairedBeforeItsResult), campaign="crash_sweep"),
    Mutant("L1-receipt-after-the-change-unhooked", "L1", "ledger",
           "the write's business change commits, its receipt in a second transaction, with no "
           "named crash point between",
           _ledger("L1UnhookedAdapter", _LedgerRecordAfterTheChange), campaign="crash_sweep"),
]
