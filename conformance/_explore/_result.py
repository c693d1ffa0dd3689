"""What an exploration returns: :class:`ExploreResult`, its findings and counts, the graph
of the reached space (``networkx``, imported only when asked for) and the counterexamples
written as ITF.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from settled.model import Config

from .. import _itf

if TYPE_CHECKING:  # networkx is imported by graph(), not by every command that explores
    import networkx as nx

from .._counterexample import Finding, TraceStep, to_plain
from ._space import _Space


# --------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------
@dataclass
class ExploreResult:
    """What one exploration found. ``to_json()`` is the machine-readable report."""

    model: str
    bounds: dict[str, Any]
    states: int
    edges: int
    seconds: float
    states_per_second: float
    violations: list[Finding]
    deadlocks: list[Finding]
    traps: list[Finding]
    unreached_states: list[Finding]
    unfired_transitions: list[Finding]
    _space: _Space = field(repr=False, compare=False)
    # Properties no declared effect can break: exploring cannot fail them, so they are not
    # reported as passing here but as checked by lockstep only.
    lockstep_only: list[dict[str, Any]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """False when ``max_states`` stopped the search (then no deadlock-free, trap, unreached
        or unfired verdict is given: those need the whole space)."""
        return bool(self.bounds["complete"])

    @property
    def findings(self) -> list[Finding]:
        return [*self.violations, *self.deadlocks, *self.traps, *self.unreached_states,
                *self.unfired_transitions]

    @property
    def ok(self) -> bool:
        """No finding of any kind. A search cut short by ``max_states`` can still be ok;
        check :attr:`complete` for a verdict about the whole space."""
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model, "bounds": to_plain(self.bounds), "states": self.states,
            "edges": self.edges, "seconds": self.seconds,
            "states_per_second": self.states_per_second,
            "violations": [f.to_json() for f in self.violations],
            "deadlocks": [f.to_json() for f in self.deadlocks],
            "traps": [f.to_json() for f in self.traps],
            "unreached_states": [f.to_json() for f in self.unreached_states],
            "unfired_transitions": [f.to_json() for f in self.unfired_transitions],
            "lockstep_only": self.lockstep_only,
        }

    def iter_steps(self) -> Iterator[tuple[tuple[Config, ...], TraceStep, tuple[Config, ...]]]:
        """Every labelled step of the reached graph: (before, step, after), in BFS order."""
        space = self._space
        for g in range(space.head):
            before = space.configs_of(g)
            for step, target in space.labelled_steps(g):
                yield before, step, space.configs_of(target)

    def graph(self) -> nx.DiGraph:
        """The reached global graph. Nodes are state ids in BFS order (0 is initial) and carry
        ``q<i>.state`` and ``q<i>.<variable>``; an edge carries the first step between the two
        states (``instance``, ``trigger``, ``params``) and ``steps``, the text of all of them."""
        space = self._space
        p = space.local.protocol
        import networkx as nx

        g = nx.DiGraph(model=self.model, instances=space.n)
        for gid in range(space.states):
            configs = space.configs_of(gid)
            attrs: dict[str, Any] = {"initial": gid == 0,
                                     "terminal": all(c.state in p.terminal_states for c in configs)}
            for i, c in enumerate(configs):
                attrs[f"q{i}.state"] = c.state
                attrs.update({f"q{i}.{k}": v for k, v in p.view(c).items()})
            g.add_node(gid, **attrs)
        for gid in range(space.head):
            for step, target in space.labelled_steps(gid):
                if g.has_edge(gid, target):
                    g.edges[gid, target]["steps"].append(step.text())
                else:
                    g.add_edge(gid, target, instance=step.instance, trigger=step.trigger,
                               params=step.params_dict, steps=[step.text()])
        return g

    def graph_json(self) -> dict[str, Any]:
        """The graph as node-link JSON (deterministic: BFS ids, edges in BFS order)."""
        import networkx as nx

        data = nx.node_link_data(self.graph(), edges="edges")
        plain: dict[str, Any] = to_plain(data)
        return plain

    def write_itf(self, directory: str | Path) -> list[Path]:
        """One ``<kind>-<name>.itf.json`` per finding that has a counterexample."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for f in self.findings:
            if f.counterexample is not None:
                written.append(_itf.write_itf(out / f.file_name, f.counterexample.to_itf()))
        return written
