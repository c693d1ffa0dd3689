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
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

from ..shared import _pg
from ..shared._db import DEFAULT_BUSY_TIMEOUT, apply_schema, connect, write
from ..shared._errors import (
    Busy,
    IdempotencyConflict,
    InsufficientStock,
    InvalidInput,
    NotAllowed,
    NotFound,
)
from ..shared._ids import MAX_ID_CHARS, require_id
from ..shared._pg import WriteConflict, is_url

__all__ = [
    "DEFAULT_CATALOGUE",
    "HOOK_POINTS",
    "SCHEMA_VERSION",
    "TOOLS",
    "BusinessStore",
    "Clock",
    "Hook",
    "Product",
    "canonical_json",
    "check_token",
    "fingerprint",
    "normalize",
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
TOOLS: Final = ("create_order", "cancel_order", "adjust_stock", "set_listing")

MAX_TOKEN_CHARS: Final = MAX_ID_CHARS  # a token is an id (_ids)
MAX_SKU_CHARS: Final = 64
MAX_CUSTOMER_CHARS: Final = 200
MAX_ITEMS: Final = 100
MAX_LINE_QUANTITY: Final = 10_000
MAX_ABS_DELTA: Final = 1_000_000
MAX_PAYLOAD_BYTES: Final = 16 * 1024

JSON = dict[str, Any]


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


# --- canonical form -------------------------------------------------------------------------


def canonical_json(value: object) -> str:
    """Sorted keys, no spaces, no NaN: equal values give equal text, byte for byte."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def fingerprint(tool: str, normalized_args: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of tool and normalized arguments (W1, W3)."""
    text = canonical_json({"tool": tool, "args": dict(normalized_args)})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_token(client_token: object) -> str:
    """A token is an id (``_ids``): a non-blank string of at most 128 characters, kept exactly
    as given."""
    return require_id("client_token", client_token, "pass the token created for this tool "
                      "execution (at most 128 characters)")


def normalize(tool: str, args: Mapping[str, Any]) -> JSON:
    """Validate ``args`` and return the canonical request (W5); never touches a database.

    Idempotent: ``normalize(tool, normalize(tool, args)) == normalize(tool, args)``, so the
    runtime may store either form and the reconciler compares like with like.
    """
    normalizer = _NORMALIZERS.get(tool)
    if normalizer is None:
        raise InvalidInput(f"unknown tool {tool!r}; use one of {', '.join(TOOLS)}")
    _check_payload(tool, args)
    return normalizer(args)


def _check_payload(tool: str, args: object) -> None:
    if not isinstance(args, Mapping):
        raise InvalidInput(f"{tool}: arguments must be a mapping, got {type(args).__name__}")
    try:
        size = len(canonical_json(args).encode("utf-8"))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{tool}: arguments must be plain JSON values ({exc})") from exc
    if size > MAX_PAYLOAD_BYTES:
        raise InvalidInput(f"{tool}: arguments are {size} bytes of JSON, at most "
                           f"{MAX_PAYLOAD_BYTES} bytes (16 KiB) are allowed; split the request")


def _fields(tool: str, args: Mapping[str, Any], required: Sequence[str],
            optional: Sequence[str] = ()) -> None:
    missing = [name for name in required if name not in args]
    unknown = sorted(str(name) for name in args if name not in (*required, *optional))
    if missing:
        raise InvalidInput(f"{tool}: missing field(s) {', '.join(missing)}; "
                           f"required are {', '.join(required)}")
    if unknown:
        raise InvalidInput(f"{tool}: unknown field(s) {', '.join(unknown)}; "
                           f"allowed are {', '.join((*required, *optional))}")


def _text(where: str, value: object, limit: int, *, strip: bool = False) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{where} is {_show(value)}; it must be a non-empty string")
    text = value.strip() if strip else value
    if len(text) > limit:
        raise InvalidInput(f"{where} has {len(text)} characters, at most {limit} are allowed; "
                           "shorten it")
    return text


def _integer(where: str, value: object, low: int, high: int) -> int:
    # bool is an int subclass; True must not pass for a quantity of 1.
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{where} is {_show(value)}; it must be an integer from {low} to {high}")
    return value


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _normalize_create_order(args: Mapping[str, Any]) -> JSON:
    _fields("create_order", args, ("customer", "items"), ("draft_id",))
    customer = _text("create_order: customer", args["customer"], MAX_CUSTOMER_CHARS, strip=True)
    draft = args.get("draft_id")
    draft_id = None if draft is None else require_id("create_order: draft_id", draft, "pass the draft's id")
    return {"customer": customer, "items": _merge_items(args["items"]), "draft_id": draft_id}


def _merge_items(items: object) -> list[JSON]:
    """Merge quantities per SKU and sort by SKU, so reordered or split items are one request."""
    if not isinstance(items, list | tuple) or not 1 <= len(items) <= MAX_ITEMS:
        raise InvalidInput(f"create_order: items is {_show(items)}; it must be a list of 1 to "
                           f"{MAX_ITEMS} {{sku, quantity}} objects")
    merged: dict[str, int] = {}
    for index, item in enumerate(items):
        where = f"create_order: items[{index}]"
        if not isinstance(item, Mapping):
            raise InvalidInput(f"{where} is {_show(item)}; it must be a {{sku, quantity}} object")
        _fields(where, item, ("sku", "quantity"))
        sku = _text(f"{where}.sku", item["sku"], MAX_SKU_CHARS)
        quantity = _integer(f"{where}.quantity", item["quantity"], 1, MAX_LINE_QUANTITY)
        merged[sku] = merged.get(sku, 0) + quantity
    for sku, total in merged.items():
        _integer(f"create_order: total quantity of sku {sku!r}", total, 1, MAX_LINE_QUANTITY)
    return [{"sku": sku, "quantity": merged[sku]} for sku in sorted(merged)]


def _normalize_cancel_order(args: Mapping[str, Any]) -> JSON:
    _fields("cancel_order", args, ("order_id",))
    return {"order_id": require_id("cancel_order: order_id", args["order_id"], "pass the order's id")}


def _normalize_adjust_stock(args: Mapping[str, Any]) -> JSON:
    _fields("adjust_stock", args, ("sku", "delta"))
    sku = _text("adjust_stock: sku", args["sku"], MAX_SKU_CHARS)
    delta = _integer("adjust_stock: delta", args["delta"], -MAX_ABS_DELTA, MAX_ABS_DELTA)
    if delta == 0:
        raise InvalidInput("adjust_stock: delta is 0; a stock adjustment must change the stock")
    return {"sku": sku, "delta": delta}


def _normalize_set_listing(args: Mapping[str, Any]) -> JSON:
    _fields("set_listing", args, ("sku", "listed"))
    if not isinstance(args["listed"], bool):
        raise InvalidInput(f"set_listing: listed is {_show(args['listed'])}; it must be true or "
                           "false")
    return {"sku": _text("set_listing: sku", args["sku"], MAX_SKU_CHARS), "listed": args["listed"]}


_NORMALIZERS: Final[dict[str, Callable[[Mapping[str, Any]], JSON]]] = {
    "create_order": _normalize_create_order,
    "cancel_order": _normalize_cancel_order,
    "adjust_stock": _normalize_adjust_stock,
    "set_listing": _normalize_set_listing,
}


# --- business rules, applied inside the write transaction ------------------------------------


def _product(conn: sqlite3.Connection, sku: str) -> sqlite3.Row:
    row = conn.execute("SELECT sku, stock, listed FROM products WHERE sku = ?", (sku,)).fetchone()
    if row is None:
        raise NotFound(f"unknown sku {sku!r}; nothing was changed, use a sku from the catalogue")
    return row  # type: ignore[no-any-return]


def _apply_create_order(conn: sqlite3.Connection, args: JSON, now: float) -> JSON:
    # W7 comes before the stock check: resubmitting a draft whose stock has since run
    # out must still answer with the original order, not with an oversell error.
    if args["draft_id"] is not None:
        row = conn.execute("SELECT order_id FROM orders WHERE draft_id = ?",
                           (args["draft_id"],)).fetchone()
        if row is not None:
            return _resubmitted_draft(conn, row["order_id"], args)
    _take_stock(conn, args["items"])
    # Writers are serialized by BEGIN IMMEDIATE and orders are never deleted, so the
    # count is a gap-free, deterministic id source.
    count = conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0]
    order_id = f"ord-{count + 1:06d}"
    conn.execute("INSERT INTO orders (order_id, customer, status, draft_id, created_at) "
                 "VALUES (?, ?, 'open', ?, ?)", (order_id, args["customer"], args["draft_id"], now))
    conn.executemany("INSERT INTO order_lines (order_id, sku, quantity) VALUES (?, ?, ?)",
                     [(order_id, item["sku"], item["quantity"]) for item in args["items"]])
    return _order_result(conn, order_id)


