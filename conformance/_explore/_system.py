"""Exhaustive exploration of a declared :class:`System`, reduced by symmetry.

What is explored
----------------
Every configuration a system can reach through ``System.enabled``: local
steps of one instance, synchronised steps of several, and the system's own
steps over its shared variables. Checked on every run: the machine's
invariants on each instance, the system's invariants on the whole, the
machine's step properties on every instance that moves, system variables
outside their domains, deadlocks (not every instance terminal, no step),
traps (no all-terminal configuration reachable), machine states never
reached and machine transitions never fired by any instance. Each finding
carries a shortest run from the initial configuration, as a numbered step
list that :func:`replay_system` accepts back and as ITF.

Symmetry
--------
Instances are interchangeable, and so are worker processes when the system
names its ``worker`` parameter: every property here is symmetric in both.
The search stores one canonical representative per orbit (instance
configurations sorted, minimised over worker renamings), which keeps
distances, so counterexamples are still shortest. ``states`` counts the
representatives the search really visited; ``states_unreduced`` is the
number of concrete configurations they stand for (the sum of their orbit
sizes, counted exactly, not explored). A counterexample is rebuilt on
concrete configurations by following, from the initial one, a successor
whose canonical form is the next representative on the path.

Nothing here is a product shortcut: the instances share variables, so the
space is searched as one (``independent_product`` is always false).
"""

from __future__ import annotations

import itertools
import math
import re
import time
from array import array
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from settled.conformance import _itf
from settled.conformance._paused import gc_paused
from settled.model import (
    Config,
    DeclarationError,
    Step,
    System,
    SystemConfig,
    SystemStep,
    Value,
    compile_machine,
    lockstep_only,
)

Progress = Callable[[int, int, float], None]
GENERATOR = "settled explore"


@dataclass(frozen=True, slots=True)
class SystemTraceStep:
    who: str  # "q0", "all" (synchronised) or "system" (the system's own step)
    trigger: str
    params: tuple[tuple[str, Value], ...]

    def text(self) -> str:
        return " ".join([self.who, self.trigger, *(f"{k}={_fmt(v)}" for k, v in self.params)])

    def to_json(self) -> dict[str, Any]:
        return {"who": self.who, "trigger": self.trigger, "params": dict(self.params)}


def _fmt(value: Value) -> str:
    return value if isinstance(value, str) else repr(value).replace(" ", "")


def label(step: SystemStep) -> SystemTraceStep:
    if step.shared is not None:
        who = "system"
    elif step.instance is not None:
        who = f"q{step.instance}"
    else:
        who = "all"
    return SystemTraceStep(who, step.trigger, tuple(sorted(step.params.items())))


@dataclass(frozen=True)
class SystemCounterexample:
    system: System
    steps: tuple[SystemTraceStep, ...]
    configs: tuple[SystemConfig, ...]

    def __len__(self) -> int:
        return len(self.steps)

    def steps_text(self) -> str:
        return "\n".join(f"{n}. {s.text()}" for n, s in enumerate(self.steps, 1))

    def _values(self, c: SystemConfig) -> dict[str, Value]:
        out: dict[str, Value] = dict(self.system.shared_view(c))
        for i, x in enumerate(c.instances):
            out[f"q{i}.state"] = x.state
            out.update({f"q{i}.{k}": v for k, v in self.system.machine.view(x).items()})
        return out

    def to_itf(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        states = [self._values(c) for c in self.configs]
        names = sorted(states[0])
        actions = [(s.trigger, {**dict(s.params), "who": s.who}) for s in self.steps]
        return _itf.itf_trace(self.system.name, names, states, actions,
                              {"status": "violation", "generator": GENERATOR,
                               "model": self.system.name, **meta})

    def to_json(self) -> dict[str, Any]:
        return {"length": len(self.steps), "steps": [s.to_json() for s in self.steps],
                "steps_text": self.steps_text()}


@dataclass(frozen=True)
class SystemFinding:
    kind: str
    name: str
    text: str
    rules: tuple[str, ...]
    counterexample: SystemCounterexample | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "name": self.name, "text": self.text,
                               "rules": list(self.rules)}
        out.update(self.counterexample.to_json() if self.counterexample else
                   {"length": None, "steps": [], "steps_text": ""})
        return out

    @property
    def file_name(self) -> str:
        return f"{self.kind}-{re.sub(r'[^A-Za-z0-9_.+-]+', '_', self.name)}.itf.json"


