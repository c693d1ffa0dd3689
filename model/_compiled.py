"""One machine's semantics, generated from its expressions and compiled once.

:func:`compile_machine` writes the Python source of a protocol's successor
function and of its invariants, and compiles it once. Per control state
there is one function that takes the configuration's values (a tuple, in
declaration order) and returns every step the table allows: for each
parameter choice, the first transition of its trigger group whose guards
hold (the order ``Protocol.enabled`` defines), as ``(label, destination,
values after, broken step properties)``.

What the generator knows is folded away before Python sees it: a
parameter's value (each parameter choice gets its own branch), the step's
trigger and actor, the states before and after, and every variable the
step does not write (``unchanged(x)`` of an unwritten ``x`` is true). So a
guard on parameters alone decides at generation time whether a branch
exists, and most step properties vanish from most steps. The rest reads
local variables, not dictionaries.

The explorer runs these functions; ``Protocol.enabled`` and ``fire`` keep
the per-declaration compiled functions, whose results a test compares with
these on every reachable configuration.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _expr as x

if TYPE_CHECKING:
    from ._core import Params, Protocol, Transition

# A step: (label id, destination state, values after, indices of broken step properties).
GenStep = tuple[int, str, tuple[Any, ...], tuple[int, ...]]


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
    if isinstance(e, x.Compare):
        op, left, right = e.args
        (ls, lv), (rs, rv) = gen(left, ctx), gen(right, ctx)
        if lv is not UNKNOWN and rv is not UNKNOWN:
            return "", _CMP[op](lv, rv)
        if ls == rs:  # the same pure read on both sides (an unwritten variable after the step)
            return "", op in ("==", "<=", ">=")
        return f"({ls} {op} {rs})", UNKNOWN
    if isinstance(e, x.Arith):
        op, left, right = e.args
        (ls, lv), (rs, rv) = gen(left, ctx), gen(right, ctx)
        if lv is not UNKNOWN and rv is not UNKNOWN:
            return "", lv + rv if op == "+" else lv - rv
        return f"({ls} {op} {rs})", UNKNOWN
    if isinstance(e, x.And | x.Or):
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
    if isinstance(e, x.Not):
        s, v = gen(e.args[0], ctx)
        return (f"(not {s})", UNKNOWN) if v is UNKNOWN else ("", not v)
    if isinstance(e, x.IsIn):
        s, v = gen(e.args[0], ctx)
        members = frozenset(e.args[1])
        return (f"({s} in {ctx.const(members)})", UNKNOWN) if v is UNKNOWN else ("", v in members)
    if isinstance(e, x.Index):
        (ts, tv), (i_s, iv) = gen(e.args[0], ctx), gen(e.args[1], ctx)
        if tv is not UNKNOWN and iv is not UNKNOWN:
            return "", tv[iv]
        return f"{ts}[{i_s}]", UNKNOWN
    if isinstance(e, x.Update):
        (ts, _tv), (i_s, iv), (vs, _vv) = (gen(a, ctx) for a in e.args)
        if iv is not UNKNOWN:
            return f"(*{ts}[:{iv}], {vs}, *{ts}[{iv + 1}:])", UNKNOWN
        return f"_set({ts}, {i_s}, {vs})", UNKNOWN
    if isinstance(e, x.Min | x.Max):
        gens = [gen(a, ctx) for a in e.args]
        if all(v is not UNKNOWN for _, v in gens):
            return "", (min if isinstance(e, x.Min) else max)(v for _, v in gens)
        return f"{e.fname}({', '.join(s for s, _ in gens)})", UNKNOWN
    if isinstance(e, x.IfElse):
        cs, cv = gen(e.args[0], ctx)
        if cv is not UNKNOWN:
            return _gen(e.args[1] if cv else e.args[2], ctx)
        (a_s, _), (b_s, _) = gen(e.args[1], ctx), gen(e.args[2], ctx)
        return f"({a_s} if {cs} else {b_s})", UNKNOWN
    if isinstance(e, x.Unchanged):
        names = e.args or tuple(ctx.index)
        if not e.args and ctx.before != ctx.after:
            return "", False
        checks = [f"{_after(n, ctx)} == v{ctx.index[n]}" for n in names if n in ctx.written]
        if not checks:
            return "", True
        return "(" + " and ".join(checks) + ")", UNKNOWN
    raise TypeError(f"no generator for {type(e).__name__}")  # Aggregates: systems only


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
    if space == "STATE":
        assert ctx.state_local is not None
        return ctx.state_local, UNKNOWN
    if space == "B" and name == "state":
        return "", ctx.before
    if space == "A" and name == "state":
        return "", ctx.after
    if space == "A":
        return _after(name, ctx), UNKNOWN
    return f"v{ctx.index[name]}", UNKNOWN  # V, B


@dataclass(frozen=True)
class CompiledMachine:
    """A protocol's generated successor and invariant functions."""

    source: str
    successors: Mapping[str, Callable[[tuple[Any, ...]], list[GenStep]]]
    labels: tuple[tuple[Transition, Params], ...]
    broken_invariants: Callable[[str, tuple[Any, ...]], tuple[int, ...]]


