"""The nodes Python's operators build: the expression base and its operator nodes.

:class:`Expr` turns ``==``, ``<``, ``+``, ``&``, ``|``, ``~``, ``x[i]``, ``x.isin``
and ``x.set`` into :class:`Compare`, :class:`Arith`, :class:`And`, :class:`Or`,
:class:`Not`, :class:`Index`, :class:`IsIn` and :class:`Update`, which are
expressions in turn, and :func:`lift` makes a plain value a :class:`Const`: these
classes refer to each other, so they share one room. Each node renders to text
(``_expr_text``), reports what it reads, writes its Python source (``_expr_compile``)
and says what values it can take (``_expr_types``). The nodes a declaration builds by
calling a function (``when``, ``minimum``, the aggregates, ...) are in ``_expr``.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, ClassVar

from ._errors import DeclarationError
from ._expr_text import _ADD, _AND, _ATOM, _CMP, _NOT, _OR, Ref, Value, _const_text, _ref_text, _values_text
from ._expr_types import _BOOLS, _MAX_VALUES, _bools, _ints, _kind_text, _kinds, _tuples

if TYPE_CHECKING:
    from ._expr_compile import _Namespace
    from ._expr_types import Env


def lift(x: object) -> Expr:
    """``x`` as an expression: an expression as is, a plain value as a constant."""
    if isinstance(x, Expr):
        return x
    if callable(x):
        raise DeclarationError(
            f"a Python callable ({getattr(x, '__name__', x)!r}) where an expression is expected; "
            "write the condition with V, P, S, ... and the operators of settled.model._expr")
    try:
        hash(x)
    except TypeError:
        raise DeclarationError(f"constant {x!r} is not hashable; use a tuple") from None
    return Const(x)


class Expr:
    """A node of an expression. Immutable; built with Python operators."""

    __slots__ = ()
    prec: ClassVar[int] = _ATOM
    __hash__ = None  # type: ignore[assignment]  # == builds an expression; no sets of these

    # -- what every node says about itself ------------------------------------------------
    def text(self) -> str:
        raise NotImplementedError

    def source(self, ns: _Namespace) -> str:
        raise NotImplementedError

    def children(self) -> tuple[Expr, ...]:
        return ()

    def refs(self) -> tuple[Ref, ...]:
        """Every reference this expression reads, in order of first appearance."""
        out: dict[Ref, None] = {}
        self._refs(out)
        return tuple(out)

    def _refs(self, out: dict[Ref, None]) -> None:
        for c in self.children():
            c._refs(out)

    def values(self, env: Env) -> frozenset[Value] | None:
        """Every value this expression can take under ``env`` (None: not enumerated)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<expr {self.text()}>"

    def __str__(self) -> str:
        return self.text()

    def _wrap(self, prec: int) -> str:
        t = self.text()
        return f"({t})" if self.prec < prec else t

    # -- Python operators build nodes ------------------------------------------------------
    def __bool__(self) -> bool:
        raise DeclarationError(
            f"the expression `{self.text()}` was used as a Python truth value (and, or, not, if, "
            "a chained comparison or `in`); write & for and, | for or, ~ for not, x.isin(...) "
            "for membership, and when(c, a, b) for if-then-else")

    def __eq__(self, other: object) -> Expr:  # type: ignore[override]
        return Compare("==", self, lift(other))

    def __ne__(self, other: object) -> Expr:  # type: ignore[override]
        return Compare("!=", self, lift(other))

    def __lt__(self, other: object) -> Expr:
        return Compare("<", self, lift(other))

    def __le__(self, other: object) -> Expr:
        return Compare("<=", self, lift(other))

    def __gt__(self, other: object) -> Expr:
        return Compare(">", self, lift(other))

    def __ge__(self, other: object) -> Expr:
        return Compare(">=", self, lift(other))

    def __add__(self, other: object) -> Expr:
        return Arith("+", self, lift(other))

    def __radd__(self, other: object) -> Expr:
        return Arith("+", lift(other), self)

    def __sub__(self, other: object) -> Expr:
        return Arith("-", self, lift(other))

    def __rsub__(self, other: object) -> Expr:
        return Arith("-", lift(other), self)

    def __and__(self, other: object) -> Expr:
        return And.of(self, lift(other))

    def __rand__(self, other: object) -> Expr:
        return And.of(lift(other), self)

    def __or__(self, other: object) -> Expr:
        return Or.of(self, lift(other))

    def __ror__(self, other: object) -> Expr:
        return Or.of(lift(other), self)

    def __invert__(self) -> Expr:
        return Not(self)

    def __getitem__(self, index: object) -> Expr:
        return Index(self, lift(index))

    def __iter__(self) -> Any:
        raise DeclarationError(f"the expression `{self.text()}` cannot be iterated in Python; "
                               "use x.isin(...), total, count, every or some")

    def __contains__(self, item: object) -> bool:
        raise DeclarationError(f"`in` on the expression `{self.text()}`; write x.isin(...)")

    def isin(self, *members: Value) -> Expr:
        """True when this expression is one of ``members`` (a tuple may be passed whole)."""
        if len(members) == 1 and isinstance(members[0], (tuple, list, frozenset, set)):
            members = tuple(members[0])
        if not members:
            raise DeclarationError(f"`{self.text()}`.isin() names no member")
        for m in members:
            if isinstance(m, Expr) or callable(m):
                raise DeclarationError(f"`{self.text()}`.isin() takes constants, not {m}")
        return IsIn(self, tuple(members))

    def set(self, index: object, value: object) -> Expr:
        """This tuple with ``value`` at ``index`` (``held[worker] := e`` in an effect)."""
        return Update(self, lift(index), lift(value))