@dataclass
class SystemResult:
    system: str
    instances: int
    workers: int
    symmetry: bool
    states: int  # canonical representatives visited
    states_unreduced: int  # concrete configurations they stand for (orbit sizes, exact)
    edges: int  # steps taken from the visited representatives
    seconds: float
    complete: bool
    findings: list[SystemFinding] = field(default_factory=list)
    independent_product: bool = False
    # Properties no declared step can break: not passing, checked by lockstep only.
    lockstep_only: list[dict[str, Any]] = field(default_factory=list)
    # (space, keys, parent, succ_start, succ, edge masks, visited) when explored for liveness
    graph: Any = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.complete and not self.findings

    @property
    def states_per_second(self) -> float:
        return self.states / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"model": self.system, "system": True, "instances": self.instances,
                "workers": self.workers, "symmetry_reduction": self.symmetry,
                "states": self.states, "states_unreduced": self.states_unreduced,
                "edges": self.edges, "seconds": round(self.seconds, 3),
                "states_per_second": round(self.states_per_second),
                "complete": self.complete, "ok": self.ok,
                "independent_product": self.independent_product,
                "findings": [f.to_json() for f in self.findings],
                "lockstep_only": self.lockstep_only}


class _Move:
    """One local step of an instance, compiled once per (local configuration, bound values)."""

    __slots__ = ("dest", "params", "pkey", "props", "step", "trigger", "write")

    def __init__(self, step: Step, dest: int, write: tuple[Value, ...] | None,
                 props: tuple[str, ...]) -> None:
        self.step = step
        self.trigger = step.transition.trigger
        self.params = step.params
        self.pkey = tuple(sorted(step.params.items()))
        self.dest = dest
        self.write = write  # the shared machine variables after the step, if it changed them
        self.props = props  # step properties this step breaks


