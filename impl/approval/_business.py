"""The ERP business store: products, orders and idempotent write tools (W1–W8).

Theory of operation. Every write tool call carries a ``client_token`` (W1).
The call is first *normalized* — validated and brought into the one form that
encodes business equivalence (W5) — with no database access at all, so a bad
input is refused before anything is opened, let alone written, and the token
is not used up. Then ONE ``BEGIN IMMEDIATE`` transaction (W6):

1. looks the token up in ``mutation_requests``: same tool and normalized
   arguments → the stored first result, business data untouched (W2); other
   arguments or another tool → :class:`IdempotencyConflict` (W3);
2. otherwise checks the business rules against the current rows (unknown SKU,
   stock, order state), applies the change (W4), and
3. stores the tool's result under the token, then commits.

Only success results are stored: a business rejection rolls everything back,
so the token stays free and a later valid call with it succeeds.

Hooks let a crash test stop the process at a named point of that path (see
:data:`HOOK_POINTS`); the default hook does nothing.

This module is the store: its schema, catalogue, token records and transaction. The
normalization and fingerprint live in :mod:`._business_normalize`, the business rules
each tool applies in :mod:`._business_rules`.
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

from ..shared import _pg
from ..shared._db import DEFAULT_BUSY_TIMEOUT, apply_schema, connect, write
from ..shared._errors import Busy, IdempotencyConflict, InvalidInput, NotFound
from ..shared._pg import WriteConflict, is_url
from ._business_normalize import JSON, _show, canonical_json, check_token, fingerprint, normalize
from ._business_rules import _APPLIERS, _product

__all__ = [
    "DEFAULT_CATALOGUE",
    "HOOK_POINTS",
    "SCHEMA_VERSION",
    "BusinessStore",
    "Clock",
    "Hook",
    "Product",
    "seed",
]

SCHEMA_VERSION: Final = 1
SCHEMA: Final = """
CREATE TABLE products (
    sku TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    stock INTEGER NOT NULL CHECK (stock >= 0),
    listed INTEGER NOT NULL CHECK (listed IN (0, 1))
);
CREATE TABLE orders (
    order_id TEXT PRIMARY KEY,
    customer TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('open', 'cancelled')),
    draft_id TEXT UNIQUE,
    created_at REAL NOT NULL
);
CREATE TABLE order_lines (
    order_id TEXT NOT NULL REFERENCES orders (order_id),
    sku TEXT NOT NULL REFERENCES products (sku),
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    PRIMARY KEY (order_id, sku)
);
CREATE TABLE mutation_requests (
    client_token TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    normalized_args TEXT NOT NULL,
    args_fingerprint TEXT NOT NULL,
    result TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX mutation_requests_by_age ON mutation_requests (created_at)
"""

Hook = Callable[[str], None]
"""Called with a point name from :data:`HOOK_POINTS`; may raise or ``os._exit``."""
Clock = Callable[[], float]
"""Seconds since the epoch; injectable so retention can be tested."""

HOOK_POINTS: Final = ("handler_entered", "before_commit", "after_commit")
MAX_CONFLICT_RETRIES: Final = 50  # PostgreSQL only: attempts of one call lost to concurrent ones


def _unique_violation() -> type[Exception]:
    """psycopg's UniqueViolation (two first calls with one token); a never-raised type without it."""
    try:
        from psycopg.errors import UniqueViolation
    except ImportError:  # without the postgres extra no PostgreSQL store can be opened
        return _Never
    return UniqueViolation


class _Never(Exception):
    """Stands for an error class that cannot occur."""


@dataclass(frozen=True, slots=True)
class Product:
    sku: str
    name: str
    stock: int
    listed: bool = True

    def __post_init__(self) -> None:
        if not self.sku or self.stock < 0:
            raise ValueError(f"product {self.sku!r} needs a non-empty sku and stock >= 0")


DEFAULT_CATALOGUE: Final = (
    Product("A1001", "Ceramic mug", 100),
    Product("A1002", "Steel bottle", 40),
    Product("A1003", "Paper notebook", 250),
    Product("B2001", "Desk lamp", 5, listed=False),
)


# --- the store ------------------------------------------------------------------------------


def seed(conn: sqlite3.Connection, products: Iterable[Product] = DEFAULT_CATALOGUE) -> None:
    """Fill an empty catalogue; a catalogue that already has products is left alone."""
    with write(conn):
        if conn.execute("SELECT COUNT(*) FROM products").fetchone()[0]:
            return
        conn.executemany("INSERT INTO products (sku, name, stock, listed) VALUES (?, ?, ?, ?)",
                         [(p.sku, p.name, p.stock, int(p.listed)) for p in products])


def _record(conn: sqlite3.Connection, token: str, request: tuple[str, JSON, str], result: JSON,
            now: float) -> JSON:
    tool, normalized, wanted = request
    text = canonical_json(result)
    conn.execute("INSERT INTO mutation_requests (client_token, tool, normalized_args, "
                 "args_fingerprint, result, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                 (token, tool, canonical_json(normalized), wanted, text, now))
    # The caller gets exactly what a replay will get: the stored text, parsed.
    return json.loads(text)  # type: ignore[no-any-return]


def _connect_with_schema(path: str | Path, busy_timeout: float) -> sqlite3.Connection:
    if is_url(path):
        # SERIALIZABLE, deliberately. Every tool call is read-decide-write over
        # several rows: the token's record (W2/W3), the stock of each SKU, the
        # order's state (W6). SQLite gets that right by running one writer at a
        # time (BEGIN IMMEDIATE). Under PostgreSQL's default READ COMMITTED, two
        # calls with one token would both read "absent" and both apply, and two
        # orders could both read the same stock. Serializable snapshot isolation
        # promises the outcome of *some* serial order, so the code above stays
        # correct unchanged; the losing transaction of a conflicting pair is
        # aborted (SQLSTATE 40001, or a unique violation on the token) having
        # written nothing, and BusinessStore.execute runs the whole call again
        # from the start, where it now finds the winner's record and replays it
        # (W2). Row locks alone (FOR UPDATE) would not cover the token that is
        # *absent*: there is no row yet to lock.
        pg = _pg.connect(str(path), _pg.USER_SIDE, busy_timeout)
        try:
            _pg.apply_schema(pg, SCHEMA, SCHEMA_VERSION, "business")
        except BaseException:
            pg.close()
            raise
        return cast(sqlite3.Connection, pg)
    conn = connect(path, busy_timeout)
    try:
        apply_schema(conn, SCHEMA, SCHEMA_VERSION, "business")
    except BaseException:
        conn.close()
        raise
    return conn


def _no_hook(point: str) -> None:
    """The default hook: crash tests replace it, production never does."""


class BusinessStore:
    """One business database file and its four idempotent write tools."""

    def __init__(self, conn: sqlite3.Connection, *, now: Clock = time.time,
                 hook: Hook | None = None) -> None:
        self._conn = conn
        self._location = str(getattr(conn, "url", ""))
        self._now = now
        self._hook = hook or _no_hook

    @classmethod
    def create(cls, path: str | Path, products: Iterable[Product] = DEFAULT_CATALOGUE, *,
               now: Clock = time.time, hook: Hook | None = None,
               busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> BusinessStore:
        """Create (or reopen) the file, apply the schema and seed an empty catalogue."""
        conn = _connect_with_schema(path, busy_timeout)
        try:
            seed(conn, products)
        except BaseException:
            conn.close()
            raise
        return cls(conn, now=now, hook=hook)

    @classmethod
    def open(cls, path: str | Path, *, now: Clock = time.time, hook: Hook | None = None,
             busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> BusinessStore:
        """Open an existing business file (for example after a crash), never creating one."""
        if not is_url(path) and not Path(path).is_file():
            raise NotFound(f"no business database at {str(path)!r}; create it with "
                           "BusinessStore.create")
        return cls(_connect_with_schema(path, busy_timeout), now=now, hook=hook)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> BusinessStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def connection(self) -> sqlite3.Connection:
        return self._conn

    def create_order(self, client_token: str, args: Mapping[str, Any]) -> JSON:
        """``{customer, items: [{sku, quantity}], draft_id?}`` → the order (W5, W7)."""
        return self.execute("create_order", client_token, args)

    def cancel_order(self, client_token: str, args: Mapping[str, Any]) -> JSON:
        """``{order_id}`` → ``{order_id, status: "cancelled", restored_items}``."""
        return self.execute("cancel_order", client_token, args)

    def adjust_stock(self, client_token: str, args: Mapping[str, Any]) -> JSON:
        """``{sku, delta}`` → ``{sku, delta, stock_before, stock_after}``."""
        return self.execute("adjust_stock", client_token, args)

    def set_listing(self, client_token: str, args: Mapping[str, Any]) -> JSON:
        """``{sku, listed}`` → ``{sku, listed, was_listed}``."""
        return self.execute("set_listing", client_token, args)

    def execute(self, tool: str, client_token: str, args: Mapping[str, Any]) -> JSON:
        """Run one write tool call under its token; see the module docstring for the steps."""
        self._hook("handler_entered")
        token = check_token(client_token)
        normalized = normalize(tool, args)
        wanted = fingerprint(tool, normalized)
        # BEGIN IMMEDIATE takes the write lock *before* the token and the stock are read:
        # two calls with one token cannot both see "absent" and both apply, and two orders
        # cannot both read the same stock and both take it (W6). Waiting for the lock is
        # bounded by the busy timeout and surfaces as Busy.
        for attempt in range(1, MAX_CONFLICT_RETRIES + 1):
            try:
                stored, replayed = self._apply(token, tool, normalized, wanted)
                if replayed:
                    return stored
                break
            except (WriteConflict, _unique_violation()) as exc:
                # PostgreSQL only (SQLite's single writer never conflicts): a
                # concurrent call won; nothing of this attempt was written. The
                # whole call runs again and now sees the winner's rows.
                if attempt == MAX_CONFLICT_RETRIES:
                    raise Busy(f"client_token {token!r}: {attempt} attempts in a row lost to "
                               "concurrent writers; nothing was written, retry the same call") \
                        from exc
                time.sleep(random.uniform(0, 0.002 * attempt))
        self._hook("after_commit")
        return stored

    def _apply(self, token: str, tool: str, normalized: JSON, wanted: str) -> tuple[JSON, bool]:
        """One attempt of :meth:`execute`, one transaction: ``(the first result, True)`` when
        the token is recorded already, else ``(the new result as recorded, False)``."""
        with write(self._conn) as conn:
            first = self._first_result(conn, token, tool, wanted)
            if first is not None:
                return first, True
            stored = self._change(conn, token, (tool, normalized, wanted))
            self._hook("before_commit")
        return stored, False

    def _change(self, conn: sqlite3.Connection, token: str, request: tuple[str, JSON, str]) -> JSON:
        """The call's business change and the record of its token, in the caller's transaction
        (W6), at one instant: the result as recorded. ``request`` is (tool, normalized args,
        their fingerprint)."""
        tool, normalized, _wanted = request
        now = self._now()  # one instant for the business rows and the record
        result = _APPLIERS[tool](conn, normalized, now)
        return _record(conn, token, request, result, now)

    @staticmethod
    def _first_result(conn: sqlite3.Connection, token: str, tool: str,
                      wanted: str) -> JSON | None:
        row = conn.execute("SELECT tool, args_fingerprint, result FROM mutation_requests "
                           "WHERE client_token = ?", (token,)).fetchone()
        if row is None:
            return None
        if row["tool"] != tool or row["args_fingerprint"] != wanted:
            raise IdempotencyConflict(
                f"client_token {token!r} was already used for {row['tool']} with other "
                "arguments; nothing was changed, resend the original arguments or use a new "
                "token for a new request")
        return json.loads(row["result"])  # type: ignore[no-any-return]

    def purge_idempotency_records(self, older_than_seconds: float, now: float | None = None, *,
                                  in_flight: Iterable[str] = ()) -> int:
        """Delete records older than the age, except in-flight tokens (W8); return the count.

        A purged token is forgotten: replaying it later would run the call again. So the
        runtime passes every token it may still resume (pending approval, unknown outcome)
        as ``in_flight``, and the age should exceed the longest approval deadline.
        """
        age = older_than_seconds
        if isinstance(age, bool) or not isinstance(age, int | float) or not age >= 0:
            raise InvalidInput(f"older_than_seconds is {_show(age)}; it must be a number >= 0")
        if isinstance(in_flight, str):
            raise InvalidInput(f"in_flight is the string {_show(in_flight)}; pass a set of tokens")
        cutoff = (self._now() if now is None else now) - age
        protected = json.dumps(sorted(set(in_flight)))
        members = ("SELECT jsonb_array_elements_text(?::jsonb)" if is_url(self._location)
                   else "SELECT value FROM json_each(?)")
        with write(self._conn) as conn:
            cursor = conn.execute(
                "DELETE FROM mutation_requests WHERE created_at < ? "
                f"AND client_token NOT IN ({members})", (cutoff, protected))
            return int(cursor.rowcount)

    def stock(self, sku: str) -> int:
        """Current stock of ``sku`` (a read, outside any write)."""
        return int(_product(self._conn, sku)["stock"])

    def snapshot(self) -> dict[str, list[JSON]]:
        """Every business and idempotency row, in a stable order, for before/after checks."""
        tables = {"products": "sku", "orders": "order_id", "order_lines": "order_id, sku",
                  "mutation_requests": "client_token"}
        return {table: [dict(row) for row in self._conn.execute(
                    f"SELECT * FROM {table} ORDER BY {order}")]  # names are constants above
                for table, order in tables.items()}
