"""The same stores on PostgreSQL (psycopg 3), chosen by a ``postgresql://`` URL.

Theory of operation. The store, worker and business modules are written
against the small part of ``sqlite3.Connection`` they use: ``execute`` with
``?`` parameters, rows read by column name or position, ``executemany``,
``in_transaction`` and ``close``; and every write goes through
:func:`._db.write`. :class:`PgConnection` speaks that subset on a psycopg
connection, so one body of SQL and one set of protocol checks serves both
stores. What differs is said here, once:

- **Durability.** ``synchronous_commit = on`` for every session: a commit
  returns only once it is flushed on the server, the counterpart of SQLite's
  ``synchronous=FULL`` (Q12: what precedes a platform call is durable first).
- **Isolation.** SQLite's ``BEGIN IMMEDIATE`` runs one writer at a time, so
  a read-decide-write transaction never acts on a state another writer is
  changing. PostgreSQL runs writers side by side, and each connection says how
  it keeps that promise (see :data:`USER_SIDE` and :data:`WORKER_SIDE`):

  - the user's side (tasks, messages, drafts, confirm, cancel) and the
    business store run ``SERIALIZABLE``. Their decisions read several rows
    (every unattributed message of the session, the task, the draft), and
    serializable snapshot isolation guarantees the outcome of some serial
    order, i.e. the same proof obligations as SQLite's single writer, with no
    hand-written lock list to get wrong. The price is that a conflicting pair
    aborts one side with SQLSTATE 40001; that surfaces as :class:`WriteConflict`
    (a :class:`Busy`: nothing was written, retry the same call);
  - workers run ``READ COMMITTED`` with explicit row locks: a worker's
    decision depends on one query row (and its task when it settles), so it
    reads them ``FOR UPDATE`` (:func:`._db.row_lock`), claims with
    ``FOR UPDATE SKIP LOCKED`` (a row another worker is stepping is skipped,
    not waited for) and writes ``UPDATE … WHERE lease_epoch = <its epoch>``
    (fencing: a worker whose lease was taken over changes zero rows and is
    refused with :class:`StaleLease`). Serializable would be correct too,
    but workers scanning the same index pages abort each other's claims as
    false positives; row locks scale with the number of workers.

- **Sequences.** ``messages.seq`` comes from a sequence, since two workers
  settling at once cannot both read ``MAX(seq)`` safely.
- **Append-only log.** A trigger refuses UPDATE and DELETE on the event log.
- **Scratch stores.** A URL may carry ``options=-csearch_path=<schema>``;
  :func:`scratch_store` makes a fresh schema for a throwaway store inside an
  existing database (one per lockstep example) and :func:`release_store`
  removes it.
"""

from __future__ import annotations

import atexit
import contextlib
import re
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ._crash import commit_boundary
from ._errors import Busy, InvalidInput, NotFound

__all__ = [
    "USER_SIDE",
    "WORKER_SIDE",
    "PgConnection",
    "WriteConflict",
    "apply_schema",
    "connect",
    "is_url",
    "missing_database",
    "redact",
    "release_store",
    "scratch_store",
]

USER_SIDE: Final = "SERIALIZABLE"
WORKER_SIDE: Final = "READ COMMITTED"
_SCHEMES: Final = ("postgresql://", "postgres://")
_RETRYABLE: Final = ("40001", "40P01", "55P03")  # serialization failure, deadlock, lock timeout


class WriteConflict(Busy):
    """PostgreSQL aborted the transaction for a concurrent one; nothing was written, retry."""


EXTRA: Final = "pip install 'settled[postgres]'"


class PostgresMissing(InvalidInput):
    """A PostgreSQL store was asked for on an installation without psycopg."""


def psycopg_module() -> ModuleType:
    """psycopg, or :class:`PostgresMissing` in one line naming the extra that installs it."""
    try:
        import psycopg
    except ImportError:
        raise PostgresMissing("PostgreSQL support needs psycopg, which the postgres extra "
                              f"installs: {EXTRA}") from None
    return psycopg


def is_url(location: object) -> bool:
    return isinstance(location, str) and location.startswith(_SCHEMES)


def redact(url: str) -> str:
    """The URL without a password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


class Row:
    """A row read by column name or position, like ``sqlite3.Row``."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[Any], index: Mapping[str, int]) -> None:
        self._values, self._index = values, index

    def __getitem__(self, key: str | int) -> Any:
        return self._values[self._index[key]] if isinstance(key, str) else self._values[key]

    def keys(self) -> list[str]:
        return list(self._index)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def _row_factory(cursor: Any) -> Any:
    index = {column.name: i for i, column in enumerate(cursor.description or ())}
    return lambda values: Row(values, index)


