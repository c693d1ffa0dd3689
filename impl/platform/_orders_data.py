"""The synthetic orders database, and the sandbox user SQL runs in (the data-agent article).

The data are generated, not random: every value comes from a SHA-256 of a
fixed seed and the row's coordinates, so two runs, two processes or two
machines build byte-identical tables, and no Python ``random`` algorithm
change can move a figure.

The story of the seed article must hold on these rows. The user asks for the
net revenue (paid amount minus refunds, in yuan) of January 2026 by channel,
then narrows it to the app channel, which comes to exactly 16 yuan; later the
user wants the app figure by day. The app channel's January orders are
therefore written by hand (:data:`STORY_APP_ORDERS`) and everything else is
generated around them. The hand-written rows include the traps a wrong query
falls into: a cancelled and a pending order (not revenue), a fully refunded
order (net 0) and paid app orders on 31 December and 1 February (outside the
month).

User SQL is untrusted. It runs only through :class:`Sandbox`: the orders file
is opened ``mode=ro``, an authorizer allows nothing but SELECT, reads of the
business tables, functions and recursive CTEs, a progress handler bounds the
work, and the ATTACH limit is zero. A crafted statement can fail; it cannot
change the data.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ..shared._db import DEFAULT_BUSY_TIMEOUT, apply_schema, write

__all__ = [
    "APP_DAILY_SQL",
    "APP_MONTHLY_SQL",
    "BUSINESS_TABLES",
    "DATASET_SEED",
    "MAX_RESULT_ROWS",
    "MAX_SQL_CHARS",
    "MONTHLY_BY_CHANNEL_SQL",
    "ORDERS_SCHEMA_VERSION",
    "STORY_APP_ORDERS",
    "OrderRow",
    "RefundRow",
    "Sandbox",
    "SqlRefused",
    "SqlValue",
    "ensure_orders_database",
    "generate",
    "shape_problem",
    "statement_body",
]

DATASET_SEED: Final = 3
MAX_SQL_CHARS: Final = 20_000
MAX_RESULT_ROWS: Final = 10_000
_PROGRESS_STEP: Final = 1_000  # VM instructions between progress callbacks
_PROGRESS_BUDGET: Final = 5_000  # callbacks, i.e. 5 million VM instructions per statement
_MAX_VALUE_BYTES: Final = 1_000_000  # longest string or blob a query may build

SqlValue = int | float | str | None
ORDERS_SCHEMA_VERSION: Final = 1
BUSINESS_TABLES: Final = frozenset({"orders", "refunds"})
FIRST_DAY: Final = dt.date(2025, 12, 1)
LAST_DAY: Final = dt.date(2026, 2, 28)

ORDERS_SCHEMA: Final = """
CREATE TABLE orders (
    order_id INTEGER PRIMARY KEY,
    channel TEXT NOT NULL CHECK (channel IN ('app', 'web', 'store')),
    created_at TEXT NOT NULL,
    amount_fen INTEGER NOT NULL CHECK (amount_fen > 0),
    status TEXT NOT NULL CHECK (status IN ('paid', 'cancelled', 'pending'))
);
CREATE TABLE refunds (
    refund_id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES orders (order_id),
    amount_fen INTEGER NOT NULL CHECK (amount_fen > 0),
    refunded_at TEXT NOT NULL
);
CREATE TABLE dataset_info (
    name TEXT PRIMARY KEY,
    seed INTEGER NOT NULL,
    orders INTEGER NOT NULL,
    refunds INTEGER NOT NULL
)
"""

# Net revenue of an order = its amount minus all its refunds, counted in the
# month the order was created. Refunds are summed per order first, so the join
# never repeats an order's amount.
_NET_FROM = """FROM orders AS o
LEFT JOIN (
    SELECT order_id, SUM(amount_fen) AS refunded_fen FROM refunds GROUP BY order_id
) AS r ON r.order_id = o.order_id
WHERE o.status = 'paid'
  AND o.created_at >= '2026-01-01' AND o.created_at < '2026-02-01'"""
_NET_YUAN = "(SUM(o.amount_fen) - COALESCE(SUM(r.refunded_fen), 0)) / 100.0 AS net_revenue_yuan"

# The story's SQL texts. The dates are literals on purpose: a submitted query
# carries its absolute dates (M2), it is not re-expanded on a later day.
MONTHLY_BY_CHANNEL_SQL: Final = f"""SELECT o.channel AS channel,
       {_NET_YUAN}
{_NET_FROM}
GROUP BY o.channel
ORDER BY o.channel"""

APP_MONTHLY_SQL: Final = f"""SELECT o.channel AS channel,
       {_NET_YUAN}
{_NET_FROM}
  AND o.channel = 'app'