class _Space:
    """Interned local configurations, their compiled moves, and the symmetry group."""

    def __init__(self, system: System, symmetry: bool) -> None:
        self.system = system
        self.machine = system.machine
        self.ids: dict[Config, int] = {}
        self.configs: list[Config] = []
        self.steps: dict[Config, tuple[tuple[Step, tuple[int, ...]], ...]] = {}
        self.gen = compile_machine(self.machine)
        self.broken: list[tuple[str, ...]] = []  # per local id: broken machine invariants
        self.terminal: list[bool] = []
        self.shared_idx = system.shared_indices
        self.symmetry = symmetry
        self.perms: list[tuple[int, ...]] = [()]
        self.held = -1
        if system.worker is not None:
            _param, var = system.worker
            self.held = self.machine.variable_names.index(var)
            self.width = len(self.machine.initial_config().values[self.held])
            if symmetry:
                self.perms = list(itertools.permutations(range(self.width)))
        self.images: list[list[int]] = [[] for _ in self.perms]
        self._moves: dict[tuple[int, tuple[Value, ...]], tuple[_Move, ...]] = {}
        self._with: dict[tuple[int, tuple[Value, ...]], int] = {}
        self._held_back: dict[tuple[int, str, Any], bool] = {}
        self._shared_info: dict[tuple[Value, ...], Any] = {}
        self._canon: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._compiled: dict[tuple[int, tuple[Value, ...]], _Compiled] = {}
        self.fired: set[int] = set()  # id() of every machine transition some step took
        self.checked_shared: set[tuple[Value, ...]] = set()  # shared values domain-checked
        # (actor, trigger, params) -> a mask (``_liveness.system_classifier``): when set, every
        # edge keeps the mask of the steps it stands for, for the liveness check.
        self.classify: Callable[[str, str, Any], int] | None = None

    def intern(self, c: Config) -> int:
        i = self.ids.get(c)
        if i is None:
            i = self.ids[c] = len(self.configs)
            self.configs.append(c)
            invariants = self.machine.invariants
            self.broken.append(tuple(invariants[k].name
                                     for k in self.gen.broken_invariants(c.state, c.values)))
            self.terminal.append(c.state in self.machine.terminal_states)
            for k in range(len(self.perms)):
                self.images[k].append(-1)
        return i

    def image(self, k: int, i: int) -> int:
        j = self.images[k][i]
        if j < 0:
            c = self.configs[i]
            perm = self.perms[k]
            values = list(c.values)
            held = values[self.held]
            values[self.held] = tuple(held[perm.index(w)] for w in range(len(perm)))
            j = self.intern(Config(c.state, tuple(values)))
            self.images[k][i] = j
        return j

    def canon(self, ids: tuple[int, ...], shared: tuple[Value, ...]) -> tuple[Any, ...]:
        best = self._canon.get(ids)
        if best is None:
            best = self._canon[ids] = self.canon_ids(ids)
        return (best, shared)

    def canon_ids(self, ids: tuple[int, ...]) -> tuple[int, ...]:
        """The representative of ``ids`` under the symmetry group (the shared values are not
        permuted: they name no instance and no worker)."""
        if not self.symmetry:
            return ids
        best = tuple(sorted(ids))  # perms[0] is the identity; instances are interchangeable
        for k in range(1, len(self.perms)):
            images = self.images[k]
            moved = tuple(sorted([j if (j := images[i]) >= 0 else self.image(k, i) for i in ids]))
            if moved < best:
                best = moved
        return best

    def orbit(self, ids: tuple[int, ...]) -> int:
        """How many concrete configurations a representative with instance configurations
        ``ids`` stands for (its shared values are never permuted). Each worker permutation
        gives a multiset of instance configurations; distinct multisets give disjoint sets
        of sequences, each of n! / (product of multiplicities!) arrangements."""
        if len(self.perms) == 1:
            return _arrangements(tuple(sorted(ids)))
        forms = set()
        for k, images in enumerate(self.images):
            forms.add(tuple(sorted([j if (j := images[i]) >= 0 else self.image(k, i)
                                    for i in ids])))
        return sum(map(_arrangements, forms))

    def local(self, c: Config) -> tuple[tuple[Step, tuple[int, ...]], ...]:
        """The machine's steps from ``c`` with the step properties each breaks, from the
        successor function generated for the machine (the one ``Protocol.enabled`` and the
        single-machine explorer run)."""
        s = self.steps.get(c)
        if s is None:
            succ = self.gen.successors.get(c.state)
            labels = self.gen.labels
            s = self.steps[c] = () if succ is None else tuple(
                (Step(labels[lid][0], labels[lid][1], Config(dest, values)), bad)
                for lid, dest, values, bad in succ(c.values))
        return s

    def local_steps(self, c: Config) -> tuple[Step, ...]:
        """:meth:`local` without the broken step properties (``System.enabled``'s ``local``)."""
        return tuple(s for s, _broken in self.local(c))

    def config(self, key: tuple[Any, ...]) -> SystemConfig:
        ids, shared = key
        return SystemConfig(tuple(self.configs[i] for i in ids), shared)

    # -- compiled successor pieces -------------------------------------------------
    def moves(self, c: int, ctx: tuple[Value, ...], bound: Mapping[str, Value]) -> tuple[_Move, ...]:
        key = (c, ctx)
        m = self._moves.get(key)
        if m is None:
            cfg = self.configs[c]
            before = tuple(cfg.values[k] for k in self.shared_idx)
            names = [p.name for p in self.machine.step_properties]
            out = []
            for s, broken in self.local(cfg):
                if any(n in s.params and s.params[n] != x for n, x in bound.items()):
                    continue
                after = tuple(s.after.values[k] for k in self.shared_idx)
                props = tuple(names[k] for k in broken)
                out.append(_Move(s, self.intern(s.after), after if after != before else None, props))
            m = self._moves[key] = tuple(out)
        return m

    def compiled(self, c: int, shared: tuple[Value, ...]) -> _Compiled:
        """Instance configuration ``c``'s steps under the shared values ``shared``, once.

        Its own (non-sync) steps become (dest, write, new shared values, how many labelled
        steps lead there), one entry per distinct outcome in first-seen order: steps that
        differ only in a parameter no one reads (a fault's kind) cost one successor, and
        the discovery order, so the BFS ids and the shortest paths, stay those of the
        uncompiled search. Steps that break a step property are kept apart, one each, and
        sync steps are left to the caller: they depend on the other instances."""
        sv, bound, ctx, _own = self.shared_info(shared)
        sys = self.system
        sync = sys.sync
        plain: dict[tuple[int, tuple[Value, ...] | None, tuple[Value, ...]], int] = {}
        masks: dict[tuple[int, tuple[Value, ...] | None, tuple[Value, ...]], int] = {}
        classify = self.classify
        bad: list[tuple[int, _Move]] = []  # (index of its outcome in plain, the move)
        syncs: list[_Move] = []
        lock, cfg = sys.mutex is not None, self.configs[c]
        for mv in self.moves(c, ctx, bound):
            if mv.trigger in sync:
                syncs.append(mv)
                continue
            locked = shared
            if lock:  # the shared lock decides from this instance's own step alone
                got = sys.lock_after(shared, cfg, mv.step.after, mv.trigger)
                if got is None:
                    continue
                locked = got
            new_shared = sys.refined(mv.trigger, mv.params, sv, locked)
            if new_shared is None:
                continue
            # Taken from every reached configuration holding (c, shared): it fires.
            self.fired.add(id(mv.step.transition))
            out = (mv.dest, mv.write, new_shared)
            plain[out] = plain.get(out, 0) + 1
            if classify is not None:
                masks[out] = masks.get(out, 0) | classify(mv.step.transition.actor, mv.trigger,
                                                          mv.params)
            if mv.props:  # a finding: rare, so its slot is looked up, not kept for every move
                bad.append((list(plain).index(out), mv))
        compiled = self._compiled[(c, shared)] = (
            tuple((d, w, ns, n, masks.get((d, w, ns), 0)) for (d, w, ns), n in plain.items()),
            tuple(bad), tuple(syncs))
        return compiled

    def with_shared(self, c: int, values: tuple[Value, ...]) -> int:
        key = (c, values)
        j = self._with.get(key)
        if j is None:
            cfg = self.configs[c]
            vals = list(cfg.values)
            for k, x in zip(self.shared_idx, values, strict=True):
                vals[k] = x
            j = self._with[key] = self.intern(Config(cfg.state, tuple(vals)))
        return j

    def held_back(self, c: int, trigger: str, params: Any, pkey: Any) -> bool:
        key = (c, trigger, None if trigger in self.system.per_instance else pkey)
        h = self._held_back.get(key)
        if h is None:
            h = self._held_back[key] = self.system.held_back_any(self.configs[c], trigger, params)
        return h

    def shared_info(self, shared: tuple[Value, ...]) -> Any:
        """Per value of the system's variables: the view, the bound parameters, and the
        system's own steps."""
        info = self._shared_info.get(shared)
        if info is None:
            sys = self.system
            sv = sys.view_of_shared(shared)
            bound = {b.param: b.fn(sv) for b in sys.bind}
            own = []
            for t in sys.transitions:
                for p in t.param_choices():
                    if all(g.fn(sv, p) for g in t.guards):
                        own.append((t, p, sys.with_shared(shared, t.effect(sv, p))))
            info = self._shared_info[shared] = (sv, bound, tuple(bound.values()), tuple(own))
        return info


