"""A worker's lease: who it is, which epochs it holds, and the fenced steps on its rows (Q11).

:class:`WorkerLease` is the part of :class:`~._worker.Worker` that knows the worker's
name, the lease_epoch it claimed each query with and its connection: which queries it may
claim, whether a row is still held at the epoch it claimed, and how one model step is
recorded (renewing the lease) or only the lease renewed. It is its own room because it
decides nothing: the steps that call the platform and settle queries are in
:mod:`._worker`, which also opens every transaction the worker commits (``write``), so
that each keeps counting as the worker's own (``settled._bench_impl.count_transactions``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ...model.query import QueryState as S
from ..platform._platform_answers import PlatformClient
from ..shared._crash import CrashPoints, watched
from ..shared._db import skip_locked
from ..shared._errors import InvalidInput, NotAllowed, NotFound, StaleLease
from ..shared._ids import require_id
from ._events import apply_step
from ._schema import open_store
from ._values import LIVE, Clock, iso, query_row, utc_now

__all__ = ["WorkerLease"]


class WorkerLease:
    """A worker process's name, the lease epochs it holds and its connection (Q11)."""

    def __init__(self, store_path: str | Path, platform: PlatformClient, name: str,
                 lease_seconds: float, clock: Clock | None = None,
                 crash: CrashPoints | None = None) -> None:
        require_id("name", name)
        if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, int | float) \
                or lease_seconds < 0:
            raise InvalidInput(f"lease_seconds must be a number >= 0, got {lease_seconds!r:.80}; "
                               "pass how long a claim lasts without a step, e.g. 30")
        self.name = name
        self.platform = watched(platform, "platform")  # a boundary after each call
        self.lease_seconds = float(lease_seconds)
        self.held: dict[str, int] = {}  # query_id -> the lease_epoch this worker claimed with
        self._clock: Clock = clock or utc_now
        self._crash = crash or CrashPoints()
        self._conn = open_store(store_path, worker=True)

    def close(self) -> None:
        self._conn.close()

    # ---------------------------------------------------------------- plumbing
    def _now(self) -> datetime:
        return self._clock()

    @property
    def _params(self) -> dict[str, str]:
        return {"worker": self.name}

    def _expiry(self, now: datetime) -> float:
        return (now + timedelta(seconds=self.lease_seconds)).timestamp()

    def _held_row(self, conn: sqlite3.Connection, query_id: str) -> sqlite3.Row:
        """The row, if this worker still holds its current lease; else StaleLease/NotAllowed."""
        require_id("query_id", query_id)
        row = query_row(conn, query_id)
        mine = self.held.get(query_id)
        if mine is None:
            raise NotAllowed(f"worker {self.name!r} holds no lease on query {query_id!r}; claim "
                             "it first (Q11)")
        if row["lease_epoch"] != mine:
            raise StaleLease(f"worker {self.name!r} claimed query {query_id!r} with lease_epoch "
                             f"{mine}, the row is at lease_epoch {row['lease_epoch']} (taken over "
                             f"by {row['lease_owner']!r}); nothing was written, leave the query to "
                             "the current owner (Q11)")
        return row

    def _step(self, conn: sqlite3.Connection, row: sqlite3.Row, trigger: str, to_state: S,
              updates: Mapping[str, Any] | None = None, fault: str | None = None) -> S:
        """Record one step; ``fault`` is the kind of failure an unanswered call met (logged)."""
        now = self._now()
        params = self._params if fault is None else {**self._params, "fault": fault}
        apply_step(conn, row["query_id"], trigger=trigger, params=params,
                   from_state=S(row["execution_state"]), to_state=to_state, at=iso(now),
                   updates={**(updates or {}), "lease_expires_at": self._expiry(now)},
                   epoch=row["lease_epoch"])
        return to_state

    def _touch(self, conn: sqlite3.Connection, row: sqlite3.Row) -> S:
        """Nothing learnt that the model tracks: renew the lease, log nothing."""
        conn.execute("UPDATE queries SET lease_expires_at = ? WHERE query_id = ? AND lease_epoch = ?",
                     (self._expiry(self._now()), row["query_id"], row["lease_epoch"]))
        return S(row["execution_state"])

    def _require(self, row: sqlite3.Row, step: str, *states: S) -> None:
        state = S(row["execution_state"])
        if state not in states:
            raise NotAllowed(f"worker {self.name!r} cannot {step} query {row['query_id']!r}: it is "
                             f"{state.value}, {step} needs {' or '.join(s.value for s in states)}; "
                             "take the step its state allows (see run_once)")

    # ---------------------------------------------------------------- claimable (Q11)
    def _claim_row(self, conn: sqlite3.Connection, query_id: str) -> sqlite3.Row:
        # SKIP LOCKED on PostgreSQL: a row another worker's transaction holds is
        # not waited for; that worker is stepping it right now.
        row: sqlite3.Row | None = conn.execute(
            "SELECT * FROM queries WHERE query_id = ?" + skip_locked(conn), (query_id,)).fetchone()
        if row is not None:
            return row
        if conn.execute("SELECT 1 FROM queries WHERE query_id = ?", (query_id,)).fetchone() is None:
            raise NotFound(f"no query {query_id!r}; pass an id request_query returned")
        raise NotAllowed(f"worker {self.name!r} cannot claim query {query_id!r}: another worker's "
                         "transaction holds its row right now; look again next pass")

    @staticmethod
    def _claimable(conn: sqlite3.Connection, now: datetime) -> list[sqlite3.Row]:
        """Up to 8 live queries nobody holds a running lease on, oldest first (SKIP LOCKED)."""
        marks = ", ".join("?" for _ in LIVE)
        return conn.execute(
            f"SELECT * FROM queries WHERE execution_state IN ({marks}) AND (lease_owner IS NULL "
            "OR lease_expires_at IS NULL OR lease_expires_at <= ?) ORDER BY created_at, query_id "
            "LIMIT 8" + skip_locked(conn), [*(s.value for s in LIVE), now.timestamp()]).fetchall()

    @staticmethod
    def _live(conn: sqlite3.Connection) -> list[sqlite3.Row]:
        marks = ", ".join("?" for _ in LIVE)
        return conn.execute(f"SELECT * FROM queries WHERE execution_state IN ({marks}) "
                            "ORDER BY created_at, query_id", [s.value for s in LIVE]).fetchall()

    def _unclaimable(self, row: sqlite3.Row, now: datetime) -> str | None:
        state = S(row["execution_state"])
        if state not in LIVE:
            return f"it is {state.value}; only authorized, unsettled queries are claimed"
        if self.held.get(row["query_id"]) == row["lease_epoch"]:
            return f"it already holds lease_epoch {row['lease_epoch']}"
        expires = row["lease_expires_at"]
        if row["lease_owner"] is not None and expires is not None and expires > now.timestamp():
            return (f"worker {row['lease_owner']!r} holds lease_epoch {row['lease_epoch']} until "
                    f"{iso(datetime.fromtimestamp(expires, now.tzinfo))}; wait for it to expire")
        return None
