"""A declared machine as a Promela model, rendered from its expressions (``settled export
--promela``), and the SPIN run that explores it (``settled explore --engine spin``).

The model
---------
One process, ``active proctype machine``. After one ``d_step`` that checks the initial
configuration, its body is a single ``do`` loop whose every option is one ``d_step``: one
*label* of the machine (a transition with one choice of its parameters, the unit
``Protocol.enabled`` offers). So every configuration SPIN stores at the loop head is
exactly one configuration of ours, and every executed option is exactly one of our
labelled steps. The one stored state that is not ours is the process before that first
``d_step`` (SPIN's initial state), and the one transition that is not a step is that
``d_step``; both are subtracted when the counts are compared (:class:`SpinResult`).

Each option is guarded by ``st == <state>``, the transition's guards, the negation of the
guards of the transitions of the same trigger group that come before it (the first one
whose guards hold fires, as in ``Protocol.enabled``), and by "every variable inside its
declared domain": like our explorer, a configuration outside a domain is reported and not
expanded. Its body computes every written variable's new value from the values before
the step (into ``n_<name>``, reset to 0 at the end, so they never tell two states apart),
checks each step property on the before and after values, assigns, and checks each
domain and each invariant on the new configuration. A last option, ``timeout`` (no
other option is executable), asserts that the configuration is terminal or outside a
domain: our deadlock. It returns to the same state, so it adds one transition per
configuration without steps, and no state; that too is subtracted.

Every check is ``if :: !(cond) -> fail = K :: else -> skip fi; assert(fail != K)``,
``fail`` reset to 0 after: pan prints each failing assertion with its own text, so the
number ``K`` says which property it is (the table :attr:`PromelaModel.checks`).

Values are small ints: a number is itself, a truth value 0/1, a name (and ``None``) a
code from the mapping table at the top of the file (``#define k_<name> <code>``), a tuple
of numbers an array. Parameters, the step's trigger and actor and the states before and
after are constants in each option, so the renderer folds them (as ``model._compiled``
does for Python): a guard on parameters alone decides whether an option exists.

Every option prints ``@L <label>`` (seen only when SPIN replays a trail), so a trail maps
back to our triggers and parameter names (:func:`trail_steps`).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from settled.model import Params, Protocol, Transition
from settled.model import expr as x

_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge}


class ExportError(ValueError):
    """A declaration this renderer cannot write in Promela (the message says which part)."""


class _Unknown:
    pass


UNKNOWN = _Unknown()


@dataclass(frozen=True)
class Check:
    """One assertion of the model: what it checks, by our names."""

    kind: str  # invariant | step_property | domain | deadlock
    name: str  # the property's (or the variable's) name; "" for a deadlock
    index: int  # its position among the machine's invariants / step properties / variables


@dataclass(frozen=True)
class PromelaModel:
    """The rendered model, with the tables that map SPIN's report back to our names."""

    protocol: Protocol
    text: str
    # option K prints "@L K": a machine's (Transition, Params); a system's SystemTraceStep
    labels: tuple[Any, ...]
    checks: tuple[Check, ...]  # fail code K (from 1) is checks[K - 1]
    codes: Mapping[Any, int] = field(default_factory=dict)  # a name's (or None's) code
    # option K's enabling condition (control state, guards, earlier options of its group)
    conditions: tuple[str, ...] = ()
    in_domain: str = "1"  # every variable inside its declared domain
    name: str = ""  # the model's name when it is not the protocol's (a system's)


def _ident(value: Any) -> str:
    text = "_absent" if value is None else str(value)  # None: a parameter the step lacks
    return "k_" + re.sub(r"[^A-Za-z0-9_]", "_", text)


