"""The one way into SQLite for the implementation.

Every store opens its file through :func:`connect` (WAL, ``synchronous=FULL``,
foreign keys on, a bounded busy timeout) and writes through :func:`write`,
which starts with ``BEGIN IMMEDIATE``: the write lock is taken *before* the
transaction reads the rows its decision depends on, so two writers can never
both read the old state and both act on it. A lock held past the busy timeout
surfaces as :class:`Busy`; the write is never retried silently.

Transaction boundaries can be observed: :func:`set_boundary_hook` installs one
callable (``None`` removes it), called with ``"begin"`` just before an
outermost write transaction of the calling thread opens and ``"commit"`` just
after it ends (committed or rolled back), on SQLite and PostgreSQL alike. It is
never called inside a transaction, so whatever it does (a test's scheduler
makes the thread wait its turn there) holds no lock. Nothing is installed in
production.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from ._crash import commit_boundary
from ._errors import Busy

DEFAULT_BUSY_TIMEOUT = 5.0

BoundaryHook = Callable[[str], None]
_boundary_hook: BoundaryHook | None = None
_depth = threading.local()  # write transactions the thread has open, on any connection


def set_boundary_hook(hook: BoundaryHook | None) -> BoundaryHook | None:
    """Install ``hook`` (called with ``"begin"`` / ``"commit"``); return the one it replaces."""
    global _boundary_hook
    previous, _boundary_hook = _boundary_hook, hook
    return previous


def connect(path: str | Path, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> sqlite3.Connection:
    """Open ``path`` in autocommit mode with the protocol's durability settings."""
    conn = sqlite3.connect(str(path), timeout=busy_timeout, isolation_level=None)
    conn.row_factory = sqlite3.Row
    _enable_wal(conn, busy_timeout)
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def write(conn: sqlite3.Connection) -> AbstractContextManager[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``; roll back on any error, ``Busy`` on lock timeout.

    A PostgreSQL connection (:class:`._pg.PgConnection`) opens its own kind of
    transaction instead (see :mod:`._pg` for its isolation levels).
    """
    if _boundary_hook is not None:
        return _observed(conn)
    if not isinstance(conn, sqlite3.Connection):
        return conn.write()  # type: ignore[unreachable, unused-ignore]
    return _write_sqlite(conn)


@contextmanager
def _observed(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """:func:`write` with the boundary hook called around the thread's outermost transaction."""
    depth = getattr(_depth, "n", 0)
    hook = _boundary_hook
    if depth == 0 and hook is not None:
        hook("begin")
    _depth.n = depth + 1
    try:
        inner = (_write_sqlite(conn) if isinstance(conn, sqlite3.Connection)
                 else conn.write())  # type: ignore[unreachable, unused-ignore]
        with inner as opened:
            yield opened
    finally:
        _depth.n = depth
        if depth == 0 and hook is not None:
            hook("commit")


def row_lock(conn: sqlite3.Connection) -> str:
    """`` FOR UPDATE`` inside a PostgreSQL write transaction; SQLite's write lock covers every row."""
    return str(getattr(conn, "row_lock", "")) if conn.in_transaction else ""


def skip_locked(conn: sqlite3.Connection) -> str:
    """`` FOR UPDATE SKIP LOCKED`` on PostgreSQL (a row another worker is stepping is skipped)."""
    return str(getattr(conn, "skip_locked", "")) if conn.in_transaction else ""


@contextmanager
def _write_sqlite(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if _is_busy(exc):
            raise Busy(f"database is locked past the busy timeout ({exc}); nothing was written, "
                       "retry the same call") from exc
        raise
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    # A crash injected here leaves the transaction open, as a dying process does: it is
    # never committed, and closing the connection rolls it back (._crash boundaries).
    commit_boundary("before_commit", conn)
    try:
        conn.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        conn.execute("ROLLBACK")
        if _is_busy(exc):
            raise Busy(f"commit blocked past the busy timeout ({exc}); nothing was written") from exc
        raise
    commit_boundary("after_commit", conn)


def _enable_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    # Switching a new file to WAL needs an exclusive lock, and SQLite answers
    # "locked" at once instead of waiting for the busy timeout when several
    # processes open a fresh file together. Retrying this idempotent setting
    # within the same bound is safe: it writes no data.
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() >= deadline:
                raise Busy(f"could not switch the database to WAL ({exc}); retry") from exc
            time.sleep(0.01)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def next_message_seq(conn: sqlite3.Connection) -> int:
    """The next ``messages.seq``, inside the caller's write transaction.

    Under ``BEGIN IMMEDIATE`` one writer at a time reads the maximum, so
    ``MAX + 1`` is unique; a PostgreSQL connection draws from a sequence
    instead (its writers run side by side).
    """
    draw = getattr(conn, "next_message_seq", None)
    if draw is not None:
        return int(draw())
    return int(conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM messages").fetchone()[0])


def apply_schema(conn: sqlite3.Connection, schema: str, version: int, name: str) -> None:
    """Create the schema once and record its version; refuse a file of another version.

    A file already at this version is only read (no write transaction, so opening a store
    commits nothing: a restart crosses no durable boundary before its first real write)."""
    try:
        found = conn.execute("SELECT version FROM schema_version WHERE name = ?",
                             (name,)).fetchone()
    except sqlite3.OperationalError:  # no schema_version table yet: a new file
        found = None
    if found is not None and found["version"] == version:
        return
    with write(conn):
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version "
                     "(name TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        row = conn.execute("SELECT version FROM schema_version WHERE name = ?", (name,)).fetchone()
        if row is None:
            for statement in _statements(schema):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version (name, version) VALUES (?, ?)", (name, version))
        elif row["version"] != version:
            raise RuntimeError(f"{name} schema version {row['version']} in this file, this code needs "
                               f"{version}; use a fresh file or migrate it")


def _statements(schema: str) -> list[str]:
    return [s.strip() for s in schema.split(";") if s.strip()]
