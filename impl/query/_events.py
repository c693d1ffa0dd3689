"""The query event log: every state change appends one row in the same transaction.

The trace checker replays this log through the model (``model/query.py``),
so a row speaks the model's language:

- ``trigger`` is the model transition's *observable* name: the trigger,
  except that a lost submit answer and an undelivered request are both
  ``submit_unanswered``; crashes, the platform's own progress and an
  unanswered cancel leave no row at all;
- ``params`` are the model's parameters (``{"worker": name}`` for worker
  steps, the four confirmation facts for ``confirm``, ``{}`` otherwise);
- ``from_state``/``to_state`` are :class:`QueryState` values;
- ``vars`` are the model variables an implementation stores, read back from
  the rows *after* the step: submissions, cancel_state, lease_epoch,
  submit_epoch, task_version, authorized_version and phase_moved.

The two versions are logged as the model sees them. The model starts every
query at ``task_version`` 1; a real query is drafted at whatever version its
task is at (the seed's Q2 at version 2). So the log counts versions from the
query's own draft: ``task_version = task.condition_version -
query.condition_version + 1`` and ``authorized_version`` likewise (0 = not
authorized). Only differences matter to the protocol (Q24 compares the two),
and the absolute values stay in the ``queries`` and ``tasks`` rows.

:func:`apply_step` is the one place a query's state changes: it updates the
row only if it is still in the state (and, for a worker, under the lease
epoch) the caller decided on, and appends the event before the caller's
transaction commits. If the row moved underneath, nothing is written.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final, cast

from ...model.query import QueryState
from ..shared import _pg
from ..shared._db import connect
from ..shared._declared import require_declared
from ..shared._errors import NotFound
from ..shared._pg import is_url

__all__ = [
    "MACHINE",
    "TRACE_SCHEMA",
    "VAR_NAMES",
    "EventRow",
    "apply_step",
    "events",
    "export_jsonl",
    "iter_trace",
    "query_vars",
    "trace_lines",
]

TRACE_SCHEMA: Final = "settled.trace/1"  # conformance/trace.schema.json
MACHINE: Final = "query"
VAR_NAMES: Final = ("submissions", "cancel_state", "lease_epoch", "submit_epoch", "task_version",
                    "authorized_version", "phase_moved")

# Columns apply_step may set besides execution_state; anything else is a bug.
_SETTABLE: Final = frozenset({
    "cancel_state", "submissions", "lease_epoch", "lease_owner", "lease_expires_at", "submit_epoch",
    "authorized_version", "confirmation_message_id", "confirmed_run_id", "budget_message_id",
    "phase_moved", "result_ref", "result_json", "error", "settled_at",
})

EventRow = dict[str, Any]


def query_vars(conn: sqlite3.Connection, query_id: str) -> dict[str, Any]:
    """The model variables of ``query_id`` as the rows hold them now (versions relative)."""
    row = conn.execute(
        "SELECT q.submissions, q.cancel_state, q.lease_epoch, q.submit_epoch, q.authorized_version, "
        "q.phase_moved, q.condition_version, t.condition_version AS task_version "
        "FROM queries AS q JOIN tasks AS t ON t.task_id = q.task_id WHERE q.query_id = ?",
        (query_id,),
    ).fetchone()
    if row is None:
        raise LookupError(f"query {query_id!r} has no row to read variables from")
    return vars_of_row(row)


def vars_of_row(row: Any) -> dict[str, Any]:
    """The model variables from a row holding the queries columns and ``task_version``."""
    base = row["condition_version"] - 1
    values = {name: row[name] for name in VAR_NAMES}
    values["task_version"] = row["task_version"] - base
    values["authorized_version"] = row["authorized_version"] - base if row["authorized_version"] else 0
    values["phase_moved"] = bool(values["phase_moved"])
    return values


def append_event(conn: sqlite3.Connection, query_id: str, trigger: str, params: Mapping[str, Any],
                 from_state: QueryState, to_state: QueryState, at: str) -> int:
    """Append the next event of ``query_id``; the caller's transaction must be open."""
    if not conn.in_transaction:
        raise RuntimeError("append_event needs the caller's write transaction: an event commits "
                           "with the state change it records, or not at all")
    require_declared("query", trigger, QueryState(from_state).value, QueryState(to_state).value)
    seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM query_events WHERE query_id = ?",
                       (query_id,)).fetchone()[0]
    conn.execute(
        "INSERT INTO query_events (query_id, seq, trigger, params, from_state, to_state, vars, at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (query_id, seq, trigger, _dumps(params), QueryState(from_state).value,
         QueryState(to_state).value, _dumps(query_vars(conn, query_id)), at),
    )
    return int(seq)


