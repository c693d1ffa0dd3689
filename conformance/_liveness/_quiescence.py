"""The quiescence bound: how many steps a fault-free, fair run may take to settle from a
configuration (the bound the lockstep kit's quiescence phase runs the implementation to).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from settled.model import Config, Liveness, Params, Protocol, Transition, Value

from ._machine import classifier


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
    search = _Longest(protocol, classifier(live), set(resting) | protocol.terminal_states, fault)
    try:
        steps = search.longest(start)
    except _Cycle as loop:
        trail = search.trail
        cut = next(i for i, (cfg, _l) in enumerate(trail) if cfg == loop.at)
        return QuiescenceBound(start, None, (), tuple(label for _c, label in trail[cut:]),
                               tuple(search.stuck))
    path = []
    at: Config = start
    while search.memo[at][1] is not None:
        nxt = search.memo[at][1]
        assert nxt is not None
        path.append(nxt[0])
        at = nxt[1]
    return QuiescenceBound(start, steps, tuple(path), (), tuple(search.stuck))


_Label = tuple[str, tuple[tuple[str, Value], ...]]


class _Cycle(Exception):
    """The fault-free space has a cycle through ``at``."""

    def __init__(self, at: Config) -> None:
        self.at = at


class _Longest:
    """Longest fault-free paths over the required steps, memoised per configuration."""

    def __init__(self, protocol: Protocol, classify: Callable[[str, str, Params], Any],
                 ends: set[str], fault: Callable[[Transition, Params], bool]) -> None:
        self.protocol, self.classify, self.ends, self.fault = protocol, classify, ends, fault
        self.memo: dict[Config, tuple[int, tuple[Any, Config] | None]] = {}
        self.on_path: dict[Config, int] = {}
        self.trail: list[tuple[Config, _Label]] = []
        self.stuck: list[Config] = []

    def moves(self, c: Config) -> list[tuple[_Label, Config]]:
        return [((s.transition.trigger, tuple(s.params.items())), s.after)
                for s in self.protocol.enabled(c)
                if self.classify(s.transition.actor, s.transition.trigger, s.params)
                and not self.fault(s.transition, s.params)]

    def longest(self, c: Config) -> int:
        """Iterative DFS (post-order) computing the longest path from ``c``; raises
        :class:`_Cycle` (with the path to it in ``trail``) on a cycle."""
        memo, on_path, trail = self.memo, self.on_path, self.trail
        stack: list[tuple[Config, Iterator[Any]]] = [(c, iter(self.moves(c)))]
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
                    stack.append((v, iter(self.moves(v))))
                    advanced = True
                    break
                length = memo[v][0] + 1
                if length > best[u][0]:
                    best[u] = (length, (label, v))
            if advanced:
                continue
            stack.pop()
            del on_path[u]
            if best[u][1] is None and u.state not in self.ends:
                self.stuck.append(u)
            memo[u] = best[u]
            if trail:
                parent, label = trail.pop()
                if memo[u][0] + 1 > best[parent][0]:
                    best[parent] = (memo[u][0] + 1, (label, u))
        return memo[c][0]