class _Render:
    """Renders expressions of one machine to Promela, folding what is known."""

    def __init__(self, p: Protocol) -> None:
        self.p = p
        self.kinds: dict[str, str] = {}  # variable -> int | bool | code | tuple
        self.width: dict[str, int] = {}  # tuple variables: their length
        names: set[Any] = set()
        for v in p.variables:
            kinds = {_kind(d) for d in v.domain}
            if len(kinds) != 1:
                raise ExportError(f"{p.name}: variable {v.name} mixes kinds {sorted(kinds)}")
            kind = kinds.pop()
            self.kinds[v.name] = kind
            if kind == "tuple":
                widths = {len(d) for d in v.domain}
                if len(widths) != 1 or any(_kind(e) != "int" for d in v.domain for e in d):
                    raise ExportError(f"{p.name}: variable {v.name} holds tuples of different "
                                      "lengths or of non-numbers")
                self.width[v.name] = widths.pop()
            if kind == "code":
                names.update(v.domain)
        for t in p.transitions:
            for prm in t.params:
                names.update(d for d in prm.domain if _kind(d) == "code")
            names.update((t.trigger, t.actor))
        names.update(s.name for s in p.states)
        names.add(None)
        for e in self._all_exprs():
            self._collect_names(e, names)
        ordered = sorted(names, key=lambda n: (n is not None, str(n)))
        self.codes: dict[Any, int] = {n: i for i, n in enumerate(ordered)}
        idents = [_ident(n) for n in ordered]
        if len(set(idents)) != len(idents):
            raise ExportError(f"{p.name}: two names map to one Promela identifier")

    def _all_exprs(self) -> list[x.Expr]:
        p = self.p
        out: list[x.Expr] = [g.expr for t in p.transitions for g in t.guards]
        out += [x.lift(e) for t in p.transitions for e in t.effect.updates.values()]
        out += [i.expr for i in p.invariants] + [s.expr for s in p.step_properties]
        return out

    def _collect_names(self, e: x.Expr, names: set[Any]) -> None:
        if isinstance(e, x.Const) and _kind(e.value) == "code":
            names.add(e.value)
        if isinstance(e, x.IsIn):
            names.update(m for m in e.args[1] if _kind(m) == "code")
        for c in e.children():
            self._collect_names(c, names)

    # -- literals -------------------------------------------------------------------
    def lit(self, value: Any) -> str:
        kind = _kind(value)
        if kind == "bool":
            return "1" if value else "0"
        if kind == "int":
            return str(value)
        if kind == "code":
            if value not in self.codes:
                raise ExportError(f"{self.p.name}: the name {value!r} has no code")
            return _ident(value)
        raise ExportError(f"{self.p.name}: no scalar Promela value for {value!r}")

    def mapping_table(self) -> list[str]:
        lines = ["/* the mapping table: our names (and none) as small ints */"]
        lines += [f"#define {_ident(n)} {c}" for n, c in self.codes.items()]
        return lines

    # -- expressions ---------------------------------------------------------------
    def expr(self, e: x.Expr, ctx: _Ctx) -> tuple[str, Any]:
        """(Promela source, constant or UNKNOWN) of a scalar expression."""
        src, val = self._expr(e, ctx)
        if val is not UNKNOWN:
            return self.lit(val), val
        return src, val

    def _expr(self, e: x.Expr, ctx: _Ctx) -> tuple[str, Any]:
        if isinstance(e, x.Const):
            return "", e.value
        if isinstance(e, x.Var):
            return self._var(e.space, e.name, ctx)
        if isinstance(e, x.Compare):
            op, left, right = e.args
            if self._is_tuple(left, ctx) or self._is_tuple(right, ctx):
                if op not in ("==", "!="):
                    raise ExportError(f"`{e.text()}`: tuples are only compared with == or !=")
                n = self._tuple_width(left, ctx) or self._tuple_width(right, ctx) or 0
                parts = [self.expr(x.Compare("==", x.Index(left, x.Const(k)),
                                             x.Index(right, x.Const(k))), ctx) for k in range(n)]
                both = self._and([p for p in parts])
                if op == "!=":
                    return self._not(both)
                return both
            (ls, lv), (rs, rv) = self.expr(left, ctx), self.expr(right, ctx)
            if lv is not UNKNOWN and rv is not UNKNOWN:
                return "", _CMP[op](lv, rv)
            if ls == rs:
                return "", op in ("==", "<=", ">=")
            return f"({ls} {op} {rs})", UNKNOWN
        if isinstance(e, x.Arith):
            op, left, right = e.args
            (ls, lv), (rs, rv) = self.expr(left, ctx), self.expr(right, ctx)
            if lv is not UNKNOWN and rv is not UNKNOWN:
                return "", lv + rv if op == "+" else lv - rv
            return f"({ls} {op} {rs})", UNKNOWN
        if isinstance(e, x.And | x.Or):
            stop = isinstance(e, x.Or)  # the value that decides the whole (left to right)
            parts = []
            for a in e.args:
                s, v = self.expr(a, ctx)
                if v is not UNKNOWN and bool(v) is stop:
                    return "", stop
                parts.append((s, v))
            if not stop:
                return self._and(parts)
            srcs = [s for s, v in parts if v is UNKNOWN]
            return ("", False) if not srcs else ("(" + " || ".join(srcs) + ")", UNKNOWN)
        if isinstance(e, x.Not):
            return self._not(self.expr(e.args[0], ctx))
        if isinstance(e, x.IsIn):
            s, v = self.expr(e.args[0], ctx)
            members = e.args[1]
            if v is not UNKNOWN:
                return "", v in members
            return "(" + " || ".join(f"{s} == {self.lit(m)}" for m in members) + ")", UNKNOWN
        if isinstance(e, x.Index):
            t, i = e.args
            _, iv = self.expr(i, ctx)
            if isinstance(t, x.Const):
                if iv is not UNKNOWN:
                    return "", t.value[iv]
                raise ExportError(f"`{e.text()}`: a constant tuple indexed by a variable")
            if iv is UNKNOWN:
                raise ExportError(f"`{e.text()}`: an index the renderer cannot fold (only "
                                  "parameters and constants index a tuple in Promela here)")
            return self._element(t, iv, ctx)
        if isinstance(e, x.Min | x.Max):
            parts = [self.expr(a, ctx) for a in e.args]
            if all(v is not UNKNOWN for _, v in parts):
                return "", (min if isinstance(e, x.Min) else max)(v for _, v in parts)
            op = "<" if isinstance(e, x.Min) else ">"
            acc = parts[0][0]
            for s, _ in parts[1:]:
                acc = f"(({acc}) {op} ({s}) -> ({acc}) : ({s}))"
            return acc, UNKNOWN
        if isinstance(e, x.IfElse):
            cs, cv = self.expr(e.args[0], ctx)
            if cv is not UNKNOWN:
                return self._expr(e.args[1] if cv else e.args[2], ctx)
            (a_s, _), (b_s, _) = self.expr(e.args[1], ctx), self.expr(e.args[2], ctx)
            return f"({cs} -> {a_s} : {b_s})", UNKNOWN
        if isinstance(e, x.Unchanged):
            names = e.args or tuple(self.kinds)
            if not e.args and ctx.before != ctx.after:
                return "", False
            checks = []
            for n in names:
                if n not in ctx.written:
                    continue
                if self.kinds[n] == "tuple":
                    checks += [f"n_{n}[{k}] == v_{n}[{k}]" for k in range(self.width[n])]
                else:
                    checks.append(f"n_{n} == v_{n}")
            return ("", True) if not checks else ("(" + " && ".join(checks) + ")", UNKNOWN)
        if isinstance(e, x.Update):
            raise ExportError(f"`{e.text()}`: a tuple where a single value is expected")
        raise ExportError(f"no Promela for {type(e).__name__} (`{e.text()}`)")

    def _and(self, parts: Sequence[tuple[str, Any]]) -> tuple[str, Any]:
        if any(v is not UNKNOWN and not v for _, v in parts):
            return "", False
        srcs = [s for s, v in parts if v is UNKNOWN]
        return ("", True) if not srcs else ("(" + " && ".join(srcs) + ")", UNKNOWN)

    @staticmethod
    def _not(part: tuple[str, Any]) -> tuple[str, Any]:
        s, v = part
        return (f"(!{s})", UNKNOWN) if v is UNKNOWN else ("", not v)

    def _var(self, space: str, name: str, ctx: _Ctx) -> tuple[str, Any]:
        if space == "P":
            if ctx.params is None:
                raise ExportError("parameters are unknown here")
            return "", ctx.params.get(name)
        if space == "T":
            return "", ctx.trigger if name == "trigger" else ctx.actor
        if space == "STATE" or (space in ("B", "A") and name == "state"):
            if space == "B":
                return "", ctx.before
            if space == "A":
                return "", ctx.after
            return "st", UNKNOWN
        if self.kinds.get(name) == "tuple":
            raise ExportError(f"`{name}`: a whole tuple where a single value is expected")
        if space == "A" and name in ctx.written:
            return f"n_{name}", UNKNOWN
        return f"v_{name}", UNKNOWN

    # -- tuples, element by element -------------------------------------------------------
    def _is_tuple(self, e: x.Expr, ctx: _Ctx) -> bool:
        return self._tuple_width(e, ctx) is not None

    def _tuple_width(self, e: x.Expr, ctx: _Ctx) -> int | None:
        if isinstance(e, x.Var) and self.kinds.get(e.name) == "tuple" and e.space != "P":
            return self.width[e.name]
        if isinstance(e, x.Const) and isinstance(e.value, tuple):
            return len(e.value)
        if isinstance(e, x.Update):
            return self._tuple_width(e.args[0], ctx)
        if isinstance(e, x.IfElse):
            return self._tuple_width(e.args[1], ctx) or self._tuple_width(e.args[2], ctx)
        return None

    def _element(self, t: x.Expr, k: int, ctx: _Ctx) -> tuple[str, Any]:
        """Element ``k`` of the tuple expression ``t``."""
        if isinstance(t, x.Const):
            return self.expr(x.Const(t.value[k]), ctx)
        if isinstance(t, x.Var):
            if k >= self.width[t.name]:
                raise ExportError(f"`{t.text()}[{k}]`: index outside the tuple")
            if t.space == "A" and t.name in ctx.written:
                return f"n_{t.name}[{k}]", UNKNOWN
            return f"v_{t.name}[{k}]", UNKNOWN
        if isinstance(t, x.Update):
            base, i, v = t.args
            _, iv = self.expr(i, ctx)
            if iv is UNKNOWN:
                raise ExportError(f"`{t.text()}`: an index the renderer cannot fold")
            return self.expr(v, ctx) if iv == k else self._element(base, k, ctx)
        if isinstance(t, x.IfElse):
            cs, cv = self.expr(t.args[0], ctx)
            if cv is not UNKNOWN:
                return self._element(t.args[1] if cv else t.args[2], k, ctx)
            (a_s, _), (b_s, _) = self._element(t.args[1], k, ctx), self._element(t.args[2], k, ctx)
            return f"({cs} -> {a_s} : {b_s})", UNKNOWN
        raise ExportError(f"`{t.text()}`: not a tuple the renderer knows")

    def assign(self, name: str, e: x.Expr, ctx: _Ctx) -> list[str]:
        """``n_<name> = <e>`` (element by element for a tuple)."""
        if self.kinds[name] == "tuple":
            return [f"n_{name}[{k}] = {self._element(e, k, ctx)[0]};"
                    for k in range(self.width[name])]
        return [f"n_{name} = {self.expr(e, ctx)[0]};"]

    def in_domain(self, name: str, prefix: str = "") -> str:
        v = next(v for v in self.p.variables if v.name == name)
        kind = self.kinds[name]
        ref = f"{prefix}v_{name}"
        if kind == "tuple":
            alts = [" && ".join(f"{ref}[{k}] == {self.lit(e)}" for k, e in enumerate(d))
                    for d in v.domain]
            return "(" + " || ".join(f"({a})" for a in alts) + ")"
        if kind == "int":
            ints = sorted(v.domain)
            if ints == list(range(ints[0], ints[-1] + 1)):
                return f"({ref} >= {ints[0]} && {ref} <= {ints[-1]})"
        return "(" + " || ".join(f"{ref} == {self.lit(d)}" for d in v.domain) + ")"


