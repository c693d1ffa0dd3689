"""The query system's adapter: the SQLite implementation's queries of ONE task and session.

Where the machine adapter (``_query_adapter``) gives each model instance a
session and a task of its own, here every instance is a query of the same
task, in the same session, confirmed by the same run, handled by the same
worker processes. So what the system declares shared is really shared:

- one row holds the task's condition version and clarification state, and
  ``condition_updated`` is ONE update of that row (``perform(None, ...)``),
  which invalidates every pending draft of the task in its transaction;
- the session's newest message is a real message row: ``message_received``
  stores a user message (pending), ``message_attributed`` attributes it to the
  task; ``confirm`` never invents a message, so a pending one blocks it the
  way it blocks any draft of the session;
- a worker process is one :class:`~settled.impl.query._worker.Worker` object for
  all queries; ``crash`` (``perform(None, "crash", {"worker": w})``) drops
  the object with every lease it holds on a live query and starts a new one
  of the same name from the files.

``observe(None)`` reports the system's own variables: ``message`` is
``pending`` while the newest message of the session is not attributed;
``other_task`` is how far the session's second task's conditions moved
(``other_task_updated`` is one update of that task's row).
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from settled.conformance._bundled._query_adapter import (
    CLOCK,
    MESSAGE_TEXT,
    QUOTE_TEXT,
    QueryAdapter,
    _side_notification,
    platform_template,
)
from settled.conformance._bundled._scratch import ram_disk, run_folder
from settled.conformance._bundled._system_step import perform_system_step
from settled.impl.platform._platform import APP_MONTHLY_SQL
from settled.impl.shared._errors import CallerError
from settled.model.query import LIVE
from settled.model.systems import build_query_system

SESSION, USER = "session-0", "user-0"
NEW_MESSAGE = "wait, by day"
# A later message is sent on a later day: its request clock is not the confirming message's,
# so a notification stamped with the newest message's clock is told apart (M2).
LATER_CLOCK = (CLOCK[0] + timedelta(days=3, hours=5), CLOCK[1])


@functools.cache
def query_system(queries: int, workers: int, /) -> Any:
    """The declared query system, built once per process (campaigns share its plans;
    positional only, so that one system has one cache key)."""
    return build_query_system(queries=queries, workers=workers)


class _Query:
    """One query of the shared task (the attributes the machine adapter's steps read)."""

    def __init__(self, shared: QuerySystemAdapter) -> None:
        self.session, self.user = SESSION, USER
        self.task = shared.task
        self.run = shared.run
        self.message = shared.message
        self.clock = shared.clock
        self.reader = shared.reader
        self.query_id: str | None = None
        self.sql: str | None = None
        self.reruns: list[str] = []
        self.rejected = False
        self.notification: str | None = None


class QuerySystemAdapter(QueryAdapter):
    """Drives ``queries`` queries of one task and session with ``workers`` worker processes."""

    def __init__(self, queries: int = 2, workers: int = 2, directory: Path | None = None,
                 transport: str | None = None) -> None:
        self.system = query_system(queries, workers)
        self.protocol = self.system.machine
        self.instances = queries
        self._folder = run_folder("settled-system-", directory)
        self.dir = self._folder.path
        # The orders database comes filled from a copy made once per process.
        if not (self.dir / "platform").exists():
            shutil.copytree(platform_template(ram_disk()),
                            self.dir / "platform")
        self._open_platform(transport)
        self.store_path = self.dir / "agent.db"
        self.store = self.store_class(self.store_path, self._client())
        self.workers = [self._worker(w) for w in range(workers)]
        self.task = self.store.create_task(USER, SESSION, {"month": "2026-01", "unit": "yuan"})
        # The session's second task: no query of the system's, its conditions only (T1, T2).
        self.other = self.store.create_task(USER, SESSION, {"month": "2026-02", "unit": "yuan"})
        self.other_created = self.other.condition_version
        self.run = self.store.start_run(SESSION)
        message = self.store.receive_message(SESSION, USER, MESSAGE_TEXT, CLOCK,
                                             task_id=self.task.task_id)
        self.message = message.message_id
        self.clock = (message.request_clock_utc, message.time_zone)
        # A later message of the task: the status tool shows it the result (Q26).
        self.reader = self.store.receive_message(SESSION, USER, "what did it return?", CLOCK,
                                                 task_id=self.task.task_id).message_id
        self.pending: str | None = None  # the newest message, while it is not attributed
        self.later: str | None = None  # the newest later message than the confirming one
        self.items = [_Query(self) for _ in range(queries)]  # type: ignore[misc]
        # The notification a confirmation may quote, made before any step: made later, its
        # side query's own confirmation would meet a pending message of the session.
        self.notification = _side_notification(self.store, self.platform, self.store_path,
                                                self.worker_class, self.items[0])

    # ------------------------------------------------------------------ perform
    def perform(self, instance: int | None, trigger: str,
                params: Mapping[str, Any]) -> None:
        if instance is not None:
            super().perform(instance, trigger, params)
        else:
            perform_system_step(self._perform_system, trigger, params)

    def _perform_system(self, trigger: str, params: Mapping[str, Any]) -> None:
        if trigger == "condition_updated":  # one update of the task's row
            for item in self.items:  # a draft whose check is in flight exists as a row
                if item.query_id is None:
                    item.query_id = self.store.request_query(self.task.task_id,
                                                             APP_MONTHLY_SQL).query_id
                    item.sql = APP_MONTHLY_SQL
            task = self.store.task(self.task.task_id)
            self.store.update_conditions(task.task_id, task.condition_version,
                                         {"revision": task.condition_version + 1})
        elif trigger == "other_task_updated":  # one update of the other task's row
            other = self.store.task(self.other.task_id)
            self.store.update_conditions(other.task_id, other.condition_version,
                                         {"revision": other.condition_version + 1})
        elif trigger == "crash":
            self.crash_process(int(params["worker"]))
        elif trigger == "message_received":
            self.pending = self.store.receive_message(SESSION, USER, NEW_MESSAGE,
                                                      LATER_CLOCK).message_id
            self.later = self.pending
        elif trigger == "message_attributed":
            if self.pending is None:
                raise CallerError("no message is waiting for attribution")
            self.store.attribute_message(self.pending, self.task.task_id)
            self.pending = None
        else:
            raise KeyError(f"no system step {trigger!r}")

    def crash_process(self, w: int) -> None:
        """Worker process ``w`` dies: every lease it holds on a live query is gone at once."""
        old = self.workers[w]
        old.close()
        self._drop_client(old)
        self.workers[w] = self._worker(w)
        live = {s.value for s in LIVE}
        self.workers[w].held = {q: e for q, e in old.held.items()
                                if self.store.query(q).state.value not in live}

    def _message_state(self) -> str:
        """The session's newest user message as the store has it: the confirming one, or the
        latest one received here, pending while the store has not attributed it."""
        if self.later is None:
            return "attributed"
        attribution = self.store.message(self.later).attribution
        return "later" if attribution == "attributed" else "pending"

    def _other_task(self) -> str:
        """The second task's conditions: as created, updated once, or a version the model
        has no name for (reported as it is, outside the domain)."""
        moved = self.store.task(self.other.task_id).condition_version - self.other_created
        return {0: "unchanged", 1: "updated"}.get(moved, f"moved by {moved}")

    def version(self) -> None:
        """None: the system kit observes every instance and the system after every step."""
        return None

    def _perform_on_query(self, item: Any, qid: str, trigger: str,
                          params: Mapping[str, Any]) -> None:
        if trigger == "run_stopped":  # the session's one run: every query's caller moves on
            self.store.end_run(self.run)
            self.run = self.store.start_run(SESSION)
            for other in self.items:
                other.run = self.run
            return
        super()._perform_on_query(item, qid, trigger, params)

    def _confirm(self, item: Any, qid: str, params: Mapping[str, Any]) -> None:
        """Confirm with the session's real message state: nothing is invented here."""
        query = self.store.query(qid)
        draft = query.draft_version + (params["draft_version"] == "stale")
        condition = query.condition_version + (params["condition_version"] == "stale")
        message, quote = item.message, MESSAGE_TEXT
        if params["quote"] != "notification":
            quote = QUOTE_TEXT[str(params["quote"])]  # whole, padded, recased or a part (Q5)
        else:
            message = self._notification_message(item)
            quote = self.store.message(message).text
        self.store.confirm(qid, draft, condition, quote, message, item.run)

    def _notification_message(self, item: Any) -> str:
        return self.notification

    # ------------------------------------------------------------------ observe
    def observe(self, instance: int | None) -> Mapping[str, Any]:
        if instance is None:
            return {"message": self._message_state(), "other_task": self._other_task()}
        out = dict(super().observe(instance))
        if self.items[instance].query_id is None:  # the task's row is shared, draft or not
            task = self.store.task(self.task.task_id)
            out["clarifying"] = task.awaiting_clarification
        return out

