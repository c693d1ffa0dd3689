"""The crash sweep: a crash at every durable boundary of every operation, held to the model.

The named crash points (:mod:`settled.impl.shared._crash`) sit where the
protocol names a window; a durable write with no hook beside it would never be
crashed around. So the implementation reports every *boundary* it crosses:
just before and just after each ``COMMIT`` of its stores (SQLite and
PostgreSQL, :mod:`._db`, :mod:`._pg`) and after each call to the platform
client (``after_call``); the far side's own commits inside a call, and the
writes an adapter makes as the world (``unwatched``), are not the
implementation's. The sweep installs a hook there (``impl/`` never imports the
kit) and, for each machine:

1. takes, for each declared transition (an *operation*: one step an adapter
   performs through the implementation), the explorer's shortest path that
   fires it (breadth-first over ``Protocol.enabled``);
2. replays the path on a fresh adapter and counts the boundaries of its last
   step, numbered 1..M in the order they are crossed;
3. for each k, replays the path again and crashes at boundary k: in-process,
   :class:`CrashNow` unwinds with no cleanup (as the named points do; an open
   transaction stays open until the dead process's connections close); for a
   sample, in a child process that ``os._exit`` s there (SQLite, and only where
   the adapter runs no threads of its own: a forked child has none);
4. restarts what died (``Adapter.recover_crash``) and observes the instance.
   The observation must equal the model's state before the operation, a state
   after it, or a state one declared crash transition (a trigger named
   ``crash…`` or ``restart…``) leads to from either: the store never shows a
   half-done operation.

A boundary counted but never crashed (the re-run did not reach it, or the
adapter's recovery failed first) is reported like an edge never fired, and
``settled verify`` fails naming it. An adapter without ``recover_crash``, a
path that cannot be replayed, or a machine with no boundary at all is a
failure too, never a pass.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from settled.conformance._adapter import Adapter
from settled.conformance._explore import _Local
from settled.impl.shared._crash import CRASH_EXIT_CODE, CrashNow, install_boundary_hook
from settled.model import Config, Params, Protocol, Value

from ._tour import path_to

__all__ = ["CHILD_EVERY", "Operation", "SweepReport", "crash_triggers", "operations", "sweep"]

# Every CHILD_EVERY-th boundary of a machine (counted over all its operations) is also crashed
# in a child process that hard-exits there, where the adapter allows a fork.
CHILD_EVERY: Final = 5
Step = tuple[str, Params]


def crash_triggers(protocol: Protocol) -> frozenset[str]:
    """The model's crash transitions: triggers named ``crash…`` or ``restart…``."""
    return frozenset(t.trigger for t in protocol.transitions
                     if t.trigger.startswith(("crash", "restart")))


@dataclass(frozen=True)
class Operation:
    """A declared transition and the shortest path that fires it (its last step)."""

    name: str  # the trigger, or trigger#n where the model declares the trigger n times
    path: tuple[Step, ...]
    before: Config  # the model's configuration before the last step

    @property
    def step(self) -> Step:
        return self.path[-1]


def _names(protocol: Protocol) -> dict[int, str]:
    counts: dict[str, int] = {}
    names = {}
    for t in protocol.transitions:
        counts[t.trigger] = counts.get(t.trigger, 0) + 1
        many = sum(x.trigger == t.trigger for x in protocol.transitions) > 1
        names[id(t)] = f"{t.trigger}#{counts[t.trigger]}" if many else t.trigger
    return names


_SPACES: dict[int, tuple[Protocol, _Local]] = {}
_WRITES: dict[int, tuple[Protocol, frozenset[str]]] = {}


def _space(protocol: Protocol) -> _Local:
    """The model's local space as ``Protocol.enabled`` walks it, once per protocol object."""
    found = _SPACES.get(id(protocol))
    if found is None or found[0] is not protocol:
        found = _SPACES[id(protocol)] = (protocol, _Local(protocol, protocol.enabled, None,
                                                          checks=False))
    return found[1]


