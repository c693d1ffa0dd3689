"""A declared system as a Promela model, rendered from its expressions (``settled export
--promela SYSTEM``), and SPIN's findings mapped back to our instances (``settled explore
SYSTEM --engine spin``).

The model
---------
As for one machine (``_promela``): one process whose body is a ``do`` loop of ``d_step``
options, each one *step* of ``System.enabled``, so every configuration SPIN stores at the
loop head is one concrete configuration of ours (no symmetry reduction: it is compared
with our explorer's count without it) and every executed option one of our steps:

* a local step: one machine label (a transition with one choice of its parameters) on
  one instance ``q<i>``, whose variables are the machine's with the suffix ``_q<i>``
  (``v_held_q0``, ``st_q0``), except the machine variables the system shares, held once;
* a synchronised step: one per trigger and parameter choice (for a ``per_instance``
  trigger, one per combination of each instance's choice or its not taking part); every
  instance where the trigger is enabled moves, computed from the values before the step;
  it is not offered while an instance it does not move is held back by a model bound
  alone (``System.held_back``);
* a step of the system itself (``SharedTransition``), over the system's variables.

Bindings, refinements and the mutex are conditions and effects of these options, rendered
from the same expressions as ``System.enabled`` evaluates. Every option is followed by the
checks on the new configuration (each instance's invariants and domains, the system's
invariants and the domains of its variables), and the machine's step properties are
checked on every instance that moves. The ``timeout`` option is our deadlock: not every
instance terminal and no step. Counts are subtracted as for a machine (``SpinResult``).

The machine renderer (``_promela._Render``) renders every expression, once per machine
label; the result for instance ``i`` is the same text with the instance's identifiers
renamed, so one instance's step means exactly what the machine's label means.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from settled.model import Params, System, Transition
from settled.model import expr as x

from ._promela import UNKNOWN, ExportError, PromelaModel, _Ctx, _ident, _Render
from ._promela_machine import _Codes
from ._system import SystemTraceStep


class _SystemRender(_Render):
    """The machine's renderer, knowing the system's names and its aggregates over instances."""

    def __init__(self, system: System) -> None:
        self.system = system
        super().__init__(system.machine)
        for v in system.variables:
            kinds = {_kind_of(d) for d in v.domain}
            if len(kinds) != 1 or kinds & {"tuple"}:
                raise ExportError(f"{system.name}: system variable {v.name} must hold values of "
                                  "one scalar kind")
            self.kinds[v.name] = kinds.pop()
        local = [n for n in system.machine.variable_names if n not in system.shared]
        self._local = re.compile(r"\b([vn])_(" + "|".join(
            re.escape(n) for n in sorted(local, key=len, reverse=True)) + r")\b") if local else None

    def _all_exprs(self) -> list[x.Expr]:
        s = self.system
        out = super()._all_exprs()
        out += [x.Const(d) for v in s.variables for d in v.domain]
        out += [b.expr for b in s.bind] + [i.expr for i in s.invariants]
        for r in s.refinements:
            out += [g.expr for g in r.guards] + [x.lift(e) for e in r.effect.updates.values()]
        for t in s.transitions:
            out += [g.expr for g in t.guards] + [x.lift(e) for e in t.effect.updates.values()]
            out += [x.Const(d) for p in t.params for d in p.domain if _kind_of(d) == "code"]
        out += [x.Const(v) for v in ("free", "held")] if s.mutex else []
        return out

    def rename(self, src: str, i: int) -> str:
        """Machine-level Promela ``src`` for instance ``i``."""
        if self._local is not None:
            src = self._local.sub(lambda m: f"{m.group(1)}_{m.group(2)}_q{i}", src)
        return re.sub(r"\bst\b", f"st_q{i}", src)

    def _var(self, space: str, name: str, ctx: _Ctx) -> tuple[str, Any]:
        if space == "I":  # one instance inside an aggregate: rendered as the machine's, renamed
            return ("st", UNKNOWN) if name == "state" else super()._var("V", name, ctx)
        return super()._var(space, name, ctx)

    def _expr(self, e: x.Expr, ctx: _Ctx) -> tuple[str, Any]:
        if not isinstance(e, x.Aggregate):
            return super()._expr(e, ctx)
        word, body = e.args
        parts = []
        for i in range(self.system.instances):
            s, v = self.expr(body, ctx)
            parts.append((self.rename(s, i), v))
        if word == "every":
            return self._and(parts)
        if word == "some":
            return self._not(self._and([self._not(p) for p in parts]))
        if word == "count":
            parts = [("", 1 if v else 0) if v is not UNKNOWN else (f"({s} -> 1 : 0)", UNKNOWN)
                     for s, v in parts]
        known = sum(v for _, v in parts if v is not UNKNOWN)
        srcs = [src for src, v in parts if v is UNKNOWN]
        if not srcs:
            return "", known
        return "(" + " + ".join([*srcs, *([str(known)] if known else [])]) + ")", UNKNOWN


def _kind_of(value: Any) -> str:
    from ._promela import _kind

    return _kind(value)


@dataclass(frozen=True)
class _Label:
    """One label of the machine, rendered at machine level (to be renamed per instance)."""

    t: Transition
    params: Params
    state: str
    dest: str
    cond: tuple[str, Any]  # the whole enabling condition in the machine
    ctx: _Ctx


def _machine_labels(r: _SystemRender) -> list[_Label]:
    """The machine's labels with their conditions, as ``render_machine`` renders them (the
    first transition of a group whose guards hold fires, as in ``Protocol.enabled``)."""
    out = []
    for state, params, t, dest, ctx, guard, earlier in r.plan(r.p):
        cond = r._and([(f"st == {_ident(state)}", UNKNOWN), *map(r._not, earlier), guard])
        out.append(_Label(t, params, state, dest, cond, ctx))
    return out


class _Model(_Codes):
    """Accumulates the text, the labels and the checks of one system's model."""

    def __init__(self, system: System) -> None:
        super().__init__(indent="")
        self.s = system
        self.r = _SystemRender(system)
        self.labels = _machine_labels(self.r)
        self.steps: list[SystemTraceStep] = []
        self.options: list[str] = []
        self.conditions: list[str] = []  # option K's enabling condition
        self.steps_of: list[tuple[tuple[str, str, Params], ...]] = []  # its fairness keys
        sv = _Ctx(None)
        self.bound = {b.param: self.r.expr(b.expr, sv) for b in system.bind}

    def fits(self, lab: _Label) -> tuple[str, Any]:
        """The label's own condition and the system's bindings of its parameters."""
        parts = [lab.cond]
        for name, (src, val) in self.bound.items():
            if name in lab.params:
                want = lab.params[name]
                parts.append(("", val == want) if val is not UNKNOWN
                             else (f"({src} == {self.r.lit(want)})", UNKNOWN))
        return self.r._and(parts)

    def of(self, i: int, cond: tuple[str, Any]) -> tuple[str, Any]:
        s, v = cond
        return (self.r.rename(s, i), v)

    def src(self, cond: tuple[str, Any]) -> str:
        s, v = cond
        return s if v is UNKNOWN else ("1" if v else "0")

    def compute(self, lab: _Label, i: int) -> list[str]:
        """The new values of the label's writes on instance ``i`` (into scratch), and the
        machine's step properties on that move."""
        out = []
        for name, e in lab.t.effect.updates.items():
            out += [self.r.rename(a, i) for a in self.r.assign(name, x.lift(e), lab.ctx)]
        for k, sp in enumerate(self.s.machine.step_properties):
            out += self.coded("step_property", sp.name, k,
                              self.of(i, self.r.expr(sp.expr, lab.ctx)))
        return out

    def commit(self, lab: _Label, i: int) -> list[str]:
        out = [] if lab.dest == lab.state else [f"st_q{i} = {_ident(lab.dest)};"]
        for name in lab.t.effect.updates:
            if self.r.kinds[name] == "tuple":
                out += [self.r.rename(f"v_{name}[{k}] = n_{name}[{k}];", i)
                        for k in range(self.r.width[name])]
            else:
                out.append(self.r.rename(f"v_{name} = n_{name};", i))
        return out

    def reset(self, names: Sequence[tuple[str, int | None]]) -> list[str]:
        out = []
        for name, i in dict.fromkeys(names):
            if self.r.kinds.get(name) == "tuple":
                line = " ".join(f"n_{name}[{k}] = 0;" for k in range(self.r.width[name]))
            else:
                line = f"n_{name} = 0;"
            out.append(line if i is None else self.r.rename(line, i))
        return out

    def refine(self, trigger: str, params: Params) -> tuple[tuple[str, Any], list[str], list[str]]:
        """The refinement of ``trigger``: its guards, its effect into scratch, its commit."""
        ref = {f.trigger: f for f in self.s.refinements}.get(trigger)
        if ref is None:
            return ("", True), [], []
        ctx = _Ctx(params)
        guard = self.r._and([self.r.expr(g.expr, ctx) for g in ref.guards])
        comp = [f"n_{n} = {self.r.expr(x.lift(e), ctx)[0]};" for n, e in ref.effect.updates.items()]
        return guard, comp, [f"v_{n} = n_{n};" for n in ref.effect.updates]

    def held_back(self, i: int, trigger: str, params: Params | None) -> tuple[str, Any]:
        """Only a model bound keeps ``trigger`` (with ``params``; any choice of them when
        None) from concerning instance ``i`` (``System.held_back_any``)."""
        alts = []
        for t in self.s.machine.transitions:
            if t.trigger != trigger or not any(g.bound for g in t.guards):
                continue
            choices = list(t.param_choices()) if params is None else (
                [params] if {p.name for p in t.params} == set(params) else [])
            for p in choices:
                for src in t.source:
                    ctx = _Ctx(p, t.trigger, t.actor, src, t.target(src),
                               frozenset(t.effect.writes))
                    alts.append(self.r._and([(f"st == {_ident(src)}", UNKNOWN), *(
                        self.r.expr(g.expr, ctx) for g in t.guards if not g.bound)]))
        if not alts:
            return "", False
        any_ = self.r._not(self.r._and([self.r._not(a) for a in alts]))
        return self.of(i, any_)

    def option(self, step: SystemTraceStep, cond: tuple[str, Any], body: list[str],
               keys: Sequence[tuple[str, str, Params]]) -> None:
        if cond[1] is not UNKNOWN and not cond[1]:
            return
        k = len(self.steps)
        self.steps.append(step)
        self.conditions.append(self.src(cond))
        unique: list[tuple[str, str, Params]] = []
        for key in keys:  # parameters are mappings: compared, not hashed
            if key not in unique:
                unique.append(key)
        self.steps_of.append(tuple(unique))
        lines = [f"  :: d_step {{ /* {k}: {step.text()} */",
                 f"     {self.src(cond)} ->", f'       printf("@L {k}\\n");']
        lines += [f"       {b}" for b in body]
        lines += ["       after_step()", "     }"]
        self.options.append("\n".join(lines))

    # -- the steps ----------------------------------------------------------------------
    def local_steps(self) -> None:
        s, r = self.s, self.r
        mx = s.mutex
        for i in range(s.instances):
            for lab in self.labels:
                if lab.t.trigger in s.sync:
                    continue
                cond = [self.of(i, self.fits(lab))]
                guard, ref_comp, ref_commit = self.refine(lab.t.trigger, lab.params)
                cond.append(guard)
                comp = self.compute(lab, i)
                scratch: list[tuple[str, int | None]] = [
                    (n, None if n in s.shared else i) for n in lab.t.effect.updates]
                if mx is not None:
                    had = f"v_{mx.flag}_q{i}"
                    e = lab.t.effect.updates.get(mx.flag)
                    has = had if e is None else self.src(self.of(i, r.expr(x.lift(e), lab.ctx)))
                    takes = lab.t.trigger in mx.takes
                    held = f"v_{mx.variable} == {_ident('held')}"
                    cond.append((f"({had} || !({held}) || !({'1' if takes else has}))", UNKNOWN))
                    comp.append(f"n_{mx.variable} = ({has} -> {_ident('held')} : ({had} -> "
                                f"{_ident('free')} : v_{mx.variable}));")
                    ref_commit = [f"v_{mx.variable} = n_{mx.variable};", *ref_commit]
                    scratch.append((mx.variable, None))
                comp += ref_comp
                scratch += [(n, None) for n in
                            {f.trigger: f for f in s.refinements}.get(
                                lab.t.trigger, _NoRef).effect.updates]
                body = comp + self.commit(lab, i) + ref_commit + self.reset(scratch)
                step = SystemTraceStep(f"q{i}", lab.t.trigger, tuple(sorted(lab.params.items())))
                self.option(step, self.r._and(cond), body,
                            [(lab.t.actor, lab.t.trigger, lab.params)])

    def sync_steps(self) -> None:
        s = self.s
        n = s.instances
        for trigger in s.sync:
            labs = [lab for lab in self.labels if lab.t.trigger == trigger]
            keys: dict[tuple[tuple[str, Any], ...], Params] = {}
            for lab in labs:
                keys.setdefault(tuple(sorted(lab.params.items())), lab.params)
            if trigger in s.per_instance:
                choices: list[Params | None] = [None, *keys.values()]
                for combo in itertools.product(choices, repeat=n):
                    if all(c is None for c in combo):
                        continue
                    self._sync(trigger, labs, combo, True)
            else:
                for params in keys.values():
                    self._sync(trigger, labs, (params,) * n, False)

    def _sync(self, trigger: str, labs: list[_Label], combo: Sequence[Params | None],
              per_instance: bool) -> None:
        s, r = self.s, self.r
        cond: list[tuple[str, Any]] = []
        comp: list[str] = []
        commit: list[str] = []
        scratch: list[tuple[str, int | None]] = []
        movers = []
        for i, params in enumerate(combo):
            mine = [lab for lab in labs if params is not None and lab.params == params]
            enabled = [self.of(i, self.fits(lab)) for lab in mine]
            moves = r._not(r._and([r._not(e) for e in enabled])) if enabled else ("", False)
            if per_instance:
                if params is None:  # not taking part: no choice of it enabled, none held back
                    every = [self.of(i, self.fits(lab)) for lab in labs]
                    cond.append(r._and([r._not(e) for e in every]))
                    cond.append(r._not(self.held_back(i, trigger, None)))
                    continue
                cond.append(moves)
            else:  # it moves, or it is not held back by a bound alone
                held = self.held_back(i, trigger, params)
                cond.append(r._not(r._and([r._not(moves), held])))
            movers.append(moves)
            for k, (lab, en) in enumerate(zip(mine, enabled, strict=True)):
                comp += [f"if :: {self.src(en)} -> mv_q{i} = {k + 1}", *(
                    f"   {c}" for c in self.compute(lab, i)), ":: else -> skip fi;"]
                commit += [f"if :: mv_q{i} == {k + 1} ->", *(
                    f"   {c}" for c in self.commit(lab, i)), ":: else -> skip fi;"]
                scratch += [(name, None if name in s.shared else i)
                            for name in lab.t.effect.updates]
            commit.append(f"mv_q{i} = 0;")
        if not per_instance:
            cond.append(r._not(r._and([r._not(m) for m in movers])))
            params = combo[0] or {}
        else:
            params = {f"q{i}.{k}": v for i, c in enumerate(combo) if c for k, v in c.items()}
        guard, ref_comp, ref_commit = self.refine(trigger, {} if per_instance else params)
        cond.append(guard)
        ref = {f.trigger: f for f in s.refinements}.get(trigger, _NoRef)
        scratch += [(name, None) for name in ref.effect.updates]
        body = comp + ref_comp + commit + ref_commit + self.reset(scratch)
        movers_named = [i for i, c in enumerate(combo) if c is not None]
        who = f"q{movers_named[0]}" if per_instance and len(movers_named) == 1 else "all"
        # the first mover's step decides the fairness groups (our explorer's edge mask)
        first = combo[movers_named[0]]
        self.option(SystemTraceStep(who, trigger, tuple(sorted(params.items()))),
                    r._and(cond), body,
                    [(lab.t.actor, trigger, lab.params) for lab in labs if lab.params == first])

    def own_steps(self) -> None:
        for t in self.s.transitions:
            for p in t.param_choices():
                ctx = _Ctx(p, t.trigger, t.actor)
                cond = self.r._and([self.r.expr(g.expr, ctx) for g in t.guards])
                comp = [f"n_{n} = {self.r.expr(x.lift(e), ctx)[0]};"
                        for n, e in t.effect.updates.items()]
                body = comp + [f"v_{n} = n_{n};" for n in t.effect.updates] + self.reset(
                    [(n, None) for n in t.effect.updates])
                self.option(SystemTraceStep("system", t.trigger, tuple(sorted(p.items()))),
                            cond, body, [(t.actor, t.trigger, p)])

    def state_checks(self) -> list[str]:
        s, r = self.s, self.r
        m = s.machine
        out: list[str] = []
        # Every variable's domain, as the machine export checks it: a check reads it, so SPIN
        # keeps a variable no guard reads (it drops variables it sees only written, which
        # would merge configurations our explorer tells apart).
        for i in range(s.instances):
            for k, var in enumerate(m.variables):
                if var.name in s.shared and i:
                    continue
                out += self.coded("domain", var.name, k, self.of(i, (r.in_domain(var.name),
                                                                     UNKNOWN)))
            for k, inv in enumerate(m.invariants):
                out += self.coded("invariant", inv.name, k,
                                  self.of(i, r.expr(inv.expr, _Ctx(None))))
        for k, sinv in enumerate(s.invariants):
            out += self.coded("system_invariant", sinv.name, k, r.expr(sinv.expr, _Ctx(None)))
        for k, v in enumerate(s.variables):
            alts = " || ".join(f"v_{v.name} == {r.lit(d)}" for d in v.domain)
            out += self.coded("system_domain", v.name, k, (f"({alts})", UNKNOWN))
        return out