def _arrangements(form: tuple[int, ...]) -> int:
    """Distinct orderings of the multiset ``form`` (sorted): n! / (each run's length)!."""
    if len(form) == 2:
        return 1 if form[0] == form[1] else 2
    out, run = math.factorial(len(form)), 1
    for a, b in itertools.pairwise(form):
        if a == b:
            run += 1
        else:
            out //= math.factorial(run)
            run = 1
    return out // math.factorial(run)


# (instance ids, shared values, the moving instances' moves, the system's own step if it is one)
_Succ = tuple[tuple[int, ...], tuple[Value, ...], tuple[tuple[int, _Move], ...], Any]
_Compiled = tuple[
    tuple[tuple[int, "tuple[Value, ...] | None", tuple[Value, ...], int, int], ...],
    tuple[tuple[int, _Move], ...],
    tuple[_Move, ...]]


def _sync_and_own(sp: _Space, ids: tuple[int, ...], shared: tuple[Value, ...],
                  sync_moves: list[tuple[int, _Move]]) -> list[_Succ]:
    """The synchronised steps (``sync_moves``: every instance's sync moves, in instance
    order) and the system's own steps. Sync steps are offered sorted by (trigger,
    parameters), the order the explorer has always used; ``System.enabled`` offers them in
    the declared ``sync`` order. Only the BFS numbering depends on it: the same states,
    steps and shortest lengths are found either way."""
    sys = sp.system
    sv = sp.shared_info(shared)[0]
    out: list[_Succ] = []
    groups: dict[tuple[str, Any], list[tuple[int, _Move]]] = {}
    for i, mv in sync_moves:
        groups.setdefault((mv.trigger, None if mv.trigger in sys.per_instance else mv.pkey),
                          []).append((i, mv))
    steps: list[tuple[str, Any, Any, tuple[tuple[int, _Move], ...]]] = []
    for (trigger, pkey), group in sorted(groups.items(), key=lambda kv: repr(kv[0])):
        if pkey is not None:
            steps.append((trigger, group[0][1].params, pkey, tuple(group)))
            continue
        # Each instance chooses its own parameters: one step per combination (see System).
        by_instance: dict[int, list[tuple[int, _Move]]] = {}
        for i, mv in group:
            by_instance.setdefault(i, []).append((i, mv))
        for combo in itertools.product(*by_instance.values()):
            params = {f"q{i}.{k}": v for i, mv in combo for k, v in mv.params.items()}
            steps.append((trigger, params, tuple(sorted(params.items())), combo))
    for trigger, params, pkey, moves in steps:
        movers = {i for i, _ in moves}
        if any(sp.held_back(c, trigger, params, pkey) for j, c in enumerate(ids) if j not in movers):
            continue
        if sys.mutex is not None:  # as System._apply, first: a sync step may not move the lock
            sys.locked(SystemConfig(tuple(sp.configs[c] for c in ids), shared),
                        tuple((i, mv.step) for i, mv in moves), trigger)
        new_shared = sys.refined(trigger, params, sv, shared)
        if new_shared is None:
            continue
        new = list(ids)
        written = None
        for i, mv in moves:
            new[i] = mv.dest
            if mv.write is not None:
                if written is not None and written != mv.write:
                    raise DeclarationError(
                        f"{sys.name}: sync step {trigger!r} writes the shared variables "
                        f"{list(sys.shared)} differently on two instances; make the effects agree")
                written = mv.write
        if written is not None:
            for j in range(len(ids)):
                if j not in movers:
                    new[j] = sp.with_shared(ids[j], written)
        out.append((tuple(new), new_shared, tuple(moves), None))
    out.extend(_own(sp, ids, shared))
    return out


