"""Liveness of a system, checked on the symmetry-reduced graph the system explorer keeps;
a lasso is rebuilt on concrete configurations (unrolled where the cycle returns to its
first configuration only up to a renaming).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from settled.model import Liveness, Params, Pred, Value

from ._graph import CYCLIC, ONCE, REQUIRED, Graph, Lasso, LivenessResult
from ._machine import classifier, held_in
from ._search import check_graph


# --------------------------------------------------------------------------
# A system: the symmetry-reduced graph the system explorer keeps
# --------------------------------------------------------------------------
def system_classifier(liveness: Liveness) -> Callable[[str, str, Params], int]:
    """A step's mask for the system explorer: required groups, plus CYCLIC or ONCE."""
    required = classifier(liveness)
    finite = liveness.finite

    def mask(actor: str, trigger: str, params: Params) -> int:
        once = any(f.steps.matches(actor, trigger, params) for f in finite)
        return required(actor, trigger, params) | (ONCE if once else CYCLIC)
    return mask


class SystemGraph(Graph):
    """The canonical configurations a system explorer visited, with its edge masks."""

    def __init__(self, system: Any, graph: Any, liveness: Liveness) -> None:
        super().__init__(tuple(f.kind for f in liveness.required))
        sp, keys, _parent, start, succ, masks, visited = graph
        self.system, self.sp, self.keys = system, sp, keys
        self.classify = system_classifier(liveness)
        for g in range(visited):
            en = selfm = 0
            out: dict[int, int] = {}
            fout: set[int] = set()
            a, b = start[g], start[g + 1]
            for n, m in zip(succ[a:b], masks[a:b], strict=True):
                en |= m & REQUIRED
                if not m & CYCLIC:
                    if n != g:
                        fout.add(n)
                elif n == g:
                    selfm |= m & REQUIRED
                else:
                    out[n] = out.get(n, 0) | (m & REQUIRED)
            self.succ.append(list(out.items()))
            self.fsucc.append(sorted(fout - out.keys()))
            self.selfmask.append(selfm)
            self.enabled.append(en)
        self._preds: dict[int, Any] = {}

    def name(self) -> str:
        return str(self.system.name)

    def holds(self, pred: Pred, u: int) -> bool:
        got = self._preds.get(id(pred))
        if got is None:
            fn = pred.compile(self.system.machine.variable_names)
            each = [fn(c.state, c.values) for c in self.sp.configs]  # per instance config
            shared_ok = Pred(where=pred.system).compile(self.system.variable_names)
            seen0: dict[Any, bool] = {}
            got = self._preds[id(pred)] = (each, seen0, shared_ok, pred.instances == "some")
        each, seen, shared_ok, some = got
        ids, shared = self.keys[u]
        ok = seen.get(shared)
        if ok is None:
            ok = seen[shared] = shared_ok("", shared)
        if not ok:
            return False
        return any(each[i] for i in ids) if some else all(each[i] for i in ids)

    def _held_back(self, u: int) -> tuple[int, tuple[str, ...]]:
        mask, names = 0, set[str]()
        m = self.system.machine
        for i in self.keys[u][0]:
            got, why = held_in(m, self.classify, self.sp.configs[i], self.enabled[u])
            mask |= got
            names.update(why)
        return mask, tuple(sorted(names))

    def var_names(self) -> list[str]:
        m = self.system.machine
        return sorted([*self.system.variable_names,
                       *(f"q{i}.{n}" for i in range(self.system.instances)
                         for n in ("state", *m.variable_names))])

    def values(self, u: int) -> dict[str, Value]:
        raise NotImplementedError  # a system's lasso is rebuilt on concrete configurations

    def lasso(self, prefix: list[int], cycle: list[tuple[int, int, int]], meta: dict[str, Any]
              ) -> Lasso:
        from settled.conformance._explore._system import SystemCounterexample, label

        system, sp = self.system, self.sp
        cfg = system.initial_config()
        configs, steps = [cfg], []

        def walk(target: int, need: int, cyclic: bool) -> None:
            nonlocal cfg
            for st in system.enabled(cfg, sp.local_steps):
                a = st.after
                if sp.canon(tuple(sp.intern(c) for c in a.instances), a.shared) != \
                        self.keys[target]:
                    continue
                if st.moves:
                    t = st.moves[0][1].transition
                    m = self.classify(t.actor, st.trigger, st.params)
                else:
                    m = self.classify(st.shared.actor, st.trigger, st.params)
                if (m & need) == need and not (cyclic and not m & CYCLIC):
                    steps.append(label(st))
                    configs.append(a)
                    cfg = a
                    return
            raise AssertionError(f"{system.name}: no concrete step to a lasso state")

        for b in prefix[1:]:
            walk(b, 0, False)
        loop, start = len(steps), cfg
        rounds = 0
        while cycle:
            for _a, b, m in cycle:
                walk(b, m, True)
            rounds += 1
            if cfg == start or rounds >= 24:
                break
        shown = SystemCounterexample(system, (), ())
        states = [shown._values(c) for c in configs]
        closed = not cycle or cfg == start
        if cycle:
            states.pop()  # the cycle's last step returns to the state at ``loop``
        meta = {**meta, "cycle_rounds": rounds,
                **({} if closed else {"loop_up_to_renaming": True})}
        actions = tuple((s.trigger, {**dict(s.params), "who": s.who}) for s in steps)
        return Lasso(system.name, tuple(steps[:loop]), tuple(steps[loop:]), tuple(states),
                     actions, loop, self.var_names(), meta)


def check_system(result: Any, liveness: Liveness | None = None) -> LivenessResult:
    """The progress properties of a system, on a result of ``explore_system(..., classify=)``."""
    from ...model.progress import liveness_of

    if result.graph is None or len(result.graph[5]) != len(result.graph[4]):  # no masks
        raise ValueError("check_system: explore the system with classify=system_classifier(...)")
    system = result.graph[0].system
    live = liveness or liveness_of(system)
    graph = SystemGraph(system, result.graph, live)
    return check_graph(graph, live, system.name, result.complete,
                       {"instances": system.instances})


def explore_system_liveness(system: Any, liveness: Liveness | None = None, **kw: Any
                            ) -> tuple[Any, LivenessResult]:
    """Explore ``system`` keeping its graph, then check its progress properties."""
    from settled.conformance._explore._system import explore_system

    from ...model.progress import liveness_of

    live = liveness or liveness_of(system)
    result = explore_system(system, classify=system_classifier(live), **kw)
    return result, check_system(result, live)
