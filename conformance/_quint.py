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

import enum
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model import _expr as x
from ..model._core import Protocol, Transition

# Quint's keywords and built-in operators: a declared name equal to one gets a "_" suffix.
RESERVED = frozenset((
    "module", "import", "export", "from", "as", "const", "var", "val", "def", "pure", "action",
    "run", "temporal", "nondet", "assume", "type", "if", "else", "match", "all", "any", "and",
    "or", "not", "iff", "implies", "true", "false", "int", "str", "bool", "Set", "List", "Rec",
    "Tup", "Bool", "Int", "Nat", "Str", "Map", "allLists", "allListsUpTo", "always",
    "apalache", "append", "assert", "assign", "chooseSome", "concat", "contains", "enabled",
    "eq", "eventually", "exclude", "exists", "expect", "fail", "filter", "flatten", "fold",
    "foldl", "forall", "get", "getOnlyElement", "head", "iadd", "idiv", "igt", "igte", "ilt",
    "ilte", "imod", "imul", "in", "indices", "intersect", "ipow", "isFinite", "isub", "ite",
    "iuminus", "keys", "leadsTo", "length", "map", "mapBy", "mustChange", "neq", "next", "nth",
    "oneOf", "orKeep", "powerset", "put", "q", "range", "replaceAt", "reps", "select", "set",
    "setBy", "setOfMaps", "setToMap", "size", "slice", "strongFair", "subseteq", "tail",
    "then", "to", "union", "weakFair", "init", "step", "vars", "state", "settled", "in_domain",
    "no_deadlock", "all_invariants", "fairness",
))

_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge}


class ExportError(ValueError):
    """A declaration this renderer cannot write in Quint (the message says which part)."""


class _Unknown:
    """Not a constant while rendering."""


UNKNOWN: Any = _Unknown()
ABSENT: Any = object()  # a parameter the step does not have (step properties read None)


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


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _type(values: Iterable[Any], what: str) -> str:
    kinds = set()
    for v in values:
        v = _plain(v)
        if isinstance(v, bool):
            kinds.add("bool")
        elif isinstance(v, int):
            kinds.add("int")
        elif isinstance(v, str):
            kinds.add("str")
        elif isinstance(v, tuple) and v and all(isinstance(e, int) and not isinstance(e, bool)
                                                for e in v):
            kinds.add("List[int]")
        else:
            raise ExportError(f"{what}: no Quint type for the value {v!r}")
    if len(kinds) != 1:
        raise ExportError(f"{what}: mixes values of the Quint types {sorted(kinds)}")
    return kinds.pop()


