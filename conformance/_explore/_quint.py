"""A declared machine as a Quint module, rendered from its expressions (``settled export
--quint``), for users of Quint and TLA+.

The module
----------
* ``var state: str`` (the control state) and one ``var`` per variable: a number is ``int``,
  a truth value ``bool``, a name ``str`` (the name itself, as a string literal), a tuple of
  numbers ``List[int]`` (indexed ``held[worker]``, updated ``held.replaceAt(i, e)``).
* ``init``: the initial configuration.
* One action per transition, ``<trigger>`` (``<trigger>_<k>`` when a trigger has several
  transitions), whose parameters are ``nondet`` picks over their declared domains, calling
  ``<action>_with(params)``: its enabling condition ``<action>_enabled(params)`` (the
  source states, every variable inside its declared domain, the guards, and the negated
  guards of the transitions of the same trigger that come before it in a source state:
  the first one whose guards hold fires, as in ``Protocol.enabled``), then every
  variable's new value (its effect; the others unchanged).
* ``settled``: a stutter in a terminal configuration (or one outside a domain, which the
  explorer reports and does not expand), so every run goes on; ``step`` is the
  disjunction of every action and ``settled``.
* Invariants as ``val`` predicates: ``inv_<name>`` for each invariant, ``domain_<var>``
  for each variable, ``no_deadlock`` (a non-terminal configuration inside the domains has
  a step), and ``step_<name>`` for each step property. ``quint run`` checks state
  invariants only, so each action evaluates every step property on the values before and
  after the step and records the verdict in a ghost ``var ok_<name>: bool``; ``step_<name>``
  reads it. ``all_invariants`` is the conjunction of every check.
* Fairness and progress as ``temporal`` formulas: one ``action fair_<group>`` per group
  (the disjunction of its steps, parameters filtered as declared); ``weak`` is
  ``weakFair(fair_<g>, vars)``, ``strong`` ``strongFair``, ``finite``
  ``eventually(always(not(fair_<g>).orKeep(vars)))``, ``never`` constrains nothing;
  ``progress_<name>`` is ``fairness implies premise.leadsTo(goal)``.

What the export cannot say is listed in :attr:`QuintModel.not_expressed`, written as a
comment at the top of the module and printed by the command: a progress property whose
predicate Quint cannot type (an order comparison of names) is left out, never silently.
Notes on meaning (no Quint tool offline checks temporal formulas; model bounds) are in
:attr:`QuintModel.notes`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from settled.model import Protocol, Transition
from settled.model import expr as x

from ._quint_expr import RESERVED, ExportError, _Ctx, _Render, _set, _type, lit

__all__ = ["RESERVED", "ExportError", "QuintModel", "lit", "render_module"]


@dataclass(frozen=True)
class QuintModel:
    """The rendered module and what it holds, by our names."""

    protocol: Protocol
    text: str
    actions: tuple[str, ...]  # one per transition, in declaration order
    invariants: tuple[str, ...]  # every val a `quint run --invariants` may check
    temporal: tuple[str, ...]  # progress_<name>
    not_expressed: tuple[str, ...] = ()  # what the module leaves out, and why
    notes: tuple[str, ...] = field(default=())
    variables: Mapping[str, str] = field(default_factory=dict)  # our name -> Quint's



def _comment(text: str) -> str:
    return " ".join(text.split())


def action_names(transitions: Sequence[Transition], r: _Render) -> list[str]:
    """One Quint name a transition: its trigger, numbered where several transitions share it
    (``claim_1``, ``claim_2``), kept apart from every name already taken."""
    counts = Counter(t.trigger for t in transitions)
    seen: Counter[str] = Counter()
    names = []
    for t in transitions:
        seen[t.trigger] += 1
        names.append(r.fresh(t.trigger if counts[t.trigger] == 1
                             else f"{t.trigger}_{seen[t.trigger]}"))
    return names


def _step_groups(p: Protocol) -> dict[int, list[tuple[Transition, tuple[str, ...]]]]:
    """For each transition (by position): the transitions of its trigger that come before it
    in some of its source states, each with the sources where it does."""
    pos = {id(t): i for i, t in enumerate(p.transitions)}
    out: dict[int, list[tuple[Transition, tuple[str, ...]]]] = {}
    for i, t in enumerate(p.transitions):
        where: dict[int, list[str]] = {}
        for s in t.source:
            for u in p.transitions_from(s):
                if u is t:
                    break
                if u.trigger == t.trigger:
                    where.setdefault(pos[id(u)], []).append(s)
        out[i] = [(p.transitions[j], tuple(ss)) for j, ss in sorted(where.items())]
    return out


_NOTES = (
    "quint run checks state invariants only: the temporal formulas below (progress under "
    "the declared fairness) typecheck, and are checked by `quint verify --temporal` "
    "(Apalache), or by TLC on a TLA+ translation; `settled explore` checks them here",
    "a cycle that only a model bound (a guard marked bound) makes fair is reported by "
    "`settled explore` as stuck_at_bound; here it is a plain violation",
    "weakFair/strongFair count only steps that change a variable: a step that changes "
    "nothing and records the same step verdicts is a stutter here, a step in our check",
)


def render_module(p: Protocol, live: Any = None) -> QuintModel:
    """``p`` (with its declared fairness and progress, ``live``; by default the machine's own,
    ``model.progress.liveness_of``) as a Quint module (see the module's docstring)."""
    if live is None:
        from settled.model.progress import liveness_of
        live = liveness_of(p)
    return _Module(p, live).render()


class _Module:
    """One module being written: the names taken so far and the lines, section by section."""

    def __init__(self, p: Protocol, live: Any) -> None:
        self.p, self.live = p, live
        self.r = r = _Render(p)
        self.mod = r.fresh(p.name)
        self.n = r.names
        self.not_expressed: list[str] = []
        self.ok = {sp.name: r.fresh(f"ok_{sp.name}") for sp in p.step_properties}
        self.all_vars = ["state", *(self.n[v.name] for v in p.variables), *self.ok.values()]
        self.body: list[str] = []
        self.add = self.body.append
        self.action_of: list[str] = []
        self.pnames_of: list[dict[str, str]] = []
        self.invariants: list[str] = []
        self.temporal: list[str] = []

    def render(self) -> QuintModel:
        self.configuration()
        self.actions()
        self.checks()
        self.fairness_and_progress()
        p = self.p
        head = [f"// {p.name}: {_comment(p.meaning)}",
                f"// Generated by `settled export --quint {p.name}` from the declaration's "
                "expressions; do not edit.",
                "// Names are strings, tuples of numbers List[int]. Check every invariant with:",
                f"//   quint run --invariant=all_invariants --max-steps=30 {p.name}.qnt",
                "// Notes:"]
        head += [f"//   - {note}" for note in _NOTES]
        if self.not_expressed:
            head.append("// NOT EXPRESSED in Quint (left out of this module):")
            head += [f"//   - {item}" for item in self.not_expressed]
        text = "\n".join([*head, f"module {self.mod} {{", *self.body, ""])
        return QuintModel(p, text, tuple(self.action_of), tuple(self.invariants),
                          tuple(self.temporal), tuple(self.not_expressed), _NOTES, dict(self.n))

    # -- the configuration ------------------------------------------------------------------
    def configuration(self) -> None:
        p, r, n, add, ok = self.p, self.r, self.n, self.add, self.ok
        state_names = [s.name for s in p.states]
        add("  // ---- the configuration " + "-" * 60)
        add(f"  /// the control state: one of {', '.join(state_names)}")
        add("  var state: str")
        for v in p.variables:
            add(f"  /// {_comment(v.meaning)} (one of {_comment(x.values_text(v.domain))}"
                f"{'; a ghost: specification-only' if v.ghost else ''})")
            add(f"  var {n[v.name]}: {r.types[v.name]}")
        if p.step_properties:
            add("  // ghosts: each step records whether it kept each step property (quint run "
                "checks state invariants only)")
        for sp in p.step_properties:
            add(f"  var {ok[sp.name]}: bool")
        add("")
        add(f"  pure val STATES = {_set(state_names)}")
        add(f"  pure val TERMINAL = {_set(sorted(p.terminal_states))}")
        add("")
        add("  /// every variable inside its declared domain (outside one, the explorer reports the")
        add("  /// configuration and does not expand it)")
        add("  val in_domain = and {")
        for v in p.variables:
            add(f"    {n[v.name]}.in({_set(v.domain)}),")
        add("    true,")
        add("  }")
        add("")
        add("  action init = all {")
        add(f"    state' = {lit(p.initial)},")
        for v in p.variables:
            add(f"    {n[v.name]}' = {lit(v.initial)},")
        for name in ok.values():
            add(f"    {name}' = true,")
        add("  }")
        add("")

    # -- one action per transition ------------------------------------------------------------
    def actions(self) -> None:
        p, r, add = self.p, self.r, self.add
        self.action_of.extend(action_names(p.transitions, r))
        earlier = _step_groups(p)
        for i, t in enumerate(p.transitions):
            self.action(i, t, earlier[i])
        add("  /// a settled configuration (terminal, or outside a domain) stays as it is")
        add("  action settled = all {")
        add("    state.in(TERMINAL) or not(in_domain),")
        for name in self.all_vars:
            add(f"    {name}' = {name},")
        add("  }")
        add("")
        add("  action step = any {")
        for a in self.action_of:
            add(f"    {a},")
        add("    settled,")
        add("  }")
        add("")

    def action(self, i: int, t: Transition, earlier: list[tuple[Transition, tuple[str, ...]]]
               ) -> None:
        """Transition ``t``: its enabling condition, its action and, with parameters, the
        action that picks them."""
        p, r, n, add = self.p, self.r, self.n, self.add
        a = self.action_of[i]
        local = set(r.taken)
        pn: dict[str, str] = {}
        for prm in t.params:
            own = prm.name if prm.name not in local and re.match(r"[a-z]\w*$", prm.name) \
                else r.fresh(f"{prm.name}_param")
            local.add(own)
            pn[prm.name] = own
        self.pnames_of.append(pn)
        sig = ", ".join(f"{pn[prm.name]}: {_type(prm.domain, f'{t.trigger}.{prm.name}')}"
                        for prm in t.params)
        call = ", ".join(pn[prm.name] for prm in t.params)
        before = t.source[0] if len(t.source) == 1 else None
        ctx = _Ctx(pn, t.trigger, t.actor, before, t.dest,
                   {k: x.lift(e) for k, e in t.effect.updates.items()})
        rules = f" ({', '.join(t.rules)})" if t.rules else ""
        add(f"  /// {t.trigger}{rules}, by the {t.actor}: {_comment(t.meaning)}")
        enabled = f"def {a}_enabled({sig}): bool" if t.params else f"val {a}_enabled"
        add(f"  {enabled} = and {{")
        add(f"    state.in({_set(t.source)}),")
        add("    in_domain,")
        for g in t.guards:
            add(f"    // {g.name}{' (a model bound)' if g.bound else ''}: {_comment(g.text)}")
            add(f"    {r.expr(g.expr, ctx)},")
        self.not_earlier(t, pn, earlier)
        add("  }")
        with_head = f"action {a}_with({sig}): bool" if t.params else f"action {a}"
        add(f"  {with_head} = all {{")
        add(f"    {a}_enabled{f'({call})' if t.params else ''},")
        add(f"    state' = {lit(t.dest) if t.dest is not None else 'state'},")
        if t.effect.updates:
            add(f"    // {_comment(t.effect.text)}")
        for v in p.variables:
            e = ctx.effect.get(v.name)
            add(f"    {n[v.name]}' = {r.expr(e, ctx) if e is not None else n[v.name]},")
        for sp in p.step_properties:
            add(f"    {self.ok[sp.name]}' = {r.expr(sp.expr, ctx)},")
        add("  }")
        if t.params:
            add(f"  action {a} = {{")
            for prm in t.params:
                add(f"    nondet {pn[prm.name]} = {_set(prm.domain)}.oneOf()")
            add(f"    {a}_with({call})")
            add("  }")
        add("")

    def not_earlier(self, t: Transition, pn: dict[str, str],
                    earlier: list[tuple[Transition, tuple[str, ...]]]) -> None:
        """The first transition of a trigger group whose guards pass fires: ``t`` is enabled
        only where no earlier one of its group is."""
        for u, where in earlier:
            if {q.name for q in u.params} != set(pn):
                continue  # its parameters never fit this step's
            parts = []
            if set(where) != set(t.source):
                parts.append(f"state.in({_set(where)})")
            for q in u.params:
                mine = next(m for m in t.params if m.name == q.name)
                if set(q.domain) != set(mine.domain):
                    parts.append(f"{pn[q.name]}.in({_set(q.domain)})")
            uctx = _Ctx(pn, u.trigger, u.actor)
            parts += [self.r.expr(g.expr, uctx) for g in u.guards]
            first = ", ".join(f"{g.name}" for g in u.guards) or "no guard"
            self.add(f"    // not an earlier {u.trigger} of its group ({first}): the first fires")
            self.add(f"    not({' and '.join(parts) or 'true'}),")

    # -- the checks ---------------------------------------------------------------------------
    def checks(self) -> None:
        p, r, n, add, invariants = self.p, self.r, self.n, self.add, self.invariants
        add("  // ---- invariants " + "-" * 66)
        inv_ctx = _Ctx()
        for inv in p.invariants:
            name = r.fresh(f"inv_{inv.name}")
            invariants.append(name)
            add(f"  /// {_comment(inv.meaning)} ({', '.join(inv.rules)}): {_comment(inv.text)}")
            add(f"  val {name} = {r.expr(inv.expr, inv_ctx)}")
        for sp in p.step_properties:
            name = r.fresh(f"step_{sp.name}")
            invariants.append(name)
            add(f"  /// step property: {_comment(sp.meaning)} ({', '.join(sp.rules)}): "
                f"{_comment(sp.text)}")
            add(f"  val {name} = {self.ok[sp.name]}")
        for v in p.variables:
            name = r.fresh(f"domain_{v.name}")
            invariants.append(name)
            add(f"  val {name} = {n[v.name]}.in({_set(v.domain)})")
        invariants.append("no_deadlock")
        add("  /// a configuration that is not terminal and inside every domain has a step")
        add("  val no_deadlock = or {")
        add("    state.in(TERMINAL),")
        add("    not(in_domain),")
        for i, t in enumerate(p.transitions):
            a, pn = self.action_of[i], self.pnames_of[i]
            if not t.params:
                add(f"    {a}_enabled,")
                continue
            inner = f"{a}_enabled({', '.join(pn[q.name] for q in t.params)})"
            for q in reversed(t.params):
                inner = f"{_set(q.domain)}.exists({pn[q.name]} => {inner})"
            add(f"    {inner},")
        add("  }")
        add("  /// every check above, at once")
        add("  val all_invariants = and {")
        for name in invariants:
            add(f"    {name},")
        add("  }")
        add("")

    # -- fairness and progress ----------------------------------------------------------------
    def fairness_and_progress(self) -> None:
        add = self.add
        add("  // ---- fairness and progress " + "-" * 56)
        add(f"  val vars = ({', '.join(self.all_vars)})")
        fair_terms: list[str] = []
        for f in self.live.fairness:
            add(f"  // fairness {f.name}: {_comment(f.words())} ({', '.join(f.rules)})")
            if f.kind == "never":
                add("  //   (never: constrains nothing)")
                continue
            fg = self.r.fresh(f"fair_{f.name}")
            add(f"  action {fg} = any {{ {', '.join(self.fair_steps(f))} }}")
            if f.kind == "weak":
                fair_terms.append(f"weakFair({fg}, vars)")
            elif f.kind == "strong":
                fair_terms.append(f"strongFair({fg}, vars)")
            elif f.kind == "finite":
                fair_terms.append(f"eventually(always(not({fg}).orKeep(vars)))")
            else:
                raise ExportError(f"fairness {f.name}: no Quint for the kind {f.kind!r}")
        add("  temporal fairness = and {")
        for term in fair_terms:
            add(f"    {term},")
        add("    true,")
        add("  }")
        for prop in self.live.progress:
            try:
                premise = self.pred(prop.premise, f"progress {prop.name}")
                goal = self.pred(prop.goal, f"progress {prop.name}")
            except ExportError as e:
                self.not_expressed.append(str(e))
                add(f"  // NOT EXPRESSED: {e} (the property: {_comment(prop.formula())})")
                continue
            name = self.r.fresh(f"progress_{prop.name}")
            self.temporal.append(name)
            add(f"  /// {_comment(prop.text)} ({', '.join(prop.rules)}): "
                f"{_comment(prop.formula())}")
            add(f"  temporal {name} = fairness implies {premise}.leadsTo({goal})")
        add("}")

    def fair_steps(self, f: Any) -> list[str]:
        """The actions (or parameter picks of them) a fairness declaration covers."""
        alts = []
        for i, t in enumerate(self.p.transitions):
            if f.steps.actors and t.actor not in f.steps.actors:
                continue
            if f.steps.triggers and t.trigger not in f.steps.triggers:
                continue
            pn = self.pnames_of[i]
            domains = {q.name: tuple(q.domain) for q in t.params}
            filtered = True
            for pname, values in f.steps.params:
                if pname not in domains:
                    filtered = False
                    break
                domains[pname] = tuple(v for v in domains[pname] if v in values)
            if not filtered or any(not d for d in domains.values()):
                continue
            if all(set(domains[q.name]) == set(q.domain) for q in t.params):
                alts.append(self.action_of[i])
            else:
                picks = " ".join(f"nondet {pn[q.name]} = {_set(domains[q.name])}.oneOf()"
                                 for q in t.params)
                call = ", ".join(pn[q.name] for q in t.params)
                alts.append(f"{{ {picks} {self.action_of[i]}_with({call}) }}")
        return alts

    def pred(self, pr: Any, what: str) -> str:
        parts = []
        if pr.states:
            inside = f"state.in({_set(pr.states)})"
            parts.append(f"not({inside})" if pr.outside else inside)
        for c in pr.where:
            t = self.r.types[c.variable]
            if c.op not in ("==", "!=") and t != "int":
                raise ExportError(f"{what}: `{c.text()}` orders values of type {t}; Quint "
                                  "orders numbers only")
            parts.append(f"{self.n[c.variable]} {c.op} {lit(c.value)}")
        if pr.system:
            raise ExportError(f"{what}: a system's predicate in a machine's progress")
        return "(" + " and ".join(parts or ["true"]) + ")"


def quint_path() -> str | None:
    """The ``quint`` command on the PATH, or None."""
    import shutil

    return shutil.which("quint")


INSTALL = "npm i -g @informalsystems/quint"
