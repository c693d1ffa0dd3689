"""One expression as Python source, under what the generator knows of a step.

:func:`gen` folds away what is known at generation time (a parameter's value, the
trigger and actor, the states before and after, the variables a step does not write) and
writes the rest as reads of local variables (``v3`` before the step, ``a3`` after it);
``model._compiled`` assembles these into the machine's functions.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import expr as x


class _Unknown:
    """Not a constant at generation time."""


UNKNOWN = _Unknown()

_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge}


@dataclass
class _Ctx:
    """What is known while generating one step (or one invariant)."""

    index: Mapping[str, int]  # variable -> position
    params: Mapping[str, Any] | None  # None: parameters are not known (invariants)
    trigger: str | None = None
    actor: str | None = None
    before: str | None = None  # the state before (a constant while generating a step)
    after: str | None = None  # the state after
    written: frozenset[str] = frozenset()
    state_local: str | None = None  # the local holding the state (invariants)
    consts: list[Any] | None = None

    def const(self, value: Any) -> str:
        assert self.consts is not None
        for i, c in enumerate(self.consts):
            if type(c) is type(value) and c == value:
                return f"_k{i}"
        self.consts.append(value)
        return f"_k{len(self.consts) - 1}"


def _lit(value: Any, ctx: _Ctx) -> str:
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if type(value) is str:
        return repr(value)
    return ctx.const(value)


def gen(e: x.Expr, ctx: _Ctx) -> tuple[str, Any]:
    """(Python source, constant value or UNKNOWN) of ``e`` under what ``ctx`` knows."""
    src, val = _gen(e, ctx)
    if val is not UNKNOWN:
        return _lit(val, ctx), val
    return src, val


def _gen(e: x.Expr, ctx: _Ctx) -> tuple[str, Any]:
    if isinstance(e, x.Const):
        return "", e.value
    if isinstance(e, x.Var):
        return _var(e.space, e.name, ctx)
    rule = _RULES.get(type(e))
    if rule is None:
        raise TypeError(f"no generator for {type(e).__name__}")  # Aggregates: systems only
    return rule(e, ctx)


def _compare(e: x.Compare, ctx: _Ctx) -> tuple[str, Any]:
    op, left, right = e.args
    (ls, lv), (rs, rv) = gen(left, ctx), gen(right, ctx)
    if lv is not UNKNOWN and rv is not UNKNOWN:
        return "", _CMP[op](lv, rv)
    if ls == rs:  # the same pure read on both sides (an unwritten variable after the step)
        return "", op in ("==", "<=", ">=")
    return f"({ls} {op} {rs})", UNKNOWN


def _arith(e: x.Arith, ctx: _Ctx) -> tuple[str, Any]:
    op, left, right = e.args
    (ls, lv), (rs, rv) = gen(left, ctx), gen(right, ctx)
    if lv is not UNKNOWN and rv is not UNKNOWN:
        return "", lv + rv if op == "+" else lv - rv
    return f"({ls} {op} {rs})", UNKNOWN


def _and_or(e: x.And | x.Or, ctx: _Ctx) -> tuple[str, Any]:
    stop = isinstance(e, x.Or)  # the value that decides the whole
    parts = []
    for a in e.args:
        s, v = gen(a, ctx)
        if v is UNKNOWN:
            parts.append(s)
        elif bool(v) is stop:  # decides the whole, whatever the others are
            return "", stop
    if not parts:
        return "", not stop
    return "(" + (" or " if stop else " and ").join(parts) + ")", UNKNOWN


def _not(e: x.Not, ctx: _Ctx) -> tuple[str, Any]:
    s, v = gen(e.args[0], ctx)
    return (f"(not {s})", UNKNOWN) if v is UNKNOWN else ("", not v)


def _is_in(e: x.IsIn, ctx: _Ctx) -> tuple[str, Any]:
    s, v = gen(e.args[0], ctx)
    members = frozenset(e.args[1])
    return (f"({s} in {ctx.const(members)})", UNKNOWN) if v is UNKNOWN else ("", v in members)


def _index(e: x.Index, ctx: _Ctx) -> tuple[str, Any]:
    (ts, tv), (i_s, iv) = gen(e.args[0], ctx), gen(e.args[1], ctx)
    if tv is not UNKNOWN and iv is not UNKNOWN:
        return "", tv[iv]
    return f"{ts}[{i_s}]", UNKNOWN


def _update(e: x.Update, ctx: _Ctx) -> tuple[str, Any]:
    (ts, _tv), (i_s, iv), (vs, _vv) = (gen(a, ctx) for a in e.args)
    if iv is not UNKNOWN:
        return f"(*{ts}[:{iv}], {vs}, *{ts}[{iv + 1}:])", UNKNOWN
    return f"_set({ts}, {i_s}, {vs})", UNKNOWN


def _min_max(e: x.Min | x.Max, ctx: _Ctx) -> tuple[str, Any]:
    gens = [gen(a, ctx) for a in e.args]
    if all(v is not UNKNOWN for _, v in gens):
        return "", (min if isinstance(e, x.Min) else max)(v for _, v in gens)
    return f"{e.fname}({', '.join(s for s, _ in gens)})", UNKNOWN


def _if_else(e: x.IfElse, ctx: _Ctx) -> tuple[str, Any]:
    cs, cv = gen(e.args[0], ctx)
    if cv is not UNKNOWN:
        return _gen(e.args[1] if cv else e.args[2], ctx)
    (a_s, _), (b_s, _) = gen(e.args[1], ctx), gen(e.args[2], ctx)
    return f"({a_s} if {cs} else {b_s})", UNKNOWN


def _unchanged(e: x.Unchanged, ctx: _Ctx) -> tuple[str, Any]:
    names = e.args or tuple(ctx.index)
    if not e.args and ctx.before != ctx.after:
        return "", False
    checks = [f"{_after(n, ctx)} == v{ctx.index[n]}" for n in names if n in ctx.written]
    if not checks:
        return "", True
    return "(" + " and ".join(checks) + ")", UNKNOWN


_RULES: dict[type, Callable[[Any, _Ctx], tuple[str, Any]]] = {
    x.Compare: _compare, x.Arith: _arith, x.And: _and_or, x.Or: _and_or, x.Not: _not,
    x.IsIn: _is_in, x.Index: _index, x.Update: _update, x.Min: _min_max, x.Max: _min_max,
    x.IfElse: _if_else, x.Unchanged: _unchanged}


def _after(name: str, ctx: _Ctx) -> str:
    i = ctx.index[name]
    return f"a{i}" if name in ctx.written else f"v{i}"


def _var(space: str, name: str, ctx: _Ctx) -> tuple[str, Any]:
    if space == "P":
        if ctx.params is None:
            raise TypeError("parameters are unknown here")
        return "", ctx.params.get(name)
    if space == "T":
        return "", ctx.trigger if name == "trigger" else ctx.actor
    if space == "STATE":  # a local of the invariants' function, or the known state
        return (ctx.state_local, UNKNOWN) if ctx.state_local is not None else ("", ctx.before)
    if space == "B" and name == "state":
        return "", ctx.before
    if space == "A" and name == "state":
        return "", ctx.after
    if space == "A":
        return _after(name, ctx), UNKNOWN
    return f"v{ctx.index[name]}", UNKNOWN  # V, B
