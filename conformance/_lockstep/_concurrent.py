"""Concurrent campaigns: several clients at once against the real implementation,
their history checked for linearizability against the model.

Theory of operation
-------------------
The lockstep kit performs one step at a time, so two operations never
overlap and a check-then-act race cannot show. Here several worker clients
(threads, each with its own connection and platform client, as separate worker
processes have) act on the same queries at once. Each operation is recorded
with its invocation and response instants on one shared counter and what it
observed (the lease epoch a claim got, the state a step left, or a refusal);
an operation that raised something other than a caller's error is *unknown*
(it may have taken effect or not). :func:`._linearize.check` then asks whether
some order consistent with real time is accepted by the query machine, using
the machine's own successor function (:meth:`Protocol.enabled`) as the step.

The history is split per query (P-compositionality) only because the system
declaration proves it safe: :func:`independence` checks that none of the
triggers the clients take is synchronised across instances in
``model.systems.build_query_system``, that no guard of theirs reads and no
effect of theirs writes a shared variable, and that no shared transition or
refinement carries their name. If that proof fails the campaign refuses to
split.

Two ways to run the clients:

- ``free``: real threads started together on a barrier; the operating system
  and SQLite's locks decide the interleaving. Not reproducible.
- ``controlled``: one client runs at a time. A client yields at each
  operation's start and end and at each transaction boundary (the hook
  :func:`settled.impl.shared._db.set_boundary_hook` installs: just before an
  outermost write transaction opens and just after it ends, so a paused
  client never holds a lock), and a scheduler seeded with the campaign's seed
  picks who runs next. Same seed, same interleaving, same history: a race found
  once is found again.

The default mode is the one that killed the race mutants faster in
``settled bench`` (see :data:`DEFAULT_MODE`).

A failure is shrunk to a minimal history (drop operations while it still
fails), drawn as a timeline and saved as a replayable JSON file naming the
rules of the steps involved; :func:`replay` re-runs the campaign from the
file's recorded parameters (seed, mode, implementation, mutant) and checks
both the new history and the saved one.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Protocol

from settled.conformance._lockstep._linearize import (
    CheckResult,
    History,
    Operation,
    check,
    minimal_failure,
    save_history,
    timeline,
)
from settled.impl.shared import _db
from settled.model import System

__all__ = ["DEFAULT_MODE", "CampaignResult", "Mode", "Planned", "Session", "independence", "judge",
           "run_clients"]

Mode = Literal["free", "controlled"]
# Chosen by measurement: `settled bench --json` (linearizability.race_mutant_kills_by_mode,
# one schedule per seed): controlled killed 36-40 of 40 mutant runs on seeds 1-10, free
# threads 21 of 40 (the query claim races almost never); controlled kills came sooner.
DEFAULT_MODE: Final[Mode] = "controlled"
JSON = dict[str, Any]


# ---------------------------------------------------------------------------- independence
def independence(system: System, triggers: Iterable[str]) -> tuple[bool, str]:
    """Whether the system declaration proves instances independent for ``triggers``: (proven,
    why). Independent means: no trigger synchronised, shared or refined, no guard reading and
    no effect writing a shared variable, and every guard declaring what it reads."""
    wanted = set(triggers)
    shared = set(system.shared) | {v.name for v in system.variables}
    if wanted & set(system.sync):
        return False, f"synchronised across instances: {sorted(wanted & set(system.sync))}"
    crossing = {t.trigger for t in system.transitions} | {r.trigger for r in system.refinements}
    if wanted & crossing:
        return False, f"shared transitions or refinements: {sorted(wanted & crossing)}"
    machine = system.machine
    probe = machine.view(machine.initial_config())
    for t in machine.transitions:
        if t.trigger not in wanted:
            continue
        for g in t.guards:
            if not g.reads:
                return False, f"guard {g.name!r} of {t.trigger!r} does not declare what it reads"
            if set(g.reads) & shared:
                return False, f"guard {g.name!r} of {t.trigger!r} reads {sorted(set(g.reads) & shared)}"
        for params in t.param_choices():
            try:
                written = set(t.effect(probe, params))
            except Exception as exc:  # an effect that cannot run on the probe proves nothing
                return False, f"effect of {t.trigger!r} could not be probed ({exc})"
            if written & shared:
                return False, f"{t.trigger!r} writes {sorted(written & shared)}"
    return True, (f"{system.name} shares {sorted(shared)}; none of {sorted(wanted)} is "
                  f"synchronised or refined, reads or writes them")


# ---------------------------------------------------------------------------- the model


# ---------------------------------------------------------------------------- scheduling
class _Clock:
    """One counter for every invocation and response: real-time order, exactly."""

    def __init__(self) -> None:
        self._next = itertools.count(1)
        self._lock = threading.Lock()

    def tick(self) -> int:
        with self._lock:
            return next(self._next)


class _Scheduler:
    """One client at a time; at each yield point a seeded choice of who runs next."""

    def __init__(self, seed: int | str, clients: Sequence[str]) -> None:
        self._rng = random.Random(seed)
        self._cond = threading.Condition()
        self._live = list(clients)
        self._current: str | None = None
        self._local = threading.local()
        self.switches = 0

    def start(self, name: str) -> None:
        self._local.name = name
        with self._cond:
            if self._current is None and name == self._live[0]:
                self._current = self._live[self._rng.randrange(len(self._live))]
                self._cond.notify_all()
            self._wait(name)

    def _wait(self, name: str) -> None:
        while self._current != name:
            if not self._cond.wait(timeout=8):
                raise RuntimeError(f"controlled scheduler: client {name!r} waited 30 s for its "
                                   "turn (a client blocked while holding the turn)")

    def _pick(self) -> None:
        live = self._live
        self._current = live[self._rng.randrange(len(live))] if live else None
        self.switches += 1
        self._cond.notify_all()

    def yield_(self, _point: str = "") -> None:
        name = getattr(self._local, "name", None)
        if name is None:
            return  # not a client thread (setup, the main thread)
        with self._cond:
            self._pick()
            self._wait(name)

    def finish(self) -> None:
        name = getattr(self._local, "name", None)
        with self._cond:
            if name in self._live:
                self._live.remove(name)
            self._pick()


# ---------------------------------------------------------------------------- the campaign
@dataclass(frozen=True, slots=True)
class CampaignResult:
    history: History
    result: CheckResult
    minimal: tuple[Operation, ...] = ()
    rules: tuple[str, ...] = ()
    saved: Path | None = None
    seconds: float = 0.0
    check_seconds: float = 0.0
    errors: tuple[str, ...] = ()  # unexpected exceptions (recorded as unknown operations)
    independence: str = ""
    run_seconds: float = 0.0  # the clients' run alone (no setup, no check)
    model: Any = None  # what drew the operations: the campaign's model

    @property
    def started(self) -> bool:
        """Every client opened its session (else the history lacks a client's calls)."""
        return not any(e.startswith("client ") for e in self.errors)

    @property
    def ok(self) -> bool:
        return self.result.ok and self.started

    def report(self) -> str:
        meta = self.history.meta
        head = (f"concurrent campaign {meta.get('implementation')} seed {meta.get('seed')} "
                f"({meta.get('mode')}, {meta.get('clients')} clients, "
                f"{len(self.history.operations)} operations, {meta.get('store')}): "
                f"{self.result.summary()}")
        if not self.started:
            head += "\nINCOMPLETE: a client could not start:\n" + next(
                e for e in self.errors if e.startswith("client "))
        if self.result.ok or self.result.nothing_checked:
            return head
        lines = [head, f"rules: {', '.join(self.rules)}", "minimal history:",
                 timeline(self.minimal, self.model)]
        if self.saved is not None:
            lines.append(f"saved: {self.saved} (replay: settled.conformance._bundled._races.replay)")
        lines.append(f"instances: {self.independence}")
        return "\n".join(lines)


@dataclass(slots=True)
class _Client:
    name: str
    index: int
    plan: list[tuple[str, JSON]]  # (instance key, call)
    ops: list[Operation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def judge(history: History, model: Any, *, split: bool, shrink: bool, out: Path | None,
          start: float, run_seconds: float, errors: Sequence[str], independence: str,
          rules_of: Callable[[Sequence[Operation]], tuple[str, ...]] | None = None
          ) -> CampaignResult:
    """A campaign's history checked against ``model``: on a failure, the minimal history
    (shrunk unless ``shrink`` is False), the rules it breaks (``rules_of``, by default those
    of the operations the search could not place in the minimal history) and, with ``out``,
    the saved file ``race-IMPLEMENTATION-MUTANT-seedSEED.SCHEDULE-MODE.json``."""
    t0 = time.perf_counter()
    result = check(history, model, split=split)
    check_seconds = time.perf_counter() - t0
    minimal: tuple[Operation, ...] = ()
    rules: tuple[str, ...] = ()
    saved = None
    if not result.ok and not result.nothing_checked:
        minimal = tuple(minimal_failure(history.operations, model) if shrink
                        else result.failed_ops)
        if rules_of is not None:
            rules = rules_of(minimal)
        else:  # the operations outside the longest order the search found
            placed = set(check(minimal, model, split=split).longest)
            rules = tuple(sorted({r for op in minimal if op.id not in placed
                                  for r in model.rules(op)}))
        if out is not None:
            m = history.meta
            name = (f"race-{m['implementation']}-{m.get('mutant') or 'baseline'}-seed{m['seed']}"
                    f".{m['schedule']}-{m['mode']}.json")
            saved = save_history(out / name, history, minimal=minimal, rules=rules,
                                 verdict=result.summary())
    return CampaignResult(history, result, minimal, rules, saved, time.perf_counter() - start,
                          check_seconds, tuple(errors), independence, run_seconds, model)


class Session(Protocol):
    """One client's own connections to the implementation."""

    def perform(self, key: str, call: JSON) -> JSON:
        """Make ``call`` on instance ``key``; return what was observed (raise a refusal)."""
        ...

    def close(self) -> None: ...


Planned = tuple[str, JSON]  # (instance key, the call's input)


def run_clients(seed: int | str, mode: Mode, plans: Sequence[Sequence[Planned]],
                open_session: Callable[[int], Session],
                classify: Callable[[Exception], JSON | None],
                admit: Callable[[Planned], bool] = lambda planned: True
                ) -> tuple[list[Operation], list[str]]:
    """Run one thread per plan at once (``mode``), each through its own session; the history.

    ``classify`` turns an exception into what was observed (a refusal), or None when the
    outcome is unknown. ``admit`` may skip a planned call (it is called under a lock)."""
    team = _Team(seed, mode, plans, open_session, classify, admit)
    previous = _db.set_boundary_hook(team.scheduler.yield_ if team.scheduler is not None else None)
    try:
        threads = [threading.Thread(target=team.body, args=(c,), name=f"settled-{c.name}")
                   for c in team.clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        _db.set_boundary_hook(previous)
    ops = sorted((op for c in team.clients for op in c.ops), key=lambda o: o.call)
    return ops, [e for c in team.clients for e in c.errors]


class _Team:
    """The clients of one :func:`run_clients`: their plans, clock, ids and scheduler."""

    def __init__(self, seed: int | str, mode: Mode, plans: Sequence[Sequence[Planned]],
                 open_session: Callable[[int], Session],
                 classify: Callable[[Exception], JSON | None],
                 admit: Callable[[Planned], bool]) -> None:
        self.clients = [_Client(f"c{i}", i, list(plan)) for i, plan in enumerate(plans)]
        self.scheduler = (_Scheduler(seed, [c.name for c in self.clients])
                          if mode == "controlled" else None)
        self.barrier = threading.Barrier(len(self.clients), timeout=8)
        self.open_session, self.classify, self.admit = open_session, classify, admit
        self.clock = _Clock()
        self.ids = itertools.count()
        self.lock = threading.Lock()

    def body(self, client: _Client) -> None:
        """One client's thread: open its session, then perform its plan."""
        scheduler = self.scheduler
        # Opened before the client takes part in the schedule: opening may hold a file lock
        # across transactions (the platform's setup), and a client must never pause holding one.
        session: Session | None = None
        try:
            session = self.open_session(client.index)
        except Exception:
            client.errors.append(f"client {client.name} could not start:\n"
                                 f"{traceback.format_exc(limit=3)}")
            self.barrier.abort()  # free mode: the others stop waiting for this one
        if scheduler is not None:
            scheduler.start(client.name)
        try:
            if session is None:
                return
            if scheduler is None:
                self.barrier.wait()
            for planned in client.plan:
                with self.lock:
                    if not self.admit(planned):
                        continue
                self.perform(client, session, planned)
        finally:
            if scheduler is not None:
                scheduler.finish()
            if session is not None:
                session.close()

    def perform(self, client: _Client, session: Session, planned: Planned) -> None:
        """One call, timed on the shared clock: what it returned, or unknown."""
        scheduler, (key, call) = self.scheduler, planned
        if scheduler is not None:
            scheduler.yield_("call")
        with self.lock:
            op_id = next(self.ids)
        called = self.clock.tick()
        output: JSON | None
        try:
            output = session.perform(key, call)
        except Exception as exc:
            output = self.classify(exc)
            if output is None:  # the outcome is unknown: it may or may not have applied
                client.errors.append(traceback.format_exc(limit=3))
        returned = None if output is None else self.clock.tick()
        client.ops.append(Operation(op_id, client.name, key, call, output, called, returned))
        if scheduler is not None:
            scheduler.yield_("return")