def operations(protocol: Protocol) -> list[Operation]:
    """For every declared transition the model can fire, the shortest path that fires it."""
    space = _space(protocol)
    names = _names(protocol)
    parent: list[tuple[int, Step] | None] = [None] * len(space.configs)
    found: dict[int, Operation] = {}

    for cid in range(space.expanded):  # ids are breadth-first: the first path found is shortest
        for k in space.labels_from(cid):
            t, params = space.labels[k]
            dest = space.label_dest[k]
            if id(t) not in found:
                found[id(t)] = Operation(names[id(t)], (*path_to(parent, cid), (t.trigger, params)),
                                         space.configs[cid])
            if parent[dest] is None and dest != 0:
                parent[dest] = (cid, (t.trigger, params))
    return [found[id(t)] for t in protocol.transitions if id(t) in found]


def _projection(protocol: Protocol, c: Config, unobservable: frozenset[str]) -> dict[str, Value]:
    view = protocol.view(c)
    return {"state": str(c.state), **{v.name: view[v.name] for v in protocol.variables
                                      if not v.ghost and v.name not in unobservable}}


def crash_writes(protocol: Protocol) -> frozenset[str]:
    """The variables some crash transition changes, somewhere in the reachable space (worked
    out once per protocol object)."""
    found = _WRITES.get(id(protocol))
    if found is not None and found[0] is protocol:
        return found[1]
    space = _space(protocol)
    crashes = crash_triggers(protocol)
    out: set[str] = set()
    for cid in range(space.expanded):
        before = protocol.view(space.configs[cid])
        for k in space.labels_from(cid):
            if space.labels[k][0].trigger in crashes:
                after = protocol.view(space.configs[space.label_dest[k]])
                out.update(name for name, value in after.items() if before[name] != value)
    _WRITES[id(protocol)] = (protocol, frozenset(out))
    return frozenset(out)


def allowed(protocol: Protocol, op: Operation) -> list[tuple[str, Config, frozenset[str]]]:
    """(how, configuration, variables left free) the model allows after a crash inside ``op``.

    Before it; after it; or, from before, a step of the same actor that leaves no event, or
    that the implementation logs under another name (the call's answer lost after the far
    side acted: a cancel applied whose answer never came, ``cancel_response_lost``), taken
    with the operation's own parameters; then, from any of these, one declared crash
    transition. Where the model declares no crash
    from one of them (a terminal state, or a bound of the model's, such as its last lease
    epoch), a restart may change only what the model's crash transitions write elsewhere (a
    worker's leases, a new run), nothing else."""
    trigger, params = op.step
    steps = [s for s in protocol.enabled(op.before)
             if s.transition.trigger == trigger and s.params == params]
    crashes = crash_triggers(protocol)
    actors = {s.transition.actor for s in steps}
    free: frozenset[str] = frozenset()
    out = [("before", op.before, free), *(("after", s.after, free) for s in steps)]
    out += [(f"{s.transition.trigger} from before", s.after, free)
            for s in protocol.enabled(op.before)
            if s.transition.actor in actors and s.transition.trigger not in crashes
            and (s.transition.observed_as is None
                 or (s.transition.observed_as not in ("", None, trigger)
                     and all(dict(s.params).get(k) == v for k, v in dict(params).items())))]
    for how, c, _ in list(out):
        crashed = [(f"{s.transition.trigger} from {how}", s.after, free)
                   for s in protocol.enabled(c) if s.transition.trigger in crashes]
        out += crashed or [(f"a restart from {how} (the model declares no crash there)", c,
                            crash_writes(protocol))]
    return out


