# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""The approval catalogue's business-store mutants (each a subclass of the shipped
:class:`~settled.impl.approval._business.BusinessStore`, run by the real runtime opening it)
and the lookup that knows the token only (a copy of the shipped ``lookup`` with its bug).
The catalogue is ``approval.py``."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from settled.impl.approval._approval import (
    ApprovalRuntime,
)
from settled.impl.approval._business import BusinessStore, _record
from settled.impl.approval._business_normalize import JSON, TOOLS, check_token, fingerprint
from settled.impl.approval._business_rules import _APPLIERS
from settled.impl.approval._reconciler import (
    LookupAnswer,
    LookupStatus,
    _parse_result,
    _read_record,
    lookup,
)
from settled.impl.shared._db import DEFAULT_BUSY_TIMEOUT, write
from settled.impl.shared._errors import InvalidInput

from ._shipped import fork_of


def runtime_opening(store: type[BusinessStore]) -> type[ApprovalRuntime]:
    """The real runtime, opening the mutated business store ``store``."""
    return cast(type[ApprovalRuntime], type(f"{store.__name__}Runtime", (ApprovalRuntime,),
                                            {"business_class": store}))


# -- W6: the token record in a transaction of its own ------------------------------------------
class W6RecordInItsOwnTransaction(BusinessStore):
    """Applies the change, commits, then records the token: a crash between loses the record."""

    def _apply(self, token: str, tool: str, normalized: JSON, wanted: str) -> tuple[JSON, bool]:
        with write(self._conn) as conn:
            first = self._first_result(conn, token, tool, wanted)
            if first is not None:
                return first, True
            # bug deleted; shipped: stored = self._change(conn, token, (tool, normalized, wanted))
            # bug deleted; shipped: self._hook("before_commit")
            now = self._now()  # bug: the change alone
            result = _APPLIERS[tool](conn, normalized, now)  # bug
        with write(self._conn) as conn:  # bug: a second transaction for the record
            stored = _record(conn, token, (tool, normalized, wanted), result, now)
            self._hook("before_commit")
        return stored, False


_W6Runtime = runtime_opening(W6RecordInItsOwnTransaction)


# -- W3: a lookup that knows the token only --------------------------------------------------
@fork_of(lookup)
def lookup_by_token_only(source: str | Path | sqlite3.Connection, client_token: str, tool: str,
                         normalized_args: Mapping[str, Any], *,
                         timeout: float = DEFAULT_BUSY_TIMEOUT) -> LookupAnswer:
    """The token is the call's identity, so its record must be the call's (it need not be)."""
    token = check_token(client_token)
    if tool not in TOOLS:
        raise InvalidInput(f"unknown tool {tool!r}; use one of {', '.join(TOOLS)}")
    try:
        wanted = fingerprint(tool, normalized_args)  # noqa: F841 (the bug drops it)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"normalized_args for {tool} are not plain JSON values ({exc}); "
                           "pass what normalize() returned") from exc
    row = _read_record(source, token, timeout)
    if row is None:
        return LookupAnswer(LookupStatus.ABSENT)
    stored_tool, stored_fingerprint, result_text = row  # noqa: RUF059 (the bug drops two)
    # bug deleted; shipped: if stored_tool != tool or stored_fingerprint != wanted:
    # bug deleted; shipped:     return LookupAnswer(LookupStatus.CONFLICT)
    return LookupAnswer(LookupStatus.FOUND, _parse_result(token, result_text))


# -- W7: an already submitted draft ordered again ----------------------------------------------
class W7DraftOrderedAgain(BusinessStore):
    """A draft already submitted is ordered again when the token is new.

    De-duplication is left to the token ("a new token is a new request", W4), so a user
    who submits the same draft twice, under two tokens, gets two orders.
    """

    def create_order(self, client_token: str, args: Mapping[str, Any]) -> Any:
        draft = args.get("draft_id")  # bug
        # bug: a submitted draft is forgotten
        if draft is not None and self._conn.execute(
                "SELECT 1 FROM orders WHERE draft_id = ?", (draft,)).fetchone() is not None:
            args = {**args, "draft_id": None}
        return super().create_order(client_token, args)


