"""The business rules of the four write tools, applied inside the write transaction (W4, W7).

Each applier reads the current rows (unknown SKU, stock, listing, order state), refuses
with a typed error that changes nothing, or applies the change; :data:`_APPLIERS` maps a
tool to its applier. It is its own room because these are the ERP's own rules, not the
idempotency discipline around them: the business store (:mod:`._business`) runs one of
them in the same transaction as the token's record, and knows nothing of what they check.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Final

from ..shared._errors import IdempotencyConflict, InsufficientStock, NotAllowed, NotFound
from ._business_normalize import JSON


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
