"""Liveness under fairness, checked on the explored graph: fair cycles as lassos.

What is checked
---------------
Each declared progress property ``premise ~> goal`` (``model/_liveness``,
``model/progress``) under the declared fairness. It is violated when a fair
infinite run reaches a premise configuration and never a goal one after it.
On the finite reachable graph such a run ends in a *fair cycle* of
configurations outside the goal, reached from a premise configuration
without passing the goal. Every configuration may also stutter (nothing
happens any more, as in TLA+): that is the cycle a run stuck in a state
takes, and it is fair only where no step that fairness requires is enabled.

The search (Emerson–Lei style): restrict the graph to the configurations
outside the goal reachable from a premise one without the goal; split it
into strongly connected components (Tarjan); a component is fair when for
each weak or strong constraint some step of its group stays inside it, or,
weak, one of its configurations has no step of the group enabled, or,
strong, none has. A component that fails a weak constraint has every
configuration enabling that group and no such step inside, so no cycle in it
is fair: it is dropped. One that fails a strong constraint loses the
configurations that enable the group, and the rest is split again. What
remains are fair components; any one gives a lasso.

A violation is a lasso: the shortest prefix from the initial configuration
to the cycle (through a premise configuration, then outside the goal), and a
cycle through the component that takes one step of every group whose
constraint a step satisfies and visits a configuration that disables every
weakly fair group no step satisfies. It is printed as numbered steps (the
cycle after ``then forever``) and written as ITF with ``loop`` set.

Model bounds
------------
A guard marked ``bound`` (``epochs_left``) only keeps the space finite. A
fair cycle that is fair only because a bound holds back a required step is
not a violation of the protocol: it is reported apart, as *stuck at a
bound*, with the guards that hold it. A held-back step counts as "would be
enabled" when, taken with its bound ignored, it moves the control state or
leads to a configuration where a step that fairness requires is enabled
(one step of lookahead: a
held-back claim that only leads to another held-back claim does not excuse
the cycle). Known limit: a run that would need two or more steps past a
bound before anything it requires is enabled is reported as a violation.

Systems are checked on the symmetry-reduced graph: fairness groups and
progress predicates are invariant under renaming instances and workers
(validated: a group may not name worker values), so a fair cycle of the
quotient is a fair run of the system. The lasso is rebuilt on concrete
configurations; where the cycle returns to its first configuration only up
to a renaming, it is unrolled until it returns exactly.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from typing import Protocol as Interface

from ...model._core import Config, Params, Protocol, Transition, Value
from ...model._liveness import STRONG, WEAK, Liveness, Pred
from ...model._liveness import Progress as ProgressProperty
from .. import _itf
from .._counterexample import GENERATOR, to_plain

HOLDS, VIOLATED, AT_BOUND, NOT_CHECKED = "holds", "violated", "stuck_at_bound", "not_checked"
# A step's mask: bit i for the i-th required group it belongs to; in a system's edge masks
# also CYCLIC (a step of no finite group) or ONCE (a step of a finite group).
CYCLIC, ONCE = 1 << 60, 1 << 61
REQUIRED = CYCLIC - 1


class _Step(Interface):
    def text(self) -> str: ...
    def to_json(self) -> dict[str, Any]: ...


# --------------------------------------------------------------------------
# The graph the check runs on
# --------------------------------------------------------------------------
class Graph:
    """Nodes ``0..n-1`` (0 initial); ``succ[u]``: (v, group mask) for each v != u, the masks
    of every step u -> v ORed; ``selfmask[u]``: the masks of u's real self-loops;
    ``enabled[u]``: the masks of every step enabled in u. Bit i is the i-th required
    fairness constraint. Subclasses say how to show a node and a step."""

    def __init__(self, kinds: tuple[str, ...]) -> None:
        self.kinds = kinds
        self.succ: list[list[tuple[int, int]]] = []
        # Successors reached only by a step of a finite group: on a prefix, never in a cycle.
        self.fsucc: list[list[int]] = []
        self.selfmask: list[int] = []
        self.enabled: list[int] = []
        self._held: dict[int, tuple[int, tuple[str, ...]]] = {}

    def __len__(self) -> int:
        return len(self.succ)

    # -- for subclasses ------------------------------------------------------------
    def held(self, u: int) -> tuple[int, tuple[str, ...]]:
        """(mask of required groups held back in ``u`` by a model bound alone, where taking
        the step would enable a required step; the bound guards' names)."""
        got = self._held.get(u)
        if got is None:
            got = self._held[u] = self._held_back(u)
        return got

    def _held_back(self, u: int) -> tuple[int, tuple[str, ...]]:
        return 0, ()

    def holds(self, pred: Pred, u: int) -> bool:
        raise NotImplementedError

    def step(self, u: int, v: int, need: int, cyclic: bool = False
             ) -> tuple[_Step, tuple[str, dict[str, Any]]]:
        """A step from u to v in every group of ``need`` (``cyclic``: not of a finite group):
        (shown step, ITF action)."""
        raise NotImplementedError

    def out(self, u: int) -> Iterator[int]:
        """Every successor of ``u``, by any step."""
        for v, _m in self.succ[u]:
            yield v
        yield from self.fsucc[u]

    def values(self, u: int) -> dict[str, Value]:
        raise NotImplementedError

    def var_names(self) -> list[str]:
        raise NotImplementedError

    def lasso(self, prefix: list[int], cycle: list[tuple[int, int, int]], meta: dict[str, Any]
              ) -> Lasso:
        """The lasso through node ids: ``cycle`` is (u, v, needed mask) steps from
        ``prefix[-1]`` back to it (empty: it stutters there)."""
        steps = [self.step(a, b, 0) for a, b in itertools.pairwise(prefix)]
        loop = [self.step(a, b, m, True) for a, b, m in cycle]
        nodes = [*prefix, *(b for _a, b, _m in cycle[:-1])]
        return Lasso(self.name(), tuple(s for s, _ in steps), tuple(s for s, _ in loop),
                     tuple(self.values(u) for u in nodes),
                     tuple(a for _, a in (*steps, *loop)), len(prefix) - 1, self.var_names(),
                     meta)

    def name(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Lasso:
    """A run that repeats forever: ``prefix`` then ``cycle`` (empty: nothing happens any
    more). ``states`` are the prefix's states and the cycle's, the cycle's first state at
    index ``loop`` (the state after the prefix; the cycle's last step returns to it)."""

    model: str
    prefix: tuple[_Step, ...]
    cycle: tuple[_Step, ...]
    states: tuple[dict[str, Value], ...]
    actions: tuple[tuple[str, dict[str, Any]], ...]
    loop: int
    vars: list[str]
    meta: dict[str, Any] = field(default_factory=dict)

    def steps_text(self) -> str:
        lines = [f"{n}. {s.text()}" for n, s in enumerate(self.prefix, 1)]
        if not self.cycle:
            lines.append("then forever: nothing happens (no step that fairness requires is "
                         "enabled here)")
        else:
            first = len(self.prefix) + 1
            lines.append(f"then forever (steps {first}-{first + len(self.cycle) - 1} return to "
                         f"the state after step {len(self.prefix)}):")
            lines += [f"{n}. {s.text()}" for n, s in enumerate(self.cycle, first)]
        return "\n".join(lines)

    def to_itf(self) -> dict[str, Any]:
        closing = (self.cycle[-1].text() if self.cycle else "stutter")
        meta = {"status": "violation", "generator": GENERATOR, "model": self.model,
                **self.meta, "loop_closes_with": closing}
        return _itf.itf_trace(self.model, self.vars, list(self.states),
                              list(self.actions[:len(self.states) - 1]), meta, loop=self.loop)

    def to_json(self) -> dict[str, Any]:
        return {"prefix": [s.to_json() for s in self.prefix],
                "cycle": [s.to_json() for s in self.cycle], "loop": self.loop,
                "length": len(self.prefix) + len(self.cycle), "steps_text": self.steps_text()}


@dataclass
class Verdict:
    """One progress property: ``holds``, ``violated`` (with a lasso), ``stuck_at_bound``
    (only a model bound keeps a required step from being taken; with that lasso and the
    guards), or ``not_checked`` (the space was not explored completely)."""

    prop: ProgressProperty
    verdict: str
    lasso: Lasso | None = None
    at_bound: Lasso | None = None
    bounds: tuple[str, ...] = ()
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.prop.name, "formula": self.prop.formula(), "text": self.prop.text,
                "rules": list(self.prop.rules), "verdict": self.verdict, "why": self.why,
                "lasso": self.lasso.to_json() if self.lasso else None,
                "stuck_at_bound": ({**self.at_bound.to_json(), "bounds": list(self.bounds)}
                                   if self.at_bound else None)}


@dataclass
class LivenessResult:
    model: str
    liveness: Liveness
    verdicts: list[Verdict]
    seconds: float
    complete: bool

    @property
    def ok(self) -> bool:
        return self.complete and all(v.verdict in (HOLDS, AT_BOUND) for v in self.verdicts)

    @property
    def violated(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.verdict == VIOLATED]

    def fairness_json(self) -> list[dict[str, Any]]:
        return [{"name": f.name, "kind": f.kind, "steps": f.steps.text(), "words": f.words(),
                 "text": f.text, "rules": list(f.rules)} for f in self.liveness.fairness]

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "ok": self.ok, "complete": self.complete,
                "seconds": round(self.seconds, 3), "fairness": self.fairness_json(),
                "properties": [v.to_json() for v in self.verdicts]}

    def text(self) -> str:
        out = [f"progress ({self.model}), under this fairness:"]
        out += [f"  {f.name}: {f.words()}" for f in self.liveness.fairness]
        for v in self.verdicts:
            out.append(f"{v.verdict.upper()} {v.prop.name} ({', '.join(v.prop.rules)}): "
                       f"{v.prop.formula()}")
            if v.why:
                out.append(f"  {v.why}")
            if v.lasso is not None:
                out.append(v.lasso.steps_text())
            if v.at_bound is not None:
                out.append(f"stuck at a model bound ({', '.join(v.bounds)}), not a violation:")
                out.append(v.at_bound.steps_text())
        return "\n".join(out)

    def write_itf(self, directory: Any) -> list[Any]:
        from pathlib import Path

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for v in self.verdicts:
            for kind, lasso in (("liveness", v.lasso), ("stuck_at_bound", v.at_bound)):
                if lasso is not None:
                    written.append(_itf.write_itf(out / f"{kind}-{v.prop.name}.itf.json",
                                                  lasso.to_itf()))
        return written