GROUP BY o.channel"""

APP_DAILY_SQL: Final = f"""SELECT o.created_at AS day,
       {_NET_YUAN}
{_NET_FROM}
  AND o.channel = 'app'
GROUP BY o.created_at
ORDER BY o.created_at"""


@dataclass(frozen=True, slots=True)
class OrderRow:
    order_id: int
    channel: str
    created_at: str
    amount_fen: int
    status: str


@dataclass(frozen=True, slots=True)
class RefundRow:
    refund_id: int
    order_id: int
    amount_fen: int
    refunded_at: str


# date -> (amount_fen, status, refunded fen or 0, refund date or None).
# Paid in January: 990 + 450 + 680 + 310 = 2430 fen, refunded 450 + 380 = 830,
# net 1600 fen = 16 yuan; by day 9.90 + 0.00 + 3.00 + 3.10.
STORY_APP_ORDERS: Final[dict[str, tuple[int, str, int, str | None]]] = {
    "2025-12-31": (2750, "paid", 0, None),
    "2026-01-03": (990, "paid", 0, None),
    "2026-01-09": (450, "paid", 450, "2026-01-10"),
    "2026-01-15": (680, "paid", 380, "2026-01-17"),
    "2026-01-22": (310, "paid", 0, None),
    "2026-01-26": (1200, "cancelled", 0, None),
    "2026-01-30": (880, "pending", 0, None),
    "2026-02-01": (1990, "paid", 0, None),
}
_CHANNELS: Final = ("app", "web", "store")


def _draw(*key: object) -> int:
    """A deterministic pseudo-random integer for ``key`` (seeded by DATASET_SEED)."""
    text = ":".join(str(part) for part in (DATASET_SEED, *key))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _days() -> list[dt.date]:
    count = (LAST_DAY - FIRST_DAY).days + 1
    return [FIRST_DAY + dt.timedelta(days=n) for n in range(count)]


def _orders_of(day: dt.date, channel: str) -> list[tuple[int, str, int, str | None]]:
    """The orders of one channel on one day: hand-written for the story, else drawn."""
    iso = day.isoformat()
    if channel == "app" and (iso in STORY_APP_ORDERS or iso.startswith("2026-01")):
        return [STORY_APP_ORDERS[iso]] if iso in STORY_APP_ORDERS else []
    drawn = _draw(iso, channel, "count")
    count = drawn % 2 if channel == "app" else 1 + drawn % 3
    return [_drawn_order(iso, channel, n) for n in range(count)]


def _drawn_order(iso: str, channel: str, n: int) -> tuple[int, str, int, str | None]:
    amount = 500 + _draw(iso, channel, n, "amount") % 30_000
    status = {0: "cancelled", 1: "pending"}.get(_draw(iso, channel, n, "status") % 10, "paid")
    if status != "paid" or _draw(iso, channel, n, "refund") % 8:
        return amount, status, 0, None
    quarters = 1 + _draw(iso, channel, n, "share") % 4
    later = dt.date.fromisoformat(iso) + dt.timedelta(days=1 + _draw(iso, channel, n) % 5)
    return amount, status, amount * quarters // 4, later.isoformat()


def generate() -> tuple[list[OrderRow], list[RefundRow]]:
    """All rows of the synthetic dataset, in order id order (a few hundred rows)."""
    orders: list[OrderRow] = []
    refunds: list[RefundRow] = []
    for day in _days():
        for channel in _CHANNELS:
            for amount, status, refunded, refunded_at in _orders_of(day, channel):
                order_id = len(orders) + 1
                orders.append(OrderRow(order_id, channel, day.isoformat(), amount, status))
                if refunded_at is not None:
                    refunds.append(RefundRow(len(refunds) + 1, order_id, refunded, refunded_at))
    return orders, refunds


def ensure_orders_database(conn: sqlite3.Connection) -> None:
    """Create and fill the orders database once; a no-op when it is already filled.

    The schema and the rows are committed in two steps (``apply_schema`` owns
    its transaction), so the fill checks ``dataset_info`` under the write lock:
    of several processes opening a fresh directory at once, exactly one fills
    it and the others find it filled. A process that died between the two
    steps leaves empty tables, which the next opener fills.
    """
    apply_schema(conn, ORDERS_SCHEMA, ORDERS_SCHEMA_VERSION, "platform-orders")
    with write(conn):
        if not conn.execute("SELECT 1 FROM dataset_info WHERE name = ?", ("orders",)).fetchone():
            _fill(conn)


def _fill(conn: sqlite3.Connection) -> None:
    """Insert every generated row and the ``dataset_info`` mark (inside the caller's transaction)."""
    orders, refunds = generate()
    conn.executemany(
        "INSERT INTO orders (order_id, channel, created_at, amount_fen, status) "
        "VALUES (?, ?, ?, ?, ?)",
        [(o.order_id, o.channel, o.created_at, o.amount_fen, o.status) for o in orders],
    )
    conn.executemany(
        "INSERT INTO refunds (refund_id, order_id, amount_fen, refunded_at) VALUES (?, ?, ?, ?)",
        [(r.refund_id, r.order_id, r.amount_fen, r.refunded_at) for r in refunds],
    )
    conn.execute(
        "INSERT INTO dataset_info (name, seed, orders, refunds) VALUES (?, ?, ?, ?)",
        ("orders", DATASET_SEED, len(orders), len(refunds)),
    )


# --------------------------------------------------------------------------- SQL shape
# Python's sqlite3 would also refuse a second statement, but only with a
# generic message and only after the first statement was prepared. This small
# scanner splits on semicolons outside quotes and comments, so check() can
# name the problem, and it yields the statement body without trailing
# semicolons or comments, which the sandbox needs to wrap it.

_CLOSERS: Final = {"'": "'", '"': '"', "`": "`", "[": "]"}
_FIRST_WORD: Final = re.compile(r"[A-Za-z]+")


def _skip_blank(sql: str, i: int) -> int:
    """Index after the whitespace or comment at ``i``; ``i`` itself if there is none."""
    if sql.startswith("--", i):
        end = sql.find("\n", i)
        return len(sql) if end < 0 else end + 1
    if sql.startswith("/*", i):
        end = sql.find("*/", i + 2)
        return len(sql) if end < 0 else end + 2
    return i + 1 if sql[i].isspace() else i


@functools.lru_cache(maxsize=64)
def _statement_spans(sql: str) -> tuple[tuple[int, int], ...]:
    """``(start, end)`` of each non-empty statement, blanks and semicolons excluded.

    A pure function of the text, scanned character by character in Python: the
    last few texts are remembered, as a worker checks the same SQL over and over.
    """
    spans: list[tuple[int, int]] = []
    start: int | None = None
    end = i = 0
    while i < len(sql):
        if (after := _skip_blank(sql, i)) != i:
            i = after
        elif sql[i] == ";":
            if start is not None:
                spans.append((start, end))
            start, i = None, i + 1
        else:
            start = i if start is None else start
            closer = _CLOSERS.get(sql[i])
            i = i + 1 if closer is None else _after_quote(sql, i, closer)
            end = i
    if start is not None:
        spans.append((start, end))
    return tuple(spans)


def _after_quote(sql: str, i: int, closer: str) -> int:
    # A doubled quote ('it''s') simply closes and reopens: the scan stays in step.
    found = sql.find(closer, i + 1)
    return len(sql) if found < 0 else found + 1


def shape_problem(sql: object) -> str | None:
    """Why ``sql`` can never be one read-only statement; ``None`` when its shape is fine."""
    if not isinstance(sql, str):
        return f"sql must be a str, got {type(sql).__name__} {sql!r:.80}"
    if len(sql) > MAX_SQL_CHARS:
        return f"sql is {len(sql):,} characters long, the limit is {MAX_SQL_CHARS:,}"
    if "\x00" in sql:
        return "sql contains a NUL character"
    spans = _statement_spans(sql)
    if not spans:
        return "sql is empty (nothing but whitespace, comments or semicolons)"
    if len(spans) > 1:
        return f"sql holds {len(spans)} statements; submit exactly one"
    word = _FIRST_WORD.match(sql, spans[0][0])
    keyword = word.group(0).upper() if word else sql[spans[0][0]]
    if keyword not in ("SELECT", "WITH"):
        return f"only read-only SELECT or WITH statements run here; this one starts with {keyword!r}"
    return None


def statement_body(sql: str) -> str:
    start, end = _statement_spans(sql)[0]
    return sql[start:end]


# --------------------------------------------------------------------------- sandbox
_ALLOWED_ACTIONS: Final = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
# Names for the authorizer codes a refused statement can need, for the reason text.
_WRITE_ACTIONS: Final = (
    "INSERT", "UPDATE", "DELETE", "PRAGMA", "ATTACH", "DETACH", "TRANSACTION", "SAVEPOINT",
    "ALTER_TABLE", "REINDEX", "ANALYZE", "CREATE_TABLE", "CREATE_INDEX", "CREATE_VIEW",
    "CREATE_TRIGGER", "CREATE_TEMP_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_VIEW",
    "CREATE_TEMP_TRIGGER", "CREATE_VTABLE", "DROP_TABLE", "DROP_INDEX", "DROP_VIEW",
    "DROP_TRIGGER", "DROP_TEMP_TABLE", "DROP_TEMP_INDEX", "DROP_TEMP_VIEW", "DROP_TEMP_TRIGGER",
    "DROP_VTABLE",
)
_ACTION_NAMES: Final = {
    getattr(sqlite3, f"SQLITE_{name}"): name
    for name in _WRITE_ACTIONS
    if hasattr(sqlite3, f"SQLITE_{name}")
}


class SqlRefused(Exception):
    """User SQL failed in the sandbox; the text is the reason shown to the caller."""


class Sandbox:
    """A read-only connection to the orders database for untrusted SQL."""

    def __init__(self, path: Path) -> None:
        self._conn = sqlite3.connect(
            path.resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None, timeout=DEFAULT_BUSY_TIMEOUT
        )
        self._denied: list[str] = []
        self._ticks = 0
        self._conn.set_authorizer(self._authorize)
        self._conn.set_progress_handler(self._tick, _PROGRESS_STEP)
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _MAX_VALUE_BYTES)

    def close(self) -> None:
        self._conn.close()

    def plan(self, body: str) -> tuple[str, ...]:
        """Validate ``body`` and name its columns without computing any row."""
        with self._session():
            # EXPLAIN compiles the statement (tables, columns, authorizer) and
            # lists its program; the query itself does not run.
            self._conn.execute("EXPLAIN " + body).fetchall()
            # Column names need a prepared-and-stepped statement; under LIMIT 0
            # the program jumps to its end before reading the first row.
            cursor = self._conn.execute(f"SELECT * FROM (\n{body}\n) LIMIT 0")
            return tuple(d[0] for d in cursor.description or ())

    def run(self, body: str) -> tuple[tuple[str, ...], tuple[tuple[SqlValue, ...], ...]]:
        with self._session():
            cursor = self._conn.execute(body)
            try:
                columns = tuple(d[0] for d in cursor.description or ())
                rows = cursor.fetchmany(MAX_RESULT_ROWS + 1)
            finally:
                cursor.close()  # an unfinished SELECT would keep its read snapshot open
        if len(rows) > MAX_RESULT_ROWS:
            raise SqlRefused(f"result has more than {MAX_RESULT_ROWS:,} rows; aggregate or filter")
        if any(isinstance(value, bytes) for row in rows for value in row):
            raise SqlRefused("result holds a BLOB value, which this platform cannot return")
        return columns, tuple(tuple(row) for row in rows)

    @contextmanager
    def _session(self) -> Iterator[None]:
        self._denied.clear()
        self._ticks = 0
        try:
            yield
        except (sqlite3.Error, ValueError) as exc:
            if self._ticks > _PROGRESS_BUDGET:
                raise SqlRefused("query exceeded the platform's execution budget "
                                  f"({_PROGRESS_BUDGET * _PROGRESS_STEP:,} VM steps)") from exc
            raise SqlRefused("; ".join(self._denied) or str(exc)) from exc

    def _authorize(self, action: int, arg1: str | None, arg2: str | None,
                   _db: str | None, _trigger: str | None) -> int:
        if action == sqlite3.SQLITE_READ and arg1 not in BUSINESS_TABLES:
            tables = ", ".join(sorted(BUSINESS_TABLES))
            self._denied.append(f"table {arg1!r} is not part of the orders schema ({tables})")
            return sqlite3.SQLITE_DENY
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        name = _ACTION_NAMES.get(action, f"action {action}")
        target = f" on {arg1}" if arg1 else ""
        self._denied.append(f"statement is not read-only: it needs {name}{target}")
        return sqlite3.SQLITE_DENY

    def _tick(self) -> int:
        self._ticks += 1
        return 1 if self._ticks > _PROGRESS_BUDGET else 0
