# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""Race mutants: check-then-act bugs that only two clients at once can show.

Each is a small subclass of the real query :class:`~settled.impl.query._worker.Worker`,
:class:`~settled.impl.approval._business.BusinessStore` or
:class:`~settled.impl.ledger._ledger.LedgerRuntime`, correct when one client
runs alone, so the lockstep kit (one step at a time, one thread) cannot kill
it. The concurrent campaigns must: :mod:`settled.conformance._lockstep._concurrent` runs
three workers on the same queries (``machine="query_concurrent"``),
:mod:`settled.conformance._bundled._concurrent_business` three clients ordering from
one stock (``machine="business_concurrent"``),
:mod:`settled.conformance._bundled._concurrent_ledger` four runtimes on one session
(``machine="ledger_concurrent"``); each history is checked for
linearizability.

They are a catalogue of their own (``RACE_MUTANTS``), not part of
:func:`settled.conformance.mutants.all_mutants`, because the lockstep
campaigns of ``settled mutants`` cannot reach them by construction;
``tests/test_concurrent.py`` runs them on seeds 1-10.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from settled.conformance._bundled._approval_adapter import ApprovalAdapter
from settled.conformance._bundled._ledger_adapter import LedgerAdapter
from settled.conformance._bundled._query_adapter import QueryAdapter
from settled.impl.approval._business import (
    MAX_CONFLICT_RETRIES,
    BusinessStore,
    _unique_violation,
)
from settled.impl.approval._business_normalize import JSON, canonical_json
from settled.impl.approval._business_rules import _APPLIERS, _product
from settled.impl.ledger._ledger import LedgerRuntime
from settled.impl.ledger._ledger_values import Entry
from settled.impl.query._events import apply_step
from settled.impl.query._store import iso, query_row
from settled.impl.query._worker import Worker
from settled.impl.shared._db import write
from settled.impl.shared._errors import Busy, InsufficientStock, NotAllowed
from settled.impl.shared._pg import WriteConflict
from settled.model.query import QueryState as S

from . import Mutant

__all__ = ["RACE_MUTANTS", "ClaimEpochReadBeforeLock", "ClaimSplitAcrossTransactions",
           "RunCheckedBeforeTheLock", "StockReadBeforeLock", "TokenCheckedBeforeLock"]



class _UnfencedLease(Worker):
    """The claim's lease written without the fence on the epoch it was judged at: the half
    both claim races share. With the fence, the losing claim of a race fails its write; without
    it, both claims win."""

    def _take_lease(self, conn: sqlite3.Connection, row: sqlite3.Row, now: datetime,
                    begin_submit: bool) -> tuple[int, bool]:
        epoch = row["lease_epoch"] + 1
        apply_step(conn, row["query_id"], trigger="claim", params=self._params,
                   from_state=S(row["execution_state"]), to_state=S(row["execution_state"]),
                   at=iso(now),  # bug: unfenced; shipped: at=iso(now), epoch=row["lease_epoch"],
                   updates={"lease_epoch": epoch, "lease_owner": self.name,
                            "lease_expires_at": self._expiry(now)})
        submitting = begin_submit and S(row["execution_state"]) is S.QUEUED
        if submitting:
            claimed = query_row(conn, row["query_id"])
            self._step(conn, claimed, "begin_submit", S.SUBMITTING, {
                "submissions": claimed["submissions"] + 1, "submit_epoch": epoch})
        return epoch, submitting


class ClaimEpochReadBeforeLock(_UnfencedLease):
    """Q11 broken under concurrency: the claim reads the row before taking the write lock.

    How it gets written: "look before you lock" to keep the write transaction
    short. The row is read (and judged claimable) on the plain connection, the
    new epoch is computed from that read, and only the update runs under
    ``BEGIN IMMEDIATE``, without fencing on the epoch it read. Two workers
    claiming at once both read epoch N and both write N+1: each believes it
    holds the only current lease.
    """

    def claim(self, query_id: str | None = None, *, begin_submit: bool = False) -> str | None:
        now = self._now()
        # bug: read and judged before the lock, on the plain connection
        judged = None if query_id is None else self._claim_target(self._conn, query_id, now)
        with write(self._conn) as conn:
            # bug: not judged again under the lock; shipped: row = self._claim_target(conn, query_id, now)
            row = judged if judged is not None else self._claim_target(conn, query_id, now)
            if row is None:
                return None
            epoch, submitting = self._take_lease(conn, row, now, begin_submit)
        return self._lease_taken(str(row["query_id"]), epoch, submitting)