# --------------------------------------------------------------------------
# The search
# --------------------------------------------------------------------------
def _tarjan(succ: list[list[tuple[int, int]]], nodes: Sequence[int],
            member: bytearray, index: list[int]) -> list[list[int]]:
    """Strongly connected components of the graph restricted to ``nodes`` (iterative).

    ``member`` marks ``nodes`` (1) and ``index`` is -1 for every node; both are left as they
    were found (the arrays are the graph's, reused by every call)."""
    low: dict[int, int] = {}
    on: set[int] = set()
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in nodes:
        if index[root] >= 0:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        work: list[tuple[int, Iterator[tuple[int, int]]]] = [(root, iter(succ[root]))]
        while work:
            u, it = work[-1]
            for v, _m in it:
                if not member[v]:
                    continue
                iv = index[v]
                if iv < 0:
                    index[v] = low[v] = counter
                    counter += 1
                    stack.append(v)
                    on.add(v)
                    work.append((v, iter(succ[v])))
                    break
                if iv < low[u] and v in on:
                    low[u] = iv
            else:
                work.pop()
                lu = low[u]
                if work:
                    p = work[-1][0]
                    if lu < low[p]:
                        low[p] = lu
                if lu == index[u]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == u:
                            break
                    out.append(comp)
    for u in nodes:
        index[u] = -1
    return out


