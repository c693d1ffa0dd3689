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
        # DiGraph edges (parallel steps joined, a self-loop counted once) and, for the traps,
        # each state's distinct successors other than itself
        self.moves: list[list[int]] = []
        start, dest = local.label_start, local.label_dest
        edges = 0
        for c in range(local.expanded):
            s, e = start[c], start[c + 1]
            if s == e:
                (self.all_terminal if local.terminal(c) else self.deadlocks).append(c)
                self.moves.append([])
                continue
            targets = set(dest[s:e])
            edges += len(targets)
            targets.discard(c)
            self.moves.append(list(targets))
        self.edges = edges

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
        """1 for every reached state from which an all-terminal state is reachable."""
        rev: list[list[int]] = [[] for _ in range(self.states)]
        for c, targets in enumerate(self.moves):
            for d in targets:
                rev[d].append(c)
        good = bytearray(self.states)
        queue = list(self.all_terminal)
        for g in queue:
            good[g] = 1
        for g in queue:
            for p in rev[g]:
                if not good[p]:
                    good[p] = 1
                    queue.append(p)
        return good