class Var(Expr):
    __slots__ = ("name", "space")
    space: str
    name: str

    def __init__(self, space: str, name: str) -> None:
        object.__setattr__(self, "space", space)
        object.__setattr__(self, "name", name)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("expressions are immutable")

    def text(self) -> str:
        return _ref_text(self.space, self.name)

    def source(self, ns: _Namespace) -> str:
        return ns.ref(self.space, self.name)

    def _refs(self, out: dict[Ref, None]) -> None:
        out[(self.space, self.name)] = None

    def values(self, env: Env) -> frozenset[Value] | None:
        return env.domain(self.space, self.name)


class Const(Expr):
    __slots__ = ("value",)
    value: Value

    def __init__(self, value: Value) -> None:
        object.__setattr__(self, "value", value)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("expressions are immutable")

    def text(self) -> str:
        return _const_text(self.value)

    def source(self, ns: _Namespace) -> str:
        return ns.const(self.value)

    def values(self, env: Env) -> frozenset[Value] | None:
        return frozenset((self.value,))


class _Node(Expr):
    """A node with operands, stored in ``args``."""

    __slots__ = ("args",)
    args: tuple[Any, ...]

    def __init__(self, *args: Any) -> None:
        object.__setattr__(self, "args", args)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("expressions are immutable")

    def children(self) -> tuple[Expr, ...]:
        return tuple(a for a in self.args if isinstance(a, Expr))


_PY_CMP = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


class Compare(_Node):
    prec = _CMP

    @property
    def op(self) -> str:
        return str(self.args[0])

    def text(self) -> str:
        op, left, right = self.args
        return f"{left._wrap(_ADD)} {op} {right._wrap(_ADD)}"

    def source(self, ns: _Namespace) -> str:
        op, left, right = self.args
        return f"({left.source(ns)} {_PY_CMP[op]} {right.source(ns)})"

    def values(self, env: Env) -> frozenset[Value] | None:
        op, left, right = self.args
        lv, rv = left.values(env), right.values(env)
        if lv is not None and rv is not None:
            lk, rk = _kinds(lv), _kinds(rv)
            if not (lk & rk) and not ({"none"} & (lk | rk)):
                raise DeclarationError(f"`{self.text()}` compares {_kind_text(lk)} with "
                                       f"{_kind_text(rk)}")
            if op in ("<", "<=", ">", ">=") and (lk | rk) - {"int", "none"}:
                raise DeclarationError(f"`{self.text()}` orders {_kind_text(lk | rk)}; only "
                                       "numbers are ordered")
            for const, other, side in ((right, lv, left), (left, rv, right)):
                if (op in ("==", "!=") and isinstance(const, Const) and not isinstance(side, Const)
                        and const.value not in other):
                    raise DeclarationError(
                        f"`{self.text()}`: {side.text()} is never {const.text()}; it is one of "
                        f"{_values_text(other)}")
        return _BOOLS