def fair_components(g: Graph, region: Sequence[int], enabled: Callable[[int], int]
                    ) -> list[list[int]]:
    """The fair strongly connected pieces of ``region`` (Emerson–Lei), every node with its
    stutter self-loop: each holds a cycle that satisfies every constraint at once."""
    kinds = g.kinds
    allbits = (1 << len(kinds)) - 1
    out: list[list[int]] = []
    work = [list(region)]
    member, index = bytearray(len(g)), [-1] * len(g)
    while work:
        nodes = work.pop()
        for u in nodes:
            member[u] = 1
        comps = _tarjan(g.succ, nodes, member, index)
        for u in nodes:
            member[u] = 0
        for comp in comps:
            if len(comp) == 1:
                u = comp[0]
                if not enabled(u) & allbits & ~g.selfmask[u]:
                    out.append(comp)
                continue
            inside = set(comp)
            inner = 0
            for u in comp:
                inner |= g.selfmask[u]
                for v, m in g.succ[u]:
                    if v in inside:
                        inner |= m
            drop, remove = False, set()
            for i, kind in enumerate(kinds):
                bit = 1 << i
                if inner & bit:
                    continue
                on = [u for u in comp if enabled(u) & bit]
                if kind == WEAK and len(on) == len(comp):
                    drop = True
                    break
                if kind == STRONG:
                    remove.update(on)
            if drop:
                continue
            if remove:
                rest = [u for u in comp if u not in remove]
                if rest:
                    work.append(rest)
                continue
            out.append(comp)
    return out


