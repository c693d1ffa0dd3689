"""The parts a machine is declared from: states, variables, parameters, guards, effects,
transitions and properties, each a frozen dataclass validated where it can be alone.

A guard, an effect, an invariant and a step property hold an expression (``_expr``)
and derive from it, when built, their text, what they read and write, a guard's parts
and cases, and their own compiled function. They are their own room because each
stands alone: :class:`~._core.Protocol` (``_core``) and :class:`~._system.System`
(``_system``) are assembled from them, and nothing here knows either.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeAlias

from ._errors import DeclarationError
from ._expr import IfElse, conjuncts, disjuncts, names
from ._expr_compile import GUARD, INVARIANT, STEP, compile_fn
from ._expr_nodes import Arith, Expr, Update, Var, lift
from ._expr_text import _ADD, _AND, Ref

Value: TypeAlias = Any  # a hashable value from a variable's or a parameter's finite domain
Vars: TypeAlias = Mapping[str, Value]
Params: TypeAlias = Mapping[str, Value]
NO_PARAMS: Params = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class State:
    """A control state. ``unknown`` marks a state that waits for evidence."""

    name: str
    meaning: str
    terminal: bool = False
    unknown: bool = False


@dataclass(frozen=True, slots=True)
class Variable:
    name: str
    domain: tuple[Value, ...]
    initial: Value
    meaning: str
    ghost: bool = False  # specification-only history, not stored by an implementation
    logged: bool = True  # an implementation's event log records it (ghosts never)

    @property
    def observable(self) -> bool:
        return self.logged and not self.ghost


@dataclass(frozen=True, slots=True)
class Param:
    """A parameter the environment chooses when it fires a trigger (finite domain)."""

    name: str
    domain: tuple[Value, ...]
    meaning: str


def _expression(what: str, e: object) -> Expr:
    """``e`` as an expression; a Python callable (the old declarations) is refused."""
    if callable(e) and not isinstance(e, Expr):
        raise DeclarationError(f"{what} is a Python callable; declare it as an expression "
                               "(V.name, P.name, ... with & | ~ == < + and friends)")
    return lift(e)


@dataclass(frozen=True, slots=True)
class Guard:
    """A named condition, an expression; its text, reads, parts and cases are derived from it.

    ``reads`` lists every variable and parameter it looks at. A top-level ``&`` gives its
    ``parts`` (a caller may be refused for any one of them, so the kit probes a refusal where
    each part fails alone: a lease held but stale, not only no lease at all), a top-level
    ``|`` its ``cases`` (coverage counts which alternative let a step through, so "fired"
    means every way). Both are (text, predicate) pairs."""

    name: str
    expr: Expr = field(compare=False)
    # A model bound (not a protocol rule): it only keeps the explored space finite. A
    # synchronised step in a system is not taken where a bound alone would make it skip an
    # instance it concerns (see ``_system``).
    bound: bool = False
    text: str = field(init=False)
    reads: tuple[str, ...] = field(init=False, compare=False)
    fn: Callable[[Vars, Params], bool] = field(init=False, compare=False, repr=False)
    parts: tuple[tuple[str, Callable[[Vars, Params], bool]], ...] = field(
        init=False, compare=False, repr=False)
    cases: tuple[tuple[str, Callable[[Vars, Params], bool]], ...] = field(
        init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        e = _expression(f"guard {self.name!r}", self.expr)
        set_ = object.__setattr__
        set_(self, "expr", e)
        set_(self, "text", e.text())
        set_(self, "reads", names(e.refs()))
        set_(self, "fn", compile_fn(f"guard {self.name}", GUARD, e))

        def alternatives(items: tuple[Expr, ...]) -> tuple[tuple[str, Callable[..., bool]], ...]:
            if len(items) < 2:
                return ()
            return tuple((i.text(), compile_fn(f"guard {self.name}", GUARD, i)) for i in items)

        set_(self, "parts", alternatives(conjuncts(e)))
        set_(self, "cases", alternatives(disjuncts(e)))

    def __call__(self, v: Vars, p: Params) -> bool:
        return self.fn(v, p)

    def atoms(self) -> tuple[str, ...]:
        """What a refusal can be for: each part (``guard[part]``), or the guard itself."""
        return tuple(f"{self.name}[{n}]" for n, _ in self.parts) or (self.name,)

    def failing_atoms(self, v: Vars, p: Params) -> tuple[str, ...]:
        """The atoms that fail in ``v`` with ``p`` (none when the guard holds)."""
        if self.parts:
            return tuple(f"{self.name}[{n}]" for n, fn in self.parts if not fn(v, p))
        return () if self.fn(v, p) else (self.name,)

    def case(self, v: Vars, p: Params) -> str | None:
        """The first alternative that holds (None for a guard without alternatives)."""
        for name, fn in self.cases:
            if fn(v, p):
                return name
        return None


def _assignment_text(name: str, e: Expr) -> str:
    """``x += 1``, ``held[worker] := e``, ``x := e when c`` where the expression says so."""
    def same(y: object) -> bool:
        return isinstance(y, Var) and y.space in ("V", "S") and y.name == name

    if isinstance(e, Arith) and same(e.args[1]):
        return f"{name} {e.args[0]}= {e.args[2]._wrap(_ADD + 1)}"
    if isinstance(e, Update) and same(e.args[0]):
        return f"{name}[{e.args[1].text()}] := {e.args[2].text()}"
    if isinstance(e, IfElse) and same(e.args[2]):
        return f"{_assignment_text(name, e.args[1])} if {e.args[0].text()}"
    return f"{name} := {e.text()}"


@dataclass(frozen=True, slots=True)
class Effect:
    """What a step writes: each variable's new value, an expression over the values before the
    step (every right side reads the configuration before the step, as one assignment)."""

    updates: Mapping[str, object] = field(compare=False)
    text: str = field(init=False)
    writes: tuple[str, ...] = field(init=False, compare=False)
    reads: tuple[str, ...] = field(init=False, compare=False)
    fn: Callable[[Vars, Params], Mapping[str, Value]] = field(init=False, compare=False,
                                                             repr=False)

    def __post_init__(self) -> None:
        if callable(self.updates) or isinstance(self.updates, str):
            raise DeclarationError("an effect is a mapping from variable name to expression, "
                                   f"not {self.updates!r}")
        items = tuple((str(k), _expression(f"the effect on {k!r}", e))
                      for k, e in dict(self.updates).items())
        set_ = object.__setattr__
        set_(self, "updates", MappingProxyType(dict(items)))
        set_(self, "text", "; ".join(_assignment_text(k, e) for k, e in items)
             or "nothing changes")
        set_(self, "writes", tuple(k for k, _ in items))
        set_(self, "reads", names(r for _, e in items for r in e.refs()))
        set_(self, "fn", compile_fn("effect", GUARD, updates=items))

    def __call__(self, v: Vars, p: Params) -> Mapping[str, Value]:
        return self.fn(v, p)

    def refs(self) -> tuple[Ref, ...]:
        return tuple(dict.fromkeys(r for e in self.updates.values() for r in lift(e).refs()))


NO_EFFECT = Effect({})


@dataclass(frozen=True, slots=True)
class Transition:
    trigger: str
    source: tuple[str, ...]
    dest: str | None  # None: stay in the source state (a self-loop on each source)
    meaning: str
    rules: tuple[str, ...]
    guards: tuple[Guard, ...] = ()
    effect: Effect = NO_EFFECT
    actor: str = "worker"  # user | worker | platform | environment
    # What an implementation's event log calls this step. None: the step leaves no
    # event (a crash, the platform's own progress); two transitions may share one
    # name when the implementation cannot tell them apart (a lost answer and an
    # undelivered request both look like "no answer").
    observed_as: str | None = ""
    params: tuple[Param, ...] = ()

    @property
    def observable(self) -> str | None:
        return self.trigger if self.observed_as == "" else self.observed_as

    @property
    def guard_text(self) -> str:
        return " and ".join(g.expr._wrap(_AND + 1) for g in self.guards)

    def target(self, source: str) -> str:
        return source if self.dest is None else self.dest

    def param_choices(self) -> Iterator[Params]:
        names = [p.name for p in self.params]
        for values in itertools.product(*(p.domain for p in self.params)):
            yield MappingProxyType(dict(zip(names, values, strict=True)))


@dataclass(frozen=True, slots=True)
class Invariant:
    """A predicate every reachable configuration satisfies: an expression over ``V`` and
    ``STATE``. ``meaning`` says it in words; ``text`` is the expression's."""

    name: str
    meaning: str
    rules: tuple[str, ...]
    expr: Expr = field(compare=False)
    text: str = field(init=False)
    reads: tuple[str, ...] = field(init=False, compare=False)
    fn: Callable[[str, Vars], bool] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        e = _expression(f"invariant {self.name!r}", self.expr)
        object.__setattr__(self, "expr", e)
        object.__setattr__(self, "text", e.text())
        object.__setattr__(self, "reads", names(e.refs()))
        object.__setattr__(self, "fn", compile_fn(f"invariant {self.name}", INVARIANT, e))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A configuration as a step property sees it: state name and variables by name."""

    state: str
    v: Vars


@dataclass(frozen=True, slots=True)
class StepProperty:
    """A predicate every step satisfies: an expression over ``B`` (before), ``A`` (after),
    ``P`` (the step's parameters, none where the step has no such parameter) and ``T`` (its
    trigger and actor). ``meaning`` says it in words; ``text`` is the expression's."""

    name: str
    meaning: str
    rules: tuple[str, ...]
    expr: Expr = field(compare=False)
    text: str = field(init=False)
    reads: tuple[Ref, ...] = field(init=False, compare=False)
    fn: Callable[[Snapshot, Transition, Params, Snapshot], bool] = field(
        init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        e = _expression(f"step property {self.name!r}", self.expr)
        object.__setattr__(self, "expr", e)
        object.__setattr__(self, "text", e.text())
        object.__setattr__(self, "reads", e.refs())
        object.__setattr__(self, "fn", compile_fn(f"step property {self.name}", STEP, e))