@dataclass
class SweepReport:
    machine: str
    store: str
    operations: int = 0
    # (operation, k) -> (kind, where) of every boundary counted
    boundaries: dict[tuple[str, int], tuple[str, str]] = field(default_factory=dict)
    crashed: set[tuple[str, int]] = field(default_factory=set)
    child_crashed: set[tuple[str, int]] = field(default_factory=set)
    child_skipped: str | None = None  # why no boundary was crashed in a child process
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def never_crashed(self) -> list[str]:
        return [_boundary_name(key, self.boundaries[key]) for key in sorted(self.boundaries)
                if key not in self.crashed]

    @property
    def ok(self) -> bool:
        return bool(self.boundaries) and not self.failures and not self.never_crashed

    def per_operation(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, _k in self.boundaries:
            out[name] = out.get(name, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        failures = list(self.failures)
        if not self.boundaries and not failures:
            failures.append("no durable boundary was counted: nothing was crashed")
        return {"ok": self.ok, "store": self.store, "operations": self.operations,
                "boundaries": len(self.boundaries), "crashed": len(self.crashed),
                "crashed_in_child": len(self.child_crashed), "child_skipped": self.child_skipped,
                "never_crashed": self.never_crashed, "failures": failures,
                "boundaries_per_operation": self.per_operation(),
                "seconds": round(self.seconds, 2)}


def _boundary_name(key: tuple[str, int], where: tuple[str, str]) -> str:
    return f"{key[0]} boundary {key[1]} ({where[0]} {where[1]})"


class _Hook:
    """Counts the boundaries of one step; crashes at the ``crash_at``-th (once)."""

    def __init__(self, crash_at: int | None = None, exit_process: bool = False) -> None:
        self.crash_at, self.exit_process = crash_at, exit_process
        self.seen: list[tuple[str, str]] = []
        self.fired: tuple[str, str] | None = None

    def __call__(self, kind: str, where: str) -> None:
        self.seen.append((kind, where))
        if self.fired is None and len(self.seen) == self.crash_at:
            self.fired = (kind, where)
            if self.exit_process:
                os._exit(CRASH_EXIT_CODE)
            raise CrashNow(f"{kind} {where} (boundary {self.crash_at})")


@contextmanager
def _installed(hook: _Hook) -> Iterator[_Hook]:
    remove = install_boundary_hook(hook)
    try:
        yield hook
    finally:
        remove()


def _replay(adapter: Adapter, steps: tuple[Step, ...]) -> None:
    for trigger, params in steps:
        adapter.perform(0, trigger, params)


def _observe(adapter: Adapter) -> dict[str, Value]:
    seen = adapter.observe(0)
    return {k: (str(v) if k == "state" else v) for k, v in seen.items()}


def sweep(protocol: Protocol, factory: Callable[[], Adapter], *, machine: str | None = None,
          store: str = "SQLite files", child: bool = True,
          only: Callable[[Operation], bool] | None = None) -> SweepReport:
    """Crash every durable boundary of every operation of ``protocol`` on adapters ``factory``
    makes (one instance driven); ``child``: also crash every CHILD_EVERY-th boundary in a
    forked child that hard-exits (skipped, and said, where the adapter runs threads).
    ``only``: the operations to sweep (a test's selection); the default is every one."""
    report = SweepReport(machine or protocol.name, store)
    start = time.perf_counter()
    every = operations(protocol)
    ops = [op for op in every if only is None or only(op)]
    report.operations = len(ops)
    declared = {_names(protocol)[id(t)] for t in protocol.transitions}
    unreached = sorted(declared - {op.name for op in every})
    if unreached:
        report.failures.append(f"no path fires {', '.join(unreached)}: their boundaries are "
                               "not counted")
    counted = 0
    for op in ops:
        count = _count(protocol, factory, op, report)
        for k in range(1, count + 1):
            counted += 1
            in_child = child and counted % CHILD_EVERY == 0
            _crash_at(protocol, factory, op, k, report, in_child=in_child)
    report.seconds = time.perf_counter() - start
    return report


def _count(protocol: Protocol, factory: Callable[[], Adapter], op: Operation,
           report: SweepReport) -> int:
    adapter = factory()
    try:
        _replay(adapter, op.path[:-1])
        trigger, params = op.step
        with _installed(_Hook()) as hook:
            adapter.perform(0, trigger, params)
    except Exception as exc:
        report.failures.append(f"{op.name}: its shortest path could not be replayed "
                               f"({type(exc).__name__}: {exc})")
        return 0
    finally:
        adapter.close()
    for k, where in enumerate(hook.seen, start=1):
        report.boundaries[(op.name, k)] = where
    return len(hook.seen)


def _crash_at(protocol: Protocol, factory: Callable[[], Adapter], op: Operation, k: int,
              report: SweepReport, *, in_child: bool) -> None:
    name = _boundary_name((op.name, k), report.boundaries[(op.name, k)])
    adapter = factory()
    try:
        _replay(adapter, op.path[:-1])
        trigger, params = op.step
        if in_child and threading.active_count() > 1:
            report.child_skipped = (f"the {report.machine} adapter runs threads of its own "
                                    "(a forked child would have none): in-process crashes only")
            in_child = False
        if in_child and report.store != "SQLite files":
            report.child_skipped = "a forked child would share the parent's PostgreSQL sockets"
            in_child = False
        if in_child:
            fired = _in_child(adapter, trigger, params, k)
            if fired is not True:
                report.failures.append(f"{name}: the child process {fired}")
                return
            report.child_crashed.add((op.name, k))
            report.crashed.add((op.name, k))
        elif not _crash_in_process(adapter, op, k, name, report):
            return
        report.crashed.add((op.name, k))
        adapter.recover_crash(0, trigger, params)
        observed = _observe(adapter)
    except NotImplementedError as exc:
        report.failures.append(f"{name}: NOT CHECKED: {exc}")
        return
    except Exception as exc:
        report.failures.append(f"{name}: crashing there, restarting or observing raised "
                               f"{type(exc).__name__}: {exc}")
        return
    finally:
        adapter.close()
    _judge(protocol, adapter, op, observed, f"{name}{' (child process)' if in_child else ''}",
           report)


def _crash_in_process(adapter: Adapter, op: Operation, k: int, name: str,
                      report: SweepReport) -> bool:
    """Crash the step at its ``k``-th boundary in this process; False (with the failure
    reported, or none when the boundary was never crossed) when there is nothing to judge."""
    trigger, params = op.step
    hook = _Hook(k)
    with _installed(hook):
        try:
            adapter.perform(0, trigger, params)
        except BaseException as exc:  # the unwinding crash, or what it set off
            if hook.fired is None:
                if not isinstance(exc, Exception):
                    raise
                report.failures.append(f"{name}: the step raised before the boundary "
                                       f"({type(exc).__name__}: {exc})")
                return False
    if hook.fired is None:
        return False  # never crashed: reported by never_crashed
    if hook.fired != report.boundaries[(op.name, k)]:
        report.failures.append(f"{name}: the re-run crossed {hook.fired} there instead "
                               "(the boundaries of a step must not depend on the run)")
        return False
    return True


def _judge(protocol: Protocol, adapter: Adapter, op: Operation, observed: Mapping[str, Value],
           name: str, report: SweepReport) -> None:
    """Whether what the implementation shows after the crash and restart is a state the
    model allows there; a failure naming the nearest allowed one if not."""
    unobservable = frozenset(getattr(adapter, "unobservable", frozenset()))
    options = [(how, _projection(protocol, c, unobservable | free))
               for how, c, free in allowed(protocol, op)]
    for _how, expected in options:
        if all(observed.get(key) == value for key, value in expected.items()):
            return
    closest = min(options, key=lambda o: _distance(observed, o[1]))
    diffs = _diffs(observed, closest[1])
    report.failures.append(
        f"{name}: after the crash and restart the "
        f"implementation shows a state the model does not allow (before, after, or a crash "
        f"transition from either; nearest is {closest[0]}: {diffs})")


def _distance(observed: Mapping[str, Value], expected: Mapping[str, Value]) -> int:
    return sum(observed.get(k) != v for k, v in expected.items())


def _diffs(observed: Mapping[str, Value], expected: Mapping[str, Value]) -> str:
    return ", ".join(f"{k}: implementation {observed.get(k)!r}, model {v!r}"
                     for k, v in sorted(expected.items()) if observed.get(k) != v)


def _in_child(adapter: Adapter, trigger: str, params: Mapping[str, Value], k: int) -> bool | str:
    """Perform the step in a forked child that hard-exits at boundary ``k``; True when it
    did, else what the child did instead."""
    pid = os.fork()
    if pid == 0:  # the child: never returns, never cleans up
        code = 0
        try:
            remove = install_boundary_hook(_Hook(k, exit_process=True))
            try:
                adapter.perform(0, trigger, params)
            finally:
                remove()
        except BaseException:
            code = 1
        os._exit(code + 2)  # 2: finished without reaching k; 3: raised first
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == CRASH_EXIT_CODE:
        return True
    return {2: "finished the step without reaching the boundary",
            3: "raised before the boundary"}.get(code, f"exited with {code}")
