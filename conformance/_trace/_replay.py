"""The trace checker: replay an implementation's event log through the model.

A trace is JSON Lines, one committed state change per line, in the public
format of ``trace.schema.json`` (``settled.trace/1``). Each instance's events
are replayed in ``seq`` order through its declared machine, in one streaming
pass: every instance keeps only its current set of configurations. The log
cannot see everything the model can: the platform's own progress, crashes, and
answers that never arrived leave no event (their transitions declare
``observed_as=None``). So the checker tracks the *set* of configurations
consistent with what it has read so far, closing over those hidden steps
before each event; an event conforms when some configuration in the set takes
it to exactly the observed state and variables. Unknown stays unknown here
too: the checker never guesses which hidden step happened, it keeps every one
the evidence allows.

Bounded cost. Worker names are interchangeable, and at most one worker holds
an instance's current lease. So the checker replays a two-worker model in
which slot 0 is *the last worker that claimed* and slot 1 is *anyone else*: a
name is mapped to its role at each event, and a claim by anyone else swaps the
slots. A stale lease and no lease are indistinguishable to every guard but a
crash (a hidden step that only clears a lease), so the abstraction loses
nothing. Model bounds (``epochs_left``, ``versions_left``) exist only to keep
the explorer finite; the checker drops them, so epochs and versions are never
cut short and the model does not grow with the log. The cost is linear in the
number of events whatever the number of worker names, epochs or versions.

Speed. Lines are decoded with ``msgspec`` into a typed struct, which is both
the JSON parse and the envelope's schema check; ``params`` and ``vars`` stay
raw bytes and serve as memo keys, so an event whose (configurations, step)
pair was seen before costs a dictionary lookup. GC is paused while reading.
The hidden-step search tries only hidden transitions.

Verdicts are per instance: a violation, a gap in ``seq`` (``incomplete_log``),
or ``undecided`` (the hidden-step search hit its limit) stops checking that
instance only. Input that cannot be read at all (not JSON, not the schema, a
limit passed) raises :class:`TraceError` naming the line.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from operator import itemgetter
from pathlib import Path
from typing import Annotated, Any, Literal, TypeAlias

import msgspec

from settled.conformance._paused import gc_paused
from settled.model import APPROVAL, LEDGER, Config, Protocol, Transition, build_query_machine
from settled.model._core import Snapshot, Value, rule_sort_key

SCHEMA_ID = "settled.trace/1"

# Documented limits (README, "settled check"): past any of them the input is unreadable (exit 2).
CLOSURE_LIMIT = 4096  # configurations the hidden-step search may reach before an instance is undecided
MAX_LINE_BYTES = 1 << 20  # one event line, newline excluded
MAX_NESTING = 32  # brackets nested in one line; a valid event nests 2 deep
MAX_FILE_BYTES = 1 << 36  # 64 GiB read in one check
MAX_INSTANCES = 5_000_000  # distinct (machine, instance) pairs open in one check
SHOWN_CANDIDATES = 8  # candidate configurations listed per violation before collapsing

_MEMO_LIMIT = 500_000  # replay memo entries kept before the memo is started afresh


class TraceError(ValueError):
    """The input is not a readable trace; names the line and what is wrong."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


class CheckerFault(RuntimeError):
    """The checker itself failed (a defect, or memory ran out); names the input line."""

    def __init__(self, line: int, cause: BaseException) -> None:
        what = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
        super().__init__(f"the checker failed while reading line {line} ({what}); no verdict "
                         "was reached. This is a defect of the checker, not of the trace: "
                         "please report it with the line.")
        self.line = line
        self.cause = what


