"""The canonical form of a write tool call: canonical JSON, fingerprint, token and normalization.

Everything here runs before any database is opened (W1, W3, W5): a call is validated and
brought into the one form that encodes business equivalence, and its fingerprint is taken
over that form. It is its own room because it touches no row at all: the business store
(:mod:`._business`), the approval runtime, the reconciler and the ledger all compare calls
through it, and a bad input is refused here before anything is opened, let alone written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ..shared._errors import InvalidInput
from ..shared._ids import MAX_ID_CHARS, require_id

__all__ = [
    "JSON",
    "TOOLS",
    "canonical_json",
    "check_token",
    "fingerprint",
    "normalize",
]

TOOLS: Final = ("create_order", "cancel_order", "adjust_stock", "set_listing")

MAX_TOKEN_CHARS: Final = MAX_ID_CHARS  # a token is an id (_ids)
MAX_SKU_CHARS: Final = 64
MAX_CUSTOMER_CHARS: Final = 200
MAX_ITEMS: Final = 100
MAX_LINE_QUANTITY: Final = 10_000
MAX_ABS_DELTA: Final = 1_000_000
MAX_PAYLOAD_BYTES: Final = 16 * 1024

JSON = dict[str, Any]


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