class ClaimSplitAcrossTransactions(_UnfencedLease):
    """Q11 broken under concurrency: the claim checks in one transaction and acts in another.

    How it gets written: the check (is the query live, is its lease free) is
    factored into a helper that opens its own write transaction, "so it reads a
    consistent row", and the claim then writes the epoch in a second one. Each
    transaction is correct alone; the lock is released between the check and
    the act, and another worker's claim fits in the gap.
    """

    def claim(self, query_id: str | None = None, *, begin_submit: bool = False) -> str | None:
        if query_id is None:  # bug: only a claim by id is split (the oldest is found and taken in one)
            return super().claim(query_id, begin_submit=begin_submit)
        now = self._now()
        with write(self._conn) as conn:
            row = self._claim_target(conn, query_id, now)
            # bug deleted; shipped: if row is None:
            # bug deleted; shipped:     return None
            # bug deleted; shipped: epoch, submitting = self._take_lease(conn, row, now, begin_submit)
        if row is None:  # bug: the check's transaction ends here
            return None
        with write(self._conn) as conn:  # bug: the act in a second transaction
            epoch, submitting = self._take_lease(conn, row, now, begin_submit)
        return self._lease_taken(str(row["query_id"]), epoch, submitting)


# --------------------------------------------------------------------------- business store
def _in_transaction(store: BusinessStore, work: Callable[[Any], JSON]) -> JSON:
    """The store's own write loop (PostgreSQL conflicts retried), around ``work``."""
    for attempt in range(1, MAX_CONFLICT_RETRIES + 1):
        try:
            with write(store.connection) as conn:
                return work(conn)
        except (WriteConflict, _unique_violation()) as exc:
            if attempt == MAX_CONFLICT_RETRIES:
                raise Busy("too many conflicts; nothing was written") from exc
            time.sleep(0.001 * attempt)
    raise AssertionError("unreachable")


class TokenCheckedBeforeLock(BusinessStore):
    """W2 broken under concurrency: the client token is looked up before the write lock.

    How it gets written: "a replay should not even take the lock", so the token's
    record is looked up on the plain connection first and, when absent, the
    change and its record commit together; the record is inserted with
    ``ON CONFLICT DO NOTHING`` because "a concurrent duplicate only needs one
    record". Two calls with one token at once both find it absent and both
    apply: one order placed twice, stock taken twice.
    """

    def _apply(self, token: str, tool: str, normalized: JSON, wanted: str) -> tuple[JSON, bool]:
        first = self._first_result(self._conn, token, tool, wanted)  # bug: before the lock
        if first is not None:  # bug
            return first, True
        with write(self._conn) as conn:
            # bug deleted; shipped: first = self._first_result(conn, token, tool, wanted)
            # bug deleted; shipped: if first is not None:
            # bug deleted; shipped:     return first, True
            stored = self._change(conn, token, (tool, normalized, wanted))
            self._hook("before_commit")
        return stored, False

    def _change(self, conn: sqlite3.Connection, token: str, request: tuple[str, JSON, str]) -> JSON:
        tool, normalized, wanted = request  # bug: its fingerprint used; shipped: tool, normalized, _wanted = request  # noqa: E501
        now = self._now()  # one instant for the business rows and the record
        result = _APPLIERS[tool](conn, normalized, now)
        # bug: a concurrent duplicate keeps one record; shipped: return _record(conn, token, request, result, now)  # noqa: E501
        conn.execute("INSERT INTO mutation_requests (client_token, tool, normalized_args, "
                     "args_fingerprint, result, created_at) VALUES (?, ?, ?, ?, ?, ?) "
                     "ON CONFLICT (client_token) DO NOTHING",
                     (token, tool, canonical_json(normalized), wanted, canonical_json(result), now))
        return result  # bug