@dataclass
class _Ctx:
    params: Mapping[str, Any] | None
    trigger: str | None = None
    actor: str | None = None
    before: str | None = None
    after: str | None = None
    written: frozenset[str] = frozenset()


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, tuple):
        return "tuple"
    if value is None or isinstance(value, str):
        return "code"
    raise ExportError(f"no Promela value for {value!r} ({type(value).__name__})")


def render_machine(p: Protocol) -> PromelaModel:
    """``p`` as a Promela model (see the module's docstring)."""
    r = _Render(p)
    checks: list[Check] = []

    # the checks on a configuration (after a step, or the initial one), cached by text
    inv_ctx = _Ctx(None)
    state_checks: list[tuple[str, str, int, tuple[str, Any]]] = []
    for i, var in enumerate(p.variables):
        state_checks.append(("domain", var.name, i, (r.in_domain(var.name), UNKNOWN)))
    for i, inv in enumerate(p.invariants):
        state_checks.append(("invariant", inv.name, i, r.expr(inv.expr, inv_ctx)))
    # one code per property, whichever option checks it
    codes: dict[tuple[str, int], int] = {}

    def coded(kind: str, name: str, index: int, cond: tuple[str, Any], indent: str) -> list[str]:
        s, v = cond
        if v is not UNKNOWN and v:
            return []
        k = codes.get((kind, index))
        if k is None:
            checks.append(Check(kind, name, index))
            k = codes[(kind, index)] = len(checks)
        test = f"!{s}" if v is UNKNOWN else "1"
        return [f"{indent}if :: {test} -> fail = {k} :: else -> skip fi;",
                f"{indent}assert(fail != {k}); fail = 0;"]

    ind = "       "
    after_checks = [line for kind, name, i, cond in state_checks
                    for line in coded(kind, name, i, cond, ind)]
    all_in_domain = " && ".join(r.in_domain(v.name) for v in p.variables) or "1"
    terminal = " || ".join(f"st == {_ident(s)}" for s in sorted(p.terminal_states)) or "0"

    lines = [f"/* {p.name}: {p.meaning} */",
             "/* generated by `settled export --promela` from the declaration's expressions; "
             "do not edit */", ""]
    lines += r.mapping_table()
    lines += ["", "/* the configuration */", f"byte st = {_ident(p.initial)};  /* the control state */"]
    for var in p.variables:
        kind = r.kinds[var.name]
        if kind == "tuple":
            init = ", ".join(str(e) for e in var.initial)
            lines.append(f"short v_{var.name}[{r.width[var.name]}];  /* initially ({init}) */")
        else:
            ty = {"bool": "bool", "int": "short", "code": "byte"}[kind]
            lines.append(f"{ty} v_{var.name} = {r.lit(var.initial)};")
    lines += ["", "/* scratch (always 0 between steps): the values after a step, the failing "
              "check */"]
    for var in p.variables:
        if r.kinds[var.name] == "tuple":
            lines.append(f"short n_{var.name}[{r.width[var.name]}];")
        else:
            lines.append(f"short n_{var.name};")
    lines += ["byte fail;", "", "active proctype machine() {", "  d_step {"]
    for var in p.variables:
        if r.kinds[var.name] == "tuple":
            lines += [f"    v_{var.name}[{k}] = {e};" for k, e in enumerate(var.initial) if e]
    lines += [f"    {line.strip()}" for line in after_checks]
    lines += ["  };", "  do"]
    labels: list[tuple[Transition, Params]] = []
    conditions: list[str] = []
    for state, plan in p._plan.items():
        for params, fitting in plan:
            earlier: list[str] = []
            for t in fitting:
                dest = state if t.dest is None else t.dest
                written = frozenset(t.effect.writes)
                ctx = _Ctx(params, t.trigger, t.actor, state, dest, written)
                guard = r._and([r.expr(g.expr, ctx) for g in t.guards])
                if guard[1] is not UNKNOWN and not guard[1]:
                    continue
                conds = [f"st == {_ident(state)}", *earlier]
                if guard[1] is UNKNOWN:
                    conds.append(guard[0])
                label = len(labels)
                labels.append((t, params))
                conditions.append(" && ".join(conds))
                shown = " ".join([t.trigger, *(f"{k}={v}" for k, v in params.items())])
                lines.append(f"  :: d_step {{ /* {label}: {shown} */")
                lines.append(f"     {' && '.join(conds)} && {all_in_domain} ->")
                lines.append(f'       printf("@L {label}\\n");')
                for name, e in t.effect.updates.items():
                    lines += [f"       {a}" for a in r.assign(name, x.lift(e), ctx)]
                for k, sp in enumerate(p.step_properties):
                    lines += coded("step_property", sp.name, k, r.expr(sp.expr, ctx), ind)
                if dest != state:
                    lines.append(f"       st = {_ident(dest)};")
                for name in t.effect.updates:
                    if r.kinds[name] == "tuple":
                        lines += [f"       v_{name}[{k}] = n_{name}[{k}]; n_{name}[{k}] = 0;"
                                  for k in range(r.width[name])]
                    else:
                        lines.append(f"       v_{name} = n_{name}; n_{name} = 0;")
                if written or dest != state:
                    lines += after_checks
                lines.append("     }")
                if guard[1] is not UNKNOWN:  # always enabled: the rest of the group never fires
                    break
                earlier.append(f"!{guard[0]}")
    lines.append("  :: d_step { timeout ->  /* no step: a deadlock unless settled */")
    lines.append('       printf("@T\\n");')
    deadlock = (f"({terminal} || !({all_in_domain}))", UNKNOWN)
    lines += coded("deadlock", "", 0, deadlock, ind)
    lines += ["     }", "  od", "}", ""]
    return PromelaModel(p, "\n".join(lines), tuple(labels), tuple(checks), dict(r.codes),
                        tuple(conditions), all_in_domain)


