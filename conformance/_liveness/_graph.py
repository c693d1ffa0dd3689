"""What the liveness check runs on and what it returns: the verdicts, the step masks, the
:class:`Graph` interface a machine's or a system's explored space presents, a
:class:`Lasso` (a violation: a prefix and a fair cycle), and :class:`LivenessResult`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from typing import Protocol as Interface

from settled.model import Liveness, Pred, Value
from settled.model import Progress as ProgressProperty

from .. import _itf
from .._counterexample import GENERATOR

HOLDS, VIOLATED, AT_BOUND, NOT_CHECKED = "holds", "violated", "stuck_at_bound", "not_checked"
# A step's mask: bit i for the i-th required group it belongs to; in a system's edge masks
# also CYCLIC (a step of no finite group) or ONCE (a step of a finite group).
CYCLIC, ONCE = 1 << 60, 1 << 61
REQUIRED = CYCLIC - 1


class _Step(Interface):
    def text(self) -> str: ...
    def to_json(self) -> dict[str, Any]: ...


# --------------------------------------------------------------------------
# The graph the check runs on
# --------------------------------------------------------------------------
class Graph:
    """Nodes ``0..n-1`` (0 initial); ``succ[u]``: (v, group mask) for each v != u, the masks
    of every step u -> v ORed; ``selfmask[u]``: the masks of u's real self-loops;
    ``enabled[u]``: the masks of every step enabled in u. Bit i is the i-th required
    fairness constraint. Subclasses say how to show a node and a step."""

    def __init__(self, kinds: tuple[str, ...]) -> None:
        self.kinds = kinds
        self.succ: list[list[tuple[int, int]]] = []
        # Successors reached only by a step of a finite group: on a prefix, never in a cycle.
        self.fsucc: list[list[int]] = []
        self.selfmask: list[int] = []
        self.enabled: list[int] = []
        self._held: dict[int, tuple[int, tuple[str, ...]]] = {}

    def __len__(self) -> int:
        return len(self.succ)

    # -- for subclasses ------------------------------------------------------------
    def held(self, u: int) -> tuple[int, tuple[str, ...]]:
        """(mask of required groups held back in ``u`` by a model bound alone, where taking
        the step would enable a required step; the bound guards' names)."""
        got = self._held.get(u)
        if got is None:
            got = self._held[u] = self._held_back(u)
        return got

    def _held_back(self, u: int) -> tuple[int, tuple[str, ...]]:
        return 0, ()

    def holds(self, pred: Pred, u: int) -> bool:
        raise NotImplementedError

    def step(self, u: int, v: int, need: int, cyclic: bool = False
             ) -> tuple[_Step, tuple[str, dict[str, Any]]]:
        """A step from u to v in every group of ``need`` (``cyclic``: not of a finite group):
        (shown step, ITF action)."""
        raise NotImplementedError

    def out(self, u: int) -> Iterator[int]:
        """Every successor of ``u``, by any step."""
        for v, _m in self.succ[u]:
            yield v
        yield from self.fsucc[u]

    def values(self, u: int) -> dict[str, Value]:
        raise NotImplementedError

    def var_names(self) -> list[str]:
        raise NotImplementedError

    def lasso(self, prefix: list[int], cycle: list[tuple[int, int, int]], meta: dict[str, Any]
              ) -> Lasso:
        """The lasso through node ids: ``cycle`` is (u, v, needed mask) steps from
        ``prefix[-1]`` back to it (empty: it stutters there)."""
        steps = [self.step(a, b, 0) for a, b in itertools.pairwise(prefix)]
        loop = [self.step(a, b, m, True) for a, b, m in cycle]
        nodes = [*prefix, *(b for _a, b, _m in cycle[:-1])]
        return Lasso(self.name(), tuple(s for s, _ in steps), tuple(s for s, _ in loop),
                     tuple(self.values(u) for u in nodes),
                     tuple(a for _, a in (*steps, *loop)), len(prefix) - 1, self.var_names(),
                     meta)

    def name(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Lasso:
    """A run that repeats forever: ``prefix`` then ``cycle`` (empty: nothing happens any
    more). ``states`` are the prefix's states and the cycle's, the cycle's first state at
    index ``loop`` (the state after the prefix; the cycle's last step returns to it)."""

    model: str
    prefix: tuple[_Step, ...]
    cycle: tuple[_Step, ...]
    states: tuple[dict[str, Value], ...]
    actions: tuple[tuple[str, dict[str, Any]], ...]
    loop: int
    vars: list[str]
    meta: dict[str, Any] = field(default_factory=dict)

    def steps_text(self) -> str:
        lines = [f"{n}. {s.text()}" for n, s in enumerate(self.prefix, 1)]
        if not self.cycle:
            lines.append("then forever: nothing happens (no step that fairness requires is "
                         "enabled here)")
        else:
            first = len(self.prefix) + 1
            lines.append(f"then forever (steps {first}-{first + len(self.cycle) - 1} return to "
                         f"the state after step {len(self.prefix)}):")
            lines += [f"{n}. {s.text()}" for n, s in enumerate(self.cycle, first)]
        return "\n".join(lines)

    def to_itf(self) -> dict[str, Any]:
        closing = (self.cycle[-1].text() if self.cycle else "stutter")
        meta = {"status": "violation", "generator": GENERATOR, "model": self.model,
                **self.meta, "loop_closes_with": closing}
        return _itf.itf_trace(self.model, self.vars, list(self.states),
                              list(self.actions[:len(self.states) - 1]), meta, loop=self.loop)

    def to_json(self) -> dict[str, Any]:
        return {"prefix": [s.to_json() for s in self.prefix],
                "cycle": [s.to_json() for s in self.cycle], "loop": self.loop,
                "length": len(self.prefix) + len(self.cycle), "steps_text": self.steps_text()}


@dataclass
class Verdict:
    """One progress property: ``holds``, ``violated`` (with a lasso), ``stuck_at_bound``
    (only a model bound keeps a required step from being taken; with that lasso and the
    guards), or ``not_checked`` (the space was not explored completely)."""

    prop: ProgressProperty
    verdict: str
    lasso: Lasso | None = None
    at_bound: Lasso | None = None
    bounds: tuple[str, ...] = ()
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.prop.name, "formula": self.prop.formula(), "text": self.prop.text,
                "rules": list(self.prop.rules), "verdict": self.verdict, "why": self.why,
                "lasso": self.lasso.to_json() if self.lasso else None,
                "stuck_at_bound": ({**self.at_bound.to_json(), "bounds": list(self.bounds)}
                                   if self.at_bound else None)}


@dataclass
class LivenessResult:
    model: str
    liveness: Liveness
    verdicts: list[Verdict]
    seconds: float
    complete: bool

    @property
    def ok(self) -> bool:
        return self.complete and all(v.verdict in (HOLDS, AT_BOUND) for v in self.verdicts)

    @property
    def violated(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.verdict == VIOLATED]

    def fairness_json(self) -> list[dict[str, Any]]:
        return [{"name": f.name, "kind": f.kind, "steps": f.steps.text(), "words": f.words(),
                 "text": f.text, "rules": list(f.rules)} for f in self.liveness.fairness]

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "ok": self.ok, "complete": self.complete,
                "seconds": round(self.seconds, 3), "fairness": self.fairness_json(),
                "properties": [v.to_json() for v in self.verdicts]}

    def text(self) -> str:
        out = [f"progress ({self.model}), under this fairness:"]
        out += [f"  {f.name}: {f.words()}" for f in self.liveness.fairness]
        for v in self.verdicts:
            out.append(f"{v.verdict.upper()} {v.prop.name} ({', '.join(v.prop.rules)}): "
                       f"{v.prop.formula()}")
            if v.why:
                out.append(f"  {v.why}")
            if v.lasso is not None:
                out.append(v.lasso.steps_text())
            if v.at_bound is not None:
                out.append(f"stuck at a model bound ({', '.join(v.bounds)}), not a violation:")
                out.append(v.at_bound.steps_text())
        return "\n".join(out)

    def write_itf(self, directory: Any) -> list[Any]:
        from pathlib import Path

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for v in self.verdicts:
            for kind, lasso in (("liveness", v.lasso), ("stuck_at_bound", v.at_bound)):
                if lasso is not None:
                    written.append(_itf.write_itf(out / f"{kind}-{v.prop.name}.itf.json",
                                                  lasso.to_itf()))
        return written