def _own(sp: _Space, ids: tuple[int, ...], shared: tuple[Value, ...]) -> list[_Succ]:
    """The system's own steps: only the shared values change."""
    return [(ids, new_shared, (), (t, p)) for t, p, new_shared in sp.shared_info(shared)[3]]


def explore_system(system: System, *, symmetry: bool = True, max_states: int | None = None,
                   progress: Progress | None = None,
                   classify: Callable[[str, str, Any], int] | None = None) -> SystemResult:
    """Visit every reachable configuration of ``system`` (one canonical one per orbit).
    ``classify``: keep the graph, each edge with the mask of its steps (``_liveness``)."""
    with gc_paused():  # millions of live tuples: see _paused
        return _explore_system(system, symmetry, max_states, progress, classify)


def _explore_system(system: System, symmetry: bool, max_states: int | None,
                    progress: Progress | None,
                    classify: Callable[[str, str, Any], int] | None = None) -> SystemResult:
    t0 = time.perf_counter()
    sp = _Space(system, symmetry)
    sp.classify = classify
    masks = array("q")
    init = system.initial_config()
    key0 = sp.canon(tuple(sp.intern(c) for c in init.instances), init.shared)
    index: dict[tuple[Any, ...], int] = {key0: 0}
    keys: list[tuple[Any, ...]] = [key0]
    parent = array("q", [-1])
    succ_start = array("q")
    succ = array("q")
    edges = 0
    first_bad: dict[tuple[str, str], tuple[int, int | None]] = {}  # (kind, name) -> (gid, child)
    states_seen: set[int] = set()
    domains = [frozenset(v.domain) for v in system.variables]
    complete = True
    last = t0
    g = 0
    compiled, canon_of, with_of = sp._compiled, sp._canon, sp._with
    while g < len(keys):
        if max_states is not None and len(keys) > max_states:
            complete = False
            break
        key = keys[g]
        ids, shared = key
        _check_config(system, sp, key, g, first_bad, domains)
        states_seen.update(ids)
        start = len(succ)
        succ_start.append(start)
        syncs: list[tuple[int, _Move]] = []
        targets: list[int] = []  # the state each outcome of the instance leads to
        # System.enabled's steps on interned ids: each instance's own steps compiled per
        # shared value, then the sync steps and the system's own.
        for i, c in enumerate(ids):
            plain, bad, sync_moves = compiled.get((c, shared)) or sp.compiled(c, shared)
            targets.clear()
            for dest, write, new_shared, count, mask in plain:
                if write is None:
                    new_ids = (*ids[:i], dest, *ids[i + 1:])
                else:
                    new_ids = tuple(dest if j == i else with_of.get((x, write))
                                    or sp.with_shared(x, write) for j, x in enumerate(ids))
                cids = canon_of.get(new_ids)
                if cids is None:
                    cids = canon_of[new_ids] = sp.canon_ids(new_ids)
                nk = (cids, new_shared)
                n = index.get(nk)
                if n is None:
                    n = index[nk] = len(keys)
                    keys.append(nk)
                    parent.append(g)
                succ.append(n)
                if classify is not None:
                    masks.append(mask)
                targets.append(n)
                edges += count
            for k, mv in bad:
                for name in mv.props:
                    first_bad.setdefault(("step_property", name), (g, targets[k]))
            syncs.extend((i, mv) for mv in sync_moves)
        edges += _joint_steps(sp, g, syncs, index, keys, parent, succ, masks, first_bad)
        if start == len(succ) and not all(sp.terminal[i] for i in ids):
            first_bad.setdefault(("deadlock", "deadlock"), (g, None))
        g += 1
        if progress is not None and time.perf_counter() - last > 0.2:
            last = time.perf_counter()
            progress(len(keys), len(keys) - g, last - t0)
    succ_start.append(len(succ))
    visited = g
    findings = _findings(system, sp, keys, parent, first_bad)
    if complete:
        findings.extend(_whole_space_findings(system, sp, keys, parent, succ_start, succ,
                                              states_seen))
    # Orbit sizes depend on the instances' configurations alone: count each such tuple once.
    unreduced = (sum(sp.orbit(ids) * n for ids, n in Counter(
        map(itemgetter(0), itertools.islice(keys, visited))).items()) if symmetry else visited)
    return SystemResult(system.name, system.instances, len(sp.perms[0]) if sp.perms[0] else 0,
                        symmetry, visited, unreduced, edges, time.perf_counter() - t0, complete,
                        findings, lockstep_only=lockstep_only(system.unbreakable()),
                        graph=None if classify is None else (
                            sp, keys, parent, succ_start, succ, masks, visited))