def _suffixes(system: System, name: str) -> list[str]:
    """The suffixes of a machine variable's copies: one per instance, or none when shared."""
    return [""] if name in system.shared else [f"_q{i}" for i in range(system.instances)]


class _NoRef:
    class effect:
        updates: Mapping[str, Any] = {}


def render_system(system: System) -> PromelaModel:
    """``system`` as a Promela model (see the module's docstring)."""
    md = _Model(system)
    r = md.r
    m = system.machine
    checks = md.state_checks()  # first: these codes come first in the table
    md.local_steps()
    md.sync_steps()
    md.own_steps()
    term = [" || ".join(f"st_q{i} == {_ident(st)}" for st in sorted(m.terminal_states)) or "0"
            for i in range(system.instances)]
    deadlock = md.coded("deadlock", "", 0, ("(" + " && ".join(f"({t})" for t in term) + ")",
                                            UNKNOWN))

    lines = [f"/* {system.name}: {system.meaning} */",
             "/* generated by `settled export --promela` from the declaration's expressions; "
             "do not edit */", ""]
    lines += r.mapping_table()
    lines += ["", "/* the configuration: each instance's control state and variables (suffix "
              "_q<i>), the shared ones once, the system's own */"]
    scratch = []
    for i in range(system.instances):
        lines.append(f"byte st_q{i} = {_ident(m.initial)};")
    for var in m.variables:
        kind = r.kinds[var.name]
        for suffix in _suffixes(system, var.name):
            if kind == "tuple":
                lines.append(f"short v_{var.name}{suffix}[{r.width[var.name]}];")
                scratch.append(f"short n_{var.name}{suffix}[{r.width[var.name]}];")
            else:
                ty = {"bool": "bool", "int": "short", "code": "byte"}[kind]
                lines.append(f"{ty} v_{var.name}{suffix} = {r.lit(var.initial)};")
                scratch.append(f"short n_{var.name}{suffix};")
    for v in system.variables:
        ty = {"bool": "bool", "int": "short", "code": "byte"}[r.kinds[v.name]]
        lines.append(f"{ty} v_{v.name} = {r.lit(v.initial)};")
        scratch.append(f"short n_{v.name};")
    scratch += [f"byte mv_q{i};" for i in range(system.instances)]
    lines += ["", "/* scratch (always 0 between steps): values after a step, which label each "
              "instance takes in a synchronised step, the failing check */", *scratch,
              "byte fail;", "", "inline after_step() {"]
    lines += [f"  {c}" for c in checks]
    lines += ["}", "", "active proctype system() {", "  d_step {"]
    for var in m.variables:
        if r.kinds[var.name] != "tuple":
            continue
        for suffix in _suffixes(system, var.name):
            lines += [f"    v_{var.name}{suffix}[{k}] = {e};"
                      for k, e in enumerate(var.initial) if e]
    lines += ["    after_step()", "  };", "  do", *md.options]
    lines += ["  :: d_step { timeout ->  /* no step: a deadlock unless every instance settled */",
              '       printf("@T\\n");', *(f"       {d}" for d in deadlock), "     }",
              "  od", "}", ""]
    return PromelaModel(m, "\n".join(lines), tuple(md.steps), tuple(md.checks),
                        dict(r.codes), tuple(md.conditions), name=system.name,
                        steps_of=tuple(md.steps_of))


# SPIN's findings in our words and the comparison live in ``_promela_system_findings``.
from ._promela_system_findings import (  # noqa: E402
    compare_system,
    labels_of,
    replay_labels,
    system_findings,
)

__all__ = ["compare_system", "labels_of", "render_system", "replay_labels", "system_findings"]
