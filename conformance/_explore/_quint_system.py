"""A declared system as a Quint module, rendered from its expressions (``settled export
--quint SYSTEM --queries N``), with the semantics of ``System.enabled``.

The module
----------
* ``INST`` is the set of instance ids ``0..N-1``. An instance's control state is
  ``state.get(i)`` (``var state: int -> str``); each machine variable the system does not
  share is a map over instance ids (``var held: int -> List[int]``); a shared machine
  variable and each of the system's own variables is one ``var``.
* The machine's transitions are rendered once, for an instance ``i``:
  ``<action>_enabled(i, params)`` is the machine's enabling condition (the source states,
  the guards, and not an earlier transition of its group whose guards hold: the first
  fires, as in ``Protocol.enabled``).
* A local step (a trigger not synchronised): ``<action>`` picks an instance and the
  parameters; ``<action>_cond`` adds the system's bindings of its parameters, the
  refinement's guards and the mutex (a step that is not the holder's, taking the lock or
  raising the flag, needs it free); the action writes the instance's values, a shared
  machine variable for everyone, the refinement's effect and the lock.
* A synchronised step ``<trigger>_sync`` (one per choice of the parameters) moves every
  instance where the trigger is enabled with them, all at once, computed from the values
  before the step; it is not offered while an instance it does not move is held back by a
  model bound alone (``System.held_back``). A ``per_instance`` trigger picks each
  instance's own choice (a map from instance to the index of its parameters).
* A step of the system itself (``SharedTransition``) changes the system's variables only.
* ``settled``: a stutter once every instance is terminal, so every run goes on.
* Checks as ``val`` predicates: ``inv_<name>`` (a machine invariant on every instance),
  ``sys_<name>`` (a system invariant; aggregates are folds over ``INST``), ``domain_<var>``,
  ``step_<name>`` (a machine step property on every instance a step moves, recorded in a
  ghost ``ok_<name>`` since ``quint run`` checks state invariants only), ``no_deadlock`` and
  ``all_invariants``.

* Fairness and progress as ``temporal`` formulas, as for a machine
  (``_quint_system_live.py``); the steps that move several instances or none are rendered in
  ``_quint_system_sync.py``.

What the module cannot say (a progress predicate ordering names, a fairness group over
steps whose movers differ in actor) is listed in :attr:`QuintSystemModel.not_expressed`,
written at the top of the module, and printed by the command, which then exits 3.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from settled.model import System, Transition
from settled.model import expr as x

from ._quint import _comment, _step_groups, action_names
from ._quint_expr import UNKNOWN, ExportError, _Ctx, _Render, _set, _type, conj, disj, lit
from ._quint_system_live import NOTES as LIVE_NOTES
from ._quint_system_live import Kind, fairness_and_progress
from ._quint_system_sync import own_steps, per_instance_step, sync_steps

__all__ = ["QuintSystemModel", "render_system_module"]

# Names the module uses for its own purposes: a declared name equal to one gets a suffix.
_OWN = ("INST", "TERMINAL", "i", "j", "acc", "ch", "all_terminal")


@dataclass(frozen=True)
class QuintSystemModel:
    """The rendered module and what it holds, by our names."""

    system: System
    text: str
    actions: tuple[str, ...]
    invariants: tuple[str, ...]  # every val a `quint run --invariants` may check
    temporal: tuple[str, ...]  # progress_<name>
    not_expressed: tuple[str, ...]
    notes: tuple[str, ...]
    variables: Mapping[str, str]  # our name (machine's or system's) -> Quint's
    local: frozenset[str]  # the machine variables held per instance (Quint maps)
    ok: Mapping[str, str]  # step property -> its ghost variable


class _SysRender(_Render):
    """The machine's renderer, for instance ``self.inst``, with the system's variables and
    aggregates over instances."""

    def __init__(self, system: System) -> None:
        self.s = system
        super().__init__(system.machine)
        self.taken |= set(_OWN)
        for v in system.variables:
            self.types[v.name] = _type(v.domain, f"{system.name}: variable {v.name}")
            self.names[v.name] = self.fresh(v.name)
        self.local = frozenset(n for n in system.machine.variable_names
                               if n not in system.shared)
        self.sysvars = frozenset(v.name for v in system.variables)
        self.inst = "i"

    def _var(self, space: str, name: str, ctx: _Ctx) -> tuple[str, Any]:
        if space == "S":
            if name not in self.sysvars:
                raise ExportError(f"`{name}`: no variable of the system {self.s.name}")
            return self.names[name], UNKNOWN
        if space == "I":
            return self.at(name, "j")
        s, v = super()._var(space, name, ctx)
        if v is UNKNOWN and (s == "state" or (name in self.local and s == self.names[name])):
            return self.at(name, self.inst)
        return s, v

    def at(self, name: str, inst: str) -> tuple[str, Any]:
        """Instance ``inst``'s value of machine variable ``name`` (or its state)."""
        if name == "state":
            return f"state.get({inst})", UNKNOWN
        if name not in self.names or name in self.sysvars:
            raise ExportError(f"`{name}`: no variable of the machine {self.p.name}")
        return (f"{self.names[name]}.get({inst})" if name in self.local
                else self.names[name]), UNKNOWN

    def _aggregate(self, e: x.Node, ctx: _Ctx) -> tuple[str, Any]:
        word, body = e.args
        inner = self._src(*self._e(body, ctx))
        if word == "every":
            return f"INST.forall(j => {inner})", UNKNOWN
        if word == "some":
            return f"INST.exists(j => {inner})", UNKNOWN
        if word == "count":
            return f"INST.filter(j => {inner}).size()", UNKNOWN
        if word == "total":
            return f"INST.fold(0, (acc, j) => acc + {inner})", UNKNOWN
        raise ExportError(f"`{e.text()}`: no Quint for the aggregate {word!r}")