def _region(g: Graph, premise: list[bool], goal: list[bool]) -> list[int]:
    """Nodes outside the goal reachable from a premise node outside the goal, not through
    the goal."""
    seen = [False] * len(g)
    queue = deque(u for u in range(len(g)) if premise[u] and not goal[u])
    for u in queue:
        seen[u] = True
    out = []
    while queue:
        u = queue.popleft()
        out.append(u)
        for v in g.out(u):
            if not seen[v] and not goal[v]:
                seen[v] = True
                queue.append(v)
    return out


def _prefix(g: Graph, targets: set[int], premise: list[bool], goal: list[bool]) -> list[int]:
    """Shortest path from node 0 to a target, through a premise node and then outside the
    goal (phase 1 = the premise was seen and the goal not since)."""
    start = (0, premise[0] and not goal[0])
    parent: dict[tuple[int, bool], tuple[int, bool] | None] = {start: None}
    queue = deque([start])
    while queue:
        cur = queue.popleft()
        u, armed = cur
        if armed and u in targets:
            path = []
            node: tuple[int, bool] | None = cur
            while node is not None:
                path.append(node[0])
                node = parent[node]
            return path[::-1]
        for v in g.out(u):
            if armed and goal[v]:
                continue
            nxt = (v, armed or (premise[v] and not goal[v]))
            if nxt not in parent:
                parent[nxt] = cur
                queue.append(nxt)
    raise AssertionError("a fair component outside the goal is always reachable")


def _path_within(g: Graph, member: set[int], a: int, b: int) -> list[int]:
    if a == b:
        return [a]
    parent = {a: a}
    queue = deque([a])
    while queue:
        u = queue.popleft()
        for v, _m in g.succ[u]:
            if v in member and v not in parent:
                parent[v] = u
                if v == b:
                    path = [b]
                    while path[-1] != a:
                        path.append(parent[path[-1]])
                    return path[::-1]
                queue.append(v)
    raise AssertionError("a component is strongly connected")


def _cycle(g: Graph, comp: list[int], entry: int, enabled: Callable[[int], int]
           ) -> list[tuple[int, int, int]]:
    """A fair cycle from ``entry`` through ``comp``: a step of each group some step inside
    satisfies, a node disabling each weak group no step satisfies; back to ``entry``."""
    member = set(comp)
    items: list[tuple[int, int, int]] = []  # (u, v, bit) an edge; (u, -1, 0) a node
    for i, kind in enumerate(g.kinds):
        bit = 1 << i
        edge = next(((u, u) for u in comp if g.selfmask[u] & bit), None) or next(
            ((u, v) for u in comp for v, m in g.succ[u] if v in member and m & bit), None)
        if edge is not None:
            items.append((edge[0], edge[1], bit))
        elif kind == WEAK:
            off = entry if not enabled(entry) & bit else next(
                u for u in comp if not enabled(u) & bit)
            items.append((off, -1, 0))
    items.sort(key=lambda x: (x[0] != entry, x[0]))
    steps: list[tuple[int, int, int]] = []
    at = entry
    for u, v, bit in items:
        path = _path_within(g, member, at, u)
        steps += [(a, b, 0) for a, b in itertools.pairwise(path)]
        at = u
        if v >= 0:
            steps.append((u, v, bit))
            at = v
    path = _path_within(g, member, at, entry)
    steps += [(a, b, 0) for a, b in itertools.pairwise(path)]
    return steps


def check_graph(g: Graph, liveness: Liveness, model: str, complete: bool = True,
                meta: dict[str, Any] | None = None) -> LivenessResult:
    """Every progress property of ``liveness`` on ``g``."""
    t0 = time.perf_counter()
    verdicts = []
    for prop in liveness.progress:
        if not complete:
            verdicts.append(Verdict(prop, NOT_CHECKED, why="the space was not explored "
                                    "completely (--max-states): no liveness verdict"))
            continue
        verdicts.append(_check(g, prop, liveness, model, dict(meta or {})))
    return LivenessResult(model, liveness, verdicts, time.perf_counter() - t0, complete)


