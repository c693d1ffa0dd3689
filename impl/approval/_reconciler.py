"""The reconciler: a read-only question to the business store about one token (A3).

After a crash or a lost response, recovery asks "did the call with this token
commit, and with which result?" before it decides anything (A4). The answer is
one of three, and only a completed read may give it:

- ``found``: the token is recorded with the same tool and normalized
  arguments; the answer carries the FIRST stored result exactly as stored, in
  the tool's own result shape. It is never rebuilt from current rows: stock or
  order state may have moved on since.
- ``conflict``: the token is recorded for another tool or other arguments.
- ``absent``: the read completed and the token is not recorded.

Anything else — a missing file, a lock held past the timeout, a corrupt file,
a file without the table — raises :class:`LookupFailed`. A failed lookup is
*unknown*, never ``absent``: "I could not read the database" is no evidence
that nothing was committed, and answering ``absent`` would turn the most
dangerous failure into permission to write again.

The lookup never writes: a path is opened with ``mode=ro``, a PostgreSQL URL
(``postgresql://…``) gets a read-only session, and a connection
passed in only ever runs one ``SELECT``. Normalization is the business store's
own (:func:`normalize`, :func:`fingerprint` are re-exported here), so the
runtime and the store can never disagree about what "same arguments" means.
"""

from __future__ import annotations

import enum
import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..shared import _pg
from ..shared._db import DEFAULT_BUSY_TIMEOUT
from ..shared._errors import InvalidInput, LookupFailed
from ..shared._pg import is_url
from ._business_normalize import TOOLS, check_token, fingerprint, normalize

__all__ = [
    "LookupAnswer",
    "LookupFailed",
    "LookupStatus",
    "fingerprint",
    "lookup",
    "normalize",
]


class LookupStatus(enum.Enum):
    FOUND = "found"
    ABSENT = "absent"
    CONFLICT = "conflict"


@dataclass(frozen=True, slots=True)
class LookupAnswer:
    """A completed lookup; ``result`` is set exactly when the status is ``found``."""

    status: LookupStatus
    result: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if (self.status is LookupStatus.FOUND) != (self.result is not None):
            raise ValueError(f"a {self.status.value} answer must "
                             f"{'' if self.status is LookupStatus.FOUND else 'not '}carry a result")


_RECORD_SQL = "SELECT tool, args_fingerprint, result FROM mutation_requests WHERE client_token = ?"


def lookup(source: str | Path | sqlite3.Connection, client_token: str, tool: str,
           normalized_args: Mapping[str, Any], *,
           timeout: float = DEFAULT_BUSY_TIMEOUT) -> LookupAnswer:
    """Ask the business store what it committed under ``client_token`` (A3, A4).

    ``normalized_args`` is what :func:`normalize` returned for the original call. Raises
    :class:`InvalidInput` for a malformed token or tool (the caller's bug) and
    :class:`LookupFailed` when the store could not be read; neither is ever ``absent``.
    """
    token = check_token(client_token)
    if tool not in TOOLS:
        raise InvalidInput(f"unknown tool {tool!r}; use one of {', '.join(TOOLS)}")
    try:
        wanted = fingerprint(tool, normalized_args)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"normalized_args for {tool} are not plain JSON values ({exc}); "
                           "pass what normalize() returned") from exc
    row = _read_record(source, token, timeout)
    if row is None:
        return LookupAnswer(LookupStatus.ABSENT)
    stored_tool, stored_fingerprint, result_text = row
    if stored_tool != tool or stored_fingerprint != wanted:
        return LookupAnswer(LookupStatus.CONFLICT)
    return LookupAnswer(LookupStatus.FOUND, _parse_result(token, result_text))


def _read_record(source: str | Path | sqlite3.Connection, token: str,
                 timeout: float) -> tuple[str, str, str] | None:
    if isinstance(source, sqlite3.Connection):
        return _select(source, token, source_name="the given connection")
    if is_url(source):
        return _select_pg(str(source), token, timeout)
    try:
        # mode=ro: the lookup can neither write nor create a missing file (which would
        # otherwise turn "file gone" into an empty database and a false "absent").
        conn = sqlite3.connect(Path(source).resolve().as_uri() + "?mode=ro", uri=True,
                               timeout=timeout, isolation_level=None)
    except sqlite3.Error as exc:
        raise _failed(token, str(source), exc) from exc
    try:
        return _select(conn, token, source_name=str(source))
    finally:
        conn.close()


def _select(conn: sqlite3.Connection, token: str,
            source_name: str) -> tuple[str, str, str] | None:
    try:
        # One SELECT is its own read transaction; a private cursor keeps the caller's
        # row_factory out of the way.
        cursor = conn.cursor()
        cursor.row_factory = None
        row = cursor.execute(_RECORD_SQL, (token,)).fetchone()
    except sqlite3.Error as exc:
        raise _failed(token, source_name, exc) from exc
    if row is None:
        return None
    tool, stored_fingerprint, result = row
    return str(tool), str(stored_fingerprint), str(result)


def _select_pg(url: str, token: str, timeout: float) -> tuple[str, str, str] | None:
    """The same SELECT on PostgreSQL, in a READ ONLY transaction (it can never write)."""
    psycopg = _pg.psycopg_module()

    name = _pg.redact(url)
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout))) as conn:
            conn.execute("SET default_transaction_read_only = on")
            row = conn.execute(_RECORD_SQL.replace("?", "%s"), (token,)).fetchone()
    except psycopg.Error as exc:
        raise _failed(token, name, exc) from exc
    if row is None:
        return None
    tool, stored_fingerprint, result = row
    return str(tool), str(stored_fingerprint), str(result)


def _parse_result(token: str, text: str) -> dict[str, Any]:
    try:
        result = json.loads(text)
    except ValueError as exc:
        raise _failed(token, "the stored result", exc) from exc
    if not isinstance(result, dict):
        raise LookupFailed(f"lookup of client_token {token!r}: the stored result is not an "
                           "object; the outcome is unknown, reconcile by hand")
    return result


def _failed(token: str, source_name: str, exc: Exception) -> LookupFailed:
    return LookupFailed(f"lookup of client_token {token!r} in {source_name} failed ({exc}); "
                        "the outcome is unknown, not absent: retry the lookup or reconcile "
                        "by hand, never run the call again on this answer")
