"""The parts a system is declared from, and the configurations and steps it takes.

The system's own transitions (:class:`SharedTransition`), the refinements of a machine
trigger, the bindings of a parameter, the system invariants and the lock the instances
share (:class:`Mutex`) are frozen dataclasses, each built and compiled alone (as a
machine's parts are, ``_parts``); a :class:`SystemConfig` and a :class:`SystemStep` are
what :meth:`~._system.System.enabled` yields. They are their own room because none of
them knows the :class:`~._system.System` assembled from them (``_system``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import MappingProxyType

from ._core import Config, Step
from ._expr import names
from ._expr_compile import BINDING, SYSTEM_INVARIANT, compile_fn
from ._expr_nodes import Expr
from ._expr_text import Ref
from ._parts import NO_EFFECT, Effect, Guard, Param, Params, Value, Vars, _expression


@dataclass(frozen=True, slots=True)
class SharedTransition:
    """A step of the system itself over its own variables (no instance moves)."""

    trigger: str
    meaning: str
    rules: tuple[str, ...]
    guards: tuple[Guard, ...] = ()
    effect: Effect = NO_EFFECT
    actor: str = "user"
    params: tuple[Param, ...] = ()
    observed_as: str | None = ""

    def param_choices(self) -> Iterator[Params]:
        names = [p.name for p in self.params]
        for values in itertools.product(*(p.domain for p in self.params)):
            yield MappingProxyType(dict(zip(names, values, strict=True)))


@dataclass(frozen=True, slots=True)
class Refinement:
    """Extra guards and an effect over the system's variables on one machine trigger."""

    trigger: str
    rules: tuple[str, ...]
    guards: tuple[Guard, ...] = ()
    effect: Effect = NO_EFFECT


@dataclass(frozen=True, slots=True)
class Binding:
    """A machine parameter whose value the system's variables decide: an expression over ``S``."""

    param: str
    expr: Expr = field(compare=False)
    text: str = field(init=False)
    reads: tuple[str, ...] = field(init=False, compare=False)
    fn: Callable[[Vars], Value] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        e = _expression(f"binding of {self.param!r}", self.expr)
        object.__setattr__(self, "expr", e)
        object.__setattr__(self, "text", e.text())
        object.__setattr__(self, "reads", names(e.refs()))
        object.__setattr__(self, "fn", compile_fn(f"binding {self.param}", BINDING, e))


@dataclass(frozen=True, slots=True)
class SystemInvariant:
    """A predicate over every instance at once and the system's variables: an expression over
    ``S`` and, inside ``total``/``count``/``every``/``some``, ``I`` (each instance)."""

    name: str
    meaning: str
    rules: tuple[str, ...]
    expr: Expr = field(compare=False)
    text: str = field(init=False)
    reads: tuple[Ref, ...] = field(init=False, compare=False)
    fn: Callable[[tuple[str, ...], tuple[Vars, ...], Vars], bool] = field(
        init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        e = _expression(f"system invariant {self.name!r}", self.expr)
        object.__setattr__(self, "expr", e)
        object.__setattr__(self, "text", e.text())
        object.__setattr__(self, "reads", e.refs())
        object.__setattr__(self, "fn", compile_fn(f"system invariant {self.name}",
                                                    SYSTEM_INVARIANT, e))


@dataclass(frozen=True, slots=True)
class Mutex:
    """A lock the instances share: ``flag`` (a boolean machine variable) says whether an
    instance holds it, ``variable`` (a system variable over ``("free", "held")``) whether
    anyone does.

    A step of an instance that does not hold the lock, with a trigger in ``takes``, is
    enabled only while ``variable`` is ``"free"``; so is any step that raises the flag. After
    a step ``variable`` becomes ``"held"`` if the instance's flag is true, ``"free"`` if it
    was true and is no longer, and stays as it was otherwise. The system's invariants should
    say that at most one instance holds it and that ``variable`` agrees."""

    variable: str
    flag: str
    takes: frozenset[str]
    rules: tuple[str, ...]
    text: str

    def after(self, held: Value, had: Value, has: Value, trigger: str) -> Value | None:
        """The lock's value after a step of ``trigger`` that takes the instance's flag from
        ``had`` to ``has``, or None when the lock refuses the step."""
        if not had and held == "held" and (has or trigger in self.takes):
            return None
        if has:
            return "held"
        return "free" if had else held


@dataclass(frozen=True, slots=True)
class SystemConfig:
    instances: tuple[Config, ...]
    shared: tuple[Value, ...]  # the system's own variables, in declaration order


@dataclass(frozen=True, slots=True)
class SystemStep:
    """One step of a system: ``moves`` lists (instance, machine step) for every instance that
    moved (one for a local step, several for a sync step, none for a shared transition)."""

    trigger: str
    params: Params
    moves: tuple[tuple[int, Step], ...]
    shared: SharedTransition | None
    after: SystemConfig

    @property
    def sync(self) -> bool:
        return self.shared is None and len(self.moves) != 1

    @property
    def instance(self) -> int | None:
        return self.moves[0][0] if len(self.moves) == 1 and self.shared is None else None

