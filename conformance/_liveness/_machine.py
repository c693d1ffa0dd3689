"""Liveness of one machine, checked on the explorer's local space: its graph, the
classifier of its steps into fairness groups, and the entry points ``check_machine`` and
``check_protocol``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from settled.model import Config, Liveness, Params, Pred, Protocol, Transition, Value

from .._counterexample import to_plain
from ._graph import REQUIRED, Graph, LivenessResult, _Step
from ._search import check_graph


# --------------------------------------------------------------------------
# One machine: the explorer's local space
# --------------------------------------------------------------------------
def classifier(liveness: Liveness) -> Callable[[str, str, Params], int]:
    required = liveness.required

    def mask(actor: str, trigger: str, params: Params) -> int:
        out = 0
        for i, f in enumerate(required):
            if f.steps.matches(actor, trigger, params):
                out |= 1 << i
        return out
    return mask


@dataclass(frozen=True, slots=True)
class MachineStep:
    trigger: str
    params: tuple[tuple[str, Value], ...]

    def text(self) -> str:
        from .._counterexample import TraceStep

        return TraceStep(0, self.trigger, self.params).text()

    def to_json(self) -> dict[str, Any]:
        return {"instance": 0, "trigger": self.trigger,
                "params": {k: to_plain(v) for k, v in self.params}}


class MachineGraph(Graph):
    """The reachable configurations of one machine (the explorer's ``_Local``)."""

    def __init__(self, local: Any, liveness: Liveness) -> None:
        super().__init__(tuple(f.kind for f in liveness.required))
        self.local = local
        p: Protocol = local.protocol
        self.protocol = p
        classify = classifier(liveness)
        self.classify = classify
        finite = liveness.finite
        self.finite: Callable[[str, str, Params], bool] = lambda a, t, prm: any(
            f.steps.matches(a, t, prm) for f in finite)
        cache: dict[tuple[int, tuple[tuple[str, Value], ...]], int] = {}
        fcache: dict[tuple[int, tuple[tuple[str, Value], ...]], bool] = {}
        labels, dest = local.labels, local.label_dest
        self._masks: list[int] = []
        for c in range(local.expanded):
            en = selfm = 0
            out: dict[int, int] = {}
            fout: set[int] = set()
            for lab in local.labels_from(c):
                t, params = labels[lab]
                key = (id(t), tuple(params.items()))
                m = cache.get(key)
                if m is None:
                    m = cache[key] = classify(t.actor, t.trigger, params)
                en |= m
                d = dest[lab]
                fin = fcache.get(key)
                if fin is None:
                    fin = fcache[key] = self.finite(t.actor, t.trigger, params)
                if fin:
                    if d != c:
                        fout.add(d)
                elif d == c:
                    selfm |= m
                else:
                    out[d] = out.get(d, 0) | m
            self.succ.append(list(out.items()))
            self.fsucc.append(sorted(fout - out.keys()))
            self.selfmask.append(selfm)
            self.enabled.append(en)
        self._preds: dict[int, Callable[[str, tuple[Value, ...]], bool]] = {}

    def name(self) -> str:
        return self.protocol.name

    def holds(self, pred: Pred, u: int) -> bool:
        fn = self._preds.get(id(pred))
        if fn is None:
            fn = self._preds[id(pred)] = pred.compile(self.protocol.variable_names)
        c = self.local.configs[u]
        return fn(c.state, c.values)

    def step(self, u: int, v: int, need: int, cyclic: bool = False
             ) -> tuple[_Step, tuple[str, dict[str, Any]]]:
        local = self.local
        for lab in local.labels_from(u):
            t, params = local.labels[lab]
            if local.label_dest[lab] == v and (
                    self.classify(t.actor, t.trigger, params) & need) == need and not (
                    cyclic and self.finite(t.actor, t.trigger, params)):
                return (MachineStep(t.trigger, tuple(params.items())),
                        (t.trigger, {**dict(params), "instance": 0}))
        raise AssertionError(f"no step {u} -> {v}")

    def values(self, u: int) -> dict[str, Value]:
        c: Config = self.local.configs[u]
        return {"q0.state": c.state, **{f"q0.{k}": x for k, x in self.protocol.view(c).items()}}

    def var_names(self) -> list[str]:
        return ["q0.state", *(f"q0.{n}" for n in self.protocol.variable_names)]

    def _held_back(self, u: int) -> tuple[int, tuple[str, ...]]:
        return held_in(self.protocol, self.classify, self.local.configs[u], self.enabled[u])


def held_in(p: Protocol, classify: Callable[[str, str, Params], int], c: Config,
            enabled: int) -> tuple[int, tuple[str, ...]]:
    """The required groups a model bound alone holds back in ``c`` (where taking the step
    would move on), and the bound guards' names."""
    v = p.view(c)
    mask, names = 0, set[str]()
    for t in p.transitions_from(c.state):
        bounds = [g for g in t.guards if g.bound]
        if not bounds:
            continue
        for params in t.param_choices():
            m = classify(t.actor, t.trigger, params) & REQUIRED
            if not m or m & enabled == m:
                continue
            if not all(g.fn(v, params) for g in t.guards if not g.bound):
                continue
            stopping = [g.name for g in bounds if not g.fn(v, params)]
            if stopping and _leads_to_required(p, classify, c, t, params):
                mask |= m
                names.update(stopping)
    return mask, tuple(sorted(names))


def _leads_to_required(p: Protocol, classify: Callable[[str, str, Params], int], c: Config,
                       t: Transition, params: Params) -> bool:
    """Taken with its bound ignored, does ``t`` move the control state, or lead where a
    required step is enabled?"""
    v = p.view(c)
    after = Config(t.target(c.state), p.replace(c, t.effect(v, params)))
    return after.state != c.state or any(
        classify(s.transition.actor, s.transition.trigger, s.params) & REQUIRED
        for s in p.enabled(after))


def check_machine(result: Any, liveness: Liveness | None = None) -> LivenessResult:
    """The progress properties of the machine of an explore result (one instance)."""
    from ...model.progress import liveness_of

    space = result._space
    local = space.local
    live = liveness or liveness_of(local.protocol)
    if space.n != 1:
        raise ValueError("check_machine: liveness is checked on one instance of a machine; "
                         "use the declared system for several")
    graph = MachineGraph(local, live)
    return check_graph(graph, live, local.protocol.name, result.complete,
                       {"bounds": to_plain(result.bounds)})


def check_protocol(protocol: Protocol, liveness: Liveness | None = None) -> LivenessResult:
    """Explore ``protocol`` (one instance) and check its progress properties."""
    from .._explore import explore

    return check_machine(explore(protocol), liveness)
