"""The reference adapter: the SQLite implementation of the query protocol.

Each model instance is one query in its own session and task, so instances
never block each other's confirmations. Every model step becomes the
implementation call that takes it, with the world arranged first where the
step names the world's behaviour: ``submit_response_lost`` arms the
platform's lost-response fault before the worker's submit call,
``lookup_timeout`` arms a lookup timeout, ``platform_succeeds`` lets the
platform run the SQL. A crash drops a worker object without any cleanup and
starts a new one of the same name from the files; ``crash_after_platform_stored``
crashes it at that named point inside its submit call.

Leases last 0 s, so any worker may take over any live query at any time:
the adversarial schedule the model allows.

Two transports carry the worker's and the store's platform calls
(``transport``): ``inprocess`` (the default: method calls on the platform
object, a failure raised as ``PlatformUnavailable`` naming its kind) and
``http`` (the platform served on 127.0.0.1 by
:class:`~settled.impl.platform._http.PlatformServer` for the adapter's
lifetime; each worker has its own ``httpx`` client, and every fault the
model's ``fault`` parameter names is injected at the transport, so the worker
meets what its client really raises). ``FAULTS`` maps every (trigger, fault)
pair the model declares to its injection on each transport; a pair with no
injection is an adapter error, never a step taken without its fault.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import shutil
import sqlite3
from collections.abc import Callable, Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any

from settled.conformance import Adapter, Refused
from settled.conformance._bundled._query_world import (
    BAD_SQL,
    CLOCK,
    FAULTS,
    MESSAGE_TEXT,
    PART_OF_MESSAGE,
    PLATFORM_FAULTS,
    QUOTE_TEXT,
    RECOVERY_CLOCK,
    REVISED_SQL,
    TRANSPORTS,
    WORKER_CALLS,
    NoInjection,
    _Instance,
    _machine,
    _side_notification,
    _template,
    platform_template,
)
from settled.conformance._bundled._scratch import ram_disk, run_folder
from settled.impl.platform._http import PlatformServer, TransportFault
from settled.impl.platform._http_client import DEFAULT_TIMEOUT, HttpPlatform
from settled.impl.platform._platform import APP_MONTHLY_SQL, SyntheticPlatform
from settled.impl.platform._platform_answers import Fault, PlatformClient, PlatformStatus, QueryResult
from settled.impl.query._store import QueryStore, query_row
from settled.impl.query._worker import Worker
from settled.impl.shared._crash import CrashNow, CrashPoints, unwatched
from settled.impl.shared._errors import CallerError, NotAllowed
from settled.model import Protocol, Value

# The world's names (``_query_world``), here too: the adapter's users import them from it.
__all__ = ["BAD_SQL", "CLOCK", "FAULTS", "FAULT_DEADLINE", "KIT_TIMEOUT", "MESSAGE_TEXT",
           "PART_OF_MESSAGE", "PLATFORM_FAULTS", "QUOTE_TEXT", "RECOVERY_CLOCK", "REVISED_SQL",
           "STRIKE_WAIT", "TRANSPORTS", "WORKER_CALLS", "NoInjection", "QueryAdapter",
           "_side_notification", "over_http", "platform_template"]

# The HTTP clients' timeout in the kit, seconds: generous, so a loaded machine never makes
# a timeout the model did not take. A step whose fault is a platform that never answers
# (the server holds the request or its answer until the client gives up) shortens the
# worker's read deadline to FAULT_DEADLINE for that call: the worker meets a real
# httpx.ReadTimeout without the campaign waiting out the normal timeout. The kit then
# waits (at most STRIKE_WAIT) until the server has taken the fault and the platform has
# acted on the request, or never will, before it observes.
KIT_TIMEOUT = DEFAULT_TIMEOUT
FAULT_DEADLINE = 0.02
STRIKE_WAIT = 30.0
_NO_ANSWER = (TransportFault.NEVER_ARRIVES, TransportFault.SLOW_ANSWER)



class QueryAdapter(Adapter):
    """Drives the bundled SQLite implementation; subclasses swap in altered parts."""

    worker_class: type[Worker] = Worker
    store_class: type[QueryStore] = QueryStore
    transport: str = "inprocess"  # or "http": see the module's docstring

    def __init__(self, instances: int = 3, workers: int = 2, directory: Path | None = None,
                 store: str | None = None, transport: str | None = None) -> None:
        self.protocol: Protocol = _machine(workers)
        self.instances = instances
        self._folder = run_folder("settled-lockstep-", directory)
        self.dir = self._folder.path
        # A fresh run starts from a copy of a template (the orders filled, the schemas
        # applied, each instance's task, run and message committed), made once per process:
        # the same files a fresh setup writes, without its dozen commits per run.
        # Not for a PostgreSQL store: its rows live in the database, not in the copied files.
        template = (None if directory or store is not None
                    else _template(self.store_class, instances, ram_disk()))
        if template is not None:
            shutil.copytree(template[0], self.dir, dirs_exist_ok=True)
        self._open_platform(transport)
        # ``store``: a postgresql:// URL; each adapter gets a fresh schema in that
        # database (dropped on close) instead of a fresh file.
        self.store_path: Path | str = (self.dir / "agent.db" if store is None
                                       else self._folder.store(store, "query"))
        self.store = self.store_class(self.store_path, self._client())
        self.workers = [self._worker(w) for w in range(workers)]
        self.items = ([copy.copy(item) for item in template[1]] if template is not None
                      else [_Instance(self.store, n) for n in range(instances)])

    def _open_platform(self, transport: str | None) -> None:
        """The platform's own side (``self.platform``: the kit arranges and observes it
        there) and, over HTTP, its server on 127.0.0.1 for the adapter's lifetime."""
        self.transport = transport or self.transport
        if self.transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {TRANSPORTS}, got {self.transport!r}")
        self.platform = SyntheticPlatform(self.dir / "platform")
        self.server = PlatformServer(self.dir / "platform") if self.transport == "http" else None
        self._clients: list[HttpPlatform] = []

    def _client(self) -> PlatformClient:
        """What one process (the store's, or a worker's) calls the platform through."""
        if self.server is None:
            return self.platform
        client = HttpPlatform(self.server.url, timeout=KIT_TIMEOUT)
        self._clients.append(client)
        return client

    def _drop_client(self, worker: Worker) -> None:
        """A dead worker's connections die with it."""
        if isinstance(worker.platform, HttpPlatform):
            worker.platform.close()
            self._clients.remove(worker.platform)

    def _worker(self, w: int, crash: CrashPoints | None = None) -> Worker:
        return self.worker_class(self.store_path, self._client(), f"w{w}", lease_seconds=0,
                                 crash=crash)

    # ------------------------------------------------------------------ perform
    def perform(self, instance: int, trigger: str, params: Mapping[str, Value]) -> None:
        item = self.items[instance]
        try:
            self._perform(item, trigger, params)
        except CallerError as exc:
            raise Refused(str(exc)) from exc

    def _perform(self, item: _Instance, trigger: str, params: Mapping[str, Value]) -> None:
        if trigger in ("check_passed", "check_failed"):
            sql = APP_MONTHLY_SQL if trigger == "check_passed" else BAD_SQL
            item.query_id = self.store.request_query(item.task.task_id, sql).query_id
            item.sql = sql
        elif trigger == "message_redelivered":
            self.store.receive_message(item.session, item.user, MESSAGE_TEXT, RECOVERY_CLOCK,
                                       message_id=item.message)
        elif trigger == "crash":
            self.crash(int(params["worker"]), item.query_id)
        elif trigger == "condition_updated":
            self._update_conditions(item)
        elif trigger in ("clarification_asked", "clarification_answered"):
            self.store.set_awaiting_clarification(item.task.task_id,
                                                  trigger == "clarification_asked")
        else:
            self._perform_on_query(item, self._qid(item), trigger, params)

    def _perform_on_query(self, item: _Instance, qid: str, trigger: str,
                          params: Mapping[str, Value]) -> None:
        if trigger == "confirm":
            self._confirm(item, qid, params)
        elif trigger == "cancel":
            self.store.cancel(qid)
        elif trigger == "run_stopped":
            self.store.end_run(item.run)  # a stopped run (a closed stream) is not a cancel
            item.run = self.store.start_run(item.session)
        elif trigger == "rerun":
            sql = self.store.query(qid).sql
            # reassigned, not appended: a run's items are shallow copies of a template's
            item.reruns = [*item.reruns, self.store.request_query(item.task.task_id, sql).query_id]
        elif trigger == "revised":
            self.store.request_query(item.task.task_id, REVISED_SQL, replaces_query_id=qid)
        elif trigger in ("platform_succeeds", "platform_fails"):
            with unwatched():  # the platform's own progress: none of the agent's boundaries
                self._platform_step(trigger, qid)
        elif trigger == "crash_after_platform_stored":
            self._crash_inside_submit(int(params["worker"]), qid)
        else:
            self._worker_step(int(params["worker"]), trigger, qid, params.get("fault"))
            item.rejected = item.rejected or trigger == "submit_rejected"

    def _platform_step(self, trigger: str, qid: str) -> None:
        if trigger == "platform_fails":
            self.platform.inject(Fault.EXEC_FAIL)
        self.platform.complete(qid)

    def _worker_step(self, w: int, trigger: str, qid: str, kind: Value = None) -> None:
        worker = self.workers[w]
        with unwatched():  # the world arranged, not the agent's write
            disarm = self._arm(worker, trigger, None if kind is None else str(kind))
        try:
            getattr(worker, WORKER_CALLS[trigger])(qid)
        finally:
            # A fault the implementation never triggered (it refused first) must
            # not leak into the next step.
            with unwatched():
                disarm()

    def _arm(self, worker: Worker, trigger: str, kind: str | None) -> Callable[[], None]:
        """Arm what ``trigger`` with ``fault=kind`` names; the call that disarms it again."""
        armed: list[Callable[[], None]] = []
        if trigger in PLATFORM_FAULTS:
            fault = PLATFORM_FAULTS[trigger]
            self.platform.inject(fault)
            armed.append(functools.partial(self._disarm, fault))
        if kind is not None:
            injection = FAULTS[self.transport].get((trigger, kind))
            if injection is None:
                raise NoInjection(f"{trigger} fault={kind}: the {self.transport} transport has no "
                                  "injection for this fault; add one to FAULTS")
            if isinstance(injection, Fault):
                self.platform.inject(injection)
                armed.append(functools.partial(self._disarm, injection))
            else:
                armed.append(self._arm_transport(worker, *injection))

        def disarm_all() -> None:
            for disarm in armed:
                disarm()

        return disarm_all

    def _arm_transport(self, worker: Worker, route: str, fault: TransportFault) -> Callable[[], None]:
        server, client = self.server, getattr(worker.platform, "wrapped", worker.platform)
        if server is None or not isinstance(client, HttpPlatform):
            raise NoInjection(f"a transport fault ({fault.value}) needs the http transport and a "
                              f"worker calling through HttpPlatform, not {type(client).__name__}")
        server.inject(route, fault)
        sent = client.sent[route]
        deadline = client.read_deadline(FAULT_DEADLINE) if fault in _NO_ANSWER else None
        if deadline is not None:
            deadline.__enter__()

        def disarm() -> None:
            if deadline is not None:
                deadline.__exit__(None, None, None)
            if client.sent[route] > sent and not server.wait_struck(route, STRIKE_WAIT):
                raise RuntimeError(f"the platform server did not take the {fault.value} fault "
                                   f"armed for {route} within {STRIKE_WAIT} s")
            server.clear_faults(route)

        return disarm

    def _disarm(self, fault: Fault) -> None:
        if self.platform.pending_faults().get(fault):
            self.platform.clear_faults(fault)

    def _crash_inside_submit(self, w: int, qid: str) -> None:
        crash = CrashPoints({"after_platform_stored"})
        worker = self._worker(w, crash)
        worker.held = dict(self.workers[w].held)
        self.workers[w].close()
        self._drop_client(self.workers[w])
        self.workers[w] = worker
        with contextlib.suppress(CrashNow):  # unwinds mid-call, no cleanup
            worker.call_submit(qid)
        self.crash(w, qid)

    def crash(self, w: int, qid: str | None) -> None:
        """Worker ``w`` dies while handling ``qid``: it restarts from the files.

        The model crashes a worker per query (a whole process dying is a crash
        on each query it held); so the restarted worker keeps its other leases.
        """
        old = self.workers[w]
        old.close()  # no cleanup of any kind: the rows stay as the last commit left them
        self._drop_client(old)
        self.workers[w] = self._worker(w)
        self.workers[w].held = {q: e for q, e in old.held.items() if q != qid}

    def recover_crash(self, instance: int, trigger: str, params: Mapping[str, Value]) -> None:
        """A crash at a durable boundary of a worker's step is that worker dying (the model's
        ``crash`` of it on this query); of a user's step (a store call), the agent's store
        connection dying: it is opened again, and an open transaction of the old one is
        rolled back as it closes."""
        item = self.items[instance]
        if "worker" in params:
            self.crash(int(params["worker"]), item.query_id)
            return
        self.store.close()
        self.store = self.store_class(self.store_path, self.platform)
        self._adopt_draft(item)  # a draft arranged for a condition update that committed

    def _update_conditions(self, item: _Instance) -> None:
        task = self.store.task(item.task.task_id)
        if item.query_id is None:  # drafted: the draft exists, its check is in flight
            with unwatched():  # arranged, not the step: the model's draft exists already
                drafted = self.store.request_query(task.task_id, APP_MONTHLY_SQL).query_id
            # Adopted once the update commits (recover_crash decides after a crash between).
            item.drafting = (drafted, task.condition_version)
        self.store.update_conditions(task.task_id, task.condition_version,
                                     {"revision": task.condition_version + 1})
        self._adopt_draft(item)

    def _adopt_draft(self, item: _Instance) -> None:
        # getattr: the system adapter's items share these steps without the attribute
        drafting: tuple[str, int] | None = getattr(item, "drafting", None)
        if drafting is not None:
            drafted, version = drafting
            item.drafting = None
            if self.store.task(item.task.task_id).condition_version != version:
                item.query_id, item.sql = drafted, APP_MONTHLY_SQL

    def _confirm(self, item: _Instance, qid: str, params: Mapping[str, Value]) -> None:
        query = self.store.query(qid)
        draft = query.draft_version + (params["draft_version"] == "stale")
        condition = query.condition_version + (params["condition_version"] == "stale")
        message = item.message
        if params["quote"] != "notification":
            quote = QUOTE_TEXT[str(params["quote"])]
        else:
            message = self._notification_message(item)
            quote = self.store.message(message).text
        pending = None
        if params["message"] == "pending":
            pending = self.store.receive_message(item.session, item.user, "wait, by day", CLOCK)
        try:
            self.store.confirm(qid, draft, condition, quote, message, item.run)
        finally:
            if pending is not None:  # the environment settles it again afterwards
                self.store.attribute_message(pending.message_id, item.task.task_id)

    def _notification_message(self, item: _Instance) -> str:
        """A real result notification of this session (made with the template's files)."""
        if item.notification is None:
            item.notification = _side_notification(self.store, self.platform, self.store_path,
                                                   self.worker_class, item)
        return item.notification

    def _qid(self, item: _Instance) -> str:
        if item.query_id is None:
            raise CallerError("the query has no draft yet")
        return item.query_id

    # ------------------------------------------------------------------ quiescence
    # The quiescence phase's turn of the implementation's own scheduler: the worker steps
    # (the platform's, a person's and the world's the kit schedules itself).
    acting = frozenset(WORKER_CALLS)

    def own_turn(self, instance: int) -> None:
        """The worker's own pass over this instance's query, as :meth:`Worker.run_once`
        makes it: the worker holding its lease (else the first) claims it if it may and
        advances it (its own choice of step); nothing is armed, no fault happens."""
        item = self.items[instance]
        qid = item.query_id
        if qid is None:
            return  # no draft: nothing for a worker
        row = query_row(self.workers[0]._conn, qid)
        mine = [w for w in self.workers if w.held.get(qid) == row["lease_epoch"]]
        worker = mine[0] if mine else self.workers[0]
        try:
            if not mine:
                if worker._unclaimable(row, worker._now()):
                    return
                worker.claim(qid, begin_submit=True)
            worker.advance(qid)
        except NotAllowed:
            return  # as run_once: taken over or cancelled meanwhile, look again next pass

    # ------------------------------------------------------------------ observe
    def observe(self, instance: int) -> Mapping[str, Value]:
        item = self.items[instance]
        if item.query_id is None:
            config = self.protocol.initial_config()
            view = dict(self.protocol.view(config))
            view["task_version"] = self.store.task(item.task.task_id).condition_version
            out: dict[str, Any] = {"state": str(config.state), **view}
        else:
            out = self.store.observe_with_task(item.query_id)  # one read: query and task
            status = self.platform.status(item.query_id)
            out["platform"] = self._platform_state(item, status)
            out.update(self._content(item, item.query_id, status))
        out["held"] = tuple(w.held.get(item.query_id or "", 0) for w in self.workers)
        return {k: v for k, v in out.items() if k not in ("not_found_seen", "ids_submitted")}

    def _content(self, item: _Instance, qid: str,
                 status: PlatformStatus | None) -> dict[str, str]:
        """Content compared with what it must equal: the model's finite abstractions
        (``status``: what the platform's ledger holds for ``qid``, read once per observation)."""
        stored = self.platform.stored_sql(qid)
        payload = "none" if stored is None else "confirmed" if stored == item.sql else "altered"
        held = self.store.status(qid, item.reader).result
        result = "none"
        if held is not None:
            mine = status is PlatformStatus.SUCCEEDED and held == _as_json(
                self.platform.result(qid))
            result = "platform" if mine else "other"
        reply = self.store.status(qid, item.message)
        notes = [n for n in self.store.notifications(item.task.task_id) if n.query_id == qid]
        notice = "none"
        if notes:
            budget = self.store.message(self.store.query(qid).budget_message_id or "")
            source = (budget.request_clock_utc, budget.time_zone)
            agree = len(notes) == 1 and (notes[0].request_clock_utc, notes[0].time_zone) == source
            notice = "source" if agree else "other"
        message = self.store.message(item.message)
        clock = "source" if (message.request_clock_utc, message.time_zone) == item.clock else "other"
        reruns = "new_id" if len({qid, *item.reruns}) == 1 + len(item.reruns) else "same_id"
        return {"payload": payload, "result": result, "notice": notice,
                "status_reply": ("shown" if reply.result is not None
                                 else "withheld" if reply.result_withheld else "none"),
                "message_clock": clock, "reruns": reruns}

    def _platform_state(self, item: _Instance, status: PlatformStatus | None) -> str:
        if status is None:
            return "rejected" if item.rejected else "not_received"
        return str(status.value)

    def version(self) -> Hashable | None:
        """What observe() reads, as change counters: each SQLite database's data_version
        (commits by other connections: the workers') and this connection's total_changes,
        the workers' leases, and what the adapter keeps per instance. None on PostgreSQL."""
        store, ledger = self.store._conn, self.platform._ledger()
        if not isinstance(store, sqlite3.Connection):
            return None
        return (store.execute("PRAGMA data_version").fetchone()[0], store.total_changes,
                ledger.execute("PRAGMA data_version").fetchone()[0], ledger.total_changes,
                tuple(tuple(w.held.items()) for w in self.workers),
                tuple((it.query_id, it.sql, tuple(it.reruns), it.rejected, it.run, it.notification)
                      for it in self.items))

    def recorded_error(self, instance: int) -> str | None:
        qid = self.items[instance].query_id
        if qid is None:
            return None
        error = query_row(self.store._conn, qid)["error"]  # the store's own status() reads it so
        return None if error is None else str(error)

    # ------------------------------------------------------------------ trace
    def trace_lines(self) -> Iterable[str]:
        return [json.dumps(row) for row in self.store.events()]

    def close(self) -> None:
        for w in self.workers:
            w.close()
        self.store.close()
        for client in self._clients:
            client.close()
        if self.server is not None:
            self.server.close()
        self.platform.close()
        self._folder.release()


def over_http() -> QueryAdapter:
    """The bundled implementation with its platform served over HTTP on 127.0.0.1:
    ``settled lockstep settled.conformance._bundled._query_adapter:over_http``."""
    return QueryAdapter(3, 2, transport="http")


def _as_json(result: QueryResult) -> dict[str, Any]:
    """The platform's result in the shape the agent stores it (columns, rows as lists)."""
    return {"columns": list(result.columns), "rows": [list(r) for r in result.rows]}