class Arith(_Node):
    prec = _ADD

    def text(self) -> str:
        op, left, right = self.args
        return f"{left._wrap(_ADD)} {op} {right._wrap(_ADD + 1)}"

    def source(self, ns: _Namespace) -> str:
        op, left, right = self.args
        return f"({left.source(ns)} {op} {right.source(ns)})"

    def values(self, env: Env) -> frozenset[Value] | None:
        op, left, right = self.args
        lv, rv = _ints(left, env), _ints(right, env)
        if lv is None or rv is None:
            return None
        return frozenset(a + b if op == "+" else a - b for a in lv for b in rv)


class _Junction(_Node):
    word: ClassVar[str] = ""
    py: ClassVar[str] = ""

    @classmethod
    def of(cls, *operands: Expr) -> Expr:
        flat: list[Expr] = []
        for o in operands:
            flat.extend(o.args if type(o) is cls else (o,))
        return cls(*flat)

    def text(self) -> str:
        return f" {self.word} ".join(a._wrap(self.prec + 1) for a in self.args)

    def source(self, ns: _Namespace) -> str:
        return "(" + f" {self.py} ".join(a.source(ns) for a in self.args) + ")"

    def values(self, env: Env) -> frozenset[Value] | None:
        for a in self.args:
            _bools(a, env, f"an operand of {self.word}")
        return _BOOLS


class And(_Junction):
    prec = _AND
    word = py = "and"


class Or(_Junction):
    prec = _OR
    word = py = "or"


class Not(_Node):
    prec = _NOT

    def text(self) -> str:
        x = self.args[0]
        if isinstance(x, IsIn):
            return f"{x.args[0]._wrap(_ADD)} not in {{{', '.join(_const_text(m) for m in x.args[1])}}}"
        return f"not {x._wrap(_NOT)}"

    def source(self, ns: _Namespace) -> str:
        return f"(not {self.args[0].source(ns)})"

    def values(self, env: Env) -> frozenset[Value] | None:
        _bools(self.args[0], env, "the operand of not")
        return _BOOLS


class IsIn(_Node):
    prec = _CMP

    def text(self) -> str:
        x, members = self.args
        return f"{x._wrap(_ADD)} in {{{', '.join(_const_text(m) for m in members)}}}"

    def source(self, ns: _Namespace) -> str:
        x, members = self.args
        return f"({x.source(ns)} in {ns.const(frozenset(members))})"

    def values(self, env: Env) -> frozenset[Value] | None:
        x, members = self.args
        xv = x.values(env)
        if xv is not None:
            never = [m for m in members if m not in xv]
            if never:
                raise DeclarationError(f"`{self.text()}`: {x.text()} is never "
                                       f"{_values_text(never)}; it is one of {_values_text(xv)}")
        return _BOOLS


class Index(_Node):
    def text(self) -> str:
        x, i = self.args
        return f"{x._wrap(_ATOM)}[{i.text()}]"

    def source(self, ns: _Namespace) -> str:
        x, i = self.args
        return f"{x.source(ns)}[{i.source(ns)}]"

    def values(self, env: Env) -> frozenset[Value] | None:
        x, i = self.args
        xv, iv = _tuples(x, env), _ints(i, env)
        if xv is None or iv is None:
            return None
        out = set()
        for t in xv:
            for k in iv:
                if not 0 <= k < len(t):
                    raise DeclarationError(f"`{self.text()}`: index {k} is outside {_const_text(t)}")
                out.add(t[k])
        return frozenset(out)


class Update(_Node):
    def text(self) -> str:
        x, i, e = self.args
        return f"{x._wrap(_ATOM)} with [{i.text()}] := {e.text()}"

    def source(self, ns: _Namespace) -> str:
        x, i, e = self.args
        return f"_set({x.source(ns)}, {i.source(ns)}, {e.source(ns)})"

    def values(self, env: Env) -> frozenset[Value] | None:
        x, i, e = self.args
        xv, iv, ev = _tuples(x, env), _ints(i, env), e.values(env)
        if xv is None or iv is None or ev is None or len(xv) * len(iv) * len(ev) > _MAX_VALUES:
            return None
        out = set()
        for t, k, y in itertools.product(xv, iv, ev):
            if not 0 <= k < len(t):
                raise DeclarationError(f"`{self.text()}`: index {k} is outside {_const_text(t)}")
            out.add((*t[:k], y, *t[k + 1:]))
        return frozenset(out)

