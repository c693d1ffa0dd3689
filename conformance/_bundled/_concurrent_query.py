"""The query campaign of the concurrent kit: worker clients at once on confirmed queries of
the bundled query runtime, their history checked against the query machine
(:mod:`._concurrent` runs the clients and judges the history)."""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any, Final

from settled.conformance._bundled._query_adapter import CLOCK, MESSAGE_TEXT, QueryAdapter
from settled.conformance._lockstep._concurrent import (
    DEFAULT_MODE,
    JSON,
    CampaignResult,
    Mode,
    Planned,
    independence,
    judge,
    run_clients,
)
from settled.conformance._lockstep._linearize import History, Operation
from settled.impl.platform._platform import APP_MONTHLY_SQL, SyntheticPlatform
from settled.impl.query._worker import Worker
from settled.impl.shared._errors import Busy, CallerError
from settled.model import Config, Transition, build_query_machine
from settled.model import Protocol as Machine
from settled.model.systems import build_query_system

__all__ = ["QueryOpsModel", "run_query_campaign"]

WORKERS: Final = 3  # clients; the model's `held` tuple has one slot per worker
MAX_EPOCH: Final = 5  # claims per query the model can count (its epoch bound)
# A claim on PostgreSQL skips a row another worker's transaction holds (SKIP LOCKED) and is
# refused with this text: nothing was written, and the model does not track row locks, so
# the refusal constrains nothing (the same as Busy).
_ROW_LOCKED: Final = "transaction holds its row right now"
OPS: Final = ("claim", "begin_submit", "call_submit", "lookup")
_WEIGHTS: Final = (6, 2, 2, 2)
# The model triggers each implementation call can take, by the call's name.
TRIGGERS: Final[dict[str, frozenset[str]]] = {
    "claim": frozenset({"claim"}),
    "begin_submit": frozenset({"begin_submit"}),
    "call_submit": frozenset({"submit_answered", "submit_response_lost", "submit_undelivered",
                              "submit_rejected"}),
    "lookup": frozenset({"lookup_running", "lookup_succeeded", "lookup_failed",
                         "lookup_cancelled", "lookup_not_found", "lookup_timeout"}),
}


@functools.cache
def _machine() -> Machine:
    return build_query_machine(workers=WORKERS, max_epoch=MAX_EPOCH)


class QueryOpsModel:
    """Worker calls on one query, stepped by the query machine's own ``enabled``."""

    def __init__(self, machine: Machine | None = None) -> None:
        self.machine = machine or _machine()
        self._held = self.machine.variable_names.index("held")

    @functools.cached_property
    def _queued(self) -> Config:
        """The configuration of a checked, confirmed query (the model's own steps to it)."""
        m = self.machine
        drafted = m.fire(m.initial_config(), "check_passed").after
        confirm = next(s for s in m.enabled(drafted) if s.transition.trigger == "confirm"
                       and s.params.get("quote") == "whole")
        return confirm.after

    def init(self, key: str) -> Hashable:
        return self._queued

    def _steps(self, state: Config, op: Operation) -> list[tuple[Transition, Config]]:
        family = TRIGGERS[str(op.input["op"])]
        w = op.input["worker"]
        return [(s.transition, s.after) for s in self.machine.enabled(state)
                if s.transition.trigger in family and s.params.get("worker") == w]

    def step(self, state: Hashable, op: Operation) -> Iterable[Hashable]:
        assert isinstance(state, Config)
        steps = self._steps(state, op)
        out = op.output
        if out is None:  # unknown: took effect (any way the model allows) or not at all
            return [state, *(after for _t, after in steps), *self._stored_then_lost(state, op)]
        if out.get("ok"):
            return [after for _t, after in steps if self._matches(after, op)]
        if out.get("void"):  # the implementation says nothing was written (busy)
            return [state]
        refused = [state] if not steps else []  # refused: the model must not enable it
        return refused + self._stored_then_lost(state, op)

    def _stored_then_lost(self, state: Config, op: Operation) -> list[Config]:
        """A submit call refused after the platform call (its lease was taken over before it
        could record the answer) left the submission on the platform unrecorded: the model's
        ``crash_after_platform_stored``, the step for "stored, and the worker never said"."""
        if op.input["op"] != "call_submit":
            return []
        w = op.input["worker"]
        return [s.after for s in self.machine.enabled(state)
                if s.transition.trigger == "crash_after_platform_stored"
                and s.params.get("worker") == w]

    def only_constrains(self, op: Operation) -> bool:
        """A refusal changes nothing (except a submit call's, see ``_stored_then_lost``)."""
        return (op.output is not None and not op.output.get("ok")
                and op.input["op"] != "call_submit")

    def _matches(self, after: Config, op: Operation) -> bool:
        out = op.output or {}
        if op.input["op"] == "claim":
            held = after.values[self._held]
            assert isinstance(held, tuple)
            return bool(held[int(op.input["worker"])] == out.get("epoch"))
        return after.state == out.get("state")

    def describe(self, op: Operation) -> str:
        out = op.output
        shown = ("?" if out is None else
                 f"epoch {out['epoch']}" if out.get("ok") and "epoch" in out else
                 str(out.get("state")) if out.get("ok") else f"refused ({out.get('error')})")
        return f"w{op.input['worker']} {op.input['op']}({op.key}) -> {shown}"

    def rules(self, op: Operation) -> tuple[str, ...]:
        family = TRIGGERS[str(op.input["op"])]
        return tuple(sorted({r for t in self.machine.transitions if t.trigger in family
                             for r in t.rules}))


