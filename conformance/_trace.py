"""The trace checker: replay an implementation's event log through the model.

A trace is JSON Lines, one committed state change per line, in the public
format of ``trace.schema.json`` (``settled.trace/1``). Each instance's events
are replayed in ``seq`` order through its declared machine. The log cannot
see everything the model can: the platform's own progress, crashes, and
answers that never arrived leave no event (their transitions declare
``observed_as=None``). So the checker tracks the *set* of configurations
consistent with what it has read so far, closing over those hidden steps
before each event; an event conforms when some configuration in the set
takes it to exactly the observed state and variables. Unknown stays
unknown here too: the checker never guesses which hidden step happened, it
keeps every one the evidence allows.

Worker names are mapped to the model's worker indices in order of first
appearance, and the bounds of the machine (workers, epochs, versions) are
read off the instance's own events, so a long real log is never cut short by
the explorer's small default bounds.

Results of a replay step are memoised by (configuration set, event), which
makes the common case (many instances following the same few paths) cost a
dictionary lookup per event.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import fastjsonschema
from settled.model import APPROVAL, LEDGER, Config, Protocol, Transition, build_query_machine
from settled.model._core import Value

SCHEMA_ID = "settled.trace/1"
CLOSURE_LIMIT = 4096  # hidden-step closure size past which a trace is reported, not explored


class TraceError(ValueError):
    """The input is not a readable trace; names the line and what is wrong."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def load_schema() -> dict[str, Any]:
    text = resources.files("settled.conformance").joinpath("trace.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


# Compiled once to Python code: validating a million lines with an interpreting
# validator costs ~100 µs a line, compiled it is a few µs.
_VALIDATE = fastjsonschema.compile(load_schema())


@dataclass(frozen=True, slots=True)
class Event:
    line: int
    machine: str
    instance: str
    seq: int
    trigger: str
    params: Mapping[str, Value]
    source: str
    dest: str
    vars: Mapping[str, Value]
    raw: Mapping[str, Any] = field(compare=False)


def parse_line(line_no: int, text: str) -> Event:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(line_no, f"not JSON ({exc.msg} at column {exc.colno})") from None
    try:
        _VALIDATE(obj)
    except fastjsonschema.JsonSchemaValueException as exc:
        name, message = exc.name or "data", exc.message or "invalid"
        where = name.removeprefix("data").lstrip(".") or "the event"
        raise TraceError(line_no, f"{where}: {message.removeprefix(name + ' ')} "
                                  "(see the settled.trace/1 schema)") from None
    return Event(line_no, obj["machine"], obj["instance"], obj["seq"], obj["trigger"],
                 obj["params"], obj["from"], obj["to"], obj["vars"], obj)


def read_events(lines: Iterable[str]) -> Iterator[Event]:
    for n, text in enumerate(lines, start=1):
        if text.strip():
            yield parse_line(n, text)


# --------------------------------------------------------------------------
# Machines and their bounds, read off an instance's events
# --------------------------------------------------------------------------
def _query_for(events: list[Event]) -> Protocol:
    workers = len({e.params["worker"] for e in events if "worker" in e.params})
    epochs = max((int(e.vars.get("lease_epoch", 0)) for e in events), default=0)
    versions = max((int(e.vars.get("task_version", 1)) for e in events), default=1)
    return _cached_query(max(workers, 1), max(epochs, 1), max(versions, 2))


_QUERY_CACHE: dict[tuple[int, int, int], Protocol] = {}


def _cached_query(workers: int, epochs: int, versions: int) -> Protocol:
    key = (workers, epochs, versions)
    if key not in _QUERY_CACHE:
        _QUERY_CACHE[key] = build_query_machine(workers, epochs, versions)
    return _QUERY_CACHE[key]


MachineFor = Callable[[list[Event]], Protocol]
MACHINE_FOR: dict[str, MachineFor] = {"query": _query_for}


def register_machine(name: str, machine_for: MachineFor) -> None:
    """Let the checker replay traces of another declared machine."""
    MACHINE_FOR[name] = machine_for


# The approval machine has no bounds to read off a log: one call, its own small domains.
register_machine("approval", lambda events: APPROVAL)
# Nor has the ledger machine: one tool call of an assistant message.
register_machine("ledger", lambda events: LEDGER)


# --------------------------------------------------------------------------
# Findings
# --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Violation:
    instance: str
    line: int
    event: Mapping[str, Any]
    state_before: Mapping[str, Value]
    enabled: tuple[str, ...]
    failed_guards: tuple[tuple[str, str], ...]
    diffs: tuple[tuple[str, Value, Value], ...]  # (field, observed, expected)

    def to_json(self) -> dict[str, Any]:
        return {"instance": self.instance, "line": self.line, "event": dict(self.event),
                "state_before": {k: _plain(v) for k, v in self.state_before.items()},
                "enabled": list(self.enabled),
                "failed_guards": [{"name": n, "text": t} for n, t in self.failed_guards],
                "diffs": [{"field": f, "observed": _plain(o), "expected": _plain(x)}
                          for f, o, x in self.diffs]}

    def text(self) -> str:
        ev = self.event
        parts = [f"line {self.line}: {ev['machine']} {self.instance!r} seq {ev['seq']}: "
                 f"{ev['trigger']} {ev['from']} -> {ev['to']} does not conform",
                 f"  state before: {_brief(self.state_before)}",
                 f"  enabled there: {', '.join(self.enabled) or '(nothing)'}"]
        if self.failed_guards:
            parts.append("  failed guards: " + "; ".join(f"{n} ({t})" for n, t in self.failed_guards))
        for f, o, x in self.diffs:
            parts.append(f"  {f}: observed {_plain(o)!r}, model expects {_plain(x)!r}")
        return "\n".join(parts)


def _plain(v: Value) -> Value:
    return list(v) if isinstance(v, tuple) else (str(v) if isinstance(v, str) else v)


def _brief(state: Mapping[str, Value]) -> str:
    return ", ".join(f"{k}={_plain(v)}" for k, v in state.items())


@dataclass(frozen=True)
class CheckReport:
    events: int
    instances: int
    seconds: float
    violations: tuple[Violation, ...]

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "events": self.events, "instances": self.instances,
                "seconds": round(self.seconds, 3),
                "violations": [v.to_json() for v in self.violations]}


