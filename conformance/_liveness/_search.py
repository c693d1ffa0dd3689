"""The search for fair cycles (Emerson–Lei style) on a :class:`Graph`.

Strongly connected components (Tarjan) of the region outside the goal reached from a
premise; components that fail a fairness constraint are dropped or split again; any fair
component left gives a lasso, its prefix the shortest from the initial configuration.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from settled.model import STRONG, WEAK, Liveness
from settled.model import Progress as ProgressProperty

from ._graph import AT_BOUND, HOLDS, NOT_CHECKED, VIOLATED, Graph, Lasso, LivenessResult, Verdict


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