# --------------------------------------------------------------------------
# Running SPIN
# --------------------------------------------------------------------------
class SpinUnavailable(RuntimeError):
    """SPIN or a C compiler is missing (the message names the package)."""


class SpinFailed(RuntimeError):
    """spin, cc or pan failed (the message carries its last line)."""


@dataclass
class SpinFinding:
    check: Check
    depth: int  # pan's depth of the first (shortest, breadth-first) occurrence
    steps: tuple[Any, ...] = ()  # the shortest run, by our names (the model's labels)


@dataclass
class SpinResult:
    """What pan reported, in our terms.

    ``states`` is pan's "states, stored" minus 1 (the process before its first d_step,
    which checks the initial configuration); ``steps`` is pan's "transitions" (stored +
    matched) minus 2 (pan counts the root as a transition, and that first d_step) minus
    one ``timeout`` self-loop per configuration without steps (``no_step_states``: in the
    counting run the ``timeout`` option writes ``@T`` to pan's standard error, executed
    exactly once per such stored state, so pan counts them itself; the labels' ``@L``
    prints are left out of that run).

    With ``bitstate`` every count is a LOWER bound: a state whose hash bits were all set
    by other states is taken for seen and not expanded, so its steps and its successors
    may be missing too. :attr:`coverage_estimate` says how likely that was."""

    model: str
    stored: int
    matched: int
    transitions: int
    depth: int
    errors: int
    findings: list[SpinFinding]
    seconds: float  # the pan process's wall-clock time (pan's own figure is rounded)
    memory_mb: float
    bitstate: bool
    hash_factor: float | None
    complete: bool
    compile_seconds: float
    no_step_states: int = 0
    raw: str = field(repr=False, default="")
    cores: int = 1
    handoff_depth: int | None = None  # multi-core: pan's -z
    core_states: tuple[int, ...] = ()  # multi-core: states each core stored (pan's %g figure)
    hash_bits: int | None = None  # bitstate: the hash array holds 2**hash_bits bits (-w)
    bits_per_state: int | None = None  # bitstate: pan's -k

    @property
    def coverage_estimate(self) -> float | None:
        """Bitstate only: a first-order estimate of the fraction of states pan saw.

        pan prints the hash factor ``h`` (bits in the array per stored state) and the bits
        set per state ``k``. When the last state was stored, each of its ``k`` bits was set
        already with probability at most ``1 - e^(-k/h)``, so a new state was taken for a
        seen one with probability at most ``p = (1 - e^(-k/h))^k``, and every state before
        it with less. The estimate is ``1 - p``: it counts the states mistaken for seen
        ones, not the states reached only through them, so it is an estimate, not a bound.
        None without bitstate, or when pan printed no hash factor."""
        import math

        if not self.bitstate or not self.hash_factor or not self.bits_per_state:
            return None
        k = self.bits_per_state
        return 1.0 - (1.0 - math.exp(-k / self.hash_factor)) ** k

    @property
    def states(self) -> int:
        return self.stored - 1

    @property
    def steps(self) -> int:
        """Labelled steps executed: one per (configuration, enabled label), as our
        explorer's labelled steps."""
        return self.transitions - 2 - self.no_step_states


def tools() -> tuple[str, str]:
    """(spin, cc) paths, or :class:`SpinUnavailable` naming the package."""
    import shutil

    spin = shutil.which("spin")
    if spin is None:
        raise SpinUnavailable("spin is not installed (Debian/Ubuntu: apt-get install spin)")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SpinUnavailable("no C compiler for SPIN's pan (Debian/Ubuntu: apt-get install gcc)")
    return spin, cc


_ERROR = re.compile(r"^(?:cpu\d+: )?pan:\d+: assertion violated \(fail!=(\d+)\) "
                    r"\(at depth (\d+)\)", re.M)
