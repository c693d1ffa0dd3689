"""Display events: what a client was shown, replayable by ``(run_id, seq)`` (V1).

The display log is a *projection* for reading continuity, never a source of
business facts. Recovery decides from the checkpoint and the business store;
a missing success event still means "ask the business store", and replaying
an event only reads this table — it never calls a tool.

Events live in the checkpoint database and are appended inside the very
transaction that changes the call's state, so a crash can neither show a
state that was not checkpointed nor checkpoint a state without its event,
and no crash window can produce the same event twice. ``seq`` is gap-free per
run (writers are serialized by ``BEGIN IMMEDIATE``), so a reconnecting client
asks for everything after the last ``seq`` it saw and gets each event once.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..shared._errors import InvalidInput
from ._business_normalize import canonical_json

__all__ = ["DISPLAY_SCHEMA", "DisplayEvent", "append_event", "events_since"]

DISPLAY_SCHEMA: Final = """
CREATE TABLE display_events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL CHECK (seq >= 1),
    kind TEXT NOT NULL,
    call_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
)
"""


@dataclass(frozen=True, slots=True)
class DisplayEvent:
    """One thing a client was shown; ``(run_id, seq)`` is its identity."""

    run_id: str
    seq: int
    kind: str
    call_id: str
    payload: Mapping[str, Any]
    at: float


def append_event(conn: sqlite3.Connection, run_id: str, kind: str, call_id: str,
                 payload: Mapping[str, Any], at: float) -> int:
    """Append inside the caller's write transaction; return the new ``seq``."""
    if not conn.in_transaction:  # a bare append could commit an event for an unsaved state
        raise RuntimeError("append_event must run inside the state change's write transaction")
    last = conn.execute("SELECT MAX(seq) FROM display_events WHERE run_id = ?",
                        (run_id,)).fetchone()[0]
    seq = int(last or 0) + 1
    conn.execute("INSERT INTO display_events (run_id, seq, kind, call_id, payload, at) "
                 "VALUES (?, ?, ?, ?, ?, ?)", (run_id, seq, kind, call_id,
                                               canonical_json(dict(payload)), at))
    return seq


def events_since(conn: sqlite3.Connection, run_id: str, seq: int = 0) -> list[DisplayEvent]:
    """Every event of ``run_id`` after ``seq``, in order, each once (a read only)."""
    if not isinstance(run_id, str) or not run_id:
        raise InvalidInput(f"run_id is {run_id!r}; pass the run id the client is reading")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise InvalidInput(f"seq is {seq!r}; pass the last seq the client saw, or 0 for all")
    rows = conn.execute("SELECT run_id, seq, kind, call_id, payload, at FROM display_events "
                        "WHERE run_id = ? AND seq > ? ORDER BY seq", (run_id, seq)).fetchall()
    return [DisplayEvent(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5]) for r in rows]
