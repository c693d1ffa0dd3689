"""Execution rights (Q6, Q22): a session's latest run holds them; ending a run is not a cancel."""

from __future__ import annotations

import sqlite3

from ..shared._db import write
from ..shared._errors import NotAllowed, NotFound
from ..shared._ids import require_id
from ._values import StoreBase, new_id


class RunsPart(StoreBase):
    """Runs of a session: :meth:`start_run` takes the session's execution rights for a new
    run; :meth:`end_run` ends one. Queries a run authorized keep running (Q22)."""

    def start_run(self, session_id: str) -> str:
        """A new run of ``session_id``; it holds the session's execution rights from now on."""
        require_id("session_id", session_id)
        run_id = new_id("run")
        with write(self._conn) as conn:
            seq = conn.execute("SELECT COALESCE(MAX(started_seq), 0) + 1 FROM runs").fetchone()[0]
            conn.execute("INSERT INTO runs (run_id, session_id, started_at, started_seq) "
                         "VALUES (?, ?, ?, ?)", (run_id, session_id, self._now(), seq))
        return run_id

    def end_run(self, run_id: str) -> None:
        """End ``run_id``: it loses its rights; queries it authorized keep running (Q22)."""
        require_id("run_id", run_id)
        with write(self._conn) as conn:
            row = conn.execute("SELECT ended_at FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                raise NotFound(f"no run {run_id!r}; pass an id start_run returned")
            if row["ended_at"] is None:
                conn.execute("UPDATE runs SET ended_at = ? WHERE run_id = ?", (self._now(), run_id))


def require_rights(conn: sqlite3.Connection, run_id: str, session_id: str,
                    query_id: str) -> None:
    run = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if run is None:
        raise NotFound(f"no run {run_id!r}; pass an id start_run returned")
    # The latest run started holds the rights; a later run takes them for
    # good, even after it ends itself (an earlier run never gets them back).
    latest = conn.execute("SELECT run_id, ended_at FROM runs WHERE session_id = ? "
                          "ORDER BY started_seq DESC LIMIT 1", (session_id,)).fetchone()
    current = latest if latest is not None and latest["ended_at"] is None else None
    if run["session_id"] != session_id:
        raise NotAllowed(f"cannot confirm query {query_id!r}: run {run_id!r} belongs to session "
                         f"{run['session_id']!r}, the query to {session_id!r}; confirm from a "
                         "run of the query's own session")
    if current is None or current["run_id"] != run_id:
        now = "none" if current is None else repr(current["run_id"])
        raise NotAllowed(f"cannot confirm query {query_id!r}: run {run_id!r} no longer holds the "
                         f"execution rights of session {session_id!r} (current run: {now}); "
                         "confirm from the current run (Q6)")