def _check(g: Graph, prop: ProgressProperty, liveness: Liveness, model: str,
           meta: dict[str, Any]) -> Verdict:
    premise = [g.holds(prop.premise, u) for u in range(len(g))]
    goal = [g.holds(prop.goal, u) for u in range(len(g))]
    region = _region(g, premise, goal)
    if not region:
        return Verdict(prop, HOLDS, why="" if any(premise) else
                       "the premise holds in no reachable configuration (vacuous)")
    enabled = g.enabled.__getitem__
    fair = fair_components(g, region, enabled)
    if not fair:
        return Verdict(prop, HOLDS)

    def lifted(u: int) -> int:
        return g.enabled[u] | g.held(u)[0]

    real = [c for comp in fair for c in fair_components(g, comp, lifted)]
    m = {**meta, "kind": "liveness", "property": prop.name, "rules": list(prop.rules),
         "description": f"{prop.formula()}: {prop.text}",
         "fairness": [f.words() for f in liveness.fairness]}
    if real:
        return Verdict(prop, VIOLATED, lasso=_lasso(g, real, premise, goal, enabled, m),
                       why="a fair run reaches the premise and never the goal")
    lasso = _lasso(g, fair, premise, goal, enabled, {**m, "kind": "stuck_at_bound"})
    nodes = {u for comp in fair for u in comp}
    bounds = tuple(sorted({b for u in nodes for b in g.held(u)[1]}))
    return Verdict(prop, AT_BOUND, at_bound=lasso, bounds=bounds,
                   why="only a model bound keeps a required step from being taken "
                       f"({', '.join(bounds)}); a larger bound lets the run go on")


def _lasso(g: Graph, comps: list[list[int]], premise: list[bool], goal: list[bool],
           enabled: Callable[[int], int], meta: dict[str, Any]) -> Lasso:
    owner = {u: k for k, comp in enumerate(comps) for u in comp}
    prefix = _prefix(g, set(owner), premise, goal)
    entry = prefix[-1]
    return g.lasso(prefix, _cycle(g, comps[owner[entry]], entry, enabled), meta)


# --------------------------------------------------------------------------
# One machine: the explorer's local space
# --------------------------------------------------------------------------
def classifier(liveness: Liveness) -> Callable[[str, str, Params], int]:
    required = liveness.required

    def mask(actor: str, trigger: str, params: Params) -> int:
        out = 0
        for i, f in enumerate(required):
            if f.steps.matches(actor, trigger, params):
                out |= 1 << i
        return out
    return mask


@dataclass(frozen=True, slots=True)
class MachineStep:
    trigger: str
    params: tuple[tuple[str, Value], ...]

    def text(self) -> str:
        from .._counterexample import TraceStep

        return TraceStep(0, self.trigger, self.params).text()

    def to_json(self) -> dict[str, Any]:
        return {"instance": 0, "trigger": self.trigger,
                "params": {k: to_plain(v) for k, v in self.params}}


class MachineGraph(Graph):
    """The reachable configurations of one machine (the explorer's ``_Local``)."""

    def __init__(self, local: Any, liveness: Liveness) -> None:
        super().__init__(tuple(f.kind for f in liveness.required))
        self.local = local
        p: Protocol = local.protocol
        self.protocol = p
        classify = classifier(liveness)
        self.classify = classify
        finite = liveness.finite
        self.finite: Callable[[str, str, Params], bool] = lambda a, t, prm: any(
            f.steps.matches(a, t, prm) for f in finite)
        cache: dict[tuple[int, tuple[tuple[str, Value], ...]], int] = {}
        fcache: dict[tuple[int, tuple[tuple[str, Value], ...]], bool] = {}
        labels, dest = local.labels, local.label_dest
        self._masks: list[int] = []
        for c in range(local.expanded):
            en = selfm = 0
            out: dict[int, int] = {}
            fout: set[int] = set()
            for lab in local.labels_from(c):
                t, params = labels[lab]
                key = (id(t), tuple(params.items()))
                m = cache.get(key)
                if m is None:
                    m = cache[key] = classify(t.actor, t.trigger, params)
                en |= m
                d = dest[lab]
                fin = fcache.get(key)
                if fin is None:
                    fin = fcache[key] = self.finite(t.actor, t.trigger, params)
                if fin:
                    if d != c:
                        fout.add(d)
                elif d == c:
                    selfm |= m
                else:
                    out[d] = out.get(d, 0) | m
            self.succ.append(list(out.items()))
            self.fsucc.append(sorted(fout - out.keys()))
            self.selfmask.append(selfm)
            self.enabled.append(en)
        self._preds: dict[int, Callable[[str, tuple[Value, ...]], bool]] = {}

    def name(self) -> str:
        return self.protocol.name

    def holds(self, pred: Pred, u: int) -> bool:
        fn = self._preds.get(id(pred))
        if fn is None:
            fn = self._preds[id(pred)] = pred.compile(self.protocol.variable_names)
        c = self.local.configs[u]
        return fn(c.state, c.values)

    def step(self, u: int, v: int, need: int, cyclic: bool = False
             ) -> tuple[_Step, tuple[str, dict[str, Any]]]:
        local = self.local
        for lab in local.labels_from(u):
            t, params = local.labels[lab]
            if local.label_dest[lab] == v and (
                    self.classify(t.actor, t.trigger, params) & need) == need and not (
                    cyclic and self.finite(t.actor, t.trigger, params)):
                return (MachineStep(t.trigger, tuple(params.items())),
                        (t.trigger, {**dict(params), "instance": 0}))
        raise AssertionError(f"no step {u} -> {v}")

    def values(self, u: int) -> dict[str, Value]:
        c: Config = self.local.configs[u]
        return {"q0.state": c.state, **{f"q0.{k}": x for k, x in self.protocol.view(c).items()}}

    def var_names(self) -> list[str]:
        return ["q0.state", *(f"q0.{n}" for n in self.protocol.variable_names)]

    def _held_back(self, u: int) -> tuple[int, tuple[str, ...]]:
        return held_in(self.protocol, self.classify, self.local.configs[u], self.enabled[u])


