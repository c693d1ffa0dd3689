"""The directed tour: shortest runs, replayed before the random campaign, that fire every
transition, edge, guard alternative and refusal the model declares.

:func:`tour_of` is the one entry: a single machine's campaign (independent instances)
takes :func:`directed_tour`, a search of one instance's whole space; a declared system adds
the interleavings (:mod:`._tour_system`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from settled.conformance._lockstep._shrink import longest_paths
from settled.model import Config, Params, Protocol, System, Transition, Value

from .._explore import _Local
from ._action import Action, transition_label
from ._coverage import edge_of

T = TypeVar("T")  # a step of a search's tree: an Action, or a (trigger, params) pair


def tour_of(system: System, forbidden: frozenset[str]) -> list[list[Action]]:
    """The tour of a campaign over ``system`` (worked out once per system object)."""
    if system.independent:
        return tour(system.machine, forbidden)
    from ._tour_system import tour as system_tour

    return system_tour(system, forbidden)


@dataclass(frozen=True)
class TourPlan:
    """The tour of one machine and what its search found possible: the refusals one atom
    alone gives, the (trigger, state) pairs where a refusable trigger has no transition, and
    each (edge, parameter, value) some reachable configuration takes."""

    protocol: Protocol
    paths: list[list[Action]]
    probed: frozenset[tuple[str, str]]
    absent: tuple[tuple[str, str], ...]
    values: tuple[tuple[tuple[str, str, str], str, str], ...]


_TOURS: dict[tuple[int, frozenset[str]], TourPlan] = {}


def tour(protocol: Protocol, forbidden: frozenset[str] = frozenset()) -> list[list[Action]]:
    """:func:`directed_tour`, computed once per protocol object (a search of the whole space)."""
    return tour_plan(protocol, forbidden).paths


def tour_refusals(protocol: Protocol, forbidden: frozenset[str]) -> frozenset[tuple[str, str]]:
    """The (transition, atom) refusals the tour's search found a state for, where that atom
    alone refuses the transition (the tour probes each of them)."""
    return tour_plan(protocol, forbidden).probed


def tour_plan(protocol: Protocol, forbidden: frozenset[str]) -> TourPlan:
    key = (id(protocol), frozenset(forbidden))
    found = _TOURS.get(key)
    if found is None or found.protocol is not protocol:
        search = _Search(protocol, frozenset(forbidden))
        search.run()
        found = _TOURS[key] = TourPlan(
            protocol, search.paths(), frozenset(search.probed()), tuple(search.absent_pairs),
            tuple(search.values))
    return found


def directed_tour(protocol: Protocol,
                  forbidden: frozenset[str] = frozenset()) -> list[list[Action]]:
    """For every transition, the shortest run of one instance that fires it, and that run
    extended by each step that can follow it; for every edge, guard alternative, value of a
    parameter and value of a variable of at most three values at an edge, the shortest run
    that fires it; for every guard of a transition a caller may be refused (each part of a
    guard that declares parts), the shortest run to a state where that guard, or part, alone
    refuses it, ending in the refused action; and for every reachable state, the shortest
    run to it followed by each refusable trigger that no transition of the state takes.

    Replayed before the random campaign, the tour guarantees transition and
    refusal coverage: random runs rarely reach, say, a third not-found in a
    row, or a re-confirmation quoting a notification.
    """
    search = _Search(protocol, frozenset(forbidden))
    search.run()
    return search.paths()


class _Search:
    """The tour's search: the space is walked through the explorer's compiled successor
    function, in its breadth-first order (the ids), so the first run found to anything is a
    shortest one."""

    def __init__(self, protocol: Protocol, forbidden: frozenset[str]) -> None:
        self.protocol, self.forbidden = protocol, forbidden
        self.space = _Local(protocol, protocol.enabled, None, checks=False)
        # None: not yet reached
        self.parent: list[tuple[int, Action] | None] = [None] * len(self.space.configs)
        self.firsts: dict[str, list[Action]] = {}
        self.probes: dict[tuple[str, str, str], list[Action]] = {}
        self.pairs: dict[tuple[str, str], list[Action]] = {}
        self.ways: dict[tuple[str, ...], list[Action]] = {}
        self.absent: dict[str, list[Action]] = {}  # per state: the refusals no transition takes
        self.absent_pairs: list[tuple[str, str]] = []
        self.values: list[tuple[tuple[str, str, str], str, str]] = []
        # Every edge is also fired with each value of each variable of at most three values
        # where it can be: a cancel request, a clarification, a re-run, a task version moved
        # on by a condition update change what a step must do (Q21: success stands over a
        # cancel request; Q24: a late result leaves a moved task's phase alone), and a random
        # campaign may miss the combination. (Wider domains: counters, epochs, lease tables,
        # would more than double the tour; the random phase covers them.)
        self.flags = [v.name for v in protocol.variables if not v.ghost and len(v.domain) <= 3]
        self.flags_seen: dict[tuple[str, str, str], set[tuple[tuple[str, str], ...]]] = {}
        self.refusals = _Refusals(protocol, forbidden)
        self.names: dict[int, str] = {}
        # A refusable trigger's parameters when it is asked where no transition takes it.
        self.asked: dict[str, Params] = {}
        for t in protocol.transitions:
            if t.trigger in forbidden and t.trigger not in self.asked:
                self.asked[t.trigger] = next(iter(t.param_choices()))

    def name_of(self, t: Transition) -> str:
        found = self.names.get(id(t))
        if found is None:
            found = self.names[id(t)] = transition_label(t)
        return found

    def run(self) -> None:
        for cid in range(self.space.expanded):
            self._visit(cid)

    def _visit(self, cid: int) -> None:
        space = self.space
        c = space.configs[cid]
        v = self.protocol.view(c)
        # Once per configuration, not per step; an edge seen before with the same values of
        # every flag has had each of its flag keys already.
        flagged = tuple((f, repr(v[f])) for f in self.flags)
        here = space.labels_from(cid)
        for k in here:
            self._step(cid, c, v, flagged, k)
        for refusal, refused in self.refusals(c, v, [space.labels[k] for k in here]):
            if refusal not in self.probes:
                self.probes[refusal] = [*path_to(self.parent, cid), refused]
        if c.state not in self.absent:
            self._absent(cid, c)

    def _step(self, cid: int, c: Config, v: Mapping[str, Value],
              flagged: tuple[tuple[str, str], ...], k: int) -> None:
        space, parent = self.space, self.parent
        t, params = space.labels[k]
        dest = space.label_dest[k]
        label = self.name_of(t)
        action = Action(0, t.trigger, params)
        if label not in self.firsts:
            self.firsts[label] = [*path_to(parent, cid), action]
            # ... and one step further along each way out: a bug often shows
            # only in what follows a transition (a retry that is then answered).
            for then in space.labels_from(dest):
                t2, params2 = space.labels[then]
                self.pairs.setdefault((label, self.name_of(t2)),
                                      [*self.firsts[label], Action(0, t2.trigger, params2)])
        # Every edge (from, to, trigger), every alternative of a disjunctive guard and every
        # value of each parameter at an edge gets its own shortest run: a transition with
        # several sources or ways in is not covered by firing it once, nor a fault by one
        # of its kinds.
        edge = edge_of(c, space.configs[dest], t)
        seen = self.flags_seen.get(edge)
        if seen is None:
            seen = self.flags_seen[edge] = set()
        keys: list[tuple[str, ...]] = [
            ("edge", *edge),
            *(("case", label, g.name, case) for g in t.guards
              if g.cases and (case := g.case(v, params)) is not None),
            *(("value", *edge, name, repr(value)) for name, value in params.items())]
        if flagged not in seen:
            seen.add(flagged)
            keys += [("flag", *edge, f, r) for f, r in flagged]
        for key in keys:
            if key not in self.ways:
                self.ways[key] = [*path_to(parent, cid), action]
                if key[0] == "value":
                    self.values.append((edge, key[4], key[5]))
        if parent[dest] is None and dest != 0:  # id 0 is the initial configuration
            parent[dest] = (cid, action)

    def _absent(self, cid: int, c: Config) -> None:
        """The first configuration reached in a state: each refusable trigger that no
        transition of the state takes is asked for there, one after another (a refusal
        changes nothing, so one run asks them all)."""
        taken = {t.trigger for t in self.protocol.transitions_from(c.state)}
        asked = [Action(0, trigger, params, forbidden=True)
                 for trigger, params in self.asked.items() if trigger not in taken]
        self.absent[c.state] = [*path_to(self.parent, cid), *asked] if asked else []
        self.absent_pairs += [(a.trigger, str(c.state)) for a in asked]

    def probed(self) -> set[tuple[str, str]]:
        return {(label, atom) for label, atom, _params in self.probes}

    def paths(self) -> list[list[Action]]:
        protocol = self.protocol
        fires = [self.firsts[transition_label(t)] for t in protocol.transitions
                 if transition_label(t) in self.firsts]
        known = {_path_text(path) for path in fires}
        more = []
        for way in sorted(self.ways, key=repr):
            if (text := _path_text(self.ways[way])) not in known:
                known.add(text)
                more.append(self.ways[way])
        everything = (fires + more + [self.pairs[k] for k in sorted(self.pairs)]
                      + [self.probes[k] for k in sorted(self.probes)]
                      + [self.absent[s] for s in sorted(self.absent) if self.absent[s]])
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


def path_to(parent: Sequence[tuple[Any, T] | None] | Mapping[Any, tuple[Any, T] | None],
            c: Any) -> list[T]:
    """The run to ``c`` in a search's tree: ``parent[c]`` is the (configuration, step) that
    first reached ``c``, None at the root (a list indexed by id, or a dict)."""
    out: list[T] = []
    link = parent[c]
    while link is not None:
        c, action = link
        out.append(action)
        link = parent[c]
    return out[::-1]