class StockReadBeforeLock(BusinessStore):
    """W6 broken under concurrency: an order reads the stock before the write lock.

    How it gets written: the order form's stock check ("is there enough?") is
    done first, on the plain connection, to refuse early without locking; the
    transaction then writes the stock it computed from that read
    (``stock = <read> - quantity``) instead of decrementing in place. Two orders
    at once both read the same stock and both write the same new value: one
    unit is sold twice and the stock stays too high.
    """

    def _apply(self, token: str, tool: str, normalized: JSON, wanted: str) -> tuple[JSON, bool]:
        # bug: the stock read and judged before the lock
        levels = {item["sku"]: int(_product(self._conn, item["sku"])["stock"])
                  for item in normalized["items"]} if tool == "create_order" else {}
        for item in normalized["items"] if levels else []:  # bug
            if levels[item["sku"]] < item["quantity"]:
                raise InsufficientStock(item["sku"], item["quantity"], levels[item["sku"]])
        with write(self._conn) as conn:
            first = self._first_result(conn, token, tool, wanted)
            if first is not None:
                return first, True
            stored = self._change(conn, token, (tool, normalized, wanted))
            for item in normalized["items"] if levels else []:  # bug: the stock of the early read
                conn.execute("UPDATE products SET stock = ? WHERE sku = ?",
                             (levels[item["sku"]] - item["quantity"], item["sku"]))
            self._hook("before_commit")
        return stored, False


# --------------------------------------------------------------------------- ledger runtime
class RunCheckedBeforeTheLock(LedgerRuntime):
    """L2 broken under concurrency: recovery checks the session's run before its write.

    How it gets written: ``recover_call`` has just checked that the session runs
    under this run (``_owned``, on the plain connection), "so the transaction only
    needs to move the row". Between that check and the write another runtime takes
    the session over and marks the call ``recovering`` again; the stale run's write
    then moves it back to ``registered``, after the takeover: the new run finds a
    call it never recovered ready to run, and a run that was taken over still
    recovered a call.
    """

    def _continue_call(self, entry: Entry) -> None:
        with write(self._conn) as conn:
            # bug deleted; shipped: self._owned(conn, entry.session_id, "recover a call")
            moved = conn.execute("UPDATE ledger SET state = 'registered' WHERE call_id = ? AND "
                                 "state = 'recovering'", (entry.call_id,)).rowcount
            if not moved:
                raise NotAllowed(f"call {entry.call_id!r} moved while it was being recovered; "
                                 "nothing was changed, read it again")
            self._log(conn, entry.call_id, "resume", "recovering", "registered")


def _ledger(name: str, runtime: type[LedgerRuntime]) -> Mutant:
    adapter = type(f"{runtime.__name__}Adapter", (LedgerAdapter,), {"runtime_class": runtime})
    doc = (runtime.__doc__ or "").strip()
    return Mutant(name=name, rule=name.split("-", 1)[0], machine="ledger_concurrent",
                  description=doc.split("\n", 1)[0], adapter_class=adapter)


def _business(name: str, store: type[BusinessStore]) -> Mutant:
    adapter = type(f"{store.__name__}Adapter", (ApprovalAdapter,), {"business_class": store})
    doc = (store.__doc__ or "").strip()
    return Mutant(name=name, rule=name.split("-", 1)[0], machine="business_concurrent",
                  description=doc.split("\n", 1)[0], adapter_class=adapter)


def _race(name: str, worker: type[Worker]) -> Mutant:
    adapter = type(f"{worker.__name__}Adapter", (QueryAdapter,), {"worker_class": worker})
    doc = (worker.__doc__ or "").strip()
    return Mutant(name=name, rule=name.split("-", 1)[0], machine="query_concurrent",
                  description=doc.split("\n", 1)[0], adapter_class=adapter)


RACE_MUTANTS: list[Mutant] = [
    _race("Q11-claim-epoch-read-before-lock", ClaimEpochReadBeforeLock),
    _race("Q11-claim-check-and-act-in-two-transactions", ClaimSplitAcrossTransactions),
    _business("W2-token-looked-up-before-the-lock", TokenCheckedBeforeLock),
    _business("W6-stock-read-before-the-lock", StockReadBeforeLock),
    _ledger("L2-run-checked-before-the-lock", RunCheckedBeforeTheLock),
]
