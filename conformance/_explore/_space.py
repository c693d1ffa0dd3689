"""The reached graph of one instance, read off the search: its edges, deadlocks and
all-terminal states, the shortest paths (BFS parents) and the traps (backward reachability
from the all-terminal states).

A global state is a local configuration here: ids are the search's own, dense and in BFS
order (0 is initial). Several instances of a machine are a declared system (``_system``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from settled.model import Config

from .._counterexample import Counterexample, TraceStep
from ._local import _Local, _params_key


class _Space:
    """The reached states with their BFS parents, edges, deadlocks and all-terminal states."""

    n = 1  # instances: the liveness check and SPIN's comparison read it

    def __init__(self, local: _Local) -> None:
        self.local = local
        self.states = len(local.keys)
        self.head = local.expanded
        self.complete = local.complete
        self.deadlocks: list[int] = []
        self.all_terminal: list[int] = []
        self.edges, self.good = self._read_off(local)

    def _read_off(self, local: _Local) -> tuple[int, bytearray]:
        """The DiGraph edges (parallel steps joined, a self-loop counted once), the deadlocks
        and all-terminal states, and which states can reach an all-terminal one: decided in
        one pass from the last state to the first (most steps lead to later states), then,
        for the states still open, by backward reachability over their own steps."""
        start, dest = local.label_start, local.label_dest
        good = bytearray(self.states)
        edges = 0
        open_: list[tuple[int, set[int]]] = []
        for c in range(local.expanded - 1, -1, -1):
            s, e = start[c], start[c + 1]
            if s == e:
                if local.terminal(c):
                    good[c] = 1
                    self.all_terminal.append(c)
                else:
                    self.deadlocks.append(c)
                continue
            targets = set(dest[s:e])
            edges += len(targets)
            for d in targets:
                if good[d]:
                    good[c] = 1
                    break
            else:
                open_.append((c, targets))
        self.all_terminal.reverse()
        self.deadlocks.reverse()
        rev: dict[int, list[int]] = {}
        for c, targets in open_:
            for d in targets:
                rev.setdefault(d, []).append(c)
        queue = [d for d in rev if good[d]]
        for d in queue:
            for c in rev.get(d, ()):
                if not good[c]:
                    good[c] = 1
                    queue.append(c)
        return edges, good

    # -- states and paths ----------------------------------------------------------
    def configs_of(self, gid: int) -> tuple[Config, ...]:
        return (self.local.configs[gid],)

    def step_of(self, label: int) -> TraceStep:
        t, p = self.local.labels[label]
        return TraceStep(0, t.trigger, _params_key(p))

    def path(self, gid: int) -> tuple[list[TraceStep], list[int]]:
        gids = []
        while gid >= 0:
            gids.append(gid)
            gid = self.local.parent[gid]
        gids.reverse()
        return [self.step_of(self.local.via[g]) for g in gids[1:]], gids

    def counterexample(self, gid: int, extra: tuple[TraceStep, tuple[Config, ...]] | None,
                       meta: Mapping[str, Any]) -> Counterexample:
        steps, gids = self.path(gid)
        configs = [self.configs_of(g) for g in gids]
        if extra is not None:
            steps.append(extra[0])
            configs.append(extra[1])
        return Counterexample(self.local.protocol, tuple(steps), tuple(configs), dict(meta))

    # -- every labelled step, for the graph views --------------------------------
    def labelled_steps(self, gid: int) -> Iterator[tuple[TraceStep, int]]:
        """Every step (parallel ones and self-loops included) from ``gid``: (step, target)."""
        local = self.local
        for label in local.labels_from(gid):
            yield self.step_of(label), local.label_dest[label]

    # -- traps ------------------------------------------------------------------
    def can_settle(self) -> bytearray:
        """1 for every reached state from which an all-terminal state is reachable (a search
        cut short by max_states leaves its unexpanded states at 0)."""
        return self.good