def _take_stock(conn: sqlite3.Connection, items: list[JSON]) -> None:
    # Check every line before changing any, so the error names the first real problem.
    for item in items:
        product = _product(conn, item["sku"])
        if not product["listed"]:
            raise NotAllowed(f"sku {item['sku']!r} is not listed; nothing was changed, "
                             "list the product before ordering it")
        if product["stock"] < item["quantity"]:
            raise InsufficientStock(item["sku"], item["quantity"], product["stock"])
    conn.executemany("UPDATE products SET stock = stock - ? WHERE sku = ?",
                     [(item["quantity"], item["sku"]) for item in items])


def _resubmitted_draft(conn: sqlite3.Connection, order_id: str, args: JSON) -> JSON:
    original = _order_result(conn, order_id)
    if (original["customer"], original["items"]) != (args["customer"], args["items"]):
        raise IdempotencyConflict(
            f"draft {args['draft_id']!r} was already submitted as order {order_id!r} with "
            "another customer or items; nothing was changed, submit a new draft instead")
    return original


def _order_result(conn: sqlite3.Connection, order_id: str) -> JSON:
    order = conn.execute("SELECT order_id, customer, status, draft_id, created_at FROM orders "
                         "WHERE order_id = ?", (order_id,)).fetchone()
    lines = conn.execute("SELECT sku, quantity FROM order_lines WHERE order_id = ? ORDER BY sku",
                         (order_id,)).fetchall()
    return {**dict(order), "items": [dict(line) for line in lines]}


