"""The directed tour: shortest runs, replayed before the random campaign, that fire every
transition, edge, guard alternative and refusal the model declares.

:func:`tour_of` is the one entry: a single machine's campaign (independent instances)
takes :func:`directed_tour`, a search of one instance's whole space; a declared system adds
the interleavings (:mod:`._tour_system`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from settled.model import Config, Params, Protocol, Transition
from settled.model._core import Value
from settled.model._system import System

from .._explore import _Local
from .._shrink import longest_paths
from ._action import Action, transition_label
from ._coverage import edge_of


def tour_of(system: System, forbidden: frozenset[str]) -> list[list[Action]]:
    """The tour of a campaign over ``system`` (worked out once per system object)."""
    if system.independent:
        return tour(system.machine, forbidden)
    from ._tour_system import tour as system_tour

    return system_tour(system, forbidden)


_TOURS: dict[tuple[int, frozenset[str]],
             tuple[Protocol, list[list[Action]], frozenset[tuple[str, str]]]] = {}


def tour(protocol: Protocol, forbidden: frozenset[str] = frozenset()) -> list[list[Action]]:
    """:func:`directed_tour`, computed once per protocol object (a search of the whole space)."""
    return _tour(protocol, forbidden)[1]


def tour_refusals(protocol: Protocol, forbidden: frozenset[str]) -> frozenset[tuple[str, str]]:
    """The (transition, atom) refusals the tour's search found a state for, where that atom
    alone refuses the transition (the tour probes each of them)."""
    return _tour(protocol, forbidden)[2]


def _tour(protocol: Protocol, forbidden: frozenset[str]
          ) -> tuple[Protocol, list[list[Action]], frozenset[tuple[str, str]]]:
    key = (id(protocol), frozenset(forbidden))
    found = _TOURS.get(key)
    if found is None or found[0] is not protocol:
        probed: set[tuple[str, str]] = set()
        paths = _directed_tour(protocol, frozenset(forbidden), probed)
        found = _TOURS[key] = (protocol, paths, frozenset(probed))
    return found


def directed_tour(protocol: Protocol,
                  forbidden: frozenset[str] = frozenset()) -> list[list[Action]]:
    return _directed_tour(protocol, forbidden, set())


def _directed_tour(protocol: Protocol, forbidden: frozenset[str],
                   probed: set[tuple[str, str]]) -> list[list[Action]]:
    """For every transition, the shortest run of one instance that fires it, and that run
    extended by each step that can follow it; for every edge, guard alternative and value of
    a variable of at most three values at an edge, the shortest run that fires it; and for every
    guard of a transition a caller may be refused (each part of a guard that declares
    parts), the shortest run to a state where that guard, or part, alone refuses it, ending
    in the refused action. ``probed`` receives the (transition, atom) of each such probe.

    Replayed before the random campaign, the tour guarantees transition and
    refusal coverage: random runs rarely reach, say, a third not-found in a
    row, or a re-confirmation quoting a notification.
    """
    # The space is walked through the explorer's compiled successor function, in its
    # breadth-first order (the ids): the first run found to anything is a shortest one.
    space = _Local(protocol, protocol.enabled, None, checks=False)
    configs, labels, label_dest = space.configs, space.labels, space.label_dest
    parent: list[tuple[int, Action] | None] = [None] * len(configs)  # None: not yet reached
    paths: dict[str, list[Action]] = {}
    probes: dict[tuple[str, str, str], list[Action]] = {}
    pairs: dict[tuple[str, str], list[Action]] = {}
    ways: dict[tuple[str, ...], list[Action]] = {}
    # Every edge is also fired with each value of each variable of at most three values where
    # it can be: a cancel request, a clarification, a re-run, a task version moved on by a
    # condition update change what a step must do (Q21: success stands over a cancel
    # request; Q24: a late result leaves a moved task's phase alone), and a random campaign
    # may miss the combination. (Wider domains: counters, epochs, lease tables, would more
    # than double the tour; the random phase covers them.)
    flags = [v.name for v in protocol.variables if not v.ghost and len(v.domain) <= 3]
    refusals = _Refusals(protocol, forbidden)
    flags_seen: dict[tuple[str, str, str], set[tuple[tuple[str, str], ...]]] = {}
    names: dict[int, str] = {}

    def name_of(t: Transition) -> str:
        found = names.get(id(t))
        if found is None:
            found = names[id(t)] = transition_label(t)
        return found

    for cid in range(space.expanded):
        c = configs[cid]
        v = protocol.view(c)
        # Once per configuration, not per step; an edge seen before with the same values of
        # every flag has had each of its flag keys already.
        flagged = tuple((f, repr(v[f])) for f in flags)
        here = space.labels_from(cid)
        for k in here:
            t, params = labels[k]
            dest = label_dest[k]
            label = name_of(t)
            action = Action(0, t.trigger, params)
            if label not in paths:
                paths[label] = [*path_to(parent, cid), action]
                # ... and one step further along each way out: a bug often shows
                # only in what follows a transition (a retry that is then answered).
                for then in space.labels_from(dest):
                    t2, params2 = labels[then]
                    pairs.setdefault((label, name_of(t2)),
                                     [*paths[label], Action(0, t2.trigger, params2)])
            # Every edge (from, to, trigger) and every alternative of a disjunctive guard
            # gets its own shortest run: a transition with several sources or ways in is
            # not covered by firing it once.
            edge = edge_of(c, configs[dest], t)
            seen = flags_seen.get(edge)
            if seen is None:
                seen = flags_seen[edge] = set()
            keys: list[tuple[str, ...]] = [
                ("edge", *edge),
                *(("case", label, g.name, case) for g in t.guards
                  if g.cases and (case := g.case(v, params)) is not None)]
            if flagged not in seen:
                seen.add(flagged)
                keys += [("flag", *edge, f, r) for f, r in flagged]
            for key in keys:
                if key not in ways:
                    ways[key] = [*path_to(parent, cid), action]
            if parent[dest] is None and dest != 0:  # id 0 is the initial configuration
                parent[dest] = (cid, action)
        for refusal, refused in refusals(c, v, [labels[k] for k in here]):
            if refusal not in probes:
                probes[refusal] = [*path_to(parent, cid), refused]
    probed.update((label, atom) for label, atom, _params in probes)
    fires = [paths[transition_label(t)] for t in protocol.transitions
             if transition_label(t) in paths]
    known = {_path_text(path) for path in fires}
    more = []
    for way in sorted(ways, key=repr):
        if (text := _path_text(ways[way])) not in known:
            known.add(text)
            more.append(ways[way])
    everything = (fires + more + [pairs[k] for k in sorted(pairs)]
                  + [probes[k] for k in sorted(probes)])
    # Only the paths that start no other one: the longer one checks the same steps
    # (:func:`._shrink.longest_paths`). Shortest first, and a failing path is cut at the
    # step that diverged (run_tour); the minimiser then shortens it further.
    return longest_paths(everything)


def _path_text(path: Sequence[Action]) -> tuple[str, ...]:
    return tuple(a.text() for a in path)


# A refusal one atom alone gives: (transition, atom, params), the refused action, and the
# (trigger, params) step that must not be enabled for it to be one.
_Candidate = tuple[tuple[str, str, str], "Action", tuple[str, tuple[tuple[str, Value], ...]]]


class _Refusals:
    """(transition, atom, params) → a forbidden action refused in a configuration by that
    atom (a guard, or one part of a guard that declares parts) alone. The candidates are
    worked out once per state and values of the variables the forbidden transitions' guards
    read (most configurations of a search share them); a candidate that another transition
    of its trigger enables in the configuration is no refusal there."""

    def __init__(self, protocol: Protocol, forbidden: frozenset[str]) -> None:
        self.protocol, self.forbidden = protocol, forbidden
        guards = [g for t in protocol.transitions if t.trigger in forbidden for g in t.guards]
        names = [v.name for v in protocol.variables]
        reads = {r for g in guards for r in g.reads}
        # A guard that declares no reads may read anything: then every variable counts.
        self.reads = (names if any(not g.reads for g in guards)
                      else [n for n in names if n in reads])
        self.memo: dict[tuple[Any, ...], list[_Candidate]] = {}
        # Per state: each forbidden transition leaving it, with its label and parameter choices.
        self.plans: dict[str, list[tuple[Transition, str, list[tuple[Params, Any]]]]] = {}

    def __call__(self, c: Config, v: Mapping[str, Value],
                 here: Sequence[tuple[Transition, Params]]
                 ) -> list[tuple[tuple[str, str, str], Action]]:
        """The refusals of ``c``, where ``here`` are the steps it enables."""
        if not self.forbidden:
            return []
        key = (c.state, tuple(v[n] for n in self.reads))
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = self._candidates(c.state, v)
        if not found:
            return []
        enabled = {(t.trigger, tuple(params.items())) for t, params in here}
        return [(refusal, action) for refusal, action, step in found if step not in enabled]

    def _candidates(self, state: str, v: Mapping[str, Value]) -> list[_Candidate]:
        plan = self.plans.get(state)
        if plan is None:
            plan = self.plans[state] = [
                (t, transition_label(t), [(p, tuple(p.items())) for p in t.param_choices()])
                for t in self.protocol.transitions_from(state) if t.trigger in self.forbidden]
        out = []
        for t, label, choices in plan:
            for params, items in choices:
                failing = [a for g in t.guards for a in g.failing_atoms(v, params)]
                if len(failing) == 1:
                    key = (label, failing[0], repr(sorted(items)))
                    out.append((key, Action(0, t.trigger, params, forbidden=True), (t.trigger, items)))
        return out


def path_to(parent: Any, c: Any) -> list[Action]:
    """The run to ``c`` in a search's tree: ``parent[c]`` is the (configuration, step) that
    first reached ``c``, None at the root (a list indexed by id, or a dict)."""
    out: list[Action] = []
    link = parent[c]
    while link is not None:
        c, action = link
        out.append(action)
        link = parent[c]
    return out[::-1]

