"""The tour of a declared system: breadth-first over a bounded part of its space, so each
machine transition, synchronised step, system step and system-decided refusal is fired by a
shortest run, under each value of the system's own variables, and each edge and guard
alternative of the machine by some instance."""

from __future__ import annotations

from typing import Any

from settled.conformance._lockstep._shrink import longest_paths
from settled.model import System, SystemConfig, Value

from ._action import Action, transition_label
from ._coverage import edge_of
from ._interactions import reachable_once
from ._runner import system_probes
from ._tour import path_to
from ._tour import tour as machine_tour
from ._world import Plans, history, plans_for

TOUR_EDGES = 15_000  # steps the tour's breadth-first search may follow (a deterministic budget)


def system_tour(system: System, forbidden: frozenset[str]) -> list[list[Action]]:
    """Shortest runs, found breadth-first: one that fires each machine transition, each
    synchronised step and each system step; and, for each refusal the system's state alone
    decides (a bound parameter) and each step that can come right before it, one ending in
    that refused action. Then the same search again from the first configuration reached
    with each other value of the system's own variables (the shared stock gone, a message
    pending), so each step is also fired there: an order's handler refused because the
    stock is gone, not only because another writer changed a product. And a shortest run
    for each interaction the bounded reachability search finds (:mod:`._interactions`): a
    step moving the shared state while another instance sits in each of its control states.

    The refusals are what a system adds: a confirmation refused because the session's
    message is pending, reached after a draft was made, or after the message arrived, or
    after another query moved. Each search follows at most ``TOUR_EDGES`` steps.
    """
    plans = plans_for(system, forbidden)
    goals: dict[tuple[Any, ...], list[Action]] = {}
    start = system.initial_config()
    firsts = _tour_search(system, plans, forbidden, start, [], goals)
    for shared, (config, path) in sorted(firsts.items(), key=lambda kv: repr(kv[0])):
        if shared != start.shared:
            _tour_search(system, plans, forbidden, config, path, goals)
    _lift_machine_runs(system, forbidden, goals)
    # Each cross-instance story the explorer reaches, performed on purpose (not by chance).
    for key, run in reachable_once(system, forbidden).runs.items():
        goals.setdefault(("story", *key), run)
    return longest_paths([goals[k] for k in sorted(goals, key=repr)])


def _lift_machine_runs(system: System, forbidden: frozenset[str],
                       goals: dict[tuple[Any, ...], list[Action]]) -> None:
    """A machine transition the bounded searches did not fire (it lies deeper than
    ``TOUR_EDGES``, say a third not-found in a row) gets the machine tour's run to it, taken
    by the system's first instance, where the system model accepts that run."""
    fired = {k[1] for k in goals if k[0] == "fires"}
    missing = {transition_label(t) for t in system.machine.transitions} - fired
    if not missing:
        return
    m = system.machine
    for path in machine_tour(m, forbidden):
        c, lifted = m.initial_config(), []
        for a in path:
            if a.forbidden or not missing:
                break
            step = m.fire(c, a.trigger, a.params)
            c = step.after
            lifted.append(Action(0, a.trigger, a.params))
            label = transition_label(step.transition)
            if label in missing and history(system, lifted, forbidden) is not None:
                goals[("lifted", label)] = list(lifted)
                missing.discard(label)


def _tour_search(system: System, plans: Plans, forbidden: frozenset[str],
                 start: SystemConfig, prefix: list[Action],
                 goals: dict[tuple[Any, ...], list[Action]]
                 ) -> dict[tuple[Value, ...], tuple[SystemConfig, list[Action]]]:
    """One bounded breadth-first search from ``start`` (reached by ``prefix``), adding goals;
    returns the first configuration (and its run) reached with each value of the system's
    own variables."""
    parent: dict[SystemConfig, tuple[SystemConfig, Action] | None] = {start: None}
    firsts = {start.shared: (start, list(prefix))}
    frontier = [start]
    edges = 0
    while frontier and edges < TOUR_EDGES:
        nxt: list[SystemConfig] = []
        for c in frontier:
            path = [*prefix, *path_to(parent, c)]
            for a, step in plans.enabled(c).values():
                edges += 1
                labels = [transition_label(m.transition) for _, m in step.moves]
                if step.shared is not None or len(step.moves) != 1:
                    labels.append(f"{a.who} {a.trigger}")
                for label in labels:  # under each value of the system's own variables
                    goals.setdefault(("fires", label, c.shared), [*path, a])
                for i, m in step.moves:  # each edge and guard alternative, by some instance
                    before = c.instances[i]
                    goals.setdefault(("edge", edge_of(before, m.after, m.transition)), [*path, a])
                    v = system.machine.view(before)
                    for g in m.transition.guards:
                        if g.cases and (case := g.case(v, m.params)) is not None:
                            goals.setdefault(("case", transition_label(m.transition), g.name,
                                              case), [*path, a])
                for i in range(system.instances):
                    for probe in system_probes(plans, step.after, i):
                        key = ("probe", probe.trigger, tuple(sorted(probe.params.items())),
                               a.who == f"q{i}", a.trigger)
                        goals.setdefault(key, [*path, a, probe])
                if step.after not in parent:
                    parent[step.after] = (c, a)
                    nxt.append(step.after)
                    firsts.setdefault(step.after.shared, (step.after, [*path, a]))
        frontier = nxt
    return firsts


_TOURS: dict[tuple[int, frozenset[str]], tuple[System, list[list[Action]]]] = {}


def tour(system: System, forbidden: frozenset[str]) -> list[list[Action]]:
    """:func:`system_tour`, worked out once per system object."""
    key = (id(system), frozenset(forbidden))
    found = _TOURS.get(key)
    if found is None or found[0] is not system:
        found = _TOURS[key] = (system, system_tour(system, forbidden))
    return found[1]

