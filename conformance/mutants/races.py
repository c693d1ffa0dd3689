# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""Race mutants: check-then-act bugs that only two clients at once can show.

Each is a small subclass of the real query :class:`~settled.impl.query._worker.Worker`
or :class:`~settled.impl.approval._business.BusinessStore`, correct when one
client runs alone, so the lockstep kit (one step at a time, one thread) cannot
kill it. The concurrent campaigns must: :mod:`settled.conformance._concurrent`
runs three workers on the same queries (``machine="query_concurrent"``),
:mod:`settled.conformance._concurrent_business` three clients ordering from
one stock (``machine="business_concurrent"``); each history is checked for
linearizability.

They are a catalogue of their own (``RACE_MUTANTS``), not part of
:func:`settled.conformance.mutants.all_mutants`, because the lockstep
campaigns of ``settled mutants`` cannot reach them by construction;
``tests/test_concurrent.py`` runs them on seeds 1-10.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from settled.impl.approval._business import (
    _APPLIERS,
    MAX_CONFLICT_RETRIES,
    BusinessStore,
    _order_result,
    _product,
    _unique_violation,
    canonical_json,
    check_token,
    fingerprint,
    normalize,
)
from settled.impl.query._events import apply_step
from settled.impl.query._store import iso, query_row
from settled.impl.query._worker import Worker
from settled.impl.shared._db import write
from settled.impl.shared._errors import Busy, InsufficientStock, NotAllowed
from settled.impl.shared._ids import require_id
from settled.impl.shared._pg import WriteConflict
from settled.model.query import QueryState as S

from .._approval_adapter import ApprovalAdapter
from .._query_adapter import QueryAdapter
from . import Mutant

__all__ = ["RACE_MUTANTS", "ClaimEpochReadBeforeLock", "ClaimSplitAcrossTransactions",
           "StockReadBeforeLock", "TokenCheckedBeforeLock"]

JSON = dict[str, Any]


class ClaimEpochReadBeforeLock(Worker):
    """Q11 broken under concurrency: the claim reads the row before taking the write lock.

    How it gets written: "look before you lock" to keep the write transaction
    short. The row is read (and judged claimable) on the plain connection, the
    new epoch is computed from that read, and only the update runs under
    ``BEGIN IMMEDIATE``, without fencing on the epoch it read. Two workers
    claiming at once both read epoch N and both write N+1: each believes it
    holds the only current lease.
    """

    def claim(self, query_id: str | None = None, *, begin_submit: bool = False) -> str | None:
        if query_id is None or begin_submit:
            return super().claim(query_id, begin_submit=begin_submit)
        now = self._now()
        row = query_row(self._conn, require_id("query_id", query_id))  # the bug: no lock yet
        reason = self._unclaimable(row, now)
        if reason:
            raise NotAllowed(f"worker {self.name!r} cannot claim query {query_id!r}: {reason}")
        epoch = row["lease_epoch"] + 1
        with write(self._conn) as conn:
            apply_step(conn, query_id, trigger="claim", params=self._params,
                       from_state=S(row["execution_state"]), to_state=S(row["execution_state"]),
                       at=iso(now), updates={"lease_epoch": epoch, "lease_owner": self.name,
                                             "lease_expires_at": self._expiry(now)})
        self.held[query_id] = epoch
        return query_id