# -- W2: a replayed token applied again ---------------------------------------------------------
class W2ReplayAppliesAgain(BusinessStore):
    """Applies every call, then records its token, replacing an earlier record of it.

    "The record is a log of the last result": a retry of a committed call under the same
    token changes the business data a second time.
    """

    def _apply(self, token: str, tool: str, normalized: JSON, wanted: str) -> tuple[JSON, bool]:
        with write(self._conn) as conn:
            # bug deleted; shipped: first = self._first_result(conn, token, tool, wanted)
            # bug deleted; shipped: if first is not None:
            # bug deleted; shipped:     return first, True
            # bug: the record replaced, not read
            conn.execute("DELETE FROM mutation_requests WHERE client_token = ?", (token,))
            stored = self._change(conn, token, (tool, normalized, wanted))
            self._hook("before_commit")
        return stored, False


_W2Runtime = runtime_opening(W2ReplayAppliesAgain)


# -- W1: the record without the tool's name --------------------------------------------------
class W1RecordWithoutToolName(BusinessStore):
    """Records every write under the generic tool name ``write``.

    "The token is the key, the tool column is informational": but a lookup asks for the
    token AND the tool, so a committed call is reported as a conflict, never found.
    """

    @staticmethod
    def _first_result(conn: sqlite3.Connection, token: str, tool: str, wanted: str) -> JSON | None:
        # bug: the record is read as it is written; shipped: return BusinessStore._first_result(conn, token, tool, wanted)  # noqa: E501
        return BusinessStore._first_result(conn, token, "write", wanted)

    def _change(self, conn: sqlite3.Connection, token: str, request: tuple[str, JSON, str]) -> JSON:
        tool, normalized, wanted = request  # bug: its fingerprint used; shipped: tool, normalized, _wanted = request  # noqa: E501
        now = self._now()  # one instant for the business rows and the record
        result = _APPLIERS[tool](conn, normalized, now)
        # bug: the generic name; shipped: return _record(conn, token, request, result, now)
        return _record(conn, token, ("write", normalized, wanted), result, now)


_W1Runtime = runtime_opening(W1RecordWithoutToolName)


# -- R4: the change commits before the runtime's commit point ----------------------------------
class R4ChangeCommittedEarly(BusinessStore):
    """Commits the change and its record, then reaches the point the runtime calls pre-commit.

    The before-commit hook sits after the ``with`` block ("once everything is written"), so
    a crash in the window the runtime believes is before the commit leaves a committed change.
    """

    def _apply(self, token: str, tool: str, normalized: JSON, wanted: str) -> tuple[JSON, bool]:
        with write(self._conn) as conn:
            first = self._first_result(conn, token, tool, wanted)
            if first is not None:
                return first, True
            stored = self._change(conn, token, (tool, normalized, wanted))
            # bug deleted; shipped: self._hook("before_commit")
        self._hook("before_commit")  # bug: already committed
        return stored, False


_R4Runtime = runtime_opening(R4ChangeCommittedEarly)


# -- W4: a new token deduplicated by its arguments ----------------------------------------------
class W4NewTokenDeduplicatedByArguments(BusinessStore):
    """W4 broken: a new token whose arguments match a recorded request gets that request's
    result; the call is neither validated nor applied.

    How it gets written: "idempotency protects the user from doing the same thing twice",
    so an unknown token falls back to the request's fingerprint. But a token is the call's
    identity, not the user's intent: the same stock adjustment asked for again, under a new
    token, is a new call the store must validate and apply.
    """

    @staticmethod
    def _first_result(conn: sqlite3.Connection, token: str, tool: str,
                      wanted: str) -> JSON | None:
        first = BusinessStore._first_result(conn, token, tool, wanted)
        if first is not None:  # bug
            return first
        row = conn.execute(  # bug: the request's arguments stand in for its identity
            "SELECT result FROM mutation_requests WHERE tool = ? AND args_fingerprint = ? "
            "ORDER BY created_at LIMIT 1", (tool, wanted)).fetchone()
        # bug: the first request with these arguments answers; shipped: return first
        return None if row is None else json.loads(row["result"])
