"""The agent's query store: tasks, messages, drafts, confirmation, cancel, status.

One class, :class:`QueryStore`, composed of one part per concept, each in its
own module: ``_runs`` (execution rights), ``_tasks``, ``_messages``,
``_drafts``, ``_confirm``, ``_cancel`` and ``_reading``; ``_values`` holds
the values, validators and row reads they share.

Theory of operation. Every call validates its arguments with no database
access first (a bad value is an :class:`InvalidInput` naming the value and the
fix), then runs ONE ``BEGIN IMMEDIATE`` transaction that re-reads every row
its decision depends on, checks the protocol, and writes. Any refusal raised
inside the transaction rolls it back, so a refused call changes no row. The
write lock is the session lock of Q9: receiving a message and confirming a
query can never interleave. On PostgreSQL (``path`` a ``postgresql://`` URL)
the same transaction runs SERIALIZABLE, which gives the same guarantee: a
concurrent writer that would make the decision stale aborts one side with
:class:`..shared._pg.WriteConflict`, nothing written (see :mod:`..shared._pg`).

A query's state changes only through :func:`._events.apply_step`, which logs
the model's event in the same transaction. The store fires the user's
transitions (check_passed/check_failed, revised, condition_updated, confirm,
cancel); the worker (:mod:`._worker`) fires the rest.

Execution rights (Q6) are a ``runs`` table: :meth:`QueryStore.start_run`
makes a new run the session's current one, which takes the rights from any
earlier run; :meth:`QueryStore.end_run` ends a run. Ending or replacing a run
never touches a query already authorized (Q22): stopping the agent is not a
cancel.
"""

from __future__ import annotations

from pathlib import Path

from ..platform._platform_answers import PlatformClient
from ..shared._pg import is_url
from ._cancel import CancelPart
from ._confirm import ConfirmPart, _check_message, _check_versions
from ._drafts import DraftsPart
from ._messages import MessagesPart
from ._reading import ReadingPart
from ._runs import RunsPart
from ._schema import open_store
from ._tasks import TasksPart
from ._values import (
    CONFIRM_PARAMS,
    Clock,
    Message,
    Notification,
    Query,
    QueryStatus,
    Task,
    iso,
    message_row,
    query_row,
    task_row,
    utc_now,
)

__all__ = [
    "CONFIRM_PARAMS",
    "Clock",
    "Message",
    "Notification",
    "Query",
    "QueryStatus",
    "QueryStore",
    "Task",
    "_check_message",
    "_check_versions",
    "iso",
    "message_row",
    "query_row",
    "task_row",
    "utc_now",
]


class QueryStore(RunsPart, TasksPart, MessagesPart, DraftsPart, ConfirmPart, CancelPart,
                 ReadingPart):
    """Tasks, messages, drafts and the user's side of the query protocol, on one SQLite file
    (or PostgreSQL database). Each concept is a part in its own module; they share the
    connection, the platform and the clock (``_values.StoreBase``)."""

    def __init__(self, path: str | Path, platform: PlatformClient,
                 clock: Clock | None = None) -> None:
        # A file path, or a postgresql:// URL (see impl/shared/_pg.py); workers open the same.
        self.path: Path | str = str(path) if is_url(path) else Path(path)
        self.platform = platform
        self._clock: Clock = clock or utc_now
        self._conn = open_store(self.path)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> QueryStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