def held_in(p: Protocol, classify: Callable[[str, str, Params], int], c: Config,
            enabled: int) -> tuple[int, tuple[str, ...]]:
    """The required groups a model bound alone holds back in ``c`` (where taking the step
    would move on), and the bound guards' names."""
    v = p.view(c)
    mask, names = 0, set[str]()
    for t in p.transitions_from(c.state):
        bounds = [g for g in t.guards if g.bound]
        if not bounds:
            continue
        for params in t.param_choices():
            m = classify(t.actor, t.trigger, params) & REQUIRED
            if not m or m & enabled == m:
                continue
            if not all(g.fn(v, params) for g in t.guards if not g.bound):
                continue
            stopping = [g.name for g in bounds if not g.fn(v, params)]
            if stopping and _leads_to_required(p, classify, c, t, params):
                mask |= m
                names.update(stopping)
    return mask, tuple(sorted(names))


def _leads_to_required(p: Protocol, classify: Callable[[str, str, Params], int], c: Config,
                       t: Transition, params: Params) -> bool:
    """Taken with its bound ignored, does ``t`` move the control state, or lead where a
    required step is enabled?"""
    v = p.view(c)
    after = Config(t.target(c.state), p.replace(c, t.effect(v, params)))
    return after.state != c.state or any(
        classify(s.transition.actor, s.transition.trigger, s.params) & REQUIRED
        for s in p.enabled(after))


def check_machine(result: Any, liveness: Liveness | None = None) -> LivenessResult:
    """The progress properties of the machine of an explore result (one instance)."""
    from ...model.progress import liveness_of

    space = result._space
    local = space.local
    live = liveness or liveness_of(local.protocol)
    if space.n != 1:
        raise ValueError("check_machine: liveness is checked on one instance of a machine; "
                         "use the declared system for several")
    graph = MachineGraph(local, live)
    return check_graph(graph, live, local.protocol.name, result.complete,
                       {"bounds": to_plain(result.bounds)})


def check_protocol(protocol: Protocol, liveness: Liveness | None = None) -> LivenessResult:
    """Explore ``protocol`` (one instance) and check its progress properties."""
    from .._explore import explore

    return check_machine(explore(protocol), liveness)


# --------------------------------------------------------------------------
# A system: the symmetry-reduced graph the system explorer keeps
# --------------------------------------------------------------------------
def system_classifier(liveness: Liveness) -> Callable[[str, str, Params], int]:
    """A step's mask for the system explorer: required groups, plus CYCLIC or ONCE."""
    required = classifier(liveness)
    finite = liveness.finite

    def mask(actor: str, trigger: str, params: Params) -> int:
        once = any(f.steps.matches(actor, trigger, params) for f in finite)
        return required(actor, trigger, params) | (ONCE if once else CYCLIC)
    return mask


