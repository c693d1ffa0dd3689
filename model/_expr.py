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
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, TypeAlias

from ._errors import DeclarationError

Value: TypeAlias = Any
# A reference: (namespace, name). Namespaces: V machine variable, P parameter, S system
# variable, STATE the control state, B/A before/after (name "state" for the control state),
# T the step's label (trigger, actor), I one instance inside an aggregate.
Ref: TypeAlias = tuple[str, str]

# Binding strength, weakest first: the renderer parenthesises a weaker operand.
_OR, _AND, _NOT, _CMP, _ADD, _ATOM = 1, 2, 3, 4, 5, 9


def _const_text(x: Value) -> str:
    if isinstance(x, enum.Enum):
        x = x.value
    if isinstance(x, bool):
        return "true" if x else "false"
    if x is None:
        return "none"
    if isinstance(x, tuple):
        return "(" + ", ".join(_const_text(y) for y in x) + ")"
    return str(x)


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


class _Namespace:
    """How references compile in one kind of declaration (the Python names they read)."""

    def __init__(self, kind: str, spaces: Mapping[str, str]) -> None:
        self.kind = kind
        self.spaces = spaces
        self.consts: list[Value] = []

    def ref(self, space: str, name: str) -> str:
        template = self.spaces.get(space)
        if template is None:
            raise DeclarationError(
                f"a {self.kind} cannot read {_ref_text(space, name)} ({_SPACE_MEANING[space]}); "
                f"it may read {', '.join(_SPACE_MEANING[s] for s in self.spaces)}")
        return template.format(name=name)

    def const(self, value: Value) -> str:
        for i, c in enumerate(self.consts):
            if c is value or (type(c) is type(value) and c == value):
                return f"_k{i}"
        self.consts.append(value)
        return f"_k{len(self.consts) - 1}"


_SPACE_MEANING = {"V": "V: the machine's variables", "P": "P: the step's parameters",
                  "S": "S: the system's variables", "STATE": "STATE: the control state",
                  "B": "B: the configuration before the step", "A": "A: the one after",
                  "T": "T: the step's trigger and actor", "I": "I: one instance (in an aggregate)"}


def _ref_text(space: str, name: str) -> str:
    if space == "STATE":
        return "state"
    if space in ("B", "A"):
        return f"{'before' if space == 'B' else 'after'}.{name}"
    if space == "T":
        return f"step.{name}"
    return name


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
# Compiling
# --------------------------------------------------------------------------
def _set(t: tuple[Value, ...], i: int, x: Value) -> tuple[Value, ...]:
    return (*t[:i], x, *t[i + 1:])


# What each kind of declaration's compiled function takes, and how its references read.
GUARD = ("v, p", {"V": "v[{name!r}]", "S": "v[{name!r}]", "P": "p[{name!r}]"})
INVARIANT = ("s, v", {"V": "v[{name!r}]", "STATE": "s"})
STEP = ("b, t, p, a", {"B": "b.v[{name!r}]", "A": "a.v[{name!r}]", "P": "p.get({name!r})",
                       "T": "t.{name}"})
BINDING = ("v", {"S": "v[{name!r}]"})
SYSTEM_INVARIANT = ("states, views, v", {"S": "v[{name!r}]", "I": "_v[{name!r}]"})
_STATE_NAMES = {"B": "b.state", "A": "a.state", "I": "_s"}


class _NamespaceWithState(_Namespace):
    def ref(self, space: str, name: str) -> str:
        if name == "state" and space in _STATE_NAMES and space in self.spaces:
            return _STATE_NAMES[space]
        return super().ref(space, name)


def compile_fn(kind: str, signature: tuple[str, Mapping[str, str]], body: Expr | None = None,
               *, updates: Sequence[tuple[str, Expr]] = ()) -> Callable[..., Any]:
    """Generate the Python source of ``body`` (or of a dict of ``updates``) and compile it once."""
    args, spaces = signature
    ns = _NamespaceWithState(kind, spaces)
    if body is not None:
        src = body.source(ns)
    else:
        src = "{" + ", ".join(f"{name!r}: {e.source(ns)}" for name, e in updates) + "}"
    code = f"def _fn({args}):\n    return {src}\n"
    scope: dict[str, Any] = {f"_k{i}": c for i, c in enumerate(ns.consts)}
    scope["_set"] = _set
    exec(compile(code, f"<{kind}>", "exec"), scope)  # our own generated source
    fn: Callable[..., Any] = scope["_fn"]
    fn.__doc__ = src  # the generated source, for a reader in a debugger
    return fn


# --------------------------------------------------------------------------
# Typing
# --------------------------------------------------------------------------
_BOOLS: frozenset[Value] = frozenset((False, True))
_MAX_VALUES = 100_000


class Env:
    """The declared domains a declaration's references range over."""

    def __init__(self, where: str, domains: Mapping[Ref, Iterable[Value]]) -> None:
        self.where = where
        self.domains = {k: frozenset(v) for k, v in domains.items()}

    def domain(self, space: str, name: str) -> frozenset[Value]:
        d = self.domains.get((space, name))
        if d is None:
            known = sorted(n if s not in ("B", "A") else f"{s}.{n}" for s, n in self.domains
                           if s == space)
            raise DeclarationError(f"{_ref_text(space, name)} is not declared here; "
                                   f"{_SPACE_MEANING[space].split(':')[0]} has {known}")
        return d


def _kind(x: Value) -> str:
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, int):
        return "int"
    if isinstance(x, str):
        return "str"
    if isinstance(x, tuple):
        return "tuple"
    if x is None:
        return "none"
    return type(x).__name__


def _kinds(values: Iterable[Value]) -> set[str]:
    return {_kind(x) for x in values}


def _kind_text(kinds: set[str]) -> str:
    names = {"bool": "a truth value", "int": "a number", "str": "a name", "tuple": "a tuple",
             "none": "nothing"}
    return " or ".join(names.get(k, k) for k in sorted(kinds))


def _values_text(values: Iterable[Value]) -> str:
    return "{" + ", ".join(sorted(_const_text(x) for x in values)) + "}"


def _ints(e: Expr, env: Env) -> frozenset[Value] | None:
    # None stands for a parameter the step does not have (step properties): the property
    # must not read it there, which the generated code would report as a TypeError.
    vs = _present(e.values(env))
    if vs is not None and _kinds(vs) - {"int"}:
        raise DeclarationError(f"`{e.text()}` is {_kind_text(_kinds(vs))}, where a number is "
                               "expected")
    return vs


def _present(vs: frozenset[Value] | None) -> frozenset[Value] | None:
    return None if vs is None else vs - {None}


def _tuples(e: Expr, env: Env) -> frozenset[Value] | None:
    vs = _present(e.values(env))
    if vs is not None and _kinds(vs) - {"tuple"}:
        raise DeclarationError(f"`{e.text()}` is {_kind_text(_kinds(vs))}, where a tuple is "
                               "expected")
    return vs


def _bools(e: Expr, env: Env, what: str) -> None:
    vs = e.values(env)
    if vs is not None and _kinds(vs) - {"bool"}:
        raise DeclarationError(f"`{e.text()}`, {what}, is {_kind_text(_kinds(vs))}, not a truth "
                               "value; compare it (== or isin)")


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