def load_schema() -> dict[str, Any]:
    text = resources.files("settled.conformance").joinpath("trace.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


# --------------------------------------------------------------------------
# Decoding: one typed pass is the JSON parse and the envelope's schema check
# --------------------------------------------------------------------------
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class _Event(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The envelope of ``trace.schema.json``; params and vars stay raw until needed."""

    schema: Literal["settled.trace/1"]
    machine: NonEmpty
    instance: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    seq: Annotated[int, msgspec.Meta(ge=1)]
    trigger: NonEmpty
    params: msgspec.Raw
    from_: NonEmpty = msgspec.field(name="from")
    to: NonEmpty
    vars: msgspec.Raw
    at: str = ""


_DECODE = msgspec.json.Decoder(_Event).decode
_PARAMS = msgspec.json.Decoder(dict[str, str | int | bool]).decode
_VARS = msgspec.json.Decoder(dict[str, str | int | bool | None]).decode


@dataclass(frozen=True, slots=True)
class Event:
    """One decoded event, as the public API and the diagnostics see it."""

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


def _nesting(line: bytes) -> int:
    depth = deepest = 0
    in_string = escaped = False
    for ch in line:
        if in_string:
            if escaped:
                escaped = False
            elif ch == 0x5C:
                escaped = True
            elif ch == 0x22:
                in_string = False
        elif ch == 0x22:
            in_string = True
        elif ch in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif ch in (0x5D, 0x7D):
            depth -= 1
    return deepest


def _unreadable(line_no: int, line: bytes, exc: Exception) -> TraceError:
    if len(line) > MAX_LINE_BYTES:
        return TraceError(line_no, f"the line is {len(line):,} bytes, over the limit of "
                                   f"{MAX_LINE_BYTES:,} bytes per event")
    if (line.count(b"[") + line.count(b"{") > MAX_NESTING
            and (depth := _nesting(line)) > MAX_NESTING):
        return TraceError(line_no, f"values nested {depth} deep, over the limit of {MAX_NESTING} "
                                   "(params and vars are flat objects)")
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        return TraceError(line_no, f"not UTF-8 text (byte {bad.start + 1} of the line: {bad.reason})")
    if isinstance(exc, RecursionError):
        return TraceError(line_no, "values nested too deeply to decode (params and vars are flat)")
    if line.startswith(b"\xef\xbb\xbf"):
        return TraceError(line_no, "a byte-order mark inside the file (only the first line may "
                                   "start with one)")
    message = str(exc)
    if isinstance(exc, msgspec.ValidationError):
        message = (message.replace("`$.from_`", "`$.from`").replace("`from_`", "`from`")
                   .replace("Object contains unknown field", "unknown field"))
        return TraceError(line_no, f"{message} (see the {SCHEMA_ID} schema)")
    try:
        json.loads(line)
    except json.JSONDecodeError as bad:
        return TraceError(line_no, f"not JSON ({bad.msg} at column {bad.colno})")
    except (ValueError, RecursionError):
        pass
    return TraceError(line_no, f"not JSON ({message})")


def parse_line(line_no: int, text: str | bytes) -> Event:
    """Decode one line into an :class:`Event` (params and vars decoded); TraceError if unreadable."""
    raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    try:
        e = _DECODE(raw)
    except (msgspec.MsgspecError, RecursionError, ValueError) as exc:
        raise _unreadable(line_no, raw, exc) from None
    params = _decode_params(line_no, bytes(e.params))
    values = _decode_vars(line_no, bytes(e.vars))
    return Event(line_no, e.machine, e.instance, e.seq, e.trigger, params, e.from_, e.to, values,
                 _as_dict(raw))


def _decode_params(line_no: int, raw: bytes) -> dict[str, Value]:
    try:
        return _PARAMS(raw)
    except msgspec.ValidationError as exc:
        integral = _integers(raw, exc)
        if integral is not None:
            return _decode_params(line_no, integral)
        raise TraceError(line_no, f"params: {_where(exc, 'params')} (a flat object of strings, "
                                  f"integers and booleans; see the {SCHEMA_ID} schema)") from None
    except (msgspec.MsgspecError, RecursionError) as exc:
        raise TraceError(line_no, f"params: {_where(exc, 'params')} (a flat object of strings, "
                                  f"integers and booleans; see the {SCHEMA_ID} schema)") from None


def _decode_vars(line_no: int, raw: bytes) -> dict[str, Value]:
    try:
        return _VARS(raw)
    except msgspec.ValidationError as exc:
        integral = _integers(raw, exc)
        if integral is not None:
            return _decode_vars(line_no, integral)
        raise TraceError(line_no, f"vars: {_where(exc, 'vars')} (a flat object of strings, "
                                  f"integers, booleans and nulls; see the {SCHEMA_ID} schema)") from None
    except (msgspec.MsgspecError, RecursionError) as exc:
        raise TraceError(line_no, f"vars: {_where(exc, 'vars')} (a flat object of strings, "
                                  f"integers, booleans and nulls; see the {SCHEMA_ID} schema)") from None


def _integers(raw: bytes, exc: Exception) -> bytes | None:
    """The object with integral numbers written as integers (2.0 and 2e0 are 2, as JSON
    Schema says), when a float is what the typed decoder refused and rewriting changes it."""
    if "got `float`" not in str(exc):
        return None
    try:
        obj = json.loads(raw, parse_float=_integral)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or any(type(x) is float for x in obj.values()):
        return None
    again = json.dumps(obj, ensure_ascii=False).encode()
    return again if again != raw else None


def _where(exc: BaseException, name: str) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc).replace("`$", f"`$.{name}")


def _as_dict(raw: str | bytes) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}


def read_events(lines: Iterable[str | bytes]) -> Iterator[Event]:
    for n, text in enumerate(lines, start=1):
        if text.strip():
            yield parse_line(n, text.removeprefix("\ufeff") if isinstance(text, str) and n == 1
                             else text)


# --------------------------------------------------------------------------
# Machines: the model the checker replays, and the domains of what is logged
# --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Domain:
    """What a logged value may be, as a test and as words for the report."""

    text: str
    test: Callable[[Value], bool]


def finite(values: Iterable[Value]) -> Domain:
    values = tuple(values)
    allowed = {(type(x), x) for x in values}  # True is not 1 here
    return Domain("one of " + ", ".join(json.dumps(x) for x in values),
                  lambda x: (type(x), x) in allowed)


def integers(low: int) -> Domain:
    return Domain(f"an integer >= {low}", lambda x: type(x) is int and x >= low)


WORKER_NAME = Domain("a worker name (a string or an integer)",
                     lambda x: type(x) is str or type(x) is int)


@dataclass(frozen=True)
class Machine:
    """How the checker replays one declared machine.

    ``worker`` names the parameter that says which worker acts; when set, the
    protocol must be declared for two workers (slot 0: the last worker that
    claimed, slot 1: anyone else), ``claims`` are the logged steps after which
    the acting worker becomes slot 0, and ``worker_vars`` the variables indexed
    by worker slot (swapped when that happens).
    """

    protocol: Protocol
    variables: Mapping[str, Domain]
    worker: str | None = None
    claims: frozenset[str] = frozenset()
    worker_vars: tuple[str, ...] = ()
    # Maps a configuration to the representative of its class (configurations no logged step
    # can tell apart); applied after every logged step.
    canon: Callable[[Config], Config] | None = None

    @classmethod
    def of(cls, protocol: Protocol) -> Machine:
        """A machine with no worker abstraction, checked against its declared domains."""
        return cls(protocol, {v.name: finite(v.domain) for v in protocol.variables if v.observable})


def unbounded(protocol: Protocol) -> Protocol:
    """The protocol without its model bounds (guards declared ``bound=True``)."""
    return replace(protocol, transitions=tuple(
        replace(t, guards=tuple(g for g in t.guards if not g.bound)) for t in protocol.transitions))


def query_machine() -> Machine:
    p = unbounded(build_query_machine(workers=2, max_epoch=3, max_task_version=3))
    # Epochs and versions are bounded in the declaration only to keep exploration finite.
    unbounded_ints = {"lease_epoch": 0, "submit_epoch": 0, "task_version": 1,
                      "authorized_version": 0}
    domains = {v.name: integers(unbounded_ints[v.name]) if v.name in unbounded_ints
               else finite(v.domain) for v in p.variables if v.observable}
    return Machine(p, domains, worker="worker", claims=frozenset({"claim"}), worker_vars=("held",),
                   canon=_stale_leases_forgotten(p))


def _stale_leases_forgotten(p: Protocol) -> Callable[[Config], Config]:
    """A lease older than the row's lease_epoch is as good as none to every guard (it can
    never match the epoch again, which only grows); only a hidden crash tells them apart,
    and a crash only clears it. So a stale lease is recorded as none."""
    names = p.variable_names
    held, epoch = names.index("held"), names.index("lease_epoch")

    def canon(c: Config) -> Config:
        leases, current = c.values[held], c.values[epoch]
        if all(x == 0 or x == current for x in leases):
            return c
        values = list(c.values)
        values[held] = tuple(x if x == current else 0 for x in leases)
        return Config(c.state, tuple(values))
    return canon


MACHINES: dict[str, Machine] = {}


def register_machine(name: str, machine: Machine | Protocol) -> None:
    """Let the checker replay traces of another declared machine."""
    MACHINES[name] = machine if isinstance(machine, Machine) else Machine.of(machine)


register_machine("query", query_machine())
register_machine("approval", APPROVAL)
register_machine("ledger", LEDGER)  # one tool call of an assistant message


# --------------------------------------------------------------------------
# Findings
# --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Violation:
    """One instance's verdict when it is not "conforms": what, where, and why.

    ``kind`` is ``step`` (no configuration consistent with the log takes the
    event), ``out_of_domain`` (a name or value the machine does not declare),
    ``incomplete_log`` (a seq gap, a reordering, an instance starting
    mid-stream) or ``undecided`` (the hidden-step search hit its limit: not a
    violation, not a pass).
    """

    instance: str
    line: int
    event: Mapping[str, Any]
    kind: str = "step"
    message: str = ""
    machine: str = ""
    state_before: Mapping[str, Any] = field(default_factory=dict)
    candidates: tuple[Mapping[str, Any], ...] = ()
    candidates_total: int = 0
    unlogged: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    enabled: tuple[str, ...] = ()
    failed_guards: tuple[tuple[str, str], ...] = ()
    diffs: tuple[tuple[str, Value, Value], ...] = ()  # (field, observed, expected)
    broken: tuple[str, ...] = ()  # invariants and step properties the step would break
    rules: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"instance": self.instance, "machine": self.machine, "line": self.line,
                "kind": self.kind, "message": self.message, "event": dict(self.event),
                "rules": list(self.rules), "broken": list(self.broken),
                "state_before": {k: _plain(v) for k, v in self.state_before.items()},
                "candidates": [{k: _plain(v) for k, v in c.items()} for c in self.candidates],
                "candidates_total": self.candidates_total,
                "unlogged_possible": {k: [_plain(x) for x in v] for k, v in self.unlogged.items()},
                "enabled": list(self.enabled),
                "failed_guards": [{"name": n, "text": t} for n, t in self.failed_guards],
                "diffs": [{"field": f, "observed": _plain(o), "expected": _plain(x)}
                          for f, o, x in self.diffs]}

    def text(self) -> str:
        ev = self.event
        head = f"line {self.line}: {self.machine or ev.get('machine', '?')} {self.instance!r}"
        if "seq" in ev:
            head += f" seq {ev['seq']}"
        if self.kind == "step":
            head += (f": {ev.get('trigger')} {ev.get('from')} -> {ev.get('to')} does not conform: "
                     f"{self.message}")
        else:
            head += f": {self.kind}: {self.message}"
        parts = [head]
        if self.rules or self.broken:
            cites = ", ".join(self.rules)
            if self.broken:
                cites += ("; " if cites else "") + "breaks " + ", ".join(self.broken)
            parts.append(f"  rules: {cites}")
        if self.kind in ("step", "undecided") and self.candidates_total:
            shown = len(self.candidates)
            more = (f" ({self.candidates_total - shown} more not shown)"
                    if self.candidates_total > shown else "")
            parts.append(f"  consistent with the log so far: {self.candidates_total} distinct "
                         f"over the logged variables{more}:")
            parts += [f"    {_brief(c)}" for c in self.candidates]
            if self.unlogged:
                parts.append("  not logged, possibly: " + "; ".join(
                    f"{k} in {{{', '.join(str(_plain(x)) for x in v)}}}"
                    for k, v in self.unlogged.items()))
            parts.append(f"  enabled there: {', '.join(self.enabled) or '(nothing)'}")
        if self.failed_guards:
            parts.append("  guards failed in every candidate: "
                         + "; ".join(f"{n} ({t})" for n, t in self.failed_guards))
        for f, o, x in self.diffs:
            parts.append(f"  {f}: observed {_plain(o)!r}, model expects {_plain(x)!r}")
        return "\n".join(parts)


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple | frozenset) else str(v) if isinstance(v, str) else v


def _brief(state: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_plain(v)}" for k, v in state.items())


@dataclass(frozen=True)
class CheckReport:
    """The verdicts of one trace: every instance judged, the non-conforming ones listed."""

    events: int
    instances: int
    seconds: float
    violations: tuple[Violation, ...]
    undecided: tuple[Violation, ...] = ()
    stopped_early: bool = False  # --first: reading stopped at the first problem

    @property
    def ok(self) -> bool:
        return not self.violations and not self.undecided and self.events > 0

    @property
    def exit_code(self) -> int:
        return 1 if self.violations else 3 if self.undecided else 0

    @property
    def conforming(self) -> int:
        """Instances judged conforming (none when --first stopped the reading early)."""
        return 0 if self.stopped_early else self.unjudged_or_conforming

    @property
    def unjudged(self) -> int:
        """Instances left unjudged because --first stopped the reading early."""
        return self.unjudged_or_conforming if self.stopped_early else 0

    @property
    def unjudged_or_conforming(self) -> int:
        return self.instances - len(self.violations) - len(self.undecided)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "exit_code": self.exit_code, "events": self.events,
                "instances": self.instances,
                "verdicts": {"conforms": self.conforming, "violation": len(self.violations),
                             "undecided": len(self.undecided), "not_judged": self.unjudged},
                "stopped_early": self.stopped_early, "seconds": round(self.seconds, 3),
                "violations": [v.to_json() for v in self.violations],
                "undecided": [v.to_json() for v in self.undecided]}


TraceReport: TypeAlias = CheckReport


# --------------------------------------------------------------------------
# Replay
# --------------------------------------------------------------------------
_NO_ROLE = -1  # the event names no worker
_BAD_WORKER = "\x00worker of the wrong type"  # keeps a boolean worker name out of the memo
_Configs: TypeAlias = frozenset[Config]


class _Replayer:
    """Replays one machine's instances; memoises steps across instances."""

    def __init__(self, machine: Machine, closure_limit: int = CLOSURE_LIMIT) -> None:
        self.m = machine
        self.p = p = machine.protocol
        self.limit = closure_limit
        self.states = frozenset(p.state_names)
        self.observables = frozenset(t.observable for t in p.transitions if t.observable)
        self._index = {v.name: i for i, v in enumerate(p.variables)}
        # Per state: the trigger groups that contain a hidden transition (with params to try).
        plan = p._plan
        self.hidden: dict[str, tuple[tuple[Any, tuple[Transition, ...]], ...]] = {
            s: tuple((prm, ts) for prm, ts in groups
                     if any(t.observable is None for t in ts))
            for s, groups in plan.items()}
        # Per (state, observed name): the trigger groups one of whose members logs that name.
        self.observed: dict[tuple[str, str], tuple[tuple[Transition, ...], ...]] = {}
        for s in p.state_names:
            groups: dict[str, list[Transition]] = {}
            for t in p.transitions_from(s):
                groups.setdefault(t.trigger, []).append(t)
            for name in self.observables:
                self.observed[(s, name)] = tuple(
                    tuple(g) for g in groups.values() if any(t.observable == name for t in g))
        # Per observed name: the parameter sets its transitions declare, with domains. Two
        # transitions logged under one name with the same parameter names (a lost answer and
        # an undelivered request, each with its own faults) accept the union of their values.
        values: dict[str, dict[frozenset[str], dict[str, dict[Value, None]]]] = {}
        for t in p.transitions:
            if t.observable:
                shape_values = values.setdefault(t.observable, {}).setdefault(
                    frozenset(x.name for x in t.params), {})
                for x in t.params:
                    shape_values.setdefault(x.name, {}).update(dict.fromkeys(x.domain))
        self.param_sets: dict[str, list[dict[str, Domain]]] = {
            name: [{k: (WORKER_NAME if k == machine.worker else finite(tuple(vals)))
                    for k, vals in shape.items()} for shape in shapes.values()]
            for name, shapes in values.items()}
        self._closure: dict[int, tuple[_Configs, bool]] = {}
        self._hidden: dict[Config, tuple[Config, ...]] = {}
        self._fitting: dict[tuple[Any, ...], tuple[tuple[Transition, ...], ...]] = {}
        self._fired: dict[tuple[Config, Any], tuple[Config, ...]] = {}
        # Configuration sets are interned: an instance holds a small integer, and the memo
        # compares integers, never sets of configurations.
        self.sets: list[_Configs] = []
        self.set_ids: dict[_Configs, int] = {}
        self.memo: dict[tuple[Any, ...], tuple[int, bool]] = {}
        self.params: dict[bytes, tuple[tuple[tuple[str, Value], ...], Value, dict[str, Value]]] = {}
        self.checked_vars: dict[bytes, dict[str, Value]] = {}
        self.swap = self._swapper()

    # -- the hidden-step search --------------------------------------------
    def closure(self, set_id: int) -> tuple[_Configs, bool]:
        """Every configuration hidden steps reach from a set; False if the limit cut it."""
        cached = self._closure.get(set_id)
        if cached is not None:
            return cached
        configs = self.sets[set_id]
        succ, limit = self.hidden_successors, self.limit
        seen, frontier = set(configs), list(configs)
        complete = True
        while frontier:
            for after in succ(frontier.pop()):
                if after not in seen:
                    if len(seen) >= limit:
                        complete = False
                        frontier.clear()
                        break
                    seen.add(after)
                    frontier.append(after)
        result = (frozenset(seen), complete)
        if len(self._closure) > _MEMO_LIMIT:
            self._closure.clear()
        self._closure[set_id] = result
        return result

    def hidden_successors(self, c: Config) -> tuple[Config, ...]:
        got = self._hidden.get(c)
        if got is None:
            out = []
            groups = self.hidden.get(c.state)
            if groups:
                v = self.p.view(c)
                for prm, ts in groups:
                    step = _first_enabled(self.p, ts, c, v, prm)
                    if step is not None and step[0].observable is None:
                        out.append(step[1])
            got = tuple(out)
            if len(self._hidden) > _MEMO_LIMIT:
                self._hidden.clear()
            self._hidden[c] = got
        return got

    def fire(self, c: Config, name: str, params: Mapping[str, Value]) -> Iterator[
            tuple[Transition, Config]]:
        """Every step logged as ``name`` with ``params`` that ``c`` allows (priorities honoured)."""
        groups = self.fitting(c.state, name, params)
        if not groups:
            return
        v = self.p.view(c)
        for fitting in groups:
            step = _first_enabled(self.p, fitting, c, v, params)
            if step is not None and step[0].observable == name:
                yield step

    def fitting(self, state: str, name: str, params: Mapping[str, Value],
                pkey: Any = None) -> tuple[tuple[Transition, ...], ...]:
        """The trigger groups logged as ``name`` from ``state``, cut to those ``params`` fit."""
        key = (state, pkey or (name, tuple(sorted(params.items()))))
        groups = self._fitting.get(key)
        if groups is None:
            groups = self._fitting[key] = tuple(
                fitting for group in self.observed.get((state, name), ())
                if (fitting := tuple(t for t in group if _fits(t, params))))
        return groups

    def step(self, set_id: int, name: str, params: Mapping[str, Value], source: str,
             dest: str, observed: Mapping[str, Value], role: int,
             logged: str) -> tuple[_Configs, bool]:
        closed, complete = self.closure(set_id)
        index, fired, canon = self._index, self._fired, self.m.canon
        pkey = (name, tuple(sorted(params.items())))
        # The logged values, compared in one C call per candidate (their types were checked
        # against the domains already, so True never stands for 1 here).
        names = tuple(observed)
        wanted = tuple(observed[k] for k in names)
        pick = itemgetter(*(index[k] for k in names)) if len(names) > 1 else _one_or_none(
            index[names[0]] if names else None)
        out = set()
        # The log's ``from`` may be the state it last logged although an unlogged step moved
        # the control state since (the approval's business commit): an implementation cannot
        # log what it did not see. Both readings are considered (``ends_as_logged``).
        stale = logged == source
        for c in closed:
            if c.state != source and not stale:
                continue
            key = (c, pkey)
            afters = fired.get(key)
            if afters is None:
                groups = self.fitting(c.state, name, params, pkey)
                afters = ()
                if groups:
                    v = self.p.view(c)
                    afters = tuple(step[1] for fitting in groups
                                   if (step := _first_enabled(self.p, fitting, c, v, params))
                                   is not None and step[0].observable == name)
                if len(fired) > _MEMO_LIMIT:
                    fired.clear()
                fired[key] = afters
            for after in afters:
                if pick(after.values) == wanted and ends_as_logged(c, after, source, dest):
                    out.add(after)
        if canon is not None:
            out = {canon(c) for c in out}
        if role == 1 and name in self.m.claims and out:
            out = {self.swap(c) for c in out}
        return frozenset(out), complete

    def intern(self, configs: _Configs) -> int:
        got = self.set_ids.get(configs)
        if got is None:
            got = self.set_ids[configs] = len(self.sets)
            self.sets.append(configs)
        return got

    def _swapper(self) -> Callable[[Config], Config]:
        slots = tuple(self._index[n] for n in self.m.worker_vars)

        def swap(c: Config) -> Config:
            values = list(c.values)
            for i in slots:
                a, b = values[i]
                values[i] = (b, a)
            return Config(c.state, tuple(values))
        return swap

    # -- names and domains -------------------------------------------------
    def params_of(self, raw: bytes, line: int) -> tuple[Any, Value, dict[str, Value]]:
        """(a key for the params but the worker, the worker's name or None, the decoded params)."""
        got = self.params.get(raw)
        if got is None:
            decoded = _decode_params(line, raw)
            worker = self.m.worker
            name = decoded.get(worker) if worker else None
            rest: Any = raw
            if name is not None:
                rest = tuple(sorted((k, x) for k, x in decoded.items() if k != worker))
                if not WORKER_NAME.test(name):
                    rest += ((_BAD_WORKER, name),)
            got = (rest, name, decoded)
            if len(self.params) > _MEMO_LIMIT:
                self.params.clear()
            self.params[raw] = got
        return got

    def out_of_domain(self, e: _Event, params: Mapping[str, Value],
                      observed: Mapping[str, Value]) -> str | None:
        """Why the event names something the machine does not declare, or None."""
        machine = self.p.name
        if e.trigger not in self.observables:
            return (f"trigger {e.trigger!r} is not a logged step of machine {machine!r}; its "
                    f"logged steps are {sorted(self.observables)}")
        for what, s in (("from", e.from_), ("to", e.to)):
            if s not in self.states:
                return (f"{what} state {s!r} is not a state of machine {machine!r}; its states "
                        f"are {list(self.p.state_names)}")
        shapes = self.param_sets.get(e.trigger, [])
        shape = next((s for s in shapes if set(s) == set(params)), None)
        if shape is None:
            wanted = " or ".join(str(sorted(s)) or "[]" for s in shapes) or "[]"
            return (f"params {sorted(params)} do not fit {e.trigger!r}; it takes {wanted}")
        for k, x in params.items():
            if not shape[k].test(x):
                return (f"param {k!r} of {e.trigger!r} is {json.dumps(x)}, outside its domain "
                        f"({shape[k].text})")
        domains = self.m.variables
        for k, x in observed.items():
            d = domains.get(k)
            if d is None:
                return (f"variable {k!r} is not a logged variable of machine {machine!r}; its "
                        f"logged variables are {sorted(domains)}")
            if not d.test(x):
                return f"variable {k!r} is {json.dumps(x)}, outside its domain ({d.text})"
        return None


# Replayers (and their memos) are kept across checks in one process: the lockstep kit checks
# thousands of short logs that follow the same few paths. ``settled check`` starts cold.
REPLAYERS: dict[tuple[int, int], tuple[Machine, _Replayer]] = {}


def _replayer(m: Machine, closure_limit: int) -> _Replayer:
    got = REPLAYERS.get((id(m), closure_limit))
    if got is None or got[0] is not m:
        if len(REPLAYERS) > 64:
            REPLAYERS.clear()
        got = REPLAYERS[(id(m), closure_limit)] = (m, _Replayer(m, closure_limit))
    return got[1]


def _one_or_none(i: int | None) -> Callable[[tuple[Value, ...]], tuple[Value, ...]]:
    if i is None:
        return lambda values: ()
    return lambda values: (values[i],)


def _first_enabled(p: Protocol, group: Iterable[Transition], c: Config, v: Mapping[str, Value],
                   params: Mapping[str, Value]) -> tuple[Transition, Config] | None:
    for t in group:
        for g in t.guards:
            if not g.fn(v, params):
                break
        else:
            return t, Config(t.target(c.state), p.replace(c, t.effect(v, params)))
    return None


def ends_as_logged(before: Config, after: Config, source: str, dest: str) -> bool:
    """Whether a step from ``before`` to ``after`` is the one an event logged as
    ``source -> dest``.

    Either the log saw every state change (``before`` is in ``source``), or unlogged steps
    moved the control state since the log last named ``source``; then a step with a
    destination of its own must name it, and a step that stays where it is may be logged
    where the implementation believes it is (``source -> source``)."""
    if before.state == source:
        return after.state == dest
    return after.state == dest or (after.state == before.state and dest == source)


def _fits(t: Transition, params: Mapping[str, Value]) -> bool:
    return len(params) == len(t.params) and all(
        x.name in params and params[x.name] in x.domain for x in t.params)


# --------------------------------------------------------------------------
# Diagnostics: what every candidate says, never one picked at random
# --------------------------------------------------------------------------
def _diagnose(r: _Replayer, configs: int, e: _Event, line: int, event: Mapping[str, Any],
              params: Mapping[str, Value], observed: Mapping[str, Value],
              complete: bool, last_logged: str) -> Violation:
    p = r.p
    closed, _ = r.closure(configs)
    ordered = sorted(closed, key=repr)
    logged = [v.name for v in p.variables if v.observable]
    views = [(c, p.view(c)) for c in ordered]
    shown = list(dict.fromkeys(
        tuple([("state", str(c.state)), *((k, v[k]) for k in logged)]) for c, v in views))
    hidden_vars = [v.name for v in p.variables
                   if not v.observable and not v.ghost and v.name not in r.m.worker_vars]
    unlogged = {k: tuple(sorted({v[k] for _, v in views}, key=repr)) for k in hidden_vars}
    before: dict[str, Any] = {}
    for k, *_ in shown[0] if shown else ():
        values = list(dict.fromkeys(dict(s)[k] for s in shown))
        before[k] = values[0] if len(values) == 1 else tuple(values)
    enabled = sorted({t.observable for c, _ in views for t, _after in _all_steps(r, c)
                      if t.observable})

    stale = last_logged == e.from_
    at_source = [(c, v) for c, v in views if c.state == e.from_ or stale]
    diffs: list[tuple[str, Value, Value]] = []
    if not at_source:
        diffs += [("from", e.from_, s) for s in sorted({str(c.state) for c in closed})]
    # Candidates: (configuration, transition) pairs that could log this event.
    pairs = [(c, v, t) for c, v in (at_source or views)
             for group in r.observed.get((c.state, e.trigger), ()) for t in group
             if t.observable == e.trigger and _fits(t, params)]
    if not pairs:  # no transition logged this way leaves the state: judge the step as declared
        pairs = [(c, v, t) for c, v in (at_source or views) for t in p.transitions
                 if t.observable == e.trigger and _fits(t, params)]
    failed: dict[tuple[str, str], bool] = {}
    for _c, v, t in pairs:
        for g in t.guards:
            ok = bool(g.fn(v, params))
            failed[(g.name, g.text)] = failed.get((g.name, g.text), True) and not ok
    every = tuple(k for k, f in failed.items() if f)
    guarded_rules = {rule for _c, _v, t in pairs for rule in t.rules
                     if any((g.name, g.text) in every for g in t.guards)}
    expected: dict[str, list[Value]] = {}
    for c, _v in at_source:
        for _t, after in r.fire(c, e.trigger, params):
            av = p.view(after)
            if not ends_as_logged(c, after, e.from_, e.to):
                expected.setdefault("to", []).append(str(after.state))
            for k, x in observed.items():
                if av[k] != x:
                    expected.setdefault(k, []).append(av[k])
    for k, values in expected.items():
        obs = e.to if k == "to" else observed[k]
        diffs += [(k, obs, x) for x in dict.fromkeys(values)]
    broken = _broken(r, pairs, e, params, observed)
    rules: set[str] = set(guarded_rules)
    for name in broken:
        rules.update(_property_rules(p, name))
    if not rules:
        rules.update(rule for _c, _v, t in pairs for rule in t.rules)
    kind, message = "step", _why(r, e, at_source, pairs, every, diffs, broken)
    if not complete:
        kind = "undecided"
        message = (f"the hidden-step search stopped at its limit of {r.limit:,} configurations; "
                   "the event may conform through a configuration it did not reach")
    return Violation(e.instance, line, event, kind, message, p.name, before,
                     tuple(dict(s) for s in shown[:SHOWN_CANDIDATES]), len(shown), unlogged,
                     tuple(enabled), every, tuple(diffs), broken,
                     tuple(sorted(rules, key=rule_sort_key)))


def _why(r: _Replayer, e: _Event, at_source: list[Any], pairs: list[Any],
         every: tuple[tuple[str, str], ...], diffs: list[tuple[str, Value, Value]],
         broken: tuple[str, ...]) -> str:
    """The reason in one sentence; the fields of the violation give the detail."""
    if not at_source:
        return (f"no configuration consistent with the log so far is in state {e.from_!r}")
    if not any(g for c, _v in at_source for g in r.observed.get((c.state, e.trigger), ())):
        return f"no step logged as {e.trigger!r} leaves state {e.from_!r}"
    if every:
        return "guard(s) failed in every candidate: " + ", ".join(n for n, _ in every)
    if diffs:
        return "the step's outcome differs from the log: " + ", ".join(
            dict.fromkeys(f for f, *_ in diffs))
    what = f"; it would break {', '.join(broken)}" if broken else ""
    return (f"no configuration consistent with the log takes {e.trigger!r} from {e.from_!r} to "
            f"{e.to!r} with the logged variables{what}")


def _all_steps(r: _Replayer, c: Config) -> Iterator[tuple[Transition, Config]]:
    for s in r.p.enabled(c):
        yield s.transition, s.after


def _broken(r: _Replayer, pairs: list[tuple[Config, Mapping[str, Value], Transition]], e: _Event,
            params: Mapping[str, Value], observed: Mapping[str, Value]) -> tuple[str, ...]:
    """Invariants and step properties the logged step breaks in every candidate (if forced)."""
    p = r.p
    verdicts: list[set[str]] = []
    for c, v, t in pairs:
        try:
            changed = {**t.effect(v, params), **observed}
            after = Config(e.to, p.replace(c, {k: x for k, x in changed.items() if k in r._index}))
            names = {i.name for i in p.invariants if not i.fn(after.state, p.view(after))}
            b, a = Snapshot(c.state, v), Snapshot(after.state, p.view(after))
            names |= {s.name for s in p.step_properties if not s.fn(b, t, params, a)}
        except Exception:
            continue
        verdicts.append(names)
    if not verdicts:
        return ()
    every = set.intersection(*verdicts)
    order = [i.name for i in p.invariants] + [x.name for x in p.step_properties]
    return tuple(n for n in order if n in every)


def _property_rules(p: Protocol, name: str) -> tuple[str, ...]:
    for x in p.invariants:
        if x.name == name:
            return tuple(x.rules)
    for y in p.step_properties:
        if y.name == name:
            return tuple(y.rules)
    return ()


# --------------------------------------------------------------------------
# The streaming check
# --------------------------------------------------------------------------
class _Instance:
    __slots__ = ("configs", "done", "first_line", "holder", "logged", "replayer", "seq",
                 "truncated")

    def __init__(self, replayer: _Replayer, line: int) -> None:
        self.replayer = replayer
        self.configs = replayer.intern(frozenset({replayer.p.initial_config()}))
        self.seq = 0
        self.logged: str = replayer.p.initial  # the state the log last named (``to``)
        self.holder: Value = None  # the name of the last worker that claimed
        self.done = False
        self.truncated = False  # a hidden-step search hit its limit: failures are undecided
        self.first_line = line


def check_lines(lines: Iterable[str | bytes], *, first: bool = False,
                closure_limit: int = CLOSURE_LIMIT,
                machines: Mapping[str, Machine] | None = None) -> CheckReport:
    """Check a whole trace; raises TraceError on unreadable input, CheckerFault on a defect."""
    with gc_paused():  # a million live events would have the cyclic GC walk them over and over
        return _check(lines, first, closure_limit, MACHINES if machines is None else machines)


_BOM = b"\xef\xbb\xbf"


def _check(lines: Iterable[str | bytes], first: bool, closure_limit: int,
           machines: Mapping[str, Machine]) -> CheckReport:
    at = [0]  # the line being read when a fault happens
    try:
        return _check_all(lines, first, closure_limit, machines, at)
    except TraceError:
        raise
    except OSError as exc:
        raise TraceError(at[0] + 1, f"cannot read the input: {exc.strerror or exc}") from None
    except Exception as exc:
        raise CheckerFault(at[0], exc) from None


def _retry(line_no: int, line: str | bytes, exc: Exception) -> _Event | None:
    """The event of a line that failed to decode: a first line after its BOM; None if blank."""
    raw = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
    if line_no == 1 and raw.startswith(_BOM):
        raw = raw[len(_BOM):]
        try:
            return _DECODE(raw)
        except (msgspec.MsgspecError, RecursionError, ValueError) as again:
            exc = again
    if not raw.strip():
        return None
    if isinstance(exc, msgspec.ValidationError) and b"float" in str(exc).encode():
        # JSON Schema calls 2.0 an integer; so does the checker (the rare path only).
        try:
            obj = json.loads(raw, parse_float=_integral)
            return _DECODE(json.dumps(obj, ensure_ascii=False).encode())
        except (ValueError, RecursionError, msgspec.MsgspecError):
            pass
    raise _unreadable(line_no, raw, exc)


def _integral(text: str) -> int | float:
    x = float(text)
    return int(x) if x.is_integer() else x


def _check_all(lines: Iterable[str | bytes], first: bool, closure_limit: int,
               machines: Mapping[str, Machine], at: list[int]) -> CheckReport:
    start = time.perf_counter()
    replayers: dict[str, _Replayer] = {}
    instances: dict[tuple[str, str], _Instance] = {}
    violations: list[Violation] = []
    undecided: list[Violation] = []
    events = total = 0
    decode = _DECODE
    line_no = 0
    stopped = False
    try:
        for line_no, line in enumerate(lines, start=1):
            try:
                e = decode(line)
            except (msgspec.MsgspecError, RecursionError, ValueError) as exc:
                retried = _retry(line_no, line, exc)
                if retried is None:
                    continue
                e = retried
            total += len(line)
            if len(line) > MAX_LINE_BYTES or total > MAX_FILE_BYTES:
                if total > MAX_FILE_BYTES:
                    raise TraceError(line_no, f"the input is over the limit of {MAX_FILE_BYTES:,} bytes")
                raw = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
                raise _unreadable(line_no, raw, ValueError())
            events += 1
            inst = instances.get((e.machine, e.instance))
            if inst is None:
                r = replayers.get(e.machine)
                if r is None:
                    m = machines.get(e.machine)
                    if m is None:
                        raise TraceError(line_no, f"unknown machine {e.machine!r}; known machines are "
                                                  f"{sorted(machines)}")
                    r = replayers[e.machine] = _replayer(m, closure_limit)
                if len(instances) >= MAX_INSTANCES:
                    raise TraceError(line_no, f"more than {MAX_INSTANCES:,} instances in one check; "
                                              "split the file by instance")
                inst = instances[(e.machine, e.instance)] = _Instance(r, line_no)
            elif inst.done:
                continue
            r = inst.replayer
            praw = bytes(e.params)
            known = r.params.get(praw)
            rest, name, params = known if known is not None else r.params_of(praw, line_no)
            if e.seq != inst.seq + 1:
                v = _incomplete(inst, e, line_no, line)
            else:
                inst.seq = e.seq
                role = _NO_ROLE if name is None else (0 if name == inst.holder else 1)
                vraw = bytes(e.vars)
                key = (inst.configs, inst.logged, e.trigger, rest, role, e.from_, e.to, vraw)
                got = r.memo.get(key)
                if got is not None:
                    inst.configs = got[0]
                    inst.logged = e.to
                    if not got[1]:
                        inst.truncated = True
                    if role == 1 and e.trigger in r.m.claims:
                        inst.holder = name
                    continue
                found = _slow_step(r, inst, e, line_no, line, params, role, vraw, key)
                if found is None:
                    if role == 1 and e.trigger in r.m.claims:
                        inst.holder = name
                    continue
                v = found
            inst.done = True
            (undecided if v.kind == "undecided" else violations).append(v)
            if first:
                stopped = True
                break
    except TraceError:
        raise
    except Exception:
        at[0] = line_no
        raise
    if not events:
        raise TraceError(line_no, "no events: the input holds no trace line")
    violations.sort(key=lambda v: v.line)
    undecided.sort(key=lambda v: v.line)
    return CheckReport(events, len(instances), time.perf_counter() - start, tuple(violations),
                       tuple(undecided), stopped)


def _slow_step(r: _Replayer, inst: _Instance, e: _Event, line_no: int, line: str | bytes,
               params: dict[str, Value], role: int, vraw: bytes,
               key: tuple[Any, ...]) -> Violation | None:
    """A step the memo has not seen: check names and domains, replay, or diagnose."""
    observed = r.checked_vars.get(vraw)
    if observed is None:
        observed = _decode_vars(line_no, vraw)
    model_params = dict(params)
    if role != _NO_ROLE and r.m.worker:
        model_params[r.m.worker] = role
    why = r.out_of_domain(e, params, observed)
    if why is not None:
        return Violation(e.instance, line_no, _as_dict(line), "out_of_domain", why, r.p.name)
    if len(r.checked_vars) > _MEMO_LIMIT:
        r.checked_vars.clear()
    r.checked_vars[vraw] = observed
    after, complete = r.step(inst.configs, e.trigger, model_params, e.from_, e.to, observed, role,
                             inst.logged)
    if after:
        if len(r.memo) > _MEMO_LIMIT:
            r.memo.clear()
        got = r.memo[key] = (r.intern(after), complete)
        inst.configs = got[0]
        inst.logged = e.to
        inst.truncated = inst.truncated or not complete
        return None
    return _diagnose(r, inst.configs, e, line_no, _as_dict(line), model_params, observed,
                     complete and not inst.truncated, inst.logged)


def _incomplete(inst: _Instance, e: _Event, line_no: int, line: str | bytes) -> Violation:
    expected = inst.seq + 1
    if inst.seq == 0:
        what = (f"the instance starts mid-stream: its first event has seq {e.seq}, and a log "
                "starts at seq 1")
    elif e.seq <= inst.seq:
        what = (f"seq {e.seq} after seq {inst.seq}: events out of order or repeated "
                f"(expected {expected})")
    else:
        gap = (f"event {expected} is" if e.seq == expected + 1
               else f"events {expected}..{e.seq - 1} are")
        what = f"seq {e.seq} after seq {inst.seq}: {gap} missing"
    return Violation(e.instance, line_no, _as_dict(line), "incomplete_log", what,
                     inst.replayer.p.name)


# --------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------
def check_file(path: Path | str, *, first: bool = False,
               closure_limit: int = CLOSURE_LIMIT) -> CheckReport:
    """Check a file (``-`` reads standard input)."""
    if str(path) == "-":
        return check_lines(sys.stdin.buffer, first=first, closure_limit=closure_limit)
    path = Path(path)
    try:
        f = path.open("rb")
    except OSError as exc:
        raise TraceError(0, f"cannot read {path}: {exc.strerror}") from None
    with f:
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        if size > MAX_FILE_BYTES:
            raise TraceError(0, f"{path} is {size:,} bytes, over the limit of "
                                f"{MAX_FILE_BYTES:,} bytes")
        try:
            return check_lines(f, first=first, closure_limit=closure_limit)
        except OSError as exc:
            raise TraceError(0, f"cannot read {path}: {exc.strerror}") from None


def check_trace(source: Path | str | Iterable[str | bytes], machine: Protocol | None = None, *,
                first: bool = False, closure_limit: int = CLOSURE_LIMIT) -> CheckReport:
    """Check a trace: a path (``-`` for standard input) or an iterable of lines.

    ``machine``, when given, is the only machine the trace may name; it is
    replayed as declared (the registered query machine keeps its worker
    abstraction). Raises :class:`TraceError` on unreadable input and
    :class:`CheckerFault` on a defect of the checker; everything else is a verdict.
    """
    if machine is not None:
        known = MACHINES.get(machine.name)
        m = known if known is not None and known.protocol.name == machine.name and (
            machine.name == "query" or known.protocol is machine) else Machine.of(machine)
        lines = _read(source) if isinstance(source, Path | str) else source
        return check_lines(lines, first=first, closure_limit=closure_limit,
                           machines={machine.name: m})
    if isinstance(source, Path | str):
        return check_file(source, first=first, closure_limit=closure_limit)
    return check_lines(source, first=first, closure_limit=closure_limit)


def _read(path: Path | str) -> Iterator[bytes]:
    if str(path) == "-":
        yield from sys.stdin.buffer
        return
    try:
        with Path(path).open("rb") as f:
            yield from f
    except OSError as exc:
        raise TraceError(0, f"cannot read {path}: {exc.strerror}") from None


def group(events: Iterable[Event]) -> dict[tuple[str, str], list[Event]]:
    """Events by (machine, instance), in file order (no verdicts: ``check_lines`` judges)."""
    out: dict[tuple[str, str], list[Event]] = {}
    for e in events:
        out.setdefault((e.machine, e.instance), []).append(e)
    return out


__all__ = ["CLOSURE_LIMIT", "MACHINES", "MAX_FILE_BYTES", "MAX_INSTANCES", "MAX_LINE_BYTES",
           "MAX_NESTING", "SCHEMA_ID", "CheckReport", "CheckerFault", "Domain", "Event",
           "Machine", "TraceError", "TraceReport", "Violation", "check_file", "check_lines",
           "check_trace", "finite", "integers", "load_schema", "parse_line",
           "read_events", "register_machine", "unbounded"]