# One line per core at the end of a multi-core run: that core's depth, states, transitions.
_CORE = re.compile(r"^cpu(\d+): Depth=\s*\d+ States=\s*([\d.e+]+) Transitions=", re.M)
# The deadlock option's mark in the counting run: one write(2) of three bytes per execution,
# never split or interleaved by the other cores' buffered output (a pipe writes at most
# PIPE_BUF bytes atomically), where a buffered printf of several processes could be.
_MARK = 'c_code { (void) write(2, "@T\\n", 3); }'
# pan's default hand-off depth in multi-core mode (-z): a state at that depth goes to the
# next core's work queue. Smaller values crash pan 6.5.2 here (segmentation fault on the
# query machine), so it is left at pan's default and reported.
HANDOFF_DEPTH = 20
HASH_BITS = 28  # bitstate: pan's -w28, a 2^28-bit (32 MB) hash array


def _num(pattern: str, text: str, cast: Callable[[str], Any] = int) -> Any:
    m = re.search(pattern, text, re.M)
    return cast(m.group(1)) if m else None


def _count(text: str) -> int:
    return int(float(text)) if ("e" in text or "." in text) else int(text)


def _keep_only(k: int) -> Callable[[re.Match[str]], str]:
    """A substitution keeping only the assertion of check ``k`` (the others skip)."""
    def keep(m: re.Match[str]) -> str:
        return m.group(0) if m.group(1) == str(k) else "skip"
    return keep


def run_spin(model: PromelaModel, *, bitstate: bool = False, cores: int = 1,
             memory_mb: int = 4096, trails: bool = True, optimize: str = "-O0",
             hash_bits: int = HASH_BITS) -> SpinResult:
    """Explore ``model`` with pan, every error counted (``-c0``), then one shortest trail per
    failing check, replayed and mapped to our labels.

    One core: a breadth-first search (``-DBFS``), so the first error of each check is at
    its shortest depth. ``cores`` > 1: SPIN's multi-core depth-first search (pan compiled
    with ``-DNCORE=<cores>``, one shared state table, work handed to the next core at depth
    :data:`HANDOFF_DEPTH`); the per-core state counts are in :attr:`SpinResult.core_states`.
    ``bitstate``: pan's bitstate hashing (``-DBITSTATE``, a ``2**hash_bits``-bit array,
    pan's default 3 bits per state): a state whose bits are all set already is taken for
    seen, so the counts are a lower bound (:attr:`SpinResult.coverage_estimate`). Bitstate
    runs on one core only: pan's multi-core bitstate search sets its shared bits without a
    lock and may store a state twice, so its counts would bound nothing (ValueError). The
    trails always come from a single-core breadth-first search of the one failing check
    (bitstate too when ``bitstate``), so they are shortest whatever the search was.

    ``optimize`` is the C compiler's flag for ``pan``: ``-O0`` compiles the query
    machine's ``pan.c`` in about 9 s here, ``-O2`` in about 50 s, for a search of under a
    second either way. spin, cc or pan failing (pan killed by a signal, or ending without
    its report) is :class:`SpinFailed`."""
    import signal
    import subprocess
    import tempfile
    import time
    from pathlib import Path

    if cores < 1:
        raise ValueError(f"run_spin: cores must be at least 1, got {cores}")
    if bitstate and cores > 1:
        # pan's multi-core bitstate search sets the shared bits without a lock: two cores
        # reaching one state together both store it (18,057 stored of the query machine's
        # 18,054 here), so its counts are neither lower nor upper bounds.
        raise ValueError("run_spin: bitstate with several cores stores some states twice; "
                         "its counts bound nothing")
    if bitstate and not 10 <= hash_bits <= 40:
        raise ValueError(f"run_spin: hash_bits {hash_bits} is outside 10..40")
    spin, cc = tools()
    with tempfile.TemporaryDirectory(prefix="settled-spin-") as tmp:
        work = Path(tmp)

        def build(text: str, flags: list[str]) -> float:
            (work / "model.pml").write_text(text, encoding="utf-8")
            t0 = time.perf_counter()
            for cmd in ([spin, "-a", "model.pml"],
                        [cc, optimize, "-w", "-o", "pan", *flags, "pan.c"]):
                done = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
                if done.returncode != 0:
                    last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
                    raise SpinFailed(f"{Path(cmd[0]).name} failed: {last[0]}")
            return time.perf_counter() - t0

        def run(args: list[str]) -> subprocess.CompletedProcess[str]:
            done = subprocess.run(args, cwd=work, capture_output=True, text=True)
            if done.returncode < 0:
                try:
                    name = signal.Signals(-done.returncode).name
                except ValueError:
                    name = f"signal {-done.returncode}"
                raise SpinFailed(f"pan was killed by {name} "
                                 f"({'multi-core, ' if cores > 1 else ''}"
                                 f"{'bitstate, ' if bitstate else ''}{memory_mb} MB limit)")
            return done

        base = ["-DNOREDUCE", "-DSAFETY", f"-DMEMLIM={memory_mb}"]
        if bitstate:
            base.append("-DBITSTATE")
        flags = [*base, f"-DNCORE={cores}" if cores > 1 else "-DBFS"]
        counting = re.sub(r'\n\s*printf\("@L \d+\\n"\);', "", model.text)
        counting = counting.replace('printf("@T\\n");', _MARK)
        compile_s = build(counting, flags)
        # the depth-first stack of a multi-core run takes -m entries of memory (53 MB here)
        args = ["./pan", "-c0", "-m1000000" if cores > 1 else "-m10000000"]
        if bitstate:
            args.append(f"-w{hash_bits}")
        t0 = time.perf_counter()
        done = run(args)
        seconds = time.perf_counter() - t0
        out = done.stdout + done.stderr
        if "states, stored" not in out:
            raise SpinFailed("pan stopped without a report: "
                             + (out.strip().splitlines() or ["no output"])[-1])
        first: dict[int, int] = {}
        for m in _ERROR.finditer(out):
            first.setdefault(int(m.group(1)), int(m.group(2)))
        findings = [SpinFinding(model.checks[k - 1], d) for k, d in sorted(first.items())]
        if trails:
            for f in findings:
                k = model.checks.index(f.check) + 1
                only = model.text.replace("byte fail;", f"byte fail;\n#define ONLY {k}", 1)
                only = re.sub(r"assert\(fail != (\d+)\)", _keep_only(k), only)
                build(only, [*base, "-DBFS"])
                run(["./pan", "-c1", "-m10000000", *args[3:]])
                if not (work / "model.pml.trail").exists():
                    raise SpinFailed(f"pan wrote no trail for {f.check.kind} {f.check.name}")
                replay = subprocess.run([spin, "-t", "-B", "model.pml"], cwd=work,
                                        capture_output=True, text=True)
                labels = [int(n) for n in re.findall(r"@L (\d+)", replay.stdout)]
                f.steps = tuple(model.labels[n] for n in labels)
                (work / "model.pml.trail").unlink()
    # pan prints a count past 10^7 or so as 1.2345e+07: read both forms (the rounded one is
    # pan's own precision)
    stored = _num(r"^\s*([\d.e+]+) states, stored", out, _count)
    matched = _num(r"^\s*([\d.e+]+) states, matched", out, _count)
    hash_factor = _num(r"hash factor: ([\d.e+]+)", out, float)
    per_core: dict[int, int] = {}
    for m in _CORE.finditer(out):  # the last line of each core is its total
        per_core[int(m.group(1))] = int(float(m.group(2)))
    return SpinResult(
        model=model.name or model.protocol.name, stored=stored, matched=matched,
        transitions=_num(r"^\s*([\d.e+]+) transitions", out, _count), depth=_num(r"depth reached (\d+)", out),
        errors=_num(r"errors: (\d+)", out), findings=findings,
        seconds=round(seconds, 4),
        memory_mb=_num(r"^\s*([\d.]+)\s+total actual memory usage", out, float) or 0.0,
        bitstate=bitstate, hash_factor=hash_factor,
        complete="search not completed" not in out and "max search depth too small" not in out,
        compile_seconds=round(compile_s, 3), raw=out,
        no_step_states=len(re.findall(r"^@T$", done.stderr, re.M)),
        cores=cores, handoff_depth=HANDOFF_DEPTH if cores > 1 else None,
        core_states=tuple(per_core.get(c, 0) for c in range(cores)) if cores > 1 else (),
        hash_bits=hash_bits if bitstate else None,
        bits_per_state=_num(r"bits set per state: (\d+)", out) if bitstate else None)


