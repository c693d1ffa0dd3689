"""The query store's schema: one file, one place, one version.

The agent's store (tasks, messages, runs, queries, notifications and the
append-only event log) lives in one SQLite file; the platform keeps its own
files and never shares a transaction with this one.

``execution_state`` holds the model's :class:`QueryState` values and nothing
else; ``cancel_state`` is kept apart from it (Q19). ``query_events`` is
append-only: two triggers refuse any UPDATE or DELETE, so a bug cannot
rewrite history the trace checker replays.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final, cast

from ...model.query import QueryState
from ..shared import _pg
from ..shared._db import apply_schema, connect, write
from ..shared._pg import is_url

__all__ = ["SCHEMA", "SCHEMA_NAME", "SCHEMA_VERSION", "open_store"]

SCHEMA_NAME: Final = "query-store"
SCHEMA_VERSION: Final = 1

_STATES = ", ".join(f"'{s.value}'" for s in QueryState)

SCHEMA: Final = f"""
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    started_at TEXT NOT NULL,
    started_seq INTEGER NOT NULL UNIQUE,
    ended_at TEXT
);
CREATE INDEX runs_by_session ON runs (session_id, started_seq);
CREATE TABLE tasks (
    task_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    conditions TEXT NOT NULL,
    condition_version INTEGER NOT NULL CHECK (condition_version >= 1),
    draft_counter INTEGER NOT NULL DEFAULT 0 CHECK (draft_counter >= 0),
    phase TEXT NOT NULL,
    awaiting_clarification INTEGER NOT NULL DEFAULT 0 CHECK (awaiting_clarification IN (0, 1)),
    created_at TEXT NOT NULL
);
CREATE TABLE task_conditions (
    task_id TEXT NOT NULL REFERENCES tasks (task_id),
    version INTEGER NOT NULL,
    conditions TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (task_id, version)
);
CREATE TABLE messages (
    message_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    text TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('user', 'notification')),
    request_clock_utc TEXT NOT NULL,
    time_zone TEXT NOT NULL,
    attribution TEXT NOT NULL CHECK (attribution IN ('pending', 'attributed', 'failed')),
    task_id TEXT REFERENCES tasks (task_id),
    applied_to_task INTEGER NOT NULL DEFAULT 0 CHECK (applied_to_task IN (0, 1)),
    received_at TEXT NOT NULL,
    CHECK (attribution != 'attributed' OR task_id IS NOT NULL),
    CHECK (applied_to_task = 0 OR attribution = 'attributed')
);
CREATE INDEX messages_by_session ON messages (session_id, seq);
CREATE TABLE queries (
    query_id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL REFERENCES tasks (task_id),
    session_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    sql TEXT NOT NULL,
    draft_version INTEGER NOT NULL CHECK (draft_version >= 1),
    condition_version INTEGER NOT NULL CHECK (condition_version >= 1),
    replaces_query_id TEXT REFERENCES queries (query_id),
    check_ok INTEGER NOT NULL CHECK (check_ok IN (0, 1)),
    check_reason TEXT,
    execution_state TEXT NOT NULL CHECK (execution_state IN ({_STATES})),
    cancel_state TEXT NOT NULL DEFAULT 'none' CHECK (cancel_state IN ('none', 'requested')),
    submissions INTEGER NOT NULL DEFAULT 0 CHECK (submissions BETWEEN 0 AND 3),
    lease_epoch INTEGER NOT NULL DEFAULT 0 CHECK (lease_epoch >= 0),
    lease_owner TEXT,
    lease_expires_at REAL,
    submit_epoch INTEGER NOT NULL DEFAULT 0 CHECK (submit_epoch >= 0),
    authorized_version INTEGER NOT NULL DEFAULT 0 CHECK (authorized_version >= 0),
    confirmation_message_id TEXT REFERENCES messages (message_id),
    confirmed_run_id TEXT REFERENCES runs (run_id),
    budget_message_id TEXT REFERENCES messages (message_id),
    phase_moved INTEGER NOT NULL DEFAULT 0 CHECK (phase_moved IN (0, 1)),
    result_ref TEXT,
    result_json TEXT,
    error TEXT,
    created_at TEXT NOT NULL,
    settled_at TEXT
);
CREATE INDEX queries_by_task ON queries (task_id, draft_version);
CREATE INDEX queries_by_state ON queries (execution_state);
CREATE TABLE notifications (
    notification_id TEXT PRIMARY KEY,
    query_id TEXT NOT NULL UNIQUE REFERENCES queries (query_id),
    task_id TEXT NOT NULL REFERENCES tasks (task_id),
    condition_version INTEGER NOT NULL,
    sql TEXT NOT NULL,
    outcome TEXT NOT NULL,
    result TEXT,
    budget_message_id TEXT NOT NULL REFERENCES messages (message_id),
    request_clock_utc TEXT NOT NULL,
    time_zone TEXT NOT NULL,
    message_id TEXT NOT NULL UNIQUE REFERENCES messages (message_id),
    text TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE query_events (
    query_id TEXT NOT NULL REFERENCES queries (query_id),
    seq INTEGER NOT NULL CHECK (seq >= 1),
    trigger TEXT NOT NULL,
    params TEXT NOT NULL,
    from_state TEXT NOT NULL CHECK (from_state IN ({_STATES})),
    to_state TEXT NOT NULL CHECK (to_state IN ({_STATES})),
    vars TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (query_id, seq)
)
"""

# apply_schema splits on ';', which a trigger body contains, so the triggers
# are created apart (idempotently) right after the tables.
_APPEND_ONLY: Final = (
    "CREATE TRIGGER IF NOT EXISTS query_events_no_update BEFORE UPDATE ON query_events "
    "BEGIN SELECT RAISE(ABORT, 'query_events is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS query_events_no_delete BEFORE DELETE ON query_events "
    "BEGIN SELECT RAISE(ABORT, 'query_events is append-only'); END",
)


# The same guarantees on PostgreSQL: a trigger function refuses changes to the
# log, and messages.seq is drawn from a sequence (see impl/shared/_pg.py).
_PG_EXTRA: Final = (
    "CREATE OR REPLACE FUNCTION query_events_append_only() RETURNS trigger LANGUAGE plpgsql "
    "AS $$ BEGIN RAISE EXCEPTION 'query_events is append-only'; END $$",
    "CREATE TRIGGER query_events_no_change BEFORE UPDATE OR DELETE ON query_events "
    "FOR EACH ROW EXECUTE FUNCTION query_events_append_only()",
    "CREATE SEQUENCE messages_seq_draw",
)


def open_store(path: str | Path, *, worker: bool = False) -> sqlite3.Connection:
    """Open (creating on first use) the query store at ``path``: a file, or a PostgreSQL URL.

    On PostgreSQL a worker's connection runs its transactions READ COMMITTED
    with row locks and the user's side SERIALIZABLE (see :mod:`..shared._pg`).
    """
    if is_url(path):
        pg = _pg.connect(str(path), _pg.WORKER_SIDE if worker else _pg.USER_SIDE)
        try:
            _pg.apply_schema(pg, SCHEMA, SCHEMA_VERSION, SCHEMA_NAME, _PG_EXTRA)
        except BaseException:
            pg.close()
            raise
        # It speaks the subset of sqlite3.Connection the store and worker use.
        return cast(sqlite3.Connection, pg)
    conn = connect(path)
    try:
        apply_schema(conn, SCHEMA, SCHEMA_VERSION, SCHEMA_NAME)
        with write(conn):
            for statement in _APPEND_ONLY:
                conn.execute(statement)
    except BaseException:
        conn.close()
        raise
    return conn