class SystemGraph(Graph):
    """The canonical configurations a system explorer visited, with its edge masks."""

    def __init__(self, system: Any, graph: Any, liveness: Liveness) -> None:
        super().__init__(tuple(f.kind for f in liveness.required))
        sp, keys, _parent, start, succ, masks, visited = graph
        self.system, self.sp, self.keys = system, sp, keys
        self.classify = system_classifier(liveness)
        for g in range(visited):
            en = selfm = 0
            out: dict[int, int] = {}
            fout: set[int] = set()
            a, b = start[g], start[g + 1]
            for n, m in zip(succ[a:b], masks[a:b], strict=True):
                en |= m & REQUIRED
                if not m & CYCLIC:
                    if n != g:
                        fout.add(n)
                elif n == g:
                    selfm |= m & REQUIRED
                else:
                    out[n] = out.get(n, 0) | (m & REQUIRED)
            self.succ.append(list(out.items()))
            self.fsucc.append(sorted(fout - out.keys()))
            self.selfmask.append(selfm)
            self.enabled.append(en)
        self._preds: dict[int, Any] = {}

    def name(self) -> str:
        return str(self.system.name)

    def holds(self, pred: Pred, u: int) -> bool:
        got = self._preds.get(id(pred))
        if got is None:
            fn = pred.compile(self.system.machine.variable_names)
            each = [fn(c.state, c.values) for c in self.sp.configs]  # per instance config
            shared_ok = Pred(where=pred.system).compile(self.system.variable_names)
            seen0: dict[Any, bool] = {}
            got = self._preds[id(pred)] = (each, seen0, shared_ok, pred.instances == "some")
        each, seen, shared_ok, some = got
        ids, shared = self.keys[u]
        ok = seen.get(shared)
        if ok is None:
            ok = seen[shared] = shared_ok("", shared)
        if not ok:
            return False
        return any(each[i] for i in ids) if some else all(each[i] for i in ids)

    def _held_back(self, u: int) -> tuple[int, tuple[str, ...]]:
        mask, names = 0, set[str]()
        m = self.system.machine
        for i in self.keys[u][0]:
            got, why = held_in(m, self.classify, self.sp.configs[i], self.enabled[u])
            mask |= got
            names.update(why)
        return mask, tuple(sorted(names))

    def var_names(self) -> list[str]:
        m = self.system.machine
        return sorted([*self.system.variable_names,
                       *(f"q{i}.{n}" for i in range(self.system.instances)
                         for n in ("state", *m.variable_names))])

    def values(self, u: int) -> dict[str, Value]:
        raise NotImplementedError  # a system's lasso is rebuilt on concrete configurations

    def lasso(self, prefix: list[int], cycle: list[tuple[int, int, int]], meta: dict[str, Any]
              ) -> Lasso:
        from .._system import SystemCounterexample, label

        system, sp = self.system, self.sp
        cfg = system.initial_config()
        configs, steps = [cfg], []

        def walk(target: int, need: int, cyclic: bool) -> None:
            nonlocal cfg
            for st in system.enabled(cfg, sp.local_steps):
                a = st.after
                if sp.canon(tuple(sp.intern(c) for c in a.instances), a.shared) != \
                        self.keys[target]:
                    continue
                if st.moves:
                    t = st.moves[0][1].transition
                    m = self.classify(t.actor, st.trigger, st.params)
                else:
                    m = self.classify(st.shared.actor, st.trigger, st.params)
                if (m & need) == need and not (cyclic and not m & CYCLIC):
                    steps.append(label(st))
                    configs.append(a)
                    cfg = a
                    return
            raise AssertionError(f"{system.name}: no concrete step to a lasso state")

        for b in prefix[1:]:
            walk(b, 0, False)
        loop, start = len(steps), cfg
        rounds = 0
        while cycle:
            for _a, b, m in cycle:
                walk(b, m, True)
            rounds += 1
            if cfg == start or rounds >= 24:
                break
        shown = SystemCounterexample(system, (), ())
        states = [shown._values(c) for c in configs]
        closed = not cycle or cfg == start
        if cycle:
            states.pop()  # the cycle's last step returns to the state at ``loop``
        meta = {**meta, "cycle_rounds": rounds,
                **({} if closed else {"loop_up_to_renaming": True})}
        actions = tuple((s.trigger, {**dict(s.params), "who": s.who}) for s in steps)
        return Lasso(system.name, tuple(steps[:loop]), tuple(steps[loop:]), tuple(states),
                     actions, loop, self.var_names(), meta)


def check_system(result: Any, liveness: Liveness | None = None) -> LivenessResult:
    """The progress properties of a system, on a result of ``explore_system(..., classify=)``."""
    from ...model.progress import liveness_of

    if result.graph is None:
        raise ValueError("check_system: explore the system with classify=system_classifier(...)")
    system = result.graph[0].system
    live = liveness or liveness_of(system)
    graph = SystemGraph(system, result.graph, live)
    return check_graph(graph, live, system.name, result.complete,
                       {"instances": system.instances})


def explore_system_liveness(system: Any, liveness: Liveness | None = None, **kw: Any
                            ) -> tuple[Any, LivenessResult]:
    """Explore ``system`` keeping its graph, then check its progress properties."""
    from ...model.progress import liveness_of
    from .._system import explore_system

    live = liveness or liveness_of(system)
    result = explore_system(system, classify=system_classifier(live), **kw)
    return result, check_system(result, live)