def compile_machine(p: Protocol, *, step_properties: bool = True) -> CompiledMachine:
    """Generate and compile ``p``'s successor function (see the module's docstring)."""
    index = {n: i for i, n in enumerate(p.variable_names)}
    unpack = ", ".join(f"v{i}" for i in range(len(index))) + ("," if len(index) == 1 else "")
    consts: list[Any] = []
    labels: list[tuple[Transition, Params]] = []
    lines: list[str] = []
    names: dict[str, str] = {}
    for k, (state, plan) in enumerate(p._plan.items()):
        fname = f"_succ_{k}"
        names[state] = fname
        lines += [f"def {fname}(values):", f"    {unpack} = values" if index else "    pass",
                  "    out = []"]
        for params, fitting in plan:
            lines += _plan_entry(p, state, params, fitting, index, consts, labels,
                                 step_properties)
        lines += ["    return out", ""]
    lines += _invariants(p, index, unpack, consts)
    source = "\n".join(lines) + "\n"
    scope: dict[str, Any] = {f"_k{i}": c for i, c in enumerate(consts)}
    scope["_set"] = x._set
    exec(compile(source, f"<generated {p.name}>", "exec"), scope)  # our own source
    successors = {state: scope[fname] for state, fname in names.items()}
    return CompiledMachine(source, successors, tuple(labels), scope["_invariants"])


def _plan_entry(p: Protocol, state: str, params: Params, fitting: Sequence[Transition],
                index: Mapping[str, int], consts: list[Any],
                labels: list[tuple[Transition, Params]], step_properties: bool) -> list[str]:
    """One parameter choice: the first transition of the group whose guards hold."""
    out: list[str] = []
    keyword = "if"
    for t in fitting:
        dest = state if t.dest is None else t.dest
        written = frozenset(t.effect.writes)
        ctx = _Ctx(index, params, t.trigger, t.actor, state, dest, written, consts=consts)
        conds = []
        never = False
        for g in t.guards:
            s, v = gen(g.expr, ctx)
            if v is UNKNOWN:
                conds.append(s)
            elif not v:
                never = True
                break
        if never:
            continue
        label = len(labels)
        labels.append((t, params))
        body = [f"a{index[n]} = {gen(x.lift(e), ctx)[0]}" for n, e in t.effect.updates.items()]
        after = ", ".join(_after(n, ctx) for n in index) + ("," if len(index) == 1 else "")
        body.append(f"n = ({after})" if written else "n = values")
        body.append("bad = ()")
        for k, sp in enumerate(p.step_properties if step_properties else ()):
            s, v = gen(sp.expr, ctx)
            if v is UNKNOWN:
                body.append(f"if not {s}: bad += ({k},)")
            elif not v:
                body.append(f"bad += ({k},)")
        body.append(f"out.append(({label}, {ctx.const(dest)}, n, bad))")
        if not conds:  # always enabled: the rest of the group is never reached
            if keyword == "if":
                out += [f"    {b}" for b in body]
            else:
                out += ["    else:", *(f"        {b}" for b in body)]
            return out
        out.append(f"    {keyword} {' and '.join(conds)}:")
        out += [f"        {b}" for b in body]
        keyword = "elif"
    return out


def _invariants(p: Protocol, index: Mapping[str, int], unpack: str,
                consts: list[Any]) -> list[str]:
    ctx = _Ctx(index, None, state_local="state", consts=consts)
    lines = ["def _invariants(state, values):", f"    {unpack} = values" if index else "    pass",
             "    bad = ()"]
    for k, inv in enumerate(p.invariants):
        s, v = gen(inv.expr, ctx)
        if v is UNKNOWN:
            lines.append(f"    if not {s}: bad += ({k},)")
        elif not v:
            lines.append(f"    bad += ({k},)")
    return [*lines, "    return bad", ""]