def _plan(seed: int, client: int, queries: int, ops: int) -> list[tuple[str, int]]:
    """Random calls; every client walks the queries in the same order, a stretch of calls on
    each, so clients meet on one query at a time (contention is what a race needs)."""
    rng = random.Random(f"{seed}/{client}")
    return [(rng.choices(OPS, _WEIGHTS)[0], j * queries // ops) for j in range(ops)]


def _perform(worker: Worker, call: str, qid: str) -> dict[str, Any]:
    if call == "claim":
        worker.claim(qid)
        return {"ok": True, "epoch": worker.held[qid]}
    state = getattr(worker, call)(qid)
    return {"ok": True, "state": str(state.value)}


def run_query_campaign(seed: int, *, mode: Mode = DEFAULT_MODE, clients: int = WORKERS,
                       queries: int = 6, ops_per_client: int = 36, store: str | None = None,
                       adapter_class: Callable[..., QueryAdapter] = QueryAdapter,
                       mutant: str | None = None, out: Path | None = None,
                       shrink: bool = True, schedule: int = 0) -> CampaignResult:
    """Run ``clients`` workers at once on ``queries`` confirmed queries and check the history.

    ``seed`` draws the clients' calls; ``schedule`` (with it) the controlled interleaving.
    ``store``: a postgresql:// URL (a scratch schema), else SQLite files. ``out``: where a
    failing history is saved (a directory)."""
    if not 1 <= clients <= WORKERS:
        raise ValueError(f"clients must be 1..{WORKERS} (the model's worker slots), got {clients}")
    proven, why = independence(build_query_system(), set().union(*TRIGGERS.values()))
    if not proven:
        raise RuntimeError(f"cannot split the history per query: {why}")
    start = time.perf_counter()
    adapter = adapter_class(instances=queries, workers=1, store=store)
    try:
        qids = []
        for item in adapter.items:
            q = adapter.store.request_query(item.task.task_id, APP_MONTHLY_SQL)
            adapter.store.confirm(q.query_id, q.draft_version, q.condition_version, MESSAGE_TEXT,
                                  item.message, item.run)
            qids.append(q.query_id)
        t_run = time.perf_counter()
        history = _run_clients(adapter, qids, seed, mode, clients, ops_per_client, schedule)
        run_seconds = time.perf_counter() - t_run
    finally:
        adapter.close()
    ops = history[0]
    meta = {"implementation": "query", "seed": seed, "schedule": schedule, "mode": mode,
            "clients": clients,
            "queries": queries, "ops_per_client": ops_per_client,
            "store": "postgresql" if store else "sqlite", "mutant": mutant}
    return judge(History(tuple(ops), meta), QueryOpsModel(), split=True, shrink=shrink,
                 out=out, start=start, run_seconds=run_seconds, errors=history[1],
                 independence=why)


class _WorkerSession:
    """A worker process's view: its own platform client and store connection."""

    def __init__(self, adapter: QueryAdapter, index: int, qids: Sequence[str]) -> None:
        self.platform = SyntheticPlatform(adapter.dir / "platform")
        self.qids = qids
        try:
            # One fixed instant with 0 s leases: every lease has always expired, so any
            # worker may take over any live query at any time (the schedule the model
            # allows); a clock read before a pause would otherwise see a later claim's
            # lease as still running and refuse for a reason the model does not track.
            self.worker = adapter.worker_class(adapter.store_path, self.platform, f"w{index}",
                                               lease_seconds=0, clock=lambda: CLOCK[0])
        except BaseException:
            self.platform.close()
            raise

    def perform(self, key: str, call: JSON) -> JSON:
        return _perform(self.worker, str(call["op"]), self.qids[int(key[1:])])

    def close(self) -> None:
        self.worker.close()
        self.platform.close()


def _classify_worker(exc: Exception) -> JSON | None:
    if isinstance(exc, Busy):
        return {"ok": False, "void": True, "error": type(exc).__name__}
    if isinstance(exc, CallerError):
        output: JSON = {"ok": False, "error": type(exc).__name__}
        if _ROW_LOCKED in str(exc):  # PostgreSQL's SKIP LOCKED: look again later
            output["void"] = True
        return output
    return None


def _run_clients(adapter: QueryAdapter, qids: list[str], seed: int, mode: Mode, clients: int,
                 ops_per_client: int, schedule: int) -> tuple[list[Operation], list[str]]:
    plans = [[(f"q{q}", {"op": call, "worker": i})
              for call, q in _plan(seed, i, len(qids), ops_per_client)] for i in range(clients)]
    claims: dict[str, int] = {}

    def admit(planned: Planned) -> bool:
        key, call = planned
        if call["op"] != "claim":
            return True
        if claims.get(key, 0) >= MAX_EPOCH:  # the model counts MAX_EPOCH claims per query
            return False
        claims[key] = claims.get(key, 0) + 1
        return True

    return run_clients(f"{seed}/{schedule}", mode, plans, lambda i: _WorkerSession(adapter, i, qids),
                       _classify_worker, admit)