# --------------------------------------------------------------------------
# Replay
# --------------------------------------------------------------------------
class _Replayer:
    """Replays one machine's instances; memoises steps across instances."""

    def __init__(self, protocol: Protocol) -> None:
        self.p = protocol
        self.hidden = tuple(t for t in protocol.transitions if t.observable is None)
        self.observables = frozenset(t.observable for t in protocol.transitions if t.observable)
        self.worker_param = any(x.name == "worker" for t in protocol.transitions for x in t.params)
        self.states = frozenset(protocol.state_names)
        self.variables = frozenset(protocol.variable_names)
        self._closure: dict[frozenset[Config], frozenset[Config]] = {}
        self._step: dict[tuple[Any, ...], frozenset[Config]] = {}

    def closure(self, configs: frozenset[Config]) -> frozenset[Config]:
        cached = self._closure.get(configs)
        if cached is not None:
            return cached
        seen, frontier = set(configs), list(configs)
        while frontier and len(seen) < CLOSURE_LIMIT:
            c = frontier.pop()
            for step in self.p.enabled(c):
                if step.transition.observable is None and step.after not in seen:
                    seen.add(step.after)
                    frontier.append(step.after)
        result = frozenset(seen)
        self._closure[configs] = result
        return result

    def step(self, configs: frozenset[Config], trigger: str, params: Mapping[str, Value],
             source: str, dest: str, observed: Mapping[str, Value]) -> frozenset[Config]:
        key = (configs, trigger, tuple(sorted(params.items())), source, dest,
               tuple(sorted(observed.items())))
        cached = self._step.get(key)
        if cached is None:
            cached = frozenset(self._matches(self.closure(configs), trigger, params, source,
                                             dest, observed))
            self._step[key] = cached
        return cached

    def _matches(self, configs: Iterable[Config], trigger: str, params: Mapping[str, Value],
                 source: str, dest: str, observed: Mapping[str, Value]) -> Iterator[Config]:
        for c in configs:
            if c.state != source:
                continue
            for after in self._fire_all(c, trigger, params):
                if after.state == dest and _agrees(self.p, after, observed):
                    yield after

    def _fire_all(self, c: Config, trigger: str, params: Mapping[str, Value]) -> Iterator[Config]:
        v = self.p.view(c)
        for t in self.p.transitions_from(c.state):
            if t.observable != trigger or not _fits(t, params):
                continue
            if all(g(v, params) for g in t.guards):
                yield Config(t.target(c.state), self.p.replace(c, t.effect(v, params)))


def _fits(t: Transition, params: Mapping[str, Value]) -> bool:
    return set(params) == {x.name for x in t.params} and all(
        params[x.name] in x.domain for x in t.params)


def _agrees(p: Protocol, config: Config, observed: Mapping[str, Value]) -> bool:
    v = p.view(config)
    return all(v[k] == x for k, x in observed.items())