def _joint_steps(sp: _Space, g: int, syncs: list[tuple[int, _Move]],
                 index: dict[tuple[Any, ...], int], keys: list[tuple[Any, ...]], parent: array[int],
                 succ: array[int], masks: array[int],
                 first_bad: dict[tuple[str, str], tuple[int, int | None]]) -> int:
    """The synchronised steps (``syncs``: each instance's sync moves) and the system's own
    steps out of state ``g``, added to the graph; the number of edges they add."""
    ids, shared = keys[g]
    classify = sp.classify
    added = 0
    for new_ids, new_shared, moves, own in (_sync_and_own(sp, ids, shared, syncs) if syncs
                                            else _own(sp, ids, shared)):
        added += 1
        nk = sp.canon(new_ids, new_shared)
        n = index.get(nk)
        if n is None:
            n = index[nk] = len(keys)
            keys.append(nk)
            parent.append(g)
        succ.append(n)
        if classify is not None:
            masks.append(_mask(classify, moves, own))
        for _i, mv in moves:
            sp.fired.add(id(mv.step.transition))
            for name in mv.props:
                first_bad.setdefault(("step_property", name), (g, n))
    return added


def _whole_space_findings(system: System, sp: _Space, keys: list[tuple[Any, ...]],
                          parent: array[int], succ_start: array[int], succ: array[int],
                          states_seen: set[int]) -> list[SystemFinding]:
    """What only a complete search may say: a trap, the states no instance reaches and the
    transitions no instance fires."""
    machine = system.machine
    findings: list[SystemFinding] = []
    trapped = _traps(sp, keys, succ_start, succ)
    if trapped is not None:
        findings.append(SystemFinding("trap", "trap", _TEXT["trap"], (),
                                      _counterexample(system, sp, keys, parent, trapped)))
    reached = {sp.configs[i].state for i in states_seen}
    findings.extend(SystemFinding("unreached_state", st, f"no instance ever reaches state {st!r}",
                                  ()) for st in machine.state_names if st not in reached)
    findings.extend(SystemFinding("unfired_transition", t.trigger,
                                  f"{t.trigger} from {list(t.source)} never fires in any instance",
                                  t.rules) for t in machine.transitions if id(t) not in sp.fired)
    return findings