def lit(value: Any) -> str:
    """A constant as a Quint literal."""
    value = _plain(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if value >= 0 else f"iuminus({-value})"
    if isinstance(value, str):
        if '"' in value or "\\" in value or "\n" in value:
            raise ExportError(f"the name {value!r} cannot be a Quint string literal")
        return f'"{value}"'
    if isinstance(value, tuple):
        return "[" + ", ".join(lit(e) for e in value) + "]"
    raise ExportError(f"no Quint literal for {value!r}")


def _set(values: Iterable[Any]) -> str:
    return "Set(" + ", ".join(lit(v) for v in values) + ")"


@dataclass
class _Ctx:
    """What one rendering knows: parameters (name -> Quint name, or None for invariants),
    the step's label, its state before (when it has one source) and after, its effect."""

    params: Mapping[str, str] | None = None
    trigger: str | None = None
    actor: str | None = None
    before: str | None = None
    after: str | None = None  # None: the state does not change (a self-loop)
    effect: Mapping[str, x.Expr] = field(default_factory=dict)


class _Render:
    def __init__(self, p: Protocol) -> None:
        self.p = p
        self.types = {v.name: _type(v.domain, f"{p.name}: variable {v.name}")
                      for v in p.variables}
        self.names: dict[str, str] = {}
        self.taken: set[str] = set(RESERVED)
        for v in p.variables:
            self.names[v.name] = self.fresh(v.name)

    def fresh(self, name: str) -> str:
        out = re.sub(r"[^A-Za-z0-9_]", "_", name)
        if not re.match(r"[a-z]", out):
            out = "x_" + out
        while out in self.taken:
            out += "_"
        self.taken.add(out)
        return out

    # -- expressions ------------------------------------------------------------------
    def expr(self, e: x.Expr, ctx: _Ctx) -> str:
        """Quint source of ``e`` (a constant folded to its literal)."""
        s, v = self._e(e, ctx)
        if v is ABSENT:
            raise ExportError(f"`{e.text()}` reads a parameter the step does not have")
        return lit(v) if v is not UNKNOWN else s

    def _e(self, e: x.Expr, ctx: _Ctx) -> tuple[str, Any]:
        if isinstance(e, x.Const):
            return "", e.value
        if isinstance(e, x.Var):
            return self._var(e.space, e.name, ctx)
        if isinstance(e, x.Compare):
            op, left, right = e.args
            (ls, lv), (rs, rv) = self._e(left, ctx), self._e(right, ctx)
            if lv is ABSENT or rv is ABSENT:  # Python: None == c is false, None != c true
                if op not in ("==", "!="):
                    raise ExportError(f"`{e.text()}` orders a parameter the step lacks")
                return "", (op == "!=") != (lv is rv)
            if lv is not UNKNOWN and rv is not UNKNOWN:
                return "", _CMP[op](lv, rv)
            ls, rs = self._src(ls, lv), self._src(rs, rv)
            if ls == rs:
                return "", op in ("==", "<=", ">=")
            return f"({ls} {op} {rs})", UNKNOWN
        if isinstance(e, x.Arith):
            op, left, right = e.args
            (ls, lv), (rs, rv) = self._e(left, ctx), self._e(right, ctx)
            if lv is not UNKNOWN and rv is not UNKNOWN:
                return "", lv + rv if op == "+" else lv - rv
            return f"({self._src(ls, lv)} {op} {self._src(rs, rv)})", UNKNOWN
        if isinstance(e, x.And | x.Or):
            stop = isinstance(e, x.Or)  # the value that decides the whole
            srcs = []
            for a in e.args:
                s, v = self._e(a, ctx)
                if v is not UNKNOWN:
                    if bool(v) is stop:
                        return "", stop
                    continue
                srcs.append(s)
            if not srcs:
                return "", not stop
            word = " or " if stop else " and "
            return (srcs[0], UNKNOWN) if len(srcs) == 1 else ("(" + word.join(srcs) + ")", UNKNOWN)
        if isinstance(e, x.Not):
            s, v = self._e(e.args[0], ctx)
            return (f"not({s})", UNKNOWN) if v is UNKNOWN else ("", not v)
        if isinstance(e, x.IsIn):
            s, v = self._e(e.args[0], ctx)
            members = e.args[1]
            if v is ABSENT:
                return "", False
            if v is not UNKNOWN:
                return "", v in members
            return f"{s}.in({_set(members)})", UNKNOWN
        if isinstance(e, x.Index):
            (ts, tv), (i_s, iv) = self._e(e.args[0], ctx), self._e(e.args[1], ctx)
            if tv is not UNKNOWN and iv is not UNKNOWN:
                return "", tv[iv]
            return f"{self._src(ts, tv)}[{self._src(i_s, iv)}]", UNKNOWN
        if isinstance(e, x.Update):
            tup, at, new = (self._e(a, ctx) for a in e.args)
            return (f"{self._src(*tup)}.replaceAt({self._src(*at)}, {self._src(*new)})",
                    UNKNOWN)
        if isinstance(e, x.Min | x.Max):
            parts = [self._e(a, ctx) for a in e.args]
            if all(v is not UNKNOWN for _, v in parts):
                return "", (min if isinstance(e, x.Min) else max)(v for _, v in parts)
            op = "<=" if isinstance(e, x.Min) else ">="
            acc = self._src(*parts[0])
            for s, v in parts[1:]:
                b = self._src(s, v)
                acc = f"(if ({acc} {op} {b}) {acc} else {b})"
            return acc, UNKNOWN
        if isinstance(e, x.IfElse):
            cs, cv = self._e(e.args[0], ctx)
            if cv is not UNKNOWN:
                return self._e(e.args[1] if cv else e.args[2], ctx)
            yes, no = self._e(e.args[1], ctx), self._e(e.args[2], ctx)
            return f"(if ({cs}) {self._src(*yes)} else {self._src(*no)})", UNKNOWN
        if isinstance(e, x.Unchanged):
            names = e.args or (*(v.name for v in self.p.variables), "state")
            parts = [self._e(x.Compare("==", x.Var("A", n), x.Var("B", n)), ctx) for n in names]
            return self._e(x.And.of(*(_Folded(s, v) for s, v in parts)), ctx) \
                if len(parts) > 1 else parts[0]
        if isinstance(e, _Folded):
            return e.args[0], e.args[1]
        raise ExportError(f"no Quint for {type(e).__name__} (`{e.text()}`): a machine's "
                          "declaration does not use it")

    def _src(self, s: str, v: Any) -> str:
        if v is ABSENT:
            raise ExportError("a parameter the step does not have, where a value is needed")
        return lit(v) if v is not UNKNOWN else s

    def _var(self, space: str, name: str, ctx: _Ctx) -> tuple[str, Any]:
        if space == "P":
            if ctx.params is None:
                raise ExportError(f"`{name}`: parameters are unknown here")
            if name not in ctx.params:
                return "", ABSENT
            return ctx.params[name], UNKNOWN
        if space == "T":
            value = ctx.trigger if name == "trigger" else ctx.actor
            if value is None:
                raise ExportError(f"step.{name} outside a step")
            return "", value
        if space == "STATE" or name == "state":
            if space == "A" and ctx.after is not None:
                return "", ctx.after
            if space in ("A", "B") and ctx.before is not None:
                return "", ctx.before
            return "state", UNKNOWN
        if space not in ("V", "B", "A"):
            raise ExportError(f"`{name}` ({space}): a machine's declaration does not read it")
        if name not in self.names:
            raise ExportError(f"`{name}`: no such variable")
        if space == "A" and name in ctx.effect:
            s, v = self._e(ctx.effect[name], _Ctx(ctx.params, ctx.trigger, ctx.actor,
                                                   ctx.before, ctx.after))
            return s, v
        return self.names[name], UNKNOWN


class _Folded(x._Node):
    """An already rendered operand (source, value), so And.of can fold it."""

    def text(self) -> str:
        return str(self.args[0])


def _comment(text: str) -> str:
    return " ".join(text.split())


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


def render_module(p: Protocol, live: Any = None) -> QuintModel:
    """``p`` (with its declared fairness and progress, ``live``; by default the machine's own,
    ``model.progress.liveness_of``) as a Quint module (see the module's docstring)."""
    if live is None:
        from ..model.progress import liveness_of
        live = liveness_of(p)
    r = _Render(p)
    mod = r.fresh(p.name)
    n = r.names
    not_expressed: list[str] = []
    notes = [
        "quint run checks state invariants only: the temporal formulas below (progress under "
        "the declared fairness) typecheck, and are checked by `quint verify --temporal` "
        "(Apalache), or by TLC on a TLA+ translation; `settled explore` checks them here",
        "a cycle that only a model bound (a guard marked bound) makes fair is reported by "
        "`settled explore` as stuck_at_bound; here it is a plain violation",
        "weakFair/strongFair count only steps that change a variable: a step that changes "
        "nothing and records the same step verdicts is a stutter here, a step in our check",
    ]
    state_names = [s.name for s in p.states]
    terminal = sorted(p.terminal_states)
    ok = {sp.name: r.fresh(f"ok_{sp.name}") for sp in p.step_properties}
    all_vars = ["state", *(n[v.name] for v in p.variables), *ok.values()]

    body: list[str] = []
    add = body.append
    add("  // ---- the configuration " + "-" * 60)
    add(f"  /// the control state: one of {', '.join(state_names)}")
    add("  var state: str")
    for v in p.variables:
        add(f"  /// {_comment(v.meaning)} (one of {_comment(x._values_text(v.domain))}"
            f"{'; a ghost: specification-only' if v.ghost else ''})")
        add(f"  var {n[v.name]}: {r.types[v.name]}")
    if p.step_properties:
        add("  // ghosts: each step records whether it kept each step property (quint run "
            "checks state invariants only)")
    for sp in p.step_properties:
        add(f"  var {ok[sp.name]}: bool")
    add("")
    add(f"  pure val STATES = {_set(state_names)}")
    add(f"  pure val TERMINAL = {_set(terminal)}")
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

    # -- one action per transition ----------------------------------------------------
    counts: dict[str, int] = {}
    for t in p.transitions:
        counts[t.trigger] = counts.get(t.trigger, 0) + 1
    seen: dict[str, int] = {}
    action_of: list[str] = []
    pnames_of: list[dict[str, str]] = []
    for t in p.transitions:
        seen[t.trigger] = seen.get(t.trigger, 0) + 1
        base = t.trigger if counts[t.trigger] == 1 else f"{t.trigger}_{seen[t.trigger]}"
        action_of.append(r.fresh(base))
    earlier = _step_groups(p)
    for i, t in enumerate(p.transitions):
        a = action_of[i]
        local = set(r.taken)
        pn: dict[str, str] = {}
        for prm in t.params:
            own = prm.name if prm.name not in local and re.match(r"[a-z]\w*$", prm.name) \
                else r.fresh(f"{prm.name}_param")
            local.add(own)
            pn[prm.name] = own
        pnames_of.append(pn)
        sig = ", ".join(f"{pn[prm.name]}: {_type(prm.domain, f'{t.trigger}.{prm.name}')}"
                        for prm in t.params)
        call = ", ".join(pn[prm.name] for prm in t.params)
        dest = t.dest
        before = t.source[0] if len(t.source) == 1 else None
        ctx = _Ctx(pn, t.trigger, t.actor, before, dest,
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
        for u, where in earlier[i]:
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
            parts += [r.expr(g.expr, uctx) for g in u.guards]
            first = ", ".join(f"{g.name}" for g in u.guards) or "no guard"
            add(f"    // not an earlier {u.trigger} of its group ({first}): the first fires")
            add(f"    not({' and '.join(parts) or 'true'}),")
        add("  }")
        with_head = f"action {a}_with({sig}): bool" if t.params else f"action {a}"
        add(f"  {with_head} = all {{")
        add(f"    {a}_enabled{f'({call})' if t.params else ''},")
        add(f"    state' = {lit(dest) if dest is not None else 'state'},")
        if t.effect.updates:
            add(f"    // {_comment(t.effect.text)}")
        for v in p.variables:
            e = ctx.effect.get(v.name)
            add(f"    {n[v.name]}' = {r.expr(e, ctx) if e is not None else n[v.name]},")
        for sp in p.step_properties:
            add(f"    {ok[sp.name]}' = {r.expr(sp.expr, ctx)},")
        add("  }")
        if t.params:
            add(f"  action {a} = {{")
            for prm in t.params:
                add(f"    nondet {pn[prm.name]} = {_set(prm.domain)}.oneOf()")
            add(f"    {a}_with({call})")
            add("  }")
        add("")
    add("  /// a settled configuration (terminal, or outside a domain) stays as it is")
    add("  action settled = all {")
    add("    state.in(TERMINAL) or not(in_domain),")
    for name in all_vars:
        add(f"    {name}' = {name},")
    add("  }")
    add("")
    add("  action step = any {")
    for a in action_of:
        add(f"    {a},")
    add("    settled,")
    add("  }")
    add("")

    # -- the checks ---------------------------------------------------------------------
    invariants: list[str] = []
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
        add(f"  val {name} = {ok[sp.name]}")
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
        a, pn = action_of[i], pnames_of[i]
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

    # -- fairness and progress ----------------------------------------------------------
    temporal: list[str] = []
    add("  // ---- fairness and progress " + "-" * 56)
    add(f"  val vars = ({', '.join(all_vars)})")
    fair_terms: list[str] = []
    for f in live.fairness:
        add(f"  // fairness {f.name}: {_comment(f.words())} ({', '.join(f.rules)})")
        if f.kind == "never":
            add("  //   (never: constrains nothing)")
            continue
        alts = []
        for i, t in enumerate(p.transitions):
            if f.steps.actors and t.actor not in f.steps.actors:
                continue
            if f.steps.triggers and t.trigger not in f.steps.triggers:
                continue
            pn = pnames_of[i]
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
                alts.append(action_of[i])
            else:
                picks = " ".join(f"nondet {pn[q.name]} = {_set(domains[q.name])}.oneOf()"
                                 for q in t.params)
                call = ", ".join(pn[q.name] for q in t.params)
                alts.append(f"{{ {picks} {action_of[i]}_with({call}) }}")
        fg = r.fresh(f"fair_{f.name}")
        add(f"  action {fg} = any {{ {', '.join(alts)} }}")
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

    def pred(pr: Any, what: str) -> str:
        parts = []
        if pr.states:
            inside = f"state.in({_set(pr.states)})"
            parts.append(f"not({inside})" if pr.outside else inside)
        for c in pr.where:
            t = r.types[c.variable]
            if c.op not in ("==", "!=") and t != "int":
                raise ExportError(f"{what}: `{c.text()}` orders values of type {t}; Quint "
                                  "orders numbers only")
            parts.append(f"{n[c.variable]} {c.op} {lit(c.value)}")
        if pr.system:
            raise ExportError(f"{what}: a system's predicate in a machine's progress")
        return "(" + " and ".join(parts or ["true"]) + ")"

    for prop in live.progress:
        try:
            premise = pred(prop.premise, f"progress {prop.name}")
            goal = pred(prop.goal, f"progress {prop.name}")
        except ExportError as e:
            not_expressed.append(str(e))
            add(f"  // NOT EXPRESSED: {e} (the property: {_comment(prop.formula())})")
            continue
        name = r.fresh(f"progress_{prop.name}")
        temporal.append(name)
        add(f"  /// {_comment(prop.text)} ({', '.join(prop.rules)}): "
            f"{_comment(prop.formula())}")
        add(f"  temporal {name} = fairness implies {premise}.leadsTo({goal})")
    add("}")

    head = [f"// {p.name}: {_comment(p.meaning)}",
            f"// Generated by `settled export --quint {p.name}` from the declaration's "
            "expressions; do not edit.",
            "// Names are strings, tuples of numbers List[int]. Check every invariant with:",
            f"//   quint run --invariant=all_invariants --max-steps=30 {p.name}.qnt",
            "// Notes:"]
    head += [f"//   - {note}" for note in notes]
    if not_expressed:
        head.append("// NOT EXPRESSED in Quint (left out of this module):")
        head += [f"//   - {item}" for item in not_expressed]
    text = "\n".join([*head, f"module {mod} {{", *body, ""])
    return QuintModel(p, text, tuple(action_of), tuple(invariants), tuple(temporal),
                      tuple(not_expressed), tuple(notes), dict(n))


def quint_path() -> str | None:
    """The ``quint`` command on the PATH, or None."""
    import shutil

    return shutil.which("quint")


INSTALL = "npm i -g @informalsystems/quint"