def _diagnose(r: _Replayer, configs: frozenset[Config], e: Event, params: Mapping[str, Value],
              observed: Mapping[str, Value]) -> Violation:
    closed = sorted(r.closure(configs), key=lambda c: (c.state != e.source, repr(c)))
    before = closed[0]
    v = r.p.view(before)
    enabled = tuple(sorted({s.transition.observable for c in closed for s in r.p.enabled(c)
                            if s.transition.observable}))
    candidates = [t for t in r.p.transitions_from(before.state)
                  if t.observable == e.trigger and _fits(t, params)]
    failed = tuple(dict.fromkeys((g.name, g.text) for t in candidates for g in t.guards
                                 if not g(v, params)))
    diffs: list[tuple[str, Value, Value]] = []
    if before.state != e.source:
        diffs.append(("from", e.source, before.state))
    for after in r._fire_all(before, e.trigger, params):
        av = r.p.view(after)
        if after.state != e.dest:
            diffs.append(("to", e.dest, after.state))
        diffs += [(k, x, av[k]) for k, x in observed.items() if av[k] != x]
        break
    state = {"state": before.state, **v}
    return Violation(e.instance, e.line, e.raw, state, enabled, failed, tuple(diffs))


def _normalise(r: _Replayer, e: Event, workers: dict[str, int]) -> tuple[
        Mapping[str, Value], Mapping[str, Value]]:
    params = dict(e.params)
    if r.worker_param and "worker" in params:
        params["worker"] = workers.setdefault(str(params["worker"]), len(workers))
    if not r.variables.issuperset(e.vars):
        unknown = sorted(set(e.vars) - r.variables)
        raise TraceError(e.line, f"unknown variable(s) {unknown} for machine {e.machine!r}; "
                                 f"its variables are {sorted(r.variables)}")
    observed = {k: (tuple(x) if isinstance(x, list) else x) for k, x in e.vars.items()}
    return params, observed


def _check_names(r: _Replayer, e: Event) -> None:
    if e.trigger not in r.observables:
        raise TraceError(e.line, f"unknown trigger {e.trigger!r} for machine {e.machine!r}; "
                                 f"logged triggers are {sorted(r.observables)}")
    for s in (e.source, e.dest):
        if s not in r.states:
            raise TraceError(e.line, f"unknown state {s!r} for machine {e.machine!r}")


def replay_instance(events: list[Event]) -> Violation | None:
    """Replay one instance's events (already in seq order); the first violation or None."""
    r = _replayer(events[0].machine, events)
    workers: dict[str, int] = {}
    configs = frozenset({r.p.initial_config()})
    for e in events:
        _check_names(r, e)
        params, observed = _normalise(r, e, workers)
        after = r.step(configs, e.trigger, params, e.source, e.dest, observed)
        if not after:
            return _diagnose(r, configs, e, params, observed)
        configs = after
    return None


_REPLAYERS: dict[int, _Replayer] = {}


def _replayer(machine: str, events: list[Event]) -> _Replayer:
    if machine not in MACHINE_FOR:
        raise TraceError(events[0].line, f"unknown machine {machine!r}; known machines are "
                                         f"{sorted(MACHINE_FOR)}")
    p = MACHINE_FOR[machine](events)
    r = _REPLAYERS.get(id(p))
    if r is None:
        r = _REPLAYERS[id(p)] = _Replayer(p)
    return r


def group(events: Iterable[Event]) -> dict[tuple[str, str], list[Event]]:
    """Events by (machine, instance), checking seq order: 1, 2, 3 … with no gap."""
    out: dict[tuple[str, str], list[Event]] = {}
    for e in events:
        if e.machine not in MACHINE_FOR:
            raise TraceError(e.line, f"unknown machine {e.machine!r}; known machines are "
                                     f"{sorted(MACHINE_FOR)}")
        seen = out.setdefault((e.machine, e.instance), [])
        expected = seen[-1].seq + 1 if seen else 1
        if e.seq != expected:
            what = ("an event for an instance that never started (its first seq must be 1)"
                    if not seen else "out-of-order sequence number")
            raise TraceError(e.line, f"{what}: {e.machine} {e.instance!r} has seq {e.seq}, "
                                     f"expected {expected}")
        seen.append(e)
    return out


def check_lines(lines: Iterable[str]) -> CheckReport:
    """Check a whole trace; raises TraceError on unreadable input."""
    start = time.perf_counter()
    grouped = group(read_events(lines))
    violations = [v for evs in grouped.values() if (v := replay_instance(evs)) is not None]
    violations.sort(key=lambda v: v.line)
    count = sum(len(evs) for evs in grouped.values())
    return CheckReport(count, len(grouped), time.perf_counter() - start, tuple(violations))


def check_file(path: Path) -> CheckReport:
    try:
        with path.open(encoding="utf-8") as f:
            return check_lines(f)
    except OSError as exc:
        raise TraceError(0, f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise TraceError(0, f"{path} is not UTF-8 text ({exc.reason})") from None