def _mask(classify: Callable[[str, str, Any], int], moves: tuple[tuple[int, _Move], ...],
          own: Any) -> int:
    """The mask of a sync step (its movers share trigger and parameters) or an own step."""
    if moves:
        mv = moves[0][1]
        return classify(mv.step.transition.actor, mv.trigger, mv.params)
    t, p = own
    return classify(t.actor, t.trigger, p)


def _findings(system: System, sp: _Space, keys: list[tuple[Any, ...]], parent: array[int],
              first_bad: dict[tuple[str, str], tuple[int, int | None]]) -> list[SystemFinding]:
    machine = system.machine
    meta = {"invariant": {i.name: (i.rules, i.text) for i in machine.invariants},
            "system_invariant": {i.name: (i.rules, i.text) for i in system.invariants},
            "step_property": {p.name: (p.rules, p.text) for p in machine.step_properties}}
    out = []
    for (kind, name), (gid, child) in sorted(first_bad.items(), key=lambda kv: (kv[1][0], kv[0])):
        r, text = meta.get(kind, {}).get(name, ((), _TEXT.get(kind, name)))
        last = (keys[child], name) if child is not None else None
        out.append(SystemFinding(kind, name, text, tuple(r),
                                 _counterexample(system, sp, keys, parent, gid, last)))
    return out


_TEXT = {"deadlock": "a configuration where not every instance is terminal and no step is enabled",
         "trap": "a configuration from which no all-terminal configuration can be reached",
         "domain": "a system variable outside its declared domain"}


def _bad_props(machine: Any, before: Config, s: Step, after: Config,
               memo: dict[tuple[int, int, Any, int], tuple[str, ...]], sp: _Space) -> tuple[str, ...]:
    if not machine.step_properties:
        return ()
    pk = (sp.intern(before), id(s.transition), tuple(s.params.items()), sp.intern(after))
    bad = memo.get(pk)
    if bad is None:
        b, a = machine.snapshot(before), machine.snapshot(after)
        bad = memo[pk] = tuple(p.name for p in machine.step_properties
                               if not p.fn(b, s.transition, s.params, a))
    return bad


def _check_config(system: System, sp: _Space, key: tuple[Any, ...], g: int,
                  first_bad: dict[tuple[str, str], tuple[int, int | None]],
                  domains: list[frozenset[Value]]) -> None:
    ids = key[0]
    for i in ids:
        for name in sp.broken[i]:
            first_bad.setdefault(("invariant", name), (g, None))
    if system.invariants:
        for inv in system.broken_invariants(sp.config(key)):
            first_bad.setdefault(("system_invariant", inv.name), (g, None))
    shared = key[1]
    if shared in sp.checked_shared:
        return
    sp.checked_shared.add(shared)  # first seen here, so g is the first state that has it
    for v, x, dom in zip(system.variables, shared, domains, strict=True):
        if x not in dom:
            first_bad.setdefault(("domain", v.name), (g, None))