_TRANSLATED: dict[str, str] = {}


def _translate(sql: str) -> str:
    """``?`` parameters → ``%s`` (and a literal ``%`` doubled); cached per statement text."""
    done = _TRANSLATED.get(sql)
    if done is None:
        done = _TRANSLATED[sql] = sql.replace("%", "%%").replace("?", "%s")
    return done


class PgConnection:
    """The subset of ``sqlite3.Connection`` the stores use, on one psycopg connection."""

    row_lock: Final = " FOR UPDATE"
    skip_locked: Final = " FOR UPDATE SKIP LOCKED"

    def __init__(self, url: str, isolation: str, busy_timeout: float) -> None:
        psycopg = psycopg_module()

        if isolation not in (USER_SIDE, WORKER_SIDE):
            raise InvalidInput(f"isolation {isolation!r}; use {USER_SIDE!r} or {WORKER_SIDE!r}")
        from psycopg.conninfo import conninfo_to_dict

        # Session settings travel with the connection request (no extra round trips).
        given = str(conninfo_to_dict(url).get("options") or "")
        options = (f"{given} -c synchronous_commit=on "
                   f"-c lock_timeout={int(busy_timeout * 1000)}").strip()
        try:
            self._conn = psycopg.connect(url, autocommit=True, row_factory=_row_factory,
                                         options=options)
        except psycopg.OperationalError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise NotFound(f"cannot connect to the PostgreSQL store {redact(url)!r} ({first}); "
                           "check the URL and that the server runs") from exc
        self.url = url
        self.isolation = isolation
        self._open = False

    # -- the sqlite3.Connection subset ---------------------------------------------------
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        import psycopg

        try:
            return self._conn.execute(_translate(sql), params)
        except psycopg.errors.OperationalError as exc:
            if _retryable(exc):
                raise _conflict(exc) from exc
            raise

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(_translate(sql), list(rows))

    @property
    def in_transaction(self) -> bool:
        return self._open

    def close(self) -> None:
        self._conn.close()

    def next_message_seq(self) -> int:
        return int(self.execute("SELECT nextval('messages_seq_draw')").fetchone()[0])

    # -- transactions ---------------------------------------------------------------------
    @contextmanager
    def write(self) -> Iterator[PgConnection]:
        """``BEGIN ISOLATION LEVEL <this side's>`` … ``COMMIT``; conflicts become WriteConflict."""
        import psycopg

        if self._open:
            raise RuntimeError("nested write transaction")
        self._conn.execute(f"BEGIN ISOLATION LEVEL {self.isolation}")
        self._open = True
        try:
            yield self
        except BaseException as exc:
            self._rollback()
            if isinstance(exc, psycopg.Error) and _retryable(exc):
                raise _conflict(exc) from exc
            raise
        # A crash injected here leaves the transaction open; the server rolls it back when
        # the dead process's connection closes (._crash boundaries).
        commit_boundary("before_commit", self)
        try:
            self._conn.execute("COMMIT")
        except psycopg.Error as exc:
            self._rollback()
            if _retryable(exc):
                raise _conflict(exc) from exc
            raise
        finally:
            self._open = False
        commit_boundary("after_commit", self)

    def _rollback(self) -> None:
        import psycopg

        self._open = False
        if self._conn.closed:
            return
        # A broken connection: the server rolls the transaction back itself.
        with contextlib.suppress(psycopg.Error):
            self._conn.execute("ROLLBACK")


def _retryable(exc: BaseException) -> bool:
    return getattr(exc, "sqlstate", None) in _RETRYABLE


def _conflict(exc: BaseException) -> WriteConflict:
    state = getattr(exc, "sqlstate", "?")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    conflict = WriteConflict(f"PostgreSQL aborted the transaction for a concurrent one "
                             f"(SQLSTATE {state}: {first}); nothing was written, retry the same call")
    conflict.__cause__ = exc
    return conflict


def connect(url: str, isolation: str = USER_SIDE, busy_timeout: float = 5.0) -> PgConnection:
    return PgConnection(url, isolation, busy_timeout)


def pg_schema(sqlite_schema: str) -> list[str]:
    """The portable schema's statements, with PostgreSQL's 8-byte float for REAL."""
    return [re.sub(r"\bREAL\b", "DOUBLE PRECISION", s.strip())
            for s in sqlite_schema.split(";") if s.strip()]


