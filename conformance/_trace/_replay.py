"""Replay: one instance's set of configurations taken through one logged event.

:class:`_Replayer` closes over the hidden steps and memoises (configurations, event)
pairs; ``REPLAYERS`` keeps replayers, and their memos, across checks in one process.
When no configuration takes an event, the diagnostics say what every candidate would have
done, never one picked at random.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from operator import itemgetter
from typing import Any, TypeAlias

from settled.model import Config, Protocol, Snapshot, Transition, Value, rule_sort_key

from ._events import _MEMO_LIMIT, CLOSURE_LIMIT, SHOWN_CANDIDATES, _decode_params, _Event
from ._machines import WORKER_NAME, Domain, Machine, finite
from ._report import Violation

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
        plan = p.plan
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
    views = [(c, p.view(c)) for c in ordered]
    shown, before, unlogged = _candidates(r, views)
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
    diffs += _expected_diffs(r, at_source, e, params, observed)
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


def _candidates(r: _Replayer, views: list[tuple[Config, Any]]
                ) -> tuple[list[tuple[tuple[str, Any], ...]], dict[str, Any], dict[str, Any]]:
    """The candidate configurations as logged (distinct), the logged values before the event
    (a tuple where candidates differ) and the values of the variables nobody logs."""
    p = r.p
    logged = [v.name for v in p.variables if v.observable]
    shown = list(dict.fromkeys(
        tuple([("state", str(c.state)), *((k, v[k]) for k in logged)]) for c, v in views))
    hidden_vars = [v.name for v in p.variables
                   if not v.observable and not v.ghost and v.name not in r.m.worker_vars]
    unlogged = {k: tuple(sorted({v[k] for _, v in views}, key=repr)) for k in hidden_vars}
    before: dict[str, Any] = {}
    for k, *_ in shown[0] if shown else ():
        values = list(dict.fromkeys(dict(s)[k] for s in shown))
        before[k] = values[0] if len(values) == 1 else tuple(values)
    return shown, before, unlogged


def _expected_diffs(r: _Replayer, at_source: list[tuple[Config, Any]], e: _Event,
                    params: Mapping[str, Value], observed: Mapping[str, Value]
                    ) -> list[tuple[str, Value, Value]]:
    """(what, logged, what the model expects) for every way the event's step could go."""
    expected: dict[str, list[Value]] = {}
    for c, _v in at_source:
        for _t, after in r.fire(c, e.trigger, params):
            av = r.p.view(after)
            if not ends_as_logged(c, after, e.from_, e.to):
                expected.setdefault("to", []).append(str(after.state))
            for k, x in observed.items():
                if av[k] != x:
                    expected.setdefault(k, []).append(av[k])
    return [(k, e.to if k == "to" else observed[k], x)
            for k, values in expected.items() for x in dict.fromkeys(values)]


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
