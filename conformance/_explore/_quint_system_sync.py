"""The steps of a system that move several instances, or none, in its Quint module
(``_quint_system.py``): synchronised steps (one action per choice of the parameters, every
instance where the trigger is enabled moving at once, not offered while an instance it does
not move is held back by a model bound alone), per-instance synchronised steps (each
instance its own choice), and the system's own steps. Each adds its action, its "enabled"
predicate (for ``no_deadlock``) and how fairness classifies it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from settled.model import Params
from settled.model import expr as x

from ._quint import _comment
from ._quint_expr import _Ctx, _set, _type, conj, disj, lit
from ._quint_system_live import Kind

if TYPE_CHECKING:
    from ._quint_system import _SysModule


def labels(md: _SysModule, trigger: str) -> list[Params]:
    """The distinct parameter choices of ``trigger``'s transitions, in declaration order."""
    keys: dict[tuple[tuple[str, Any], ...], Params] = {}
    for t in md.m.transitions:
        if t.trigger == trigger:
            for p in t.param_choices():
                keys.setdefault(tuple(sorted(p.items())), p)
    return list(keys.values())


def movers(md: _SysModule, trigger: str, params: Params) -> list[int]:
    """The transitions of ``trigger`` that take exactly ``params``."""
    return [k for k, t in enumerate(md.m.transitions)
            if t.trigger == trigger and {q.name for q in t.params} == set(params)
            and all(params[q.name] in q.domain for q in t.params)]


def actor_of(md: _SysModule, trigger: str, ks: Iterable[int]) -> str | None:
    """The actor of a synchronised step of ``trigger`` (its movers' transitions among
    ``ks``), or None when they differ."""
    actors = {md.m.transitions[k].actor for k in ks if md.m.transitions[k].trigger == trigger}
    return actors.pop() if len(actors) == 1 else None


def held_back(md: _SysModule, trigger: str, choices: list[Params] | None) -> str:
    """Instance ``i`` is concerned by ``trigger`` but for a model bound alone (with one of
    ``choices``; any choice of each transition's when None): ``System.held_back``."""
    alts = []
    for t in md.m.transitions:
        if t.trigger != trigger or not any(g.bound for g in t.guards):
            continue
        names = {q.name for q in t.params}
        for p in (list(t.param_choices()) if choices is None else
                  [c for c in choices if set(c) == names]):
            lits = {q: lit(v) for q, v in p.items()}
            for src in t.source:
                ctx = _Ctx(lits, t.trigger, t.actor, src, t.target(src))
                alts.append(conj([f"(state.get(i) == {lit(src)})", *(
                    md.r.expr(g.expr, ctx) for g in t.guards if not g.bound)]))
    return disj(alts)


def chain(md: _SysModule, cases: list[tuple[str, dict[str, str]]], var: str, old: str) -> str:
    out = old
    for cond, new in reversed(cases):
        if var in new:
            out = f"if ({cond}) {new[var]} else {out}"
    return out


def moved(md: _SysModule, cases: list[tuple[str, dict[str, str]]]) -> dict[str, str]:
    """Every instance's next values in a synchronised step: ``cases`` (a condition on
    instance ``i`` and the values it then takes), the first that holds."""
    r, n = md.r, md.n
    new = {"state": f"INST.mapBy(i => {chain(md, cases, 'state', 'state.get(i)')})"}
    for v in md.m.variables:
        if not any(v.name in c for _, c in cases):
            continue
        if v.name in r.local:
            new[v.name] = (f"INST.mapBy(i => "
                           f"{chain(md, cases, v.name, f'{n[v.name]}.get(i)')})")
        else:  # the value a mover writes, where it changes it
            changed = [(f"{cond} and {c[v.name]} != {n[v.name]}", c) for cond, c in cases]
            new[v.name] = (f"INST.fold({n[v.name]}, (acc, i) => "
                           f"{chain(md, changed, v.name, 'acc')})")
    for sp in md.m.step_properties:
        key = f"ok:{sp.name}"
        new[key] = f"INST.forall(i => {chain(md, cases, key, 'true')})"
    return new