def findings(model: PromelaModel, result: SpinResult) -> list[Any]:
    """SPIN's findings as our :class:`Finding` objects, each with its shortest run replayed
    through the table (``Protocol.fire``): numbered steps and ITF, as the explorer gives."""
    from settled.conformance._counterexample import Counterexample, Finding, TraceStep, replay

    p = model.protocol
    out = []
    for f in result.findings:
        c = f.check
        steps = [TraceStep(0, t.trigger, tuple(params.items())) for t, params in f.steps]
        configs = tuple(replay(p, steps)) if f.steps or c.kind != "deadlock" else ()
        if c.kind == "invariant":
            inv = p.invariants[c.index]
            name, rules, text = inv.name, inv.rules, inv.meaning
        elif c.kind == "step_property":
            sp = p.step_properties[c.index]
            name, rules, text = sp.name, sp.rules, sp.meaning
        elif c.kind == "domain":
            var = p.variables[c.index]
            value = p.view(configs[-1][0])[var.name] if configs else None
            name, rules = var.name, ()
            text = f"{var.name} = {value!r} is outside its declared domain {list(var.domain)}"
        else:
            name = configs[-1][0].state if configs else "?"
            rules, text = (), f"no step is possible and not every instance has settled ({name})"
        meta = {"kind": c.kind, "property": name, "rules": list(rules), "instance": 0,
                "description": text, "engine": "spin"}
        cx = Counterexample(p, tuple(steps), configs, meta) if configs else None
        out.append(Finding(c.kind, name, text, tuple(rules), 0, cx))
    return out


# --------------------------------------------------------------------------
# The two engines side by side
# --------------------------------------------------------------------------
def our_steps(result: Any) -> int:
    """Our explorer's labelled steps on one machine: one per (configuration, enabled label),
    the unit pan's transitions count (``ExploreResult.edges`` counts joined pairs instead)."""
    local = result._space.local
    if result._space.n != 1:
        raise ValueError("our_steps: one instance of a machine only")
    return sum(len(local.labels_from(c)) for c in range(local.expanded))


@dataclass
class Agreement:
    """Our explorer's states, labelled steps and findings against SPIN's.

    ``bound`` is ``equal`` (an exhaustive SPIN search: every figure must be equal) or
    ``at_most`` (a bitstate search, whose counts are lower bounds: SPIN must have seen at
    most our states and steps, and found only findings we found). An ``at_most`` agreement
    that saw less than we did is :attr:`partial`: it passes by leaving something out, and
    says so."""

    model: str
    ours: dict[str, Any]
    spin: dict[str, Any]
    bound: str = "equal"

    @property
    def disagreements(self) -> list[str]:
        out = []
        for k in self.ours:
            mine, theirs = self.ours[k], self.spin[k]
            if self.bound == "equal" and mine != theirs:
                out.append(f"{k}: ours {mine!r}, SPIN {theirs!r}")
            elif self.bound == "at_most" and k == "findings":
                extra = [f for f in theirs if f not in mine]
                if extra:
                    out.append(f"findings: SPIN's bitstate search found {extra!r}, ours did not")
            elif self.bound == "at_most" and theirs > mine:
                out.append(f"{k}: SPIN's bitstate search saw {theirs!r}, more than our "
                           f"{mine!r}: a bitstate count is a lower bound")
        return out

    @property
    def agree(self) -> bool:
        return not self.disagreements

    @property
    def partial(self) -> bool:
        """A bitstate search that saw fewer states, steps or findings than ours."""
        return self.bound == "at_most" and any(self.spin[k] != self.ours[k] for k in self.ours)

    @property
    def missed(self) -> list[str]:
        """What a partial search left out, in words."""
        if not self.partial:
            return []
        out = [f"{k}: SPIN saw {self.spin[k]:,} of our {self.ours[k]:,}"
               for k in ("states", "steps") if self.spin[k] != self.ours[k]]
        left = [f for f in self.ours["findings"] if f not in self.spin["findings"]]
        if left:
            out.append(f"findings: SPIN did not find {left!r}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "ours": self.ours, "spin": self.spin, "agree": self.agree,
                "disagreements": self.disagreements, "bound": self.bound,
                "partial": self.partial, "missed": self.missed}


