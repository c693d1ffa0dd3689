"""The protocol graph: a ``networkx.MultiDiGraph`` view of a declared table.

Nodes are control states (with ``terminal``, ``unknown``, ``initial`` and
``meaning``); there is one edge per (transition, source) carrying the
trigger, the guard text, the rule IDs, the actor and the meaning. The static
checks read this graph; the diagrams are drawn from it.
"""

from __future__ import annotations

import networkx as nx

from ._core import Protocol, rule_sort_key
from ._rules import RULES


def protocol_graph(p: Protocol) -> nx.MultiDiGraph:
    g = nx.MultiDiGraph(name=p.name)
    for s in p.states:
        g.add_node(s.name, terminal=s.terminal, unknown=s.unknown,
                   initial=s.name == p.initial, meaning=s.meaning)
    for t in p.transitions:
        for src in t.source:
            g.add_edge(src, t.target(src), key=f"{t.trigger}#{t.guard_text}",
                       trigger=t.trigger, guard=t.guard_text, rules=t.rules, actor=t.actor,
                       meaning=t.meaning, params=tuple(x.name for x in t.params))
    return g


def edge_label(trigger: str, guard: str) -> str:
    return f"{trigger} [{guard}]" if guard else trigger


def uncited_rules(p: Protocol) -> list[str]:
    """Rules of PROTOCOL.md in the families ``p`` cites (Q, T, ...) that no declaration cites:
    not ``p``, nor any declared machine or system (a rule another machine states, such as
    the ledger's L rules beside approval's L5, is cited)."""
    from . import MACHINES
    from .systems import SYSTEMS

    cited = set(p.rules()).union(*(m.rules() for m in MACHINES.values()),
                                 *(s.rules() for s in SYSTEMS.values()))
    families = {r.rstrip("0123456789") for r in p.rules()}
    return sorted((r for r in RULES if r.rstrip("0123456789") in families and r not in cited),
                  key=rule_sort_key)


def static_findings(p: Protocol) -> dict[str, list[str]]:
    """What the graph alone shows: unreachable states, dead ends, terminals with exits; and
    the rules no declaration cites."""
    g = protocol_graph(p)
    reachable = nx.descendants(g, p.initial) | {p.initial}
    terminals = p.terminal_states
    can_settle = set().union(*(nx.ancestors(g, t) | {t} for t in terminals)) if terminals else set()
    return {
        "unreachable_states": sorted(set(g.nodes) - reachable),
        "terminal_with_exits": sorted(t for t in terminals if g.out_degree(t) > 0),
        "cannot_settle": sorted(s for s in g.nodes if s not in can_settle),
        "uncited_rules": uncited_rules(p),
    }
