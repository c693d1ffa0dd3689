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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
    # a system's option K: the (actor, trigger, machine parameters) of the steps it may be,
    # which decide its fairness groups as our explorer's edge masks do
    steps_of: tuple[tuple[tuple[str, str, Params], ...], ...] = ()


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
        if isinstance(e, x.Not):
            return self._not(self.expr(e.args[0], ctx))
        for kind, render in self._RULES:
            if isinstance(e, kind):
                return render(self, e, ctx)
        if isinstance(e, x.Update):
            raise ExportError(f"`{e.text()}`: a tuple where a single value is expected")
        raise ExportError(f"no Promela for {type(e).__name__} (`{e.text()}`)")

    def _compare(self, e: Any, ctx: _Ctx) -> tuple[str, Any]:
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

    def _arith(self, e: Any, ctx: _Ctx) -> tuple[str, Any]:
        op, left, right = e.args
        (ls, lv), (rs, rv) = self.expr(left, ctx), self.expr(right, ctx)
        if lv is not UNKNOWN and rv is not UNKNOWN:
            return "", lv + rv if op == "+" else lv - rv
        return f"({ls} {op} {rs})", UNKNOWN

    def _and_or(self, e: Any, ctx: _Ctx) -> tuple[str, Any]:
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

    def _is_in(self, e: Any, ctx: _Ctx) -> tuple[str, Any]:
        s, v = self.expr(e.args[0], ctx)
        members = e.args[1]
        if v is not UNKNOWN:
            return "", v in members
        return "(" + " || ".join(f"{s} == {self.lit(m)}" for m in members) + ")", UNKNOWN

    def _index(self, e: Any, ctx: _Ctx) -> tuple[str, Any]:
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

    def _min_max(self, e: Any, ctx: _Ctx) -> tuple[str, Any]:
        parts = [self.expr(a, ctx) for a in e.args]
        if all(v is not UNKNOWN for _, v in parts):
            return "", (min if isinstance(e, x.Min) else max)(v for _, v in parts)
        op = "<" if isinstance(e, x.Min) else ">"
        acc = parts[0][0]
        for s, _ in parts[1:]:
            acc = f"(({acc}) {op} ({s}) -> ({acc}) : ({s}))"
        return acc, UNKNOWN

    def _if_else(self, e: Any, ctx: _Ctx) -> tuple[str, Any]:
        cs, cv = self.expr(e.args[0], ctx)
        if cv is not UNKNOWN:
            return self._expr(e.args[1] if cv else e.args[2], ctx)
        (a_s, _), (b_s, _) = self.expr(e.args[1], ctx), self.expr(e.args[2], ctx)
        return f"({cs} -> {a_s} : {b_s})", UNKNOWN

    def _unchanged(self, e: Any, ctx: _Ctx) -> tuple[str, Any]:
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

    # each kind of expression with its rendering (Const, Var and Not are the hot path)
    _RULES: tuple[tuple[Any, Callable[[Any, Any, _Ctx], tuple[str, Any]]], ...] = (
        (x.Compare, _compare), (x.Arith, _arith), (x.And | x.Or, _and_or), (x.IsIn, _is_in),
        (x.Index, _index), (x.Min | x.Max, _min_max), (x.IfElse, _if_else),
        (x.Unchanged, _unchanged))

    def _and(self, parts: Sequence[tuple[str, Any]]) -> tuple[str, Any]:
        if any(v is not UNKNOWN and not v for _, v in parts):
            return "", False
        srcs = [s for s, v in parts if v is UNKNOWN]
        return ("", True) if not srcs else ("(" + " && ".join(srcs) + ")", UNKNOWN)

    @staticmethod
    def _not(part: tuple[str, Any]) -> tuple[str, Any]:
        s, v = part
        return (f"(!{s})", UNKNOWN) if v is UNKNOWN else ("", not v)

    def plan(self, p: Protocol) -> Iterator[tuple[str, Params, Transition, str, _Ctx,
                                               tuple[str, Any], tuple[tuple[str, Any], ...]]]:
        """The labels a machine can take, in ``Protocol.plan``'s order: (state, params,
        transition, destination, context, its guard, the guards of the group's earlier
        members, which must fail). The first transition of a group whose guards hold fires,
        as in ``Protocol.enabled``: a guard that never holds is passed over, and after one
        that always holds the rest never fire."""
        for state, plan in p.plan.items():
            for params, fitting in plan:
                earlier: list[tuple[str, Any]] = []
                for t in fitting:
                    dest = state if t.dest is None else t.dest
                    ctx = _Ctx(params, t.trigger, t.actor, state, dest, frozenset(t.effect.writes))
                    guard = self._and([self.expr(g.expr, ctx) for g in t.guards])
                    if guard[1] is not UNKNOWN and not guard[1]:
                        continue
                    yield state, params, t, dest, ctx, guard, tuple(earlier)
                    if guard[1] is not UNKNOWN:
                        break
                    earlier.append(guard)

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


# The machine's model text is assembled in ``_promela_machine``; running SPIN and the LTL of
# progress properties live in ``_spin_run`` and ``_spin_ltl``. Their names stay importable
# from here, loaded on first use (PEP 562): those modules import this one, so importing them
# here at load time would make importing any of them first a circular import.
if TYPE_CHECKING:
    from ._promela_machine import render_machine
    from ._spin_ltl import (
        LTL_HOLDS,
        LTL_NOT_CHECKED,
        LTL_VIOLATED,
        ProgressAgreement,
        SpinLiveness,
        compare_progress,
        render_ltl,
        run_ltl,
    )
    from ._spin_run import (
        HANDOFF_DEPTH,
        HASH_BITS,
        Agreement,
        SpinFailed,
        SpinFinding,
        SpinResult,
        SpinUnavailable,
        compare,
        findings,
        our_steps,
        run_spin,
        tools,
    )

_MOVED = {
    "render_machine": "_promela_machine",
    "LTL_HOLDS": "_spin_ltl",
    "LTL_NOT_CHECKED": "_spin_ltl",
    "LTL_VIOLATED": "_spin_ltl",
    "ProgressAgreement": "_spin_ltl",
    "SpinLiveness": "_spin_ltl",
    "compare_progress": "_spin_ltl",
    "render_ltl": "_spin_ltl",
    "run_ltl": "_spin_ltl",
    "HANDOFF_DEPTH": "_spin_run",
    "HASH_BITS": "_spin_run",
    "Agreement": "_spin_run",
    "SpinFailed": "_spin_run",
    "SpinFinding": "_spin_run",
    "SpinResult": "_spin_run",
    "SpinUnavailable": "_spin_run",
    "compare": "_spin_run",
    "findings": "_spin_run",
    "our_steps": "_spin_run",
    "run_spin": "_spin_run",
    "tools": "_spin_run",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name in _MOVED:
        return getattr(importlib.import_module(f"{__package__}.{_MOVED[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["HANDOFF_DEPTH", "HASH_BITS", "LTL_HOLDS", "LTL_NOT_CHECKED", "LTL_VIOLATED",
           "UNKNOWN", "Agreement", "Check", "ExportError", "ProgressAgreement", "PromelaModel",
           "SpinFailed", "SpinFinding", "SpinLiveness", "SpinResult", "SpinUnavailable",
           "compare", "compare_progress", "findings", "our_steps", "render_ltl", "render_machine",
           "run_ltl", "run_spin", "tools"]