def _traps(sp: _Space, keys: list[tuple[Any, ...]], start: array[int], succ: array[int]) -> int | None:
    """The first (BFS order) configuration that cannot reach an all-terminal one, if any.

    Exact, in two parts. First one pass in reverse BFS order: a configuration is good when
    it is all-terminal or one of its successors is already known good (most successors
    come later in BFS order, so this settles nearly every configuration, at the cost of
    one look per configuration until its first good successor). Then a backward search
    from the good ones over the edges of the configurations still open, which finds the
    rest (a good successor with a smaller number, seen only after them)."""
    n = len(keys)
    good = bytearray(n)
    terminal = sp.terminal
    for g in range(n - 1, -1, -1):
        for k in range(start[g], start[g + 1]):
            if good[succ[k]]:
                good[g] = 1
                break
        else:
            if all(terminal[i] for i in keys[g][0]):
                good[g] = 1
    rev: dict[int, list[int]] = {}
    queue: deque[int] = deque()
    for g in range(n):
        if good[g]:
            continue
        for k in range(start[g], start[g + 1]):
            d = succ[k]
            if good[d]:
                if not good[g]:
                    good[g] = 1
                    queue.append(g)
            else:
                rev.setdefault(d, []).append(g)
    while queue:
        for p in rev.get(queue.popleft(), ()):
            if not good[p]:
                good[p] = 1
                queue.append(p)
    return next((g for g in range(n) if not good[g]), None)


def _counterexample(system: System, sp: _Space, keys: list[tuple[Any, ...]], parent: array[int],
                    target: int, last: tuple[tuple[Any, ...], str] | None = None
                    ) -> SystemCounterexample:
    """A concrete shortest run to (a configuration in the orbit of) ``keys[target]``; with
    ``last``, one more step into the orbit of ``last[0]`` that breaks step property ``last[1]``."""
    chain = []
    g = target
    while g >= 0:
        chain.append(keys[g])
        g = parent[g]
    chain.reverse()
    cfg = system.initial_config()
    configs = [cfg]
    steps: list[SystemTraceStep] = []
    for nxt in chain[1:]:
        for step in system.enabled(cfg, sp.local_steps):
            a = step.after
            if sp.canon(tuple(sp.intern(c) for c in a.instances), a.shared) == nxt:
                steps.append(label(step))
                cfg = a
                configs.append(cfg)
                break
        else:  # pragma: no cover - the canonical path always has a concrete witness
            raise AssertionError(f"{system.name}: no concrete step to a path state")
    if last is not None:
        for step in system.enabled(cfg, sp.local_steps):
            a = step.after
            if sp.canon(tuple(sp.intern(c) for c in a.instances), a.shared) != last[0]:
                continue
            if any(last[1] in _bad_props(system.machine, cfg.instances[i], s, a.instances[i], {}, sp)
                   for i, s in step.moves):
                steps.append(label(step))
                configs.append(a)
                break
        else:  # pragma: no cover
            raise AssertionError(f"{system.name}: no concrete step breaking {last[1]}")
    return SystemCounterexample(system, tuple(steps), tuple(configs))


_LINE = re.compile(r"^\s*(?:\d+\.\s*)?(?P<who>q\d+|all|system)\s+(?P<trigger>\S+)(?P<rest>.*)$")


def replay_system(system: System, text: str) -> list[SystemConfig]:
    """Replay a numbered step list (as ``steps_text`` prints it); a ValueError names the step
    that is not enabled."""
    cfg = system.initial_config()
    out = [cfg]
    for n, line in enumerate((x for x in text.splitlines() if x.strip()), 1):
        m = _LINE.match(line)
        if not m:
            raise ValueError(f"step {n}: cannot read {line!r}; expected 'q0 trigger k=v ...'")
        want = SystemTraceStep(m["who"], m["trigger"], tuple(sorted(
            (k, _parse(v)) for k, v in (kv.split("=", 1) for kv in m["rest"].split()))))
        for step in system.enabled(cfg):
            if label(step) == want:
                cfg = step.after
                out.append(cfg)
                break
        else:
            raise ValueError(f"step {n} ({line.strip()}) is not enabled here")
    return out


def _parse(x: str) -> Value:
    if x in ("True", "False"):
        return x == "True"
    if re.fullmatch(r"-?\d+", x):
        return int(x)
    return x