def compare(result: Any, spin: SpinResult) -> Agreement:
    """States, labelled steps and the (kind, property) findings of the safety checks both
    engines make: invariants, step properties, domains, and whether a deadlock exists (pan
    reports the first per check, our explorer every deadlocked state). A bitstate search
    is held to "at most ours" (:class:`Agreement`)."""
    ours_found = {(f.kind, f.name) for f in result.violations}
    ours_found |= {("deadlock", "")} if result.deadlocks else set()
    spin_found = {(f.check.kind, f.check.name) for f in spin.findings}
    return Agreement(spin.model,
                     {"states": result.states, "steps": our_steps(result),
                      "findings": [list(f) for f in sorted(ours_found)]},
                     {"states": spin.states, "steps": spin.steps,
                      "findings": [list(f) for f in sorted(spin_found)]},
                     "at_most" if spin.bitstate else "equal")


# --------------------------------------------------------------------------
# Progress properties as LTL under the declared fairness
# --------------------------------------------------------------------------
_CHECK_LINE = re.compile(r"^\s*(if :: .* -> fail = \d+ :: else -> skip fi;|"
                         r"assert\(fail != \d+\); fail = 0;)\s*$")


def _pred(r_codes: Mapping[Any, int], pred: Any, kinds: Mapping[str, str]) -> str:
    """A machine's predicate (``model._liveness.Pred``) over ``st`` and the variables."""
    def lit(value: Any) -> str:
        kind = _kind(value)
        if kind == "bool":
            return "1" if value else "0"
        if kind == "int":
            return str(value)
        if value not in r_codes:
            raise ExportError(f"the name {value!r} has no code")
        return _ident(value)

    parts = ["started"]
    if pred.states:
        inside = " || ".join(f"st == {_ident(s)}" for s in pred.states)
        parts.append(f"!({inside})" if pred.outside else f"({inside})")
    for c in pred.where:
        if kinds.get(c.variable) == "tuple":
            raise ExportError(f"`{c.text()}`: a tuple in a progress predicate")
        parts.append(f"(v_{c.variable} {c.op} {lit(c.value)})")
    return "(" + " && ".join(parts) + ")"


def render_ltl(model: PromelaModel, liveness: Any, prop: Any) -> str:
    """The model without its safety checks, every step recording which fairness groups it
    belongs to (``tk_<i>`` for the i-th weak or strong group, ``tf`` for any finite one), a
    stutter option (a run may stop anywhere, as in our check: fair only where no required
    group is enabled), and one LTL formula:

        fairness -> [](premise -> <>goal)

    Fairness, per group: weak ``[]<>(!en_i || tk_i)``, strong ``(<>[]!en_i || []<>tk_i)``,
    finite ``<>[]!tf``; ``never`` groups constrain nothing. ``en_i`` is "some option of
    the group is enabled", rendered from the options' own conditions. The weak groups are
    folded into one monitor in the model (``wf`` counts the groups whose obligation has
    held since the last ``fair``; ``fair`` is set when all have), so the formula carries one
    ``[]<>fair``: SPIN's translation of several ``[]<>`` conjuncts takes seconds to minutes,
    that of this formula milliseconds. SPIN's own ``-f`` (weak fairness among processes)
    means nothing for one process, so fairness is in the model and the formula. Model
    bounds are unknown to SPIN: a cycle our check reports as ``stuck_at_bound`` is a
    violation for SPIN."""
    p = model.protocol
    required, finite = liveness.required, liveness.finite
    weak = [i for i, f in enumerate(required) if f.kind == "weak"]
    r_kinds = {v.name: _kind(v.initial) for v in p.variables}
    body = [ln for ln in model.text.split("\n") if not _CHECK_LINE.match(ln)]
    text = "\n".join(body)
    flags = [f"tk_{i}" for i in range(len(required))] + (["tf"] if finite else [])

    def marks(label: int) -> str:
        t, params = model.labels[label]
        on = [int(f.steps.matches(t.actor, t.trigger, params)) for f in required]
        if finite:
            on.append(int(any(f.steps.matches(t.actor, t.trigger, params) for f in finite)))
        return " ".join(f"{n} = {b};" for n, b in zip(flags, on, strict=True))

    text = re.sub(r'printf\("@L (\d+)\\n"\);',
                  lambda m: m.group(0) + " " + marks(int(m.group(1))), text)
    # en_<i>: some option of group i is enabled in the configuration; kept as a variable
    # (a function of the configuration, so it tells no two states apart), recomputed after
    # every step: SPIN's LTL parser does not take the options' conditional expressions.
    recompute = []
    for i, f in enumerate(required):
        conds = [f"({c})" for c, (t, params) in zip(model.conditions, model.labels, strict=True)
                 if f.steps.matches(t.actor, t.trigger, params)]
        en = f"({model.in_domain} && ({' || '.join(conds)}))" if conds else "0"
        recompute.append(f"if :: {en} -> en_{i} = 1 :: else -> en_{i} = 0 fi;")
    # the weak monitor, after en and tk are set: obligation wf met, on to the next one
    monitor = [f"if :: wf == {k} && (!en_{i} || tk_{i}) -> wf = {k + 1} :: else -> skip fi;"
               for k, i in enumerate(weak)]
    if weak:
        monitor.append(f"if :: wf == {len(weak)} -> wf = 0; fair = 1 :: else -> fair = 0 fi;")
    again = "".join(f"\n       {line}" for line in recompute + monitor)
    start = text.index("  :: d_step { timeout ->")
    end = text.index("  od", start)
    zero = " ".join(f"{n} = 0;" for n in flags)
    stutter = "".join(f" {line}" for line in monitor)
    text = (text[:start] + f'  :: d_step {{ printf("@S\\n"); {zero}{stutter} }}  /* a stutter */\n'
            + text[end:])
    text = text.replace("\n     }\n", again + "\n     }\n")
    text = text.replace("  d_step {\n", "  d_step {\n    started = 1;" + again + "\n", 1)
    decls = ["bool started;", *(f"bool {n};" for n in flags),
             *(f"bool en_{i};" for i in range(len(required)))]
    if weak:
        decls += ["byte wf;", "bool fair;"]
    decls.append(f"#define premise {_pred(model.codes, prop.premise, r_kinds)}")
    decls.append(f"#define goal {_pred(model.codes, prop.goal, r_kinds)}")
    fair = ["([]<>fair)"] if weak else []
    fair += [f"((<>[]!en_{i}) || ([]<>tk_{i}))" for i, f in enumerate(required)
             if f.kind == "strong"]
    fair += ["(<>[]!tf)"] if finite else []
    formula = " && ".join(fair) or "true"
    decls.append(f"ltl progress {{ ({formula}) -> [](premise -> <>goal) }}")
    return text.replace("byte fail;", "byte fail;\n" + "\n".join(decls), 1)


