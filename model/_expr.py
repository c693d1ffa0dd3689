"""A small, typed expression language for declarations: guards, effects and properties as data.

A declaration's condition is written with Python's operators, the way polars or
SQLAlchemy build expressions, and becomes a tree that every view reads:

    (V.held[P.worker] > 0) & (V.held[P.worker] == V.lease_epoch)

* ``V.name`` a variable of the machine, ``P.name`` a parameter of the step,
  ``S.name`` a variable of a system, ``STATE`` the control state (invariants),
  ``B.name`` / ``A.name`` (and ``B.state`` / ``A.state``) a variable before and
  after a step, ``T.trigger`` / ``T.actor`` the step's own label (step
  properties), ``I.name`` / ``I.state`` one instance inside ``total``,
  ``count``, ``every`` or ``some`` (system invariants).
* Constants are plain Python values (``V.platform == "running"``).
* ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``+``, ``-``, ``x[i]``,
  ``x.isin(a, b)``, ``x.set(i, e)`` (the tuple ``x`` with ``e`` at ``i``),
  ``minimum``, ``maximum``, ``when(c, a, b)`` (``a`` if ``c`` else ``b``),
  ``unchanged(*names)`` (step properties), and ``&``, ``|``, ``~`` for
  and, or, not.

Python's own ``and``, ``or``, ``not`` and ``if`` call ``bool()`` on an
expression, which would silently read as true; here it raises
:class:`DeclarationError` naming the operator to use instead. So does a
Python callable where an expression is expected.

Every node renders to the text the spec, the diagrams and the messages show
(:meth:`Expr.text`), reports what it reads (:meth:`Expr.refs`), compiles to
Python source (:meth:`Expr.source`, evaluated by :func:`compile_fn`), and is
typed against the declared domains (:func:`check`): an operand of the wrong
kind, or a constant its other side can never be, is a declaration error, not
a guard that is silently false.

This module holds what a declaration writes with besides the operators: the
namespaces, the functions and the nodes they build (``when``, ``minimum``,
``maximum``, ``unchanged``, the aggregates), and what reads a whole expression
(:func:`check`, :func:`names`, :func:`conjuncts`, :func:`disjuncts`). The rest
of the language has a room each: the base and the operator nodes
(``_expr_nodes``), their text (``_expr_text``), their typing against the
domains (``_expr_types``) and their compilation (``_expr_compile``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from ._errors import DeclarationError
from ._expr_nodes import And, Const, Expr, Or, Var, _Node, lift
from ._expr_text import _OR, Ref, Value, _values_text
from ._expr_types import _BOOLS, Env, _bools, _ints, _kind_text, _kinds

if TYPE_CHECKING:
    from ._expr_compile import _Namespace


class _Call(_Node):
    fname: ClassVar[str] = ""

    def text(self) -> str:
        return f"{self.fname}({', '.join(a.text() for a in self.args)})"

    def source(self, ns: _Namespace) -> str:
        return f"{self.fname}({', '.join(a.source(ns) for a in self.args)})"

    def values(self, env: Env) -> frozenset[Value] | None:
        vs = [_ints(a, env) for a in self.args]
        if any(v is None for v in vs):
            return None
        f = min if self.fname == "min" else max
        return frozenset(f(c) for c in itertools.product(*vs))  # type: ignore[arg-type]


class Min(_Call):
    fname = "min"


class Max(_Call):
    fname = "max"


class IfElse(_Node):
    prec = _OR - 1

    def text(self) -> str:
        c, a, b = self.args
        return f"if {c.text()} then {a.text()} else {b.text()}"

    def source(self, ns: _Namespace) -> str:
        c, a, b = self.args
        return f"({a.source(ns)} if {c.source(ns)} else {b.source(ns)})"

    def values(self, env: Env) -> frozenset[Value] | None:
        c, a, b = self.args
        _bools(c, env, "the condition of when()")
        av, bv = a.values(env), b.values(env)
        return None if av is None or bv is None else av | bv


class Unchanged(_Node):
    """Step properties: the named variables (all of them, and the state, when none is named)
    are the same after the step as before."""

    def text(self) -> str:
        return f"unchanged({', '.join(self.args)})" if self.args else "nothing changes"

    def source(self, ns: _Namespace) -> str:
        if not self.args:
            return f"({ns.ref('A', 'state')} == {ns.ref('B', 'state')} and a.v == b.v)"
        return "(" + " and ".join(f"{ns.ref('A', n)} == {ns.ref('B', n)}" for n in self.args) + ")"

    def _refs(self, out: dict[Ref, None]) -> None:
        for n in self.args or ("*",):
            out[("B", n)] = None
            out[("A", n)] = None
        if not self.args:
            out[("B", "state")] = None
            out[("A", "state")] = None

    def values(self, env: Env) -> frozenset[Value] | None:
        for n in self.args:
            env.domain("B", n)
        return _BOOLS


_AGGREGATE_TEXT = {"total": "sum", "count": "count", "every": "all", "some": "any"}


class Aggregate(_Node):
    """Over every instance of a system: ``total`` (a sum), ``count``, ``every``, ``some``."""

    def text(self) -> str:
        word, body = self.args
        return f"{_AGGREGATE_TEXT[word]}({body.text()})"

    def source(self, ns: _Namespace) -> str:
        word, body = self.args
        inner = body.source(ns)
        loop = "for _s, _v in zip(states, views)"
        if word == "total":
            return f"sum({inner} {loop})"
        if word == "count":
            return f"sum(1 {loop} if {inner})"
        return f"{'all' if word == 'every' else 'any'}({inner} {loop})"

    def values(self, env: Env) -> frozenset[Value] | None:
        word, body = self.args
        if word in ("every", "some", "count"):
            _bools(body, env, f"the body of {word}")
        else:
            _ints(body, env)
        return _BOOLS if word in ("every", "some") else None


# --------------------------------------------------------------------------
# The names a declaration writes with
# --------------------------------------------------------------------------
class _Space:
    """``V.name`` -> a reference in one namespace."""

    def __init__(self, space: str) -> None:
        self._space = space

    def __getattr__(self, name: str) -> Var:
        if name.startswith("__"):
            raise AttributeError(name)
        return Var(self._space, name)

    def __getitem__(self, name: str) -> Var:
        return Var(self._space, name)


V = _Space("V")
P = _Space("P")
S = _Space("S")
B = _Space("B")
A = _Space("A")
T = _Space("T")
I = _Space("I")  # noqa: E741  # one instance, as in the system invariants' "for each"
STATE = Var("STATE", "state")


def when(cond: object, then: object, otherwise: object) -> Expr:
    """``then`` if ``cond`` holds, else ``otherwise``."""
    return IfElse(lift(cond), lift(then), lift(otherwise))


def minimum(*xs: object) -> Expr:
    return Min(*(lift(x) for x in xs))


def maximum(*xs: object) -> Expr:
    return Max(*(lift(x) for x in xs))


def unchanged(*names: str) -> Expr:
    return Unchanged(*names)


def total(body: object) -> Expr:
    return Aggregate("total", lift(body))


def count(body: object) -> Expr:
    return Aggregate("count", lift(body))


def every(body: object) -> Expr:
    return Aggregate("every", lift(body))


def some(body: object) -> Expr:
    return Aggregate("some", lift(body))


def conjuncts(e: Expr) -> tuple[Expr, ...]:
    """The operands of a top-level and (the expression itself otherwise)."""
    return e.args if isinstance(e, And) else (e,)


def disjuncts(e: Expr) -> tuple[Expr, ...]:
    """The operands of a top-level or (the expression itself otherwise)."""
    return e.args if isinstance(e, Or) else (e,)


# --------------------------------------------------------------------------
# Typing a whole expression, and the names it reads
# --------------------------------------------------------------------------
def check(e: Expr, env: Env, *, expect: str = "bool",
          into: Iterable[Value] | None = None) -> None:
    """Type ``e`` against ``env``; ``expect="bool"`` for a condition, or ``into`` a variable's
    domain for an assignment (its kind must be the domain's; a constant must be in it)."""
    try:
        vs = e.values(env)
        if expect == "bool":
            _bools(e, env, "a condition")
        elif into is not None and vs is not None:
            domain = frozenset(into)
            if _kinds(vs) - _kinds(domain):
                raise DeclarationError(f"`{e.text()}` is {_kind_text(_kinds(vs))}, but the "
                                       f"variable holds {_kind_text(_kinds(domain))}")
            # A value outside the domain is the explorer's finding (a step past a bound
            # may be guarded off), except a constant: that is a typo.
            if isinstance(e, Const) and not vs & domain:
                raise DeclarationError(f"`{e.text()}` is never inside the domain "
                                       f"{_values_text(domain)}")
    except DeclarationError as exc:
        raise DeclarationError(f"{env.where}: {exc}") from None


def names(refs: Iterable[Ref], *spaces: str) -> tuple[str, ...]:
    """The names of ``refs`` in ``spaces`` (all when none given), in order, each once."""
    return tuple(dict.fromkeys(n for s, n in refs if not spaces or s in spaces))
