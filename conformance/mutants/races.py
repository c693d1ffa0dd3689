# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""Race mutants: check-then-act bugs that only two clients at once can show.

Each is a small subclass of the real :class:`~settled.impl.query._worker.Worker`,
correct when one worker runs alone, so the lockstep kit (one step at a time,
one thread) cannot kill it. The concurrent campaign
(:mod:`settled.conformance._concurrent`) must: it runs three workers on the
same queries and checks the history for linearizability.

They are a catalogue of their own (``RACE_MUTANTS``), not part of
:func:`settled.conformance.mutants.all_mutants`, because the lockstep
campaigns of ``settled mutants`` cannot reach them by construction;
``tests/test_concurrent.py`` runs them on seeds 1-10.
"""

from __future__ import annotations

from typing import Any

from settled.impl.query._events import apply_step
from settled.impl.query._store import iso, query_row
from settled.impl.query._worker import Worker
from settled.impl.shared._db import write
from settled.impl.shared._errors import NotAllowed
from settled.impl.shared._ids import require_id
from settled.model.query import QueryState as S

from .._query_adapter import QueryAdapter
from . import Mutant

__all__ = ["RACE_MUTANTS", "ClaimEpochReadBeforeLock", "ClaimSplitAcrossTransactions"]


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


def _race(name: str, worker: type[Worker]) -> Mutant:
    adapter = type(f"{worker.__name__}Adapter", (QueryAdapter,), {"worker_class": worker})
    doc = (worker.__doc__ or "").strip()
    return Mutant(name=name, rule=name.split("-", 1)[0], machine="query_concurrent",
                  description=doc.split("\n", 1)[0], adapter_class=adapter)


RACE_MUTANTS: list[Mutant] = [
    _race("Q11-claim-epoch-read-before-lock", ClaimEpochReadBeforeLock),
    _race("Q11-claim-check-and-act-in-two-transactions", ClaimSplitAcrossTransactions),
]
