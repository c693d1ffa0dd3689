"""Expressions of a declared machine as Quint source, for ``conformance/_explore/_quint.py`` (the
module ``settled export --quint`` writes): literals, types, and a renderer that folds what a
step knows (its trigger and actor, a parameter it lacks, a constant) so that a step
property reading a parameter the step does not have is decided before Quint sees it, as
Python's ``None`` would decide it."""

from __future__ import annotations

import enum
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from settled.model import Protocol
from settled.model import expr as x

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


def conj(parts: list[str]) -> str:
    """Quint sources joined by ``and``, constants folded."""
    parts = [p for p in parts if p != "true"]
    if "false" in parts:
        return "false"
    return "(" + " and ".join(parts) + ")" if len(parts) > 1 else (parts[0] if parts else "true")


def disj(parts: list[str]) -> str:
    """Quint sources joined by ``or``, constants folded."""
    parts = [p for p in parts if p != "false"]
    if "true" in parts:
        return "true"
    return "(" + " or ".join(parts) + ")" if len(parts) > 1 else (parts[0] if parts else "false")


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
        """(Quint source, UNKNOWN) or ("", the constant value) of ``e``."""
        if isinstance(e, x.Const):
            return "", e.value
        if isinstance(e, x.Var):
            return self._var(e.space, e.name, ctx)
        if isinstance(e, _Folded):
            return e.args[0], e.args[1]
        for kind, name in _HANDLERS:
            if isinstance(e, kind) and isinstance(e, x.Node):
                handler: Callable[[x.Node, _Ctx], tuple[str, Any]] = getattr(self, name)
                return handler(e, ctx)
        raise ExportError(f"no Quint for {type(e).__name__} (`{e.text()}`): a machine's "
                          "declaration does not use it")

    def _compare(self, e: x.Node, ctx: _Ctx) -> tuple[str, Any]:
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

    def _arith(self, e: x.Node, ctx: _Ctx) -> tuple[str, Any]:
        op, left, right = e.args
        (ls, lv), (rs, rv) = self._e(left, ctx), self._e(right, ctx)
        if lv is not UNKNOWN and rv is not UNKNOWN:
            return "", lv + rv if op == "+" else lv - rv
        return f"({self._src(ls, lv)} {op} {self._src(rs, rv)})", UNKNOWN

    def _junction(self, e: x.Node, ctx: _Ctx) -> tuple[str, Any]:
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

    def _not(self, e: x.Node, ctx: _Ctx) -> tuple[str, Any]:
        s, v = self._e(e.args[0], ctx)
        return (f"not({s})", UNKNOWN) if v is UNKNOWN else ("", not v)

    def _is_in(self, e: x.Node, ctx: _Ctx) -> tuple[str, Any]:
        s, v = self._e(e.args[0], ctx)
        members = e.args[1]
        if v is ABSENT:
            return "", False
        if v is not UNKNOWN:
            return "", v in members
        return f"{s}.in({_set(members)})", UNKNOWN

    def _index(self, e: x.Node, ctx: _Ctx) -> tuple[str, Any]:
        (ts, tv), (i_s, iv) = self._e(e.args[0], ctx), self._e(e.args[1], ctx)
        if tv is not UNKNOWN and iv is not UNKNOWN:
            return "", tv[iv]
        return f"{self._src(ts, tv)}[{self._src(i_s, iv)}]", UNKNOWN

    def _update(self, e: x.Node, ctx: _Ctx) -> tuple[str, Any]:
        tup, at, new = (self._e(a, ctx) for a in e.args)
        return f"{self._src(*tup)}.replaceAt({self._src(*at)}, {self._src(*new)})", UNKNOWN

    def _min_max(self, e: x.Node, ctx: _Ctx) -> tuple[str, Any]:
        parts = [self._e(a, ctx) for a in e.args]
        if all(v is not UNKNOWN for _, v in parts):
            return "", (min if isinstance(e, x.Min) else max)(v for _, v in parts)
        op = "<=" if isinstance(e, x.Min) else ">="
        acc = self._src(*parts[0])
        for s, v in parts[1:]:
            b = self._src(s, v)
            acc = f"(if ({acc} {op} {b}) {acc} else {b})"
        return acc, UNKNOWN

    def _if_else(self, e: x.Node, ctx: _Ctx) -> tuple[str, Any]:
        cs, cv = self._e(e.args[0], ctx)
        if cv is not UNKNOWN:
            return self._e(e.args[1] if cv else e.args[2], ctx)
        yes, no = self._e(e.args[1], ctx), self._e(e.args[2], ctx)
        return f"(if ({cs}) {self._src(*yes)} else {self._src(*no)})", UNKNOWN

    def _unchanged(self, e: x.Node, ctx: _Ctx) -> tuple[str, Any]:
        names = e.args or (*(v.name for v in self.p.variables), "state")
        parts = [self._e(x.Compare("==", x.Var("A", n), x.Var("B", n)), ctx) for n in names]
        return self._e(x.And.of(*(_Folded(s, v) for s, v in parts)), ctx) \
            if len(parts) > 1 else parts[0]

    def _aggregate(self, e: x.Node, ctx: _Ctx) -> tuple[str, Any]:
        raise ExportError(f"`{e.text()}`: an aggregate over instances is a system's; a "
                          "machine's declaration does not use it")

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


_HANDLERS: tuple[tuple[type, str], ...] = (
    (x.Compare, "_compare"), (x.Arith, "_arith"), (x.And, "_junction"), (x.Or, "_junction"),
    (x.Not, "_not"), (x.IsIn, "_is_in"), (x.Index, "_index"), (x.Update, "_update"),
    (x.Min, "_min_max"), (x.Max, "_min_max"), (x.IfElse, "_if_else"),
    (x.Unchanged, "_unchanged"), (x.Aggregate, "_aggregate"))


class _Folded(x.Node):
    """An already rendered operand (source, value), so And.of can fold it."""

    def text(self) -> str:
        return str(self.args[0])