class ClaimSplitAcrossTransactions(Worker):
    """Q11 broken under concurrency: the claim checks in one transaction and acts in another.

    How it gets written: the check (is the query live, is its lease free) is
    factored into a helper that opens its own write transaction, "so it reads a
    consistent row", and the claim then writes the epoch in a second one. Each
    transaction is correct alone; the lock is released between the check and
    the act, and another worker's claim fits in the gap.
    """

    def _checked(self, query_id: str) -> dict[str, Any]:
        with write(self._conn) as conn:
            row = self._claim_row(conn, require_id("query_id", query_id))
            reason = self._unclaimable(row, self._now())
            if reason:
                raise NotAllowed(f"worker {self.name!r} cannot claim query {query_id!r}: {reason}")
            return dict(zip(row.keys(), tuple(row), strict=True))

    def claim(self, query_id: str | None = None, *, begin_submit: bool = False) -> str | None:
        if query_id is None or begin_submit:
            return super().claim(query_id, begin_submit=begin_submit)
        row = self._checked(query_id)
        now = self._now()
        epoch = row["lease_epoch"] + 1
        with write(self._conn) as conn:  # the bug: a second transaction, the check not redone
            apply_step(conn, query_id, trigger="claim", params=self._params,
                       from_state=S(row["execution_state"]), to_state=S(row["execution_state"]),
                       at=iso(now), updates={"lease_epoch": epoch, "lease_owner": self.name,
                                             "lease_expires_at": self._expiry(now)})
        self.held[query_id] = epoch
        return query_id


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

    def execute(self, tool: str, client_token: str, args: Mapping[str, Any]) -> JSON:
        token = check_token(client_token)
        normalized = normalize(tool, args)
        wanted = fingerprint(tool, normalized)
        first = self._first_result(self.connection, token, tool, wanted)  # the bug: no lock
        if first is not None:
            return first

        def work(conn: Any) -> JSON:
            now = self._now()
            result = _APPLIERS[tool](conn, normalized, now)
            conn.execute("INSERT INTO mutation_requests (client_token, tool, normalized_args, "
                         "args_fingerprint, result, created_at) VALUES (?, ?, ?, ?, ?, ?) "
                         "ON CONFLICT (client_token) DO NOTHING",
                         (token, tool, canonical_json(normalized), wanted,
                          canonical_json(result), now))
            return result

        return _in_transaction(self, work)


class StockReadBeforeLock(BusinessStore):
    """W6 broken under concurrency: an order reads the stock before the write lock.

    How it gets written: the order form's stock check ("is there enough?") is
    done first, on the plain connection, to refuse early without locking; the
    transaction then writes the stock it computed from that read
    (``stock = <read> - quantity``) instead of decrementing in place. Two orders
    at once both read the same stock and both write the same new value: one
    unit is sold twice and the stock stays too high.
    """

    def execute(self, tool: str, client_token: str, args: Mapping[str, Any]) -> JSON:
        if tool != "create_order":
            return super().execute(tool, client_token, args)
        token = check_token(client_token)
        normalized = normalize(tool, args)
        wanted = fingerprint(tool, normalized)
        levels = {item["sku"]: int(_product(self.connection, item["sku"])["stock"])  # the bug
                  for item in normalized["items"]}
        for item in normalized["items"]:
            if levels[item["sku"]] < item["quantity"]:
                raise InsufficientStock(item["sku"], item["quantity"], levels[item["sku"]])

        def work(conn: Any) -> JSON:
            first = self._first_result(conn, token, tool, wanted)
            if first is not None:
                return first
            now = self._now()
            for item in normalized["items"]:
                conn.execute("UPDATE products SET stock = ? WHERE sku = ?",
                             (levels[item["sku"]] - item["quantity"], item["sku"]))
            count = conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0]
            order_id = f"ord-{count + 1:06d}"
            conn.execute("INSERT INTO orders (order_id, customer, status, draft_id, created_at) "
                         "VALUES (?, ?, 'open', ?, ?)",
                         (order_id, normalized["customer"], normalized["draft_id"], now))
            conn.executemany("INSERT INTO order_lines (order_id, sku, quantity) VALUES (?, ?, ?)",
                             [(order_id, i["sku"], i["quantity"]) for i in normalized["items"]])
            result = _order_result(conn, order_id)
            conn.execute("INSERT INTO mutation_requests (client_token, tool, normalized_args, "
                         "args_fingerprint, result, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                         (token, tool, canonical_json(normalized), wanted,
                          canonical_json(result), now))
            return result

        return _in_transaction(self, work)


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
]
