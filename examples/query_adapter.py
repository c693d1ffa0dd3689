"""The adapter that holds ``examples.inmemory_query`` to the query model.

It uses public names only (``settled.conformance`` and ``settled.model``).
Each model instance is one query in a task and session of its own; the model
has two workers. Run it with::

    settled lockstep examples.query_adapter:correct
    settled lockstep examples.query_adapter:buggy      # exits 1 with a counterexample
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from settled.conformance import Adapter, Refused
from settled.model import QUERY

from . import buggy_query, inmemory_query
from .inmemory_query import CallerError, Query, QueryService, Worker

WORKERS = 2
TEXT = "monthly revenue by channel, then execute"
CLOCK = ("2026-02-03T09:30:00Z", "Asia/Shanghai")
# A redelivery on recovery arrives on a later day: it must not become the message's clock (M1).
RECOVERY_CLOCK = ("2026-03-01T08:00:00Z", "Europe/Berlin")
# Faults the adapter arms on the platform before a worker's call, by model trigger.
FAULTS = {"submit_response_lost": "lose_answer", "submit_undelivered": "undeliverable",
          "submit_rejected": "reject", "lookup_timeout": "lookup_timeout",
          "cancel_response_lost": "cancel_lost", "cancel_undelivered": "cancel_undeliverable"}
SUBMITS = ("submit_answered", "submit_response_lost", "submit_undelivered", "submit_rejected")
LOOKUPS = ("lookup_running", "lookup_succeeded", "lookup_failed", "lookup_cancelled",
           "lookup_not_found", "lookup_timeout")


class _Item:
    def __init__(self, service: QueryService, n: int) -> None:
        self.task = service.create_task(f"session-{n}")
        message = service.receive(self.task.session, TEXT, clock=CLOCK)
        service.attribute(message.message_id)
        self.message = message.message_id
        self.clock = message.request_clock
        self.query: Query = service.draft(self.task.task_id, "SELECT channel, sum(amount) ...")
        self.sql = self.query.sql  # the SQL the user sees and confirms
        self.reruns: list[str] = []  # the ids of deliberate reruns of the same SQL (Q2)
        self.notification: str | None = None


class InMemoryQueryAdapter(Adapter):
    """Drives one :class:`QueryService` with three queries and two workers; observes every
    variable the model declares."""

    service_class: type[QueryService] = QueryService
    worker_class: type[Worker] = Worker

    def __init__(self, instances: int = 3) -> None:
        self.protocol = QUERY
        self.instances = instances
        self.service = self.service_class()
        self.workers = [self.worker_class(self.service, f"w{w}") for w in range(WORKERS)]
        self.items = [_Item(self.service, n) for n in range(instances)]

    # -- one model step ------------------------------------------------------------
    def perform(self, instance: int, trigger: str, params: Mapping[str, Any]) -> None:
        item = self.items[instance]
        qid = item.query.query_id
        try:
            self._perform(item, qid, trigger, params)
        except CallerError as exc:
            raise Refused(str(exc)) from exc

    def _perform(self, item: _Item, qid: str, trigger: str, params: Mapping[str, Any]) -> None:
        s, platform = self.service, self.service.platform
        worker = self.workers[params["worker"]] if "worker" in params else None
        if trigger in ("check_passed", "check_failed"):
            s.check_result(qid, trigger == "check_passed")
        elif trigger == "condition_updated":
            s.update_conditions(item.task.task_id)
        elif trigger in ("clarification_asked", "clarification_answered"):
            s.set_clarifying(item.task.task_id, trigger == "clarification_asked")
        elif trigger == "revised":
            s.revise(qid, "SELECT 1")
        elif trigger == "confirm":
            self._confirm(item, qid, params)
        elif trigger == "cancel":
            s.cancel(qid)
        elif trigger == "rerun":  # a new query record, which must get its own id (Q2)
            item.reruns = [*item.reruns, s.draft(item.task.task_id, item.query.sql).query_id]
        elif trigger == "message_redelivered":  # the same message again, on a later day (M1)
            s.receive(item.task.session, TEXT, clock=RECOVERY_CLOCK, message_id=item.message)
        elif trigger == "run_stopped":
            pass  # this service has no agent runs: stopping one cannot touch a query (Q22)
        elif trigger in ("platform_succeeds", "platform_fails"):
            platform.finish(qid, trigger == "platform_succeeds")
        elif trigger == "crash":
            self._crash(int(params["worker"]), qid)
        elif trigger == "crash_after_platform_stored":
            platform.submit(qid, item.query.sql)  # stored; the worker died before recording
            self._crash(int(params["worker"]), qid)
        elif worker is not None:
            self.service.platform.fault_kind = str(params.get("fault", "timeout"))
            self._worker_step(worker, qid, trigger)
        else:
            raise ValueError(f"no mapping for trigger {trigger!r}")

    def _worker_step(self, worker: Worker, qid: str, trigger: str) -> None:
        fault = FAULTS.get(trigger)
        if fault is not None:
            self.service.platform.faults.add(fault)
        try:
            if trigger == "claim":
                worker.claim(qid)
            elif trigger == "begin_submit":
                worker.begin_submit(qid)
            elif trigger in SUBMITS:
                worker.call_submit(qid)
            elif trigger in LOOKUPS:
                worker.lookup(qid)
            elif trigger == "resubmit":
                worker.resubmit(qid)
            elif trigger in ("confirm_cancel", "cancel_confirmed", "cancel_response_lost",
                             "cancel_undelivered"):
                worker.settle_cancel(qid)
            else:
                raise ValueError(f"no worker call for trigger {trigger!r}")
        finally:
            if fault is not None:  # a fault the call never reached must not leak
                self.service.platform.faults.discard(fault)

    def _crash(self, w: int, qid: str) -> None:
        old = self.workers[w]
        self.workers[w] = self.worker_class(self.service, old.name)
        self.workers[w].held = {q: e for q, e in old.held.items() if q != qid}

    def _confirm(self, item: _Item, qid: str, params: Mapping[str, Any]) -> None:
        s, q = self.service, item.query
        message, quote = item.message, TEXT
        if params["quote"] == "part":
            quote = TEXT.split(",")[0]
        elif params["quote"] == "padded":
            quote = f"  {TEXT}\n"
        elif params["quote"] == "recased":
            quote = TEXT.upper()
        elif params["quote"] == "notification":
            note = s.receive(item.task.session, TEXT, kind="notification")
            s.attribute(note.message_id)
            message = note.message_id
        pending = None
        if params["message"] == "pending":
            pending = s.receive(item.task.session, "wait, by day")
        try:
            s.confirm(qid, draft_version=q.draft_version + (params["draft_version"] == "stale"),
                      condition_version=q.condition_version
                      + (params["condition_version"] == "stale"),
                      quote=quote, message_id=message)
        finally:
            if pending is not None:
                s.attribute(pending.message_id)

    # -- the implementation's own turn (the quiescence phase) ---------------------------
    # The triggers the worker's own loop chooses: once faults stop, the kit hands these to
    # own_turn() instead of choosing among them itself.
    acting = frozenset({"claim", "begin_submit", *SUBMITS, *LOOKUPS, "resubmit",
                        "confirm_cancel", "cancel_confirmed", "cancel_response_lost",
                        "cancel_undelivered"})

    def own_turn(self, instance: int) -> None:
        """The worker's own pass over this instance's query, with no fault armed: the one
        holding its lease, else the first. The kit checks the steps it logged."""
        q = self.items[instance].query
        mine = [w for w in self.workers if q.lease_epoch and w.held.get(q.query_id) == q.lease_epoch]
        try:
            (mine or self.workers)[0].run_once(q.query_id)
        except CallerError:
            return  # not claimable now (settled or cancelled meanwhile): look again next turn

    # -- what the implementation holds, in the model's words ----------------------------
    def observe(self, instance: int) -> Mapping[str, Any]:
        item = self.items[instance]
        q, task, platform = item.query, item.task, self.service.platform
        status = platform.jobs.get(q.query_id)
        if status is None:
            status = "rejected" if q.query_id in platform.rejected else "not_received"
        return {
            "state": q.state, "submissions": q.submissions, "cancel_state": q.cancel_state,
            "lease_epoch": q.lease_epoch,
            "held": tuple(w.held.get(q.query_id, 0) for w in self.workers),
            "submit_epoch": q.submit_epoch, "platform": status,
            "task_version": task.version - q.condition_version + 1,
            "authorized_version": (q.authorized_version - q.condition_version + 1
                                   if q.authorized_version else 0),
            "clarifying": task.clarifying, "phase_moved": q.phase_moved,
            **self._content(item, status),
        }

    def _content(self, item: _Item, status: str) -> dict[str, str]:
        """What the contents must equal, as the model's verdicts: the SQL the platform stored
        vs the confirmed SQL, the stored result vs the platform's, the notification's clock vs
        the budget message's, the status tool's answer to the confirming message, the
        confirming message's stored clock, and the reruns' ids."""
        s, q = self.service, item.query
        stored = s.platform.sql.get(q.query_id)
        payload = "none" if stored is None else "confirmed" if stored == item.sql else "altered"
        result = "none"
        if q.result is not None:
            mine = status == "succeeded" and q.result == s.platform.result(q.query_id)
            result = "platform" if mine else "other"
        notes = [n for n in s.notifications if n.query_id == q.query_id]
        notice = "none"
        if notes:
            budget = s.messages.get(q.budget_message_id or "")
            agree = (len(notes) == 1 and budget is not None
                     and notes[0].request_clock == budget.request_clock)
            notice = "source" if agree else "other"
        reply = s.status(q.query_id, item.message)
        return {
            "payload": payload, "result": result, "notice": notice,
            "status_reply": ("shown" if reply["result"] is not None
                             else "withheld" if reply["result_withheld"] else "none"),
            "message_clock": ("source" if s.messages[item.message].request_clock == item.clock
                              else "other"),
            "reruns": ("new_id" if len({q.query_id, *item.reruns}) == 1 + len(item.reruns)
                       else "same_id"),
        }

    def trace_lines(self) -> Iterable[str]:
        return [json.dumps(event) for event in self.service.log]


class BuggyQueryAdapter(InMemoryQueryAdapter):
    """The same adapter on the planted-bug service (a lost answer counted as a failure)."""

    worker_class = buggy_query.LostAnswerIsFailure


def correct() -> Adapter:
    """The factory ``settled lockstep`` calls: a fresh implementation per run."""
    return InMemoryQueryAdapter()


def buggy() -> Adapter:
    return BuggyQueryAdapter()


__all__ = ["BuggyQueryAdapter", "InMemoryQueryAdapter", "buggy", "correct", "inmemory_query"]