# --------------------------------------------------------------------------
# The quiescence bound: how long a fault-free, fair run may take to settle
# --------------------------------------------------------------------------
def is_fault(t: Transition, params: Params) -> bool:
    """A step the world's faults take: a crash, or a call that failed (a ``fault`` parameter)."""
    return "fault" in params or "crash" in t.trigger


@dataclass(frozen=True)
class QuiescenceBound:
    """From ``start``, the most steps a fault-free run of required steps takes to reach a
    terminal or resting state (``steps``), with one such longest run (``path``), or None
    with ``cycle``, a fault-free run of required steps that returns where it began (an
    implementation may then loop for ever without breaking the model), and ``stuck``, the
    configurations that are neither terminal nor resting and have no such step."""

    start: Config
    steps: int | None
    path: tuple[tuple[str, tuple[tuple[str, Value], ...]], ...]
    cycle: tuple[tuple[str, tuple[tuple[str, Value], ...]], ...] = ()
    stuck: tuple[Config, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "path": [f"{t} {dict(p)}" for t, p in self.path],
                "cycle": [f"{t} {dict(p)}" for t, p in self.cycle],
                "stuck": [c.state for c in self.stuck]}


def quiescence_bound(protocol: Protocol, start: Config, liveness: Liveness | None = None, *,
                     resting: Sequence[str] = (),
                     fault: Callable[[Transition, Params], bool] = is_fault) -> QuiescenceBound:
    """The longest fault-free path from ``start`` to a terminal or ``resting`` state, over
    the steps fairness requires (weak or strong; never the steps it leaves to chance).

    This is the bound the lockstep's quiescence phase gives an implementation once faults
    stop: every fair scheduling of the required steps settles within ``steps`` steps, so an
    implementation that has not settled after that many is looping. Exact (a depth-first
    longest path with memo over the reachable fault-free space); ``steps`` is None when that
    space has a cycle, which is then returned."""
    from ...model.progress import liveness_of

    live = liveness or liveness_of(protocol)
    classify = classifier(live)
    ends = set(resting) | protocol.terminal_states
    memo: dict[Config, tuple[int, tuple[Any, Config] | None]] = {}
    on_path: dict[Config, int] = {}
    trail: list[tuple[Config, tuple[str, tuple[tuple[str, Value], ...]]]] = []
    stuck: list[Config] = []

    def moves(c: Config) -> list[tuple[tuple[str, tuple[tuple[str, Value], ...]], Config]]:
        return [((s.transition.trigger, tuple(s.params.items())), s.after)
                for s in protocol.enabled(c)
                if classify(s.transition.actor, s.transition.trigger, s.params)
                and not fault(s.transition, s.params)]

    class _Cycle(Exception):
        def __init__(self, at: Config) -> None:
            self.at = at

    def longest(c: Config) -> int:
        """Iterative DFS (post-order) computing the longest path from ``c``."""
        stack: list[tuple[Config, Iterator[Any]]] = [(c, iter(moves(c)))]
        on_path[c] = 0
        best: dict[Config, tuple[int, tuple[Any, Config] | None]] = {c: (0, None)}
        while stack:
            u, it = stack[-1]
            advanced = False
            for label, v in it:
                if v in on_path:
                    trail.append((u, label))
                    raise _Cycle(v)
                if v not in memo:
                    on_path[v] = len(stack)
                    best[v] = (0, None)
                    trail.append((u, label))
                    stack.append((v, iter(moves(v))))
                    advanced = True
                    break
                length = memo[v][0] + 1
                if length > best[u][0]:
                    best[u] = (length, (label, v))
            if advanced:
                continue
            stack.pop()
            del on_path[u]
            if best[u][1] is None and u.state not in ends:
                stuck.append(u)
            memo[u] = best[u]
            if trail:
                parent, label = trail.pop()
                length = memo[u][0] + 1
                if length > best[parent][0]:
                    best[parent] = (length, (label, u))
        return memo[c][0]

    try:
        steps = longest(start)
    except _Cycle as loop:
        cut = next(i for i, (cfg, _l) in enumerate(trail) if cfg == loop.at)
        return QuiescenceBound(start, None, (), tuple(label for _c, label in trail[cut:]),
                               tuple(stuck))
    path = []
    at: Config = start
    while memo[at][1] is not None:
        nxt = memo[at][1]
        assert nxt is not None
        path.append(nxt[0])
        at = nxt[1]
    return QuiescenceBound(start, steps, tuple(path), (), tuple(stuck))
