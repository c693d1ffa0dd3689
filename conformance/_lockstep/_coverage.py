"""What a campaign covered: transitions, edges, guard alternatives, refusals.

Declared lists come from the model; ``unfired``/``unprobed`` say which of them no run of the
campaign took. A declared system adds its synchronised and own steps to the transitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from settled.model import Config, Protocol, Step, System, Transition, Value

from ._action import transition_label


def unfired_steps(system: System, fired: Mapping[str, int]) -> list[str]:
    """Machine transitions and system steps no run of the campaign took."""
    labels = [transition_label(t) for t in system.machine.transitions]
    labels += [f"system {t.trigger}" for t in system.transitions]
    return [x for x in dict.fromkeys(labels) if x not in fired]


def unfired(protocol: Protocol, fired: Mapping[str, int]) -> list[str]:
    return [label for t in protocol.transitions if (label := transition_label(t)) not in fired]


def ends_early(protocol: Protocol, before: Config, step: Step) -> bool:
    """A step into a terminal state before the instance made a submission; on a machine
    without a ``submissions`` count (approval, ledger), every step into a terminal state.
    The random phase draws it less often, so runs reach the deep states where the hazards
    are (the tour fires each of them in any case)."""
    return (step.after.state in protocol.terminal_states
            and protocol.view(before).get("submissions", 0) == 0)


def edge_key(before: Config, step: Any) -> tuple[str, str, str]:
    """An edge of the graph: (from state, to state, trigger)."""
    return edge_of(before, step.after, step.transition)


def edge_of(before: Config, after: Config, t: Transition) -> tuple[str, str, str]:
    """:func:`edge_key` of a step given by its parts."""
    return (str(before.state), str(after.state), t.trigger)


def declared_edges(protocol: Protocol) -> list[tuple[str, str, str]]:
    """Every (from, to, trigger) the table declares, in declaration order."""
    return list(dict.fromkeys((str(src), str(t.target(src)), t.trigger)
                              for t in protocol.transitions for src in t.source))


def declared_cases(protocol: Protocol) -> list[tuple[str, str, str]]:
    """Every (transition, guard, alternative) of a disjunctive guard."""
    return [(transition_label(t), g.name, name) for t in protocol.transitions
            for g in t.guards for name, _ in g.cases]


def declared_refusals(protocol: Protocol, forbidden: frozenset[str]) -> list[tuple[str, str]]:
    """Every (transition, atom) a caller may be refused for: each guard of a refusable
    transition, or each part of a guard that declares parts."""
    return list(dict.fromkeys((transition_label(t), atom) for t in protocol.transitions
                              if t.trigger in forbidden for g in t.guards for atom in g.atoms()))


NO_TRANSITION = "no transition"  # the atom of a refusal no guard gives: the state has none


def refusal_goals(protocol: Protocol, forbidden: frozenset[str]) -> list[tuple[str, str]]:
    """Every refusal a campaign must ask for, as (what, atom): each (transition, atom) the
    model gives for that atom alone in some reachable state (the tour's search found one),
    and each (``trigger in state``, :data:`NO_TRANSITION`) where a refusable trigger has no
    transition from a reachable state. The report's refusal count is over these."""
    from ._tour import tour_plan

    plan = tour_plan(protocol, forbidden)
    return ([(label, atom) for label, atom in declared_refusals(protocol, forbidden)
             if (label, atom) in plan.probed]
            + [(f"{trigger} in {state}", NO_TRANSITION) for trigger, state in plan.absent])


def refusal_text(goal: tuple[str, str]) -> str:
    what, atom = goal
    return f"{what} ({atom})" if atom == NO_TRANSITION else f"{what} [{atom}]"


def unprobed_refusals(protocol: Protocol, forbidden: frozenset[str],
                      refusals: Mapping[tuple[str, str], int]) -> list[str]:
    """The :func:`refusal_goals` no run of the campaign asked for."""
    return [refusal_text(goal) for goal in refusal_goals(protocol, forbidden)
            if not refusals.get(goal)]


def absent_refusal(protocol: Protocol, c: Config, trigger: str) -> tuple[str, str] | None:
    """The refusal goal of ``trigger`` in ``c`` when no transition of its state takes it."""
    if any(t.trigger == trigger for t in protocol.transitions_from(c.state)):
        return None
    return (f"{trigger} in {c.state}", NO_TRANSITION)


def value_text(key: tuple[tuple[str, str, str], str, str]) -> str:
    edge, name, value = key
    return f"{name}={value} at {edge_text(edge)}"


def declared_values(protocol: Protocol, forbidden: frozenset[str]
                    ) -> list[tuple[tuple[str, str, str], str, str]]:
    """Every (edge, parameter, value) some reachable configuration takes the edge with."""
    from ._tour import tour_plan

    return list(tour_plan(protocol, forbidden).values)


def unfired_values(protocol: Protocol, forbidden: frozenset[str],
                   values: Mapping[tuple[tuple[str, str, str], str, str], int]) -> list[str]:
    """The :func:`declared_values` no run of the campaign took."""
    return [value_text(k) for k in declared_values(protocol, forbidden) if not values.get(k)]


def never_alone(protocol: Protocol, forbidden: frozenset[str]) -> list[str]:
    """Atoms that never fail alone in a reachable state (a refusal for them always has
    another reason too): no probe can single them out, and the report says so."""
    from ._tour import tour_refusals

    probeable = tour_refusals(protocol, forbidden)
    return [f"{label} [{atom}]" for label, atom in declared_refusals(protocol, forbidden)
            if (label, atom) not in probeable]


def refused_alone(protocol: Protocol, c: Config, trigger: str,
                  params: Mapping[str, Value]) -> list[tuple[str, str]]:
    """For each transition ``trigger`` could be here, the one atom that refuses it, where
    exactly one does."""
    v = protocol.view(c)
    out = []
    for t in protocol.transitions_from(c.state):
        if t.trigger != trigger or {p.name for p in t.params} != set(params) or not all(
                params[p.name] in p.domain for p in t.params):
            continue
        failing = [a for g in t.guards for a in g.failing_atoms(v, params)]
        if len(failing) == 1:
            out.append((transition_label(t), failing[0]))
    return out


def edge_text(edge: tuple[str, str, str]) -> str:
    source, dest, trigger = edge
    return f"{trigger}: {source} -> {dest}"


def unfired_edges(protocol: Protocol, edges: Mapping[tuple[str, str, str], int]) -> list[str]:
    return [edge_text(e) for e in declared_edges(protocol) if not edges.get(e)]


def unfired_cases(protocol: Protocol, cases: Mapping[tuple[str, str, str], int]) -> list[str]:
    return [f"{label} [{guard}: {case}]" for label, guard, case in declared_cases(protocol)
            if not cases.get((label, guard, case))]


_CASES: dict[int, tuple[Protocol, frozenset[int]]] = {}


def _with_cases(protocol: Protocol) -> frozenset[int]:
    """The ids of the transitions with a disjunctive guard (ids: hashing a transition is slow)."""
    found = _CASES.get(id(protocol))
    if found is None or found[0] is not protocol:
        found = _CASES[id(protocol)] = (protocol, frozenset(
            id(t) for t in protocol.transitions if any(g.cases for g in t.guards)))
    return found[1]


def expected_projection(p: Protocol, config: Config,
                        unobservable: frozenset[str] = frozenset()) -> dict[str, Value]:
    view = p.view(config)
    return {"state": str(config.state),
            **{v.name: view[v.name] for v in p.variables
               if not v.ghost and v.name not in unobservable}}


# --------------------------------------------------------------------------