@dataclass
class SpinLiveness:
    """SPIN's verdict on one progress property: ``holds``, ``violated`` (with the lasso's
    prefix and cycle as our labels; ``None`` a stutter) or ``not_checked`` (``why`` says
    what pan did not do: such a property is never reported as holding)."""

    name: str
    verdict: str
    prefix: tuple[tuple[Transition, Params] | None, ...] = ()
    cycle: tuple[tuple[Transition, Params] | None, ...] = ()
    seconds: float = 0.0
    states: int = 0
    why: str = ""


LTL_HOLDS, LTL_VIOLATED, LTL_NOT_CHECKED = "holds", "violated", "not_checked"


def run_ltl(model: PromelaModel, liveness: Any, prop: Any, *, memory_mb: int = 4096,
            optimize: str = "-O0", depth: int = 1_000_000) -> SpinLiveness:
    """pan's acceptance-cycle search (``-a``) of :func:`render_ltl`'s formula.

    ``holds`` only when pan's report says the never claim was in the search, acceptance
    cycles were searched, the search completed (no depth, memory or other cut) and no
    error was found; ``violated`` only for an acceptance cycle; anything else is
    ``not_checked`` with pan's reason. spin or cc failing is :class:`SpinFailed`."""
    import subprocess
    import tempfile
    import time
    from pathlib import Path

    try:
        text = render_ltl(model, liveness, prop)
    except ExportError as e:
        return SpinLiveness(prop.name, LTL_NOT_CHECKED, why=f"not rendered in Promela: {e}")
    spin, cc = tools()
    with tempfile.TemporaryDirectory(prefix="settled-ltl-") as tmp:
        work = Path(tmp)
        (work / "model.pml").write_text(text, encoding="utf-8")
        for cmd in ([spin, "-a", "model.pml"],
                    [cc, optimize, "-w", "-o", "pan", "-DNOREDUCE", f"-DMEMLIM={memory_mb}",
                     "pan.c"]):
            done = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
            if done.returncode != 0:
                last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
                raise SpinFailed(f"{Path(cmd[0]).name} failed: {last[0]}")
        t0 = time.perf_counter()
        done = subprocess.run(["./pan", "-a", f"-m{depth}"], cwd=work, capture_output=True,
                              text=True)
        seconds = time.perf_counter() - t0
        out = done.stdout + done.stderr
        states = _num(r"^\s*(\d+) states, stored", out) or 0

        def not_checked(why: str) -> SpinLiveness:
            return SpinLiveness(prop.name, LTL_NOT_CHECKED, seconds=seconds, states=states,
                                why=why)

        if "states, stored" not in out:
            return not_checked("pan stopped without a report: "
                               + (out.strip().splitlines() or ["no output"])[-1])
        errors = _num(r"errors: (\d+)", out)
        if errors is None:
            return not_checked("pan's report has no error count")
        if errors:
            if not re.search(r"^pan:\d+: acceptance cycle", out, re.M):
                first = re.search(r"^pan:\d+: .*$", out, re.M)
                return not_checked("pan's error is not an acceptance cycle: "
                                   + (first.group(0) if first else "?"))
        else:
            if not re.search(r"^\s*never claim\s+\+", out, re.M):
                return not_checked("pan searched without the never claim")
            if not re.search(r"^\s*acceptance\s+cycles\s+\+", out, re.M):
                return not_checked("pan did not search for acceptance cycles")
            cut = [w for w in ("max search depth too small", "search not completed",
                               "reached -DMEMLIM bound", "out of memory") if w in out]
            if cut:
                return not_checked(f"pan's search was cut: {cut[0]}")
            return SpinLiveness(prop.name, LTL_HOLDS, seconds=seconds, states=states)
        replay = subprocess.run([spin, "-t", "-B", "model.pml"], cwd=work, capture_output=True,
                                text=True)
    prefix: list[tuple[Transition, Params] | None] = []
    cycle: list[tuple[Transition, Params] | None] = []
    into = prefix
    for line in replay.stdout.splitlines():
        if "START OF CYCLE" in line:
            into = cycle
        m = re.match(r"^\s*@L (\d+)$", line)
        if m:
            into.append(model.labels[int(m.group(1))])
        elif line.strip() == "@S":
            into.append(None)
    if "START OF CYCLE" not in replay.stdout:
        return SpinLiveness(prop.name, LTL_VIOLATED, tuple(prefix), (), seconds, states,
                            why="the trail replayed without its cycle mark")
    return SpinLiveness(prop.name, LTL_VIOLATED, tuple(prefix), tuple(cycle), seconds, states)


@dataclass(frozen=True)
class ProgressAgreement:
    """One progress property: our check's verdict (``model``'s fair-cycle search) beside
    SPIN's. SPIN knows no model bound, so a cycle we report stuck at a bound is a violation
    there."""

    name: str
    ours: str  # holds, violated, stuck_at_bound or not_checked (conformance._liveness)
    spin: SpinLiveness

    @property
    def checked(self) -> bool:
        """Both engines decided (neither says not_checked)."""
        return (self.spin.verdict != LTL_NOT_CHECKED
                and self.ours in (LTL_HOLDS, LTL_VIOLATED, "stuck_at_bound"))

    @property
    def agree(self) -> bool:
        expected = LTL_HOLDS if self.ours == LTL_HOLDS else LTL_VIOLATED
        return self.checked and self.spin.verdict == expected

    def to_json(self) -> dict[str, Any]:
        return {"property": self.name, "ours": self.ours, "spin": self.spin.verdict,
                "spin_seconds": round(self.spin.seconds, 3), "spin_states": self.spin.states,
                "why": self.spin.why, "checked": self.checked, "agree": self.agree}


def compare_progress(model: PromelaModel, ours: Any, liveness: Any) -> list[ProgressAgreement]:
    """Every progress property of ``liveness``: ``ours`` (a ``LivenessResult`` of the same
    machine and liveness) beside SPIN's verdict (:func:`run_ltl`, one pan per property)."""
    verdicts = {v.prop.name: v.verdict for v in ours.verdicts}
    return [ProgressAgreement(p.name, verdicts.get(p.name, LTL_NOT_CHECKED),
                              run_ltl(model, liveness, p)) for p in liveness.progress]