def apply_step(conn: sqlite3.Connection, query_id: str, *, trigger: str, params: Mapping[str, Any],
               from_state: QueryState, to_state: QueryState, at: str,
               updates: Mapping[str, Any] | None = None, epoch: int | None = None) -> None:
    """Move ``query_id`` from ``from_state`` to ``to_state`` and log it, in the open transaction.

    ``epoch`` fences a worker write: the row must still carry that lease_epoch.
    The caller has already checked both under ``BEGIN IMMEDIATE``; a miss here
    means a bug, and raising rolls the whole transaction back.
    """
    sets = dict(updates or {})
    unknown = set(sets) - _SETTABLE
    if unknown:
        raise ValueError(f"apply_step cannot set {sorted(unknown)}")
    sets["execution_state"] = QueryState(to_state).value
    assignments = ", ".join(f"{column} = ?" for column in sets)
    where = "query_id = ? AND execution_state = ?"
    args: list[Any] = [*sets.values(), query_id, QueryState(from_state).value]
    if epoch is not None:
        where += " AND lease_epoch = ?"
        args.append(epoch)
    cursor = conn.execute(f"UPDATE queries SET {assignments} WHERE {where}", args)
    if cursor.rowcount != 1:
        raise RuntimeError(f"query {query_id!r} was not in state {from_state.value!r}"
                           f"{'' if epoch is None else f' under lease_epoch {epoch}'}; "
                           "the caller must check inside its transaction")
    append_event(conn, query_id, trigger, params, from_state, to_state, at)


def events(conn: sqlite3.Connection, query_id: str | None = None) -> list[EventRow]:
    """The log as trace rows (see :func:`export_jsonl`), ordered by (query_id, seq)."""
    sql = "SELECT * FROM query_events"
    args: tuple[str, ...] = ()
    if query_id is not None:
        sql, args = sql + " WHERE query_id = ?", (query_id,)
    rows = conn.execute(sql + " ORDER BY query_id, seq", args).fetchall()
    return [_trace_row(row) for row in rows]


def _trace_row(row: sqlite3.Row) -> EventRow:
    return {
        "schema": TRACE_SCHEMA,
        "machine": MACHINE,
        "instance": row["query_id"],
        "seq": row["seq"],
        "trigger": row["trigger"],
        "params": json.loads(row["params"]),
        "from": row["from_state"],
        "to": row["to_state"],
        "vars": json.loads(row["vars"]),
        "at": row["at"],
    }


def _require_store(db_path: str | Path) -> None:
    # connect() would create an empty file; exporting nothing from a typo is worse than an error.
    if is_url(db_path):
        return  # a server says for itself whether the store is there
    if not Path(db_path).is_file():
        raise NotFound(f"no query store at {str(db_path)!r}; pass the path of an existing store file")


def iter_trace(db_path: str | Path) -> Iterator[EventRow]:
    """The log of the store at ``db_path``: a file, or a postgresql:// URL (read, never created)."""
    _require_store(db_path)
    conn = (cast(sqlite3.Connection, _pg.connect(str(db_path))) if is_url(db_path)
            else connect(db_path))
    try:
        yield from events(conn)
    finally:
        conn.close()


def trace_lines(db_path: str | Path) -> Iterator[str]:
    """The log as ``settled.trace/1`` JSON lines (no newline), for an adapter's ``trace_lines``."""
    for row in iter_trace(db_path):
        yield json.dumps(row, ensure_ascii=False, separators=(",", ":"))


def export_jsonl(db_path: str | Path, out_path: str | Path) -> int:
    """Write the event log of the store at ``db_path`` as JSON Lines; returns the row count.

    One object per line in the conformance kit's ``settled.trace/1`` format,
    ordered by (query_id, seq): ``{"schema": "settled.trace/1", "machine":
    "query", "instance": <query_id>, "seq", "trigger", "params", "from",
    "to", "vars", "at"}``.
    """
    _require_store(db_path)
    lines = trace_lines(db_path)
    count = 0
    with open(out_path, "w", encoding="utf-8", newline="\n") as out:
        for line in lines:
            out.write(line + "\n")
            count += 1
    return count


def _dumps(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