def _apply_cancel_order(conn: sqlite3.Connection, args: JSON, now: float) -> JSON:
    order_id = args["order_id"]
    row = conn.execute("SELECT status FROM orders WHERE order_id = ?", (order_id,)).fetchone()
    if row is None:
        raise NotFound(f"unknown order {order_id!r}; nothing was changed, check the order id")
    if row["status"] == "cancelled":
        raise NotAllowed(f"order {order_id!r} is already cancelled; nothing was changed")
    lines = conn.execute("SELECT sku, quantity FROM order_lines WHERE order_id = ? ORDER BY sku",
                         (order_id,)).fetchall()
    conn.executemany("UPDATE products SET stock = stock + ? WHERE sku = ?",
                     [(line["quantity"], line["sku"]) for line in lines])
    conn.execute("UPDATE orders SET status = 'cancelled' WHERE order_id = ?", (order_id,))
    return {"order_id": order_id, "status": "cancelled",
            "restored_items": [dict(line) for line in lines]}


def _apply_adjust_stock(conn: sqlite3.Connection, args: JSON, now: float) -> JSON:
    sku, delta = args["sku"], args["delta"]
    before = _product(conn, sku)["stock"]
    if before + delta < 0:
        raise InsufficientStock(sku, -delta, before)
    conn.execute("UPDATE products SET stock = ? WHERE sku = ?", (before + delta, sku))
    return {"sku": sku, "delta": delta, "stock_before": before, "stock_after": before + delta}


def _apply_set_listing(conn: sqlite3.Connection, args: JSON, now: float) -> JSON:
    sku, listed = args["sku"], args["listed"]
    was_listed = bool(_product(conn, sku)["listed"])
    conn.execute("UPDATE products SET listed = ? WHERE sku = ?", (int(listed), sku))
    return {"sku": sku, "listed": listed, "was_listed": was_listed}


_APPLIERS: Final[dict[str, Callable[[sqlite3.Connection, JSON, float], JSON]]] = {
    "create_order": _apply_create_order,
    "cancel_order": _apply_cancel_order,
    "adjust_stock": _apply_adjust_stock,
    "set_listing": _apply_set_listing,
}


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
            now = self._now()  # one instant for the business rows and the record
            result = _APPLIERS[tool](conn, normalized, now)
            stored = _record(conn, token, (tool, normalized, wanted), result, now)
            self._hook("before_commit")
        return stored, False

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