_NOTES = (
    "quint run checks state invariants only: step properties are recorded by each step in "
    "ghost variables ok_<name>, read by step_<name>",
    "no symmetry reduction: instances and worker processes are told apart, as in "
    "`settled explore SYSTEM --engine spin`",
    "a synchronised step whose movers would write a shared variable differently is a "
    "declaration error in `settled explore`; here the last such mover's value is taken",
)


def render_system_module(system: System, live: Any = None) -> QuintSystemModel:
    """``system`` as a Quint module, with its declared fairness and progress (``live``; by
    default the system's own, ``model.progress.liveness_of``); see the module's docstring."""
    if live is None:
        from settled.model.progress import liveness_of
        live = liveness_of(system)
    return _SysModule(system, live).render()


class _SysModule:
    """One system module being written."""

    def __init__(self, system: System, live: Any) -> None:
        self.s, self.m, self.live = system, system.machine, live
        self.r = r = _SysRender(system)
        self.mod = r.fresh(system.name)
        self.n = r.names
        self.ok = {sp.name: r.fresh(f"ok_{sp.name}") for sp in self.m.step_properties}
        self.body: list[str] = []
        self.add = self.body.append
        self.enabled: list[str] = []  # per machine transition: its enabled def's name
        self.pn: list[dict[str, str]] = []  # per machine transition: its parameters' names
        self.actions: list[str] = []
        self.conds: list[str] = []  # one "this step is enabled" predicate per step kind
        self.invariants: list[str] = []
        self.temporal: list[str] = []
        self.kinds: list[Kind] = []  # how fairness classifies each action
        self.not_expressed: list[str] = []
        self.refine = {f.trigger: f for f in system.refinements}

    def render(self) -> QuintSystemModel:
        self.configuration()
        self.machine_transitions()
        self.local_steps()
        for trigger in self.s.sync:
            if trigger in self.s.per_instance:
                per_instance_step(self, trigger)
            else:
                sync_steps(self, trigger)
        own_steps(self)
        self.step_and_settled()
        self.checks()
        self.body += fairness_and_progress(self)
        s = self.s
        head = [f"// {s.name}: {_comment(s.meaning)}",
                f"// Generated by `settled export --quint` from the declaration of {s.name} "
                f"({s.instances} instances of {self.m.name}); do not edit.",
                "// Check every invariant with:",
                f"//   quint run --invariant=all_invariants --max-steps=30 {self.mod}.qnt",
                "// Notes:", *(f"//   - {note}" for note in (*_NOTES, *LIVE_NOTES))]
        if self.not_expressed:
            head.append("// NOT EXPRESSED in Quint (left out of this module):")
            head += [f"//   - {item}" for item in self.not_expressed]
        text = "\n".join([*head, f"module {self.mod} {{", *self.body, "}", ""])
        return QuintSystemModel(s, text, tuple(self.actions), tuple(self.invariants),
                                tuple(self.temporal), tuple(self.not_expressed),
                                (*_NOTES, *LIVE_NOTES), dict(self.n),
                                self.r.local, dict(self.ok))

    # -- the configuration ---------------------------------------------------------------
    def all_vars(self) -> list[str]:
        m, n = self.m, self.n
        return ["state", *(n[v.name] for v in m.variables),
                *(n[v.name] for v in self.s.variables), *self.ok.values()]

    def configuration(self) -> None:
        s, m, r, n, add = self.s, self.m, self.r, self.n, self.add
        add(f"  pure val INST = 0.to({s.instances - 1})")
        add(f"  pure val TERMINAL = {_set(sorted(m.terminal_states))}")
        add(f"  /// each instance's control state: one of {', '.join(m.state_names)}")
        add("  var state: int -> str")
        for v in m.variables:
            where = "per instance" if v.name in r.local else "shared by every instance"
            add(f"  /// {_comment(v.meaning)} ({where}; one of {_comment(x.values_text(v.domain))})")
            ty = r.types[v.name]
            add(f"  var {n[v.name]}: {'int -> ' + ty if v.name in r.local else ty}")
        for v in s.variables:
            add(f"  /// the system's: {_comment(v.meaning)} (one of "
                f"{_comment(x.values_text(v.domain))})")
            add(f"  var {n[v.name]}: {r.types[v.name]}")
        for ok in self.ok.values():
            add(f"  var {ok}: bool")
        add("")
        add("  action init = all {")
        add(f"    state' = INST.mapBy(_ => {lit(m.initial)}),")
        for v in m.variables:
            value = lit(v.initial)
            add(f"    {n[v.name]}' = {f'INST.mapBy(_ => {value})' if v.name in r.local else value},")
        for v in s.variables:
            add(f"    {n[v.name]}' = {lit(v.initial)},")
        for ok in self.ok.values():
            add(f"    {ok}' = true,")
        add("  }")
        add("")

    # -- the machine, for one instance ---------------------------------------------------------
    def machine_transitions(self) -> None:
        """``<action>_enabled(i, params)`` for every machine transition."""
        m, r, add = self.m, self.r, self.add
        names = action_names(m.transitions, r)
        earlier = _step_groups(m)
        add("  // ---- the machine's transitions, on instance i " + "-" * 38)
        for k, t in enumerate(m.transitions):
            pn = {q.name: (q.name if q.name not in r.taken and re.match(r"[a-z]\w*$", q.name)
                           else r.fresh(f"{q.name}_param")) for q in t.params}
            self.pn.append(pn)
            self.enabled.append(f"{names[k]}_enabled")
            sig = ", ".join(["i: int", *(f"{pn[q.name]}: {_type(q.domain, t.trigger)}"
                                         for q in t.params)])
            add(f"  /// {t.trigger} ({', '.join(t.rules)}), by the {t.actor}: "
                f"{_comment(t.meaning)}")
            add(f"  def {names[k]}_enabled({sig}): bool = and {{")
            add(f"    state.get(i).in({_set(t.source)}),")
            ctx = self.ctx(t, pn)
            for g in t.guards:
                add(f"    // {g.name}{' (a model bound)' if g.bound else ''}: {_comment(g.text)}")
                add(f"    {r.expr(g.expr, ctx)},")
            for u, where in earlier[k]:
                if {q.name for q in u.params} != set(pn):
                    continue
                parts = [f"state.get(i).in({_set(where)})"] if set(where) != set(t.source) else []
                for q in u.params:
                    mine = next(p for p in t.params if p.name == q.name)
                    if set(q.domain) != set(mine.domain):
                        parts.append(f"{pn[q.name]}.in({_set(q.domain)})")
                parts += [r.expr(g.expr, _Ctx(pn, u.trigger, u.actor)) for g in u.guards]
                add(f"    not({conj(parts)}),  // an earlier {u.trigger} of its group fires first")
            add("    true,")
            add("  }")
        add("")

    def ctx(self, t: Transition, params: Mapping[str, str]) -> _Ctx:
        before = t.source[0] if len(t.source) == 1 else None
        return _Ctx(params, t.trigger, t.actor, before, t.dest,
                    {k: x.lift(e) for k, e in t.effect.updates.items()})

    def call(self, k: int, inst: str, params: Mapping[str, str]) -> str:
        t = self.m.transitions[k]
        return f"{self.enabled[k]}({', '.join([inst, *(params[q.name] for q in t.params)])})"

    def effects(self, k: int, params: Mapping[str, str]) -> dict[str, str]:
        """Transition ``k``'s new values on instance ``i``: state, machine variables, step
        property verdicts (by our names; "state" and "ok:<name>")."""
        t, r = self.m.transitions[k], self.r
        ctx = self.ctx(t, params)
        out = {"state": lit(t.dest) if t.dest is not None else "state.get(i)"}
        for name, e in ctx.effect.items():
            out[name] = r.expr(e, ctx)
        for sp in self.m.step_properties:
            out[f"ok:{sp.name}"] = r.expr(sp.expr, ctx)
        return out

    # -- the system's additions to a step ------------------------------------------------------
    def fits(self, params: Mapping[str, str]) -> list[str]:
        """The system's bindings of the step's parameters (``params``: name -> source)."""
        return [f"({params[b.param]} == {self.r.expr(b.expr, _Ctx({}))})"
                for b in self.s.bind if b.param in params]

    def refinement(self, trigger: str, params: Mapping[str, str]) -> tuple[list[str],
                                                                           dict[str, str]]:
        ref = self.refine.get(trigger)
        if ref is None:
            return [], {}
        ctx = _Ctx(params, trigger)
        return ([self.r.expr(g.expr, ctx) for g in ref.guards],
                {name: self.r.expr(x.lift(e), ctx) for name, e in ref.effect.updates.items()})

    def mutex(self, k: int, params: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        """The lock's condition on a local step of transition ``k`` and its new value."""
        mx = self.s.mutex
        if mx is None:
            return [], {}
        t = self.m.transitions[k]
        ctx = self.ctx(t, params)
        had = self.r.at(mx.flag, "i")[0]
        has = self.r.expr(x.Var("A", mx.flag), ctx)
        lock = self.n[mx.variable]
        takes = "true" if t.trigger in mx.takes else has
        cond = f"({had} or {lock} != \"held\" or not({takes}))"
        return [cond], {mx.variable: f"(if ({has}) \"held\" else if ({had}) \"free\" else {lock})"}

    def assign(self, new: Mapping[str, str]) -> None:
        """Every variable's next value: ``new`` by our names (per-instance ones as whole maps),
        the others unchanged; step verdicts true unless given."""
        n = self.n
        self.add(f"    state' = {new.get('state', 'state')},")
        for v in (*self.m.variables, *self.s.variables):
            self.add(f"    {n[v.name]}' = {new.get(v.name, n[v.name])},")
        for sp, ok in self.ok.items():
            self.add(f"    {ok}' = {new.get(f'ok:{sp}', 'true')},")

    # -- the steps -------------------------------------------------------------------------------
    def local_steps(self) -> None:
        m, s, r, add = self.m, self.s, self.r, self.add
        add("  // ---- local steps: one instance moves " + "-" * 46)
        for k, t in enumerate(m.transitions):
            if t.trigger in s.sync:
                continue
            pn = self.pn[k]
            name = self.enabled[k][:-len("_enabled")]
            sig = ", ".join(["i: int", *(f"{pn[q.name]}: {_type(q.domain, t.trigger)}"
                                         for q in t.params)])
            args = ", ".join(["i", *(pn[q.name] for q in t.params)])
            guards, ref_eff = self.refinement(t.trigger, pn)
            lock, lock_eff = self.mutex(k, pn)
            clash = set(ref_eff) & set(lock_eff)
            if clash:
                raise ExportError(f"{s.name}: the refinement of {t.trigger} writes the lock "
                                  f"{sorted(clash)}")
            add(f"  def {name}_cond({sig}): bool = and {{")
            for part in [self.call(k, "i", pn), *self.fits(pn), *guards, *lock]:
                add(f"    {part},")
            add("  }")
            add(f"  action {name}_with({sig}): bool = all {{")
            add(f"    {name}_cond({args}),")
            new = {}
            for var, src in self.effects(k, pn).items():
                if var == "state" or var in r.local:
                    new[var] = f"{r.names.get(var, 'state')}.set(i, {src})"
                else:
                    new[var] = src
            self.assign({**new, **ref_eff, **lock_eff})
            add("  }")
            add(f"  action {name} = {{")
            add("    nondet i = INST.oneOf()")
            for q in t.params:
                add(f"    nondet {pn[q.name]} = {_set(q.domain)}.oneOf()")
            add(f"    {name}_with({args})")
            add("  }")
            self.actions.append(name)
            self.kinds.append(Kind(name, t.actor, t.trigger, {}, {
                q.name: (pn[q.name], tuple(q.domain)) for q in t.params},
                f"{name}_with({args})", instance=True))
            picks = "".join(f"{_set(q.domain)}.exists({pn[q.name]} => " for q in t.params)
            self.conds.append(f"INST.exists(i => {picks}{name}_cond({args}){')' * len(t.params)})")
        add("")

    def step_and_settled(self) -> None:
        add = self.add
        add("  val all_terminal = INST.forall(i => state.get(i).in(TERMINAL))")
        add("  /// once every instance is terminal, the configuration may stay as it is")
        add("  action settled = all {")
        add("    all_terminal,")
        for name in self.all_vars():
            add(f"    {name}' = {name},")
        add("  }")
        add("  action step = any {")
        for a in self.actions:
            add(f"    {a},")
        add("    settled,")
        add("  }")
        add("")

    # -- the checks ---------------------------------------------------------------------------
    def check(self, name: str, text: str, comment: str) -> None:
        q = name if name == "no_deadlock" else self.r.fresh(name)  # reserved: no clash
        self.invariants.append(q)
        self.add(f"  /// {_comment(comment)}")
        self.add(f"  val {q} = {text}")

    def checks(self) -> None:
        s, m, r, n = self.s, self.m, self.r, self.n
        self.add("  // ---- invariants " + "-" * 66)
        for inv in m.invariants:
            self.check(f"inv_{inv.name}", f"INST.forall(i => {r.expr(inv.expr, _Ctx())})",
                       f"on every instance: {inv.meaning} ({', '.join(inv.rules)}): {inv.text}")
        for sinv in s.invariants:
            self.check(f"sys_{sinv.name}", r.expr(sinv.expr, _Ctx()),
                       f"{sinv.meaning} ({', '.join(sinv.rules)}): {sinv.text}")
        for sp in m.step_properties:
            self.check(f"step_{sp.name}", self.ok[sp.name],
                       f"step property, on every instance a step moves: {sp.meaning} "
                       f"({', '.join(sp.rules)}): {sp.text}")
        for v in (*m.variables, *s.variables):
            inside = f"{n[v.name]}.get(i).in({_set(v.domain)})"
            self.check(f"domain_{v.name}", f"INST.forall(i => {inside})" if v.name in r.local
                       else f"{n[v.name]}.in({_set(v.domain)})", f"{v.name} inside its domain")
        self.check("no_deadlock", disj(["all_terminal", *self.conds]),
                   "not every instance terminal: some step is enabled")
        self.add("  val all_invariants = and {")
        for name in self.invariants:
            self.add(f"    {name},")
        self.add("  }")