def apply_schema(conn: PgConnection, schema: str, version: int, name: str,
                 extra: Sequence[str] = ()) -> None:
    """Create the schema once and record its version; refuse a database of another version.

    An advisory lock on the schema's name makes concurrent first opens (eight
    worker processes starting together) wait for one another instead of
    racing to create the same tables.
    """
    import psycopg

    try:  # the common case, one round trip: the schema is there at this version
        row = conn.execute("SELECT version FROM schema_version WHERE name = ?", (name,)).fetchone()
    except psycopg.errors.UndefinedTable:
        row = None
    if row is not None and row["version"] == version:
        return
    for attempt in range(20):
        try:
            with conn.write():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (name,))
                conn.execute("CREATE TABLE IF NOT EXISTS schema_version "
                             "(name TEXT PRIMARY KEY, version INTEGER NOT NULL)")
                row = conn.execute("SELECT version FROM schema_version WHERE name = ?",
                                   (name,)).fetchone()
                if row is None:
                    for statement in [*pg_schema(schema), *extra]:
                        conn.execute(statement)
                    conn.execute("INSERT INTO schema_version (name, version) VALUES (?, ?)",
                                 (name, version))
                elif row["version"] != version:
                    raise RuntimeError(f"{name} schema version {row['version']} in this database, "
                                       f"this code needs {version}; use a fresh database or "
                                       "migrate it")
            return
        except (WriteConflict, psycopg.errors.UniqueViolation):
            # Two first opens created schema_version at once: the loser retries and
            # finds the winner's tables.
            time.sleep(0.01 * (attempt + 1))
    raise Busy(f"could not create the {name} schema: concurrent openers kept conflicting")


# --------------------------------------------------------------------------- scratch stores
def _with_search_path(url: str, schema: str | None) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    if schema is not None:
        query.append(("options", f"-csearch_path={schema}"))
    return urlunsplit(parts._replace(query=urlencode(query)))


def _search_path(url: str) -> str | None:
    for key, value in parse_qsl(urlsplit(url).query):
        if key == "options" and value.startswith("-csearch_path="):
            return value.split("=", 1)[1]
    return None


_POOL: dict[tuple[str, str], list[str]] = {}  # (server URL, kind) -> emptied scratch stores


def scratch_store(url: str, kind: str = "store") -> str:
    """A fresh, empty schema in the database at ``url``; the URL that points at it.

    A campaign makes hundreds of throwaway stores; one released with
    :func:`release_store` is emptied and handed out again to the next caller of
    the same ``kind`` in this process (its tables are already there), and
    every pooled schema is dropped when the process exits.
    """
    psycopg = psycopg_module()

    base = _with_search_path(url, None)
    pooled = _POOL.get((base, kind))
    if pooled:
        return pooled.pop()
    schema = f"settled_{kind}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return _with_search_path(url, schema)


def release_store(url: str, kind: str = "store") -> None:
    """Empty the schema a :func:`scratch_store` URL points at and keep it for reuse."""
    psycopg = psycopg_module()

    schema = _scratch_schema(url)
    with psycopg.connect(_with_search_path(url, None), autocommit=True) as conn, conn.transaction():
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename != "
            "'schema_version'", (schema,))]
        if tables:
            conn.execute("TRUNCATE " + ", ".join(f"{schema}.{t}" for t in tables) + " CASCADE")
        for (sequence,) in conn.execute(
                "SELECT sequencename FROM pg_sequences WHERE schemaname = %s", (schema,)).fetchall():
            conn.execute(f"ALTER SEQUENCE {schema}.{sequence} RESTART")
    _POOL.setdefault((_with_search_path(url, None), kind), []).append(url)


def _scratch_schema(url: str) -> str:
    schema = _search_path(url)
    if schema is None or not re.fullmatch(r"settled_[a-z]+_[0-9a-f]{12}", schema):
        raise InvalidInput(f"{redact(url)!r} does not point at a scratch store; refusing to drop")
    return schema


@atexit.register
def _drop_pooled() -> None:
    if not _POOL:
        return  # nothing pooled (and psycopg perhaps not installed)
    import psycopg

    for (base, _kind), urls in list(_POOL.items()):
        with contextlib.suppress(psycopg.Error), psycopg.connect(base, autocommit=True,
                                                                 connect_timeout=5) as conn:
            for url in urls:
                conn.execute(f"DROP SCHEMA IF EXISTS {_scratch_schema(url)} CASCADE")
    _POOL.clear()


def missing_database(url: str) -> str:
    """The URL of a database that does not exist on the same server (an unreachable store)."""
    parts = urlsplit(_with_search_path(url, None))
    return urlunsplit(parts._replace(path=f"/settled_missing_{uuid.uuid4().hex[:12]}"))
