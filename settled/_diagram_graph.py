"""The table read as a graph, before any drawing: each transition's kind, the edges between
states, each state's self-loops, the groups of states that share self-loops, and the states
that get a focused diagram.

Its own room because every picture reads it (the DOT text of :mod:`settled._diagram_dot`,
the Mermaid text of :mod:`settled._diagrams`, the review site's page data): it decides what
is drawn, the other rooms only how.
"""

from __future__ import annotations

from dataclasses import dataclass

from settled.model import Protocol, Transition

# kind -> (colour, edge style, what the legend says)
KINDS: dict[str, tuple[str, str, str]] = {
    "user": ("#1f5fbf", "solid", "user"),
    "worker": ("#222222", "solid", "worker"),
    "platform": ("#2e8b57", "dashed", "platform, on its own"),
    "crash": ("#c0392b", "dotted", "crash, restart, time, contract"),
}
# A state with at least this many transitions (in, out and self-loops) gets its own diagram.
FOCUS_AT = 10


def kind(t: Transition) -> str:
    """The legend entry a transition is drawn with."""
    if t.actor == "environment" or t.trigger.startswith("crash") or "_crash" in t.trigger:
        return "crash"
    return t.actor if t.actor in KINDS else "worker"


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    dest: str
    lines: tuple[tuple[str, str, str], ...]  # (trigger, guard names, kind)


def label(t: Transition) -> str:
    guards = ", ".join(g.name for g in t.guards)
    return f"{t.trigger} [{guards}]" if guards else t.trigger


def edges(p: Protocol) -> list[Edge]:
    """One edge per (source, destination), self-loops included, its lines sorted."""
    grouped: dict[tuple[str, str], set[tuple[str, str, str]]] = {}
    for t in p.transitions:
        guards = ", ".join(g.name for g in t.guards)
        for src in t.source:
            grouped.setdefault((src, t.target(src)), set()).add((t.trigger, guards, kind(t)))
    order = {s: i for i, s in enumerate(p.state_names)}
    return [Edge(s, d, tuple(sorted(lines)))
            for (s, d), lines in sorted(grouped.items(), key=lambda kv: (order[kv[0][0]],
                                                                         order[kv[0][1]]))]


def loops(p: Protocol) -> dict[str, tuple[tuple[str, str, str], ...]]:
    """State -> its self-loops (trigger, guards, kind), in table order, one per trigger+guards."""
    out: dict[str, list[tuple[str, str, str]]] = {s: [] for s in p.state_names}
    for t in p.transitions:
        guards = ", ".join(g.name for g in t.guards)
        for src in t.source:
            row = (t.trigger, guards, kind(t))
            if t.target(src) == src and row not in out[src]:
                out[src].append(row)
    return {s: tuple(rows) for s, rows in out.items()}


Row = tuple[str, str, str]  # a self-loop: (trigger, guard names, kind)


@dataclass(frozen=True, slots=True)
class LoopGroup:
    """Self-loops that several states share, listed once on a box around those states."""

    states: frozenset[str]
    rows: tuple[Row, ...]


def loop_groups(p: Protocol) -> list[LoopGroup]:
    """Groups of at least 3 states sharing at least 2 self-loops, nested or disjoint (so
    each can be drawn as a box inside or beside another), largest first."""
    order = {s: i for i, s in enumerate(p.state_names)}
    holders: dict[Row, frozenset[str]] = {}
    for s, rows in loops(p).items():
        for r in rows:
            holders[r] = holders.get(r, frozenset()) | {s}
    by_set: dict[frozenset[str], list[Row]] = {}
    for r, states in holders.items():
        if len(states) >= 3:
            by_set.setdefault(states, []).append(r)
    candidates = sorted(((states, rows) for states, rows in by_set.items() if len(rows) >= 2),
                        key=lambda g: (-len(g[0]), min(order[s] for s in g[0])))
    accepted: list[LoopGroup] = []
    for states, shared in candidates:
        if all(states <= a.states or states.isdisjoint(a.states) for a in accepted):
            accepted.append(LoopGroup(states, tuple(shared)))
    return accepted


def _line(trigger: str, guards: str) -> str:
    return f"{trigger} [{guards}]" if guards else trigger


def focused_states(p: Protocol) -> list[str]:
    """The states that get a focused diagram: many transitions touch them."""
    touching = {s: 0 for s in p.state_names}
    for t in p.transitions:
        for src in t.source:
            touching[src] += 1
            if t.target(src) != src:
                touching[t.target(src)] += 1
    return [s for s in p.state_names if touching[s] >= FOCUS_AT]