def sync_steps(md: _SysModule, trigger: str) -> None:
    add = md.add
    choices = labels(md, trigger)
    for li, params in enumerate(choices):
        name = md.r.fresh(f"{trigger}_sync" if len(choices) == 1 else f"{trigger}_sync_{li}")
        lits = {q: lit(v) for q, v in params.items()}
        ks = movers(md, trigger, params)
        moves = disj([md.call(k, "i", lits) for k in ks])
        held = held_back(md, trigger, [params])
        guards, ref_eff = md.refinement(trigger, lits)
        shown = ", ".join(f"{q}={v}" for q, v in lits.items())
        add(f"  /// {trigger}({shown}): every instance where it is enabled moves at once")
        add(f"  val {name}_cond = and {{")
        for part in [*md.fits(lits), f"INST.exists(i => {moves})",
                     f"INST.forall(i => {disj([moves, f'not({held})'])})", *guards]:
            add(f"    {part},")
        add("  }")
        add(f"  action {name} = all {{")
        add(f"    {name}_cond,")
        md.assign({**moved(md, [(md.call(k, "i", lits), md.effects(k, lits))
                                   for k in ks]), **ref_eff})
        add("  }")
        md.actions.append(name)
        md.kinds.append(Kind(name, actor_of(md, trigger, ks), trigger, params, {}, name))
        md.conds.append(f"{name}_cond")
    add("")


def per_instance_step(md: _SysModule, trigger: str) -> None:
    add = md.add
    choices = labels(md, trigger)
    name = md.r.fresh(f"{trigger}_sync")
    cases: list[tuple[str, dict[str, str]]] = []
    chosen, anyone = [], []
    for li, params in enumerate(choices):
        lits = {q: lit(v) for q, v in params.items()}
        fits = md.fits(lits)
        for k in movers(md, trigger, params):
            en = conj([md.call(k, "i", lits), *fits])
            anyone.append(en)
            chosen.append(f"(ch.get(i) == {li} and {en})")
            cases.append((f"ch.get(i) == {li} and {en}", md.effects(k, lits)))
    guards, ref_eff = md.refinement(trigger, {})
    held = held_back(md, trigger, None)
    add(f"  /// {trigger}: every instance where it is enabled moves at once, each with its "
        "own parameters (ch: instance -> the index of its choice)")
    for li, params in enumerate(choices):
        add(f"  //   choice {li}: {', '.join(f'{q}={lit(v)}' for q, v in params.items())}")
    add(f"  def {name}_moves(i: int): bool = {disj(anyone)}")
    add(f"  def {name}_cond(ch: int -> int): bool = and {{")
    for part in [f"INST.exists(i => {name}_moves(i))",
                 f"INST.forall(i => if ({name}_moves(i)) {disj(chosen)} else not({held}))",
                 *guards]:
        add(f"    {part},")
    add("  }")
    add(f"  action {name}_with(ch: int -> int): bool = all {{")
    add(f"    {name}_cond(ch),")
    md.assign({**moved(md, cases), **ref_eff})
    add("  }")
    maps = f"INST.setOfMaps(0.to({len(choices) - 1}))"
    add(f"  action {name} = {{ nondet ch = {maps}.oneOf() {name}_with(ch) }}")
    add("")
    md.actions.append(name)
    md.kinds.append(Kind(name, actor_of(md, trigger, range(len(md.m.transitions))), trigger,
                         {}, {}, name))
    md.conds.append(f"{maps}.exists(ch => {name}_cond(ch))")


def own_steps(md: _SysModule) -> None:
    r, add = md.r, md.add
    if md.s.transitions:
        add("  // ---- the system's own steps " + "-" * 55)
    for t in md.s.transitions:
        name = r.fresh(t.trigger)
        pn = {q.name: r.fresh(f"{q.name}_param") for q in t.params}
        sig = ", ".join(f"{pn[q.name]}: {_type(q.domain, t.trigger)}" for q in t.params)
        args = ", ".join(pn[q.name] for q in t.params)
        ctx = _Ctx(pn, t.trigger, t.actor)
        add(f"  /// {t.trigger} ({', '.join(t.rules)}), by the {t.actor}: "
            f"{_comment(t.meaning)}")
        head = f"def {name}_cond({sig}): bool" if t.params else f"val {name}_cond"
        add(f"  {head} = {conj([r.expr(g.expr, ctx) for g in t.guards])}")
        add(f"  action {name}{f'_with({sig}): bool' if t.params else ''} = all {{")
        add(f"    {name}_cond{f'({args})' if t.params else ''},")
        md.assign({v: r.expr(x.lift(e), ctx) for v, e in t.effect.updates.items()})
        add("  }")
        if t.params:
            picks = " ".join(f"nondet {pn[q.name]} = {_set(q.domain)}.oneOf()"
                             for q in t.params)
            add(f"  action {name} = {{ {picks} {name}_with({args}) }}")
        picks = "".join(f"{_set(q.domain)}.exists({pn[q.name]} => " for q in t.params)
        md.conds.append(f"{picks}{name}_cond{f'({args})' if t.params else ''}"
                          f"{')' * len(t.params)}")
        md.actions.append(name)
        md.kinds.append(Kind(name, t.actor, t.trigger, {}, {
            q.name: (pn[q.name], tuple(q.domain)) for q in t.params},
            f"{name}_with({args})" if t.params else name))
    add("")
