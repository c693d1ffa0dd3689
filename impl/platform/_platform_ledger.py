"""The platform's own files: the ledger's schema, opening both files once per process, the
one-shot faults waiting in the ledger, and the figures an observer reads from it.

:class:`PlatformLedger` is the base of :class:`~._platform.SyntheticPlatform`: everything
here reads the files or sets them up, and none of it opens a write transaction of its
own. It is its own room so that :mod:`._platform` holds only the calls and the platform's
decisions, each one a ``BEGIN IMMEDIATE`` transaction on the ledger (``settled bench``
counts those commits by the module that makes them: ``platform``).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from ..shared._db import apply_schema, connect
from ..shared._errors import InvalidInput
from ._orders_data import Sandbox, ensure_orders_database
from ._platform_answers import Fault, PlatformStatus

__all__ = ["LEDGER_SCHEMA", "LEDGER_SCHEMA_VERSION", "MAX_QUERY_ID_CHARS", "PlatformLedger"]

MAX_QUERY_ID_CHARS: Final = 200

LEDGER_SCHEMA_VERSION: Final = 1
LEDGER_SCHEMA: Final = """
CREATE TABLE submissions (
    query_id TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    target TEXT NOT NULL,
    target_version INTEGER NOT NULL,
    sql TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'cancelled')),
    polls INTEGER NOT NULL DEFAULT 0,
    executions INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    columns_json TEXT,
    rows_json TEXT
);
CREATE TABLE arrivals (
    query_id TEXT PRIMARY KEY,
    received INTEGER NOT NULL CHECK (received > 0)
);
CREATE TABLE faults (
    fault TEXT PRIMARY KEY,
    remaining INTEGER NOT NULL CHECK (remaining >= 0)
)
"""


# --------------------------------------------------------------------------- ledger helpers
def _require_query_id(query_id: object) -> str:
    if not isinstance(query_id, str) or not query_id.strip():
        raise InvalidInput(f"query_id must be a non-empty str, got {query_id!r:.80}; "
                           "pass the query's stable id (Q1)")
    if len(query_id) > MAX_QUERY_ID_CHARS:
        raise InvalidInput(f"query_id {query_id[:40]!r}… is {len(query_id)} characters, "
                           f"the limit is {MAX_QUERY_ID_CHARS}")
    return query_id


def _require_polls(polls: object) -> int | None:
    if polls is None or (type(polls) is int and polls >= 1):
        return polls
    raise InvalidInput(f"auto_complete_after_polls must be None or an int >= 1, got {polls!r:.80}")


def _take_fault(conn: sqlite3.Connection, fault: Fault) -> bool:
    """Consume one pending ``fault`` inside the caller's transaction; True if there was one."""
    cursor = conn.execute(
        "UPDATE faults SET remaining = remaining - 1 WHERE fault = ? AND remaining > 0",
        (fault.value,),
    )
    return cursor.rowcount == 1


def _take_first(conn: sqlite3.Connection, faults: tuple[Fault, ...]) -> Fault | None:
    """Consume the first pending fault of ``faults`` (in that order), or None."""
    for fault in faults:
        if _take_fault(conn, fault):
            return fault
    return None


@contextmanager
def _setup_lock(directory: Path) -> Iterator[None]:
    # Several worker processes may open a fresh directory at the same moment.
    # Switching a new file to WAL is one step SQLite does not wait for: the
    # loser gets "database is locked" at once, busy timeout or not. A file
    # lock makes the first opener create both files while the others wait;
    # once the files exist, opening them needs no lock.
    with open(directory / "platform-setup.lock", "ab") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        yield


class PlatformLedger:
    """The ledger and orders files of one platform folder, and what can be read of them."""

    def __init__(self, directory: str | os.PathLike[str], *,
                 auto_complete_after_polls: int | None = None) -> None:
        self.directory = Path(directory)
        self.auto_complete_after_polls = _require_polls(auto_complete_after_polls)
        self.ledger_path = self.directory / "platform-ledger.db"
        self.orders_path = self.directory / "platform-orders.db"
        self._pid = -1
        self._ledger_conn: sqlite3.Connection | None = None
        self._sandbox_conn: Sandbox | None = None
        self.directory.mkdir(parents=True, exist_ok=True)
        with _setup_lock(self.directory):
            orders = connect(self.orders_path)
            try:
                ensure_orders_database(orders)
            finally:
                orders.close()
            apply_schema(self._ledger(), LEDGER_SCHEMA, LEDGER_SCHEMA_VERSION, "platform-ledger")

    # ---------------------------------------------------------------- connections
    def _ledger(self) -> sqlite3.Connection:
        self._reopen_after_fork()
        if self._ledger_conn is None:
            self._ledger_conn = connect(self.ledger_path)
        return self._ledger_conn

    def _sandbox(self) -> Sandbox:
        self._reopen_after_fork()
        if self._sandbox_conn is None:
            self._sandbox_conn = Sandbox(self.orders_path)
        return self._sandbox_conn

    def _reopen_after_fork(self) -> None:
        # An SQLite connection must not be used on both sides of a fork(); a
        # child that inherited this object opens its own (and leaves the
        # parent's alone rather than closing it under the parent).
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._ledger_conn = self._sandbox_conn = None

    def close(self) -> None:
        if self._pid == os.getpid():
            if self._ledger_conn is not None:
                self._ledger_conn.close()
            if self._sandbox_conn is not None:
                self._sandbox_conn.close()
        self._ledger_conn = self._sandbox_conn = None

    # ---------------------------------------------------------------- figures, for observers
    def status(self, query_id: str) -> PlatformStatus | None:
        """What the ledger holds for ``query_id``, read without counting as a poll.

        For observers (a conformance kit, an operator); a worker asks with
        :meth:`lookup`, which is a remote call that can time out.
        """
        _require_query_id(query_id)
        row = self._ledger().execute("SELECT status FROM submissions WHERE query_id = ?",
                                     (query_id,)).fetchone()
        return None if row is None else PlatformStatus(row["status"])

    def stored_sql(self, query_id: str) -> str | None:
        """The SQL the ledger stored under ``query_id`` (None: nothing stored), for observers."""
        _require_query_id(query_id)
        row = self._ledger().execute("SELECT sql FROM submissions WHERE query_id = ?",
                                     (query_id,)).fetchone()
        return None if row is None else str(row["sql"])

    def pending_faults(self) -> dict[Fault, int]:
        rows = self._ledger().execute("SELECT fault, remaining FROM faults WHERE remaining > 0")
        return {Fault(row["fault"]): row["remaining"] for row in rows}

    def executions(self, query_id: str) -> int:
        """How often the SQL of ``query_id`` really ran (must stay <= 1)."""
        return self._figure("SELECT executions FROM submissions WHERE query_id = ?", query_id)

    def submissions_received(self, query_id: str) -> int:
        """Submit requests that arrived for ``query_id``: dedupe hits and rejections included."""
        return self._figure("SELECT received FROM arrivals WHERE query_id = ?", query_id)

    def _figure(self, select: str, query_id: str) -> int:
        row = self._ledger().execute(select, (_require_query_id(query_id),)).fetchone()
        return 0 if row is None else int(row[0])
