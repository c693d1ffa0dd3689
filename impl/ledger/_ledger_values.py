"""The ledger's values: tool contracts, the calls and entries it keeps, and its input checks.

A :class:`Contract` says what one version of a tool allows (L5); :class:`ToolCall` is a
call as the SDK delivers it, :class:`Entry` one ledger row and :class:`TurnReport` what a
recovery did. It is its own room because none of it touches the session file: these are
the plain values the runtime (:mod:`._ledger`) is called with and answers, and the
checks that refuse a bad input before anything is read or written.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final

from ..approval._business_normalize import canonical_json, normalize
from ..shared._errors import InvalidInput
from ..shared._ids import require_id

__all__ = [
    "CONTRACTS",
    "HOOK_POINTS",
    "Contract",
    "Entry",
    "Hook",
    "ToolCall",
    "TurnReport",
    "check_fingerprint",
    "contracts_upgraded",
]

Hook = Callable[[str, int], None]
HOOK_POINTS: Final = ("receipt_committed", "inside_transaction", "result_checkpointed")
MAX_INPUT_CHARS: Final = 20_000
MAX_CALLS: Final = 64
_HEX64: Final = re.compile(r"[0-9a-f]{64}")


# --- contracts --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Contract:
    """A tool's contract: version, kind, and what the version allows.

    Version 2 of a write tool allows at most ``max_quantity`` units per order line or stock
    adjustment: arguments registered under version 1 may not pass it (L5).
    """

    tool: str
    read_only: bool = False
    version: int = 1
    max_quantity: int | None = None

    @property
    def fingerprint(self) -> str:
        text = canonical_json({"tool": self.tool, "version": self.version,
                               "read_only": self.read_only, "max_quantity": self.max_quantity})
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The normalized arguments, or :class:`InvalidInput` naming what this version refuses."""
        if self.read_only:
            return _normalize_lookup(self.tool, args)
        normalized = normalize(self.tool, args)
        if self.max_quantity is not None:
            quantities = ([item["quantity"] for item in normalized.get("items", [])]
                          + ([abs(normalized["delta"])] if "delta" in normalized else []))
            too_many = [q for q in quantities if q > self.max_quantity]
            if too_many:
                raise InvalidInput(f"{self.tool} contract v{self.version}: quantity {too_many[0]} "
                                   f"exceeds {self.max_quantity}; split the request")
        return normalized


CONTRACTS: Final = MappingProxyType({c.tool: c for c in (
    Contract("create_order"), Contract("cancel_order"), Contract("adjust_stock"),
    Contract("set_listing"), Contract("stock_level", read_only=True))})


def contracts_upgraded(contracts: Mapping[str, Contract] = CONTRACTS,
                       tools: Sequence[str] | None = None) -> dict[str, Contract]:
    """The contracts after a deployment that upgrades ``tools`` (default: every write tool)."""
    chosen = [t for t, c in contracts.items() if not c.read_only] if tools is None else tools
    out = dict(contracts)
    for tool in chosen:
        c = out[tool]
        out[tool] = replace(c, version=c.version + 1, max_quantity=1)
    return out


def _normalize_lookup(tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(args, Mapping) or set(args) != {"sku"}:
        raise InvalidInput(f"{tool}: arguments are {_show(args)}; pass exactly {{\"sku\": ...}}")
    sku = args["sku"]
    if not isinstance(sku, str) or not sku.strip() or len(sku) > 64:
        raise InvalidInput(f"{tool}: sku is {_show(sku)}; it must be a non-empty string of at "
                           "most 64 characters")
    return {"sku": sku}


# --- values -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of an assistant message, as the SDK delivered it."""

    call_id: str
    tool: str
    args: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Entry:
    """One ledger row: the call id's mapping, its state and (when known) its receipt."""

    call_id: str
    session_id: str
    position: int
    tool: str
    args: Mapping[str, Any]
    fingerprint: str
    contract: str
    read_only: bool
    operation_id: str
    origin_run_id: str
    state: str
    receipt: str = "none"  # none | success | rejected
    receipt_body: Any = None
    result: Mapping[str, Any] | None = None


@dataclass
class TurnReport:
    """What :meth:`LedgerRuntime.recover` did to one turn."""

    session_id: str
    run_id: str
    calls: int = 0
    paired_from_receipts: list[str] = field(default_factory=list)
    continued: list[str] = field(default_factory=list)  # ran again under the original op id
    unknown: list[str] = field(default_factory=list)
    denied: list[str] = field(default_factory=list)
    results: dict[str, Mapping[str, Any]] = field(default_factory=dict)


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _text_id(name: str, value: object) -> str:
    return require_id(name, value, "pass the id this session uses")


def check_fingerprint(value: object) -> str:
    """A parameter fingerprint is 64 lowercase hex characters (sha256)."""
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise InvalidInput(f"fingerprint {_show(value)} is malformed; pass the 64 lowercase hex "
                           "characters of the sha256 of the call's canonical parameters")
    return value


def _no_hook(point: str, position: int) -> None:
    """Production never crashes on purpose."""
