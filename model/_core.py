"""The declaration vocabulary: a protocol machine as data, validated when built.

A :class:`Protocol` is the single source of truth for one machine: its states,
its variables with finite domains, its transitions (trigger, sources,
destination, guards, effect, actor, parameters, rule IDs) and its properties.
Every other view (the ``transitions`` oracle, the protocol graph, the
diagrams, the spec, the explorer) reads this table and nothing else, so a
behaviour that is not in the table does not exist.

A *configuration* of a machine is a :class:`Config`: the control state plus
one value per variable, in declaration order. Guards, effects, invariants and
step properties are expressions (``_expr``): their text, what they read and
write, a guard's parts and cases are derived from them, and so is the code
that runs them: each declaration's own compiled function (``Guard.fn``,
``Effect.fn``: variables and parameters as mappings, an effect's dict of the
variables it writes), and the successor function generated for the whole
machine (``_compiled``) that ``Protocol.enabled`` and the explorers run.

Everything is checked when the declaration is made (see ``_validate``) and a
broken declaration raises :class:`DeclarationError` naming the problem.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeAlias

from . import _expr as x
from ._errors import DeclarationError as DeclarationError
from ._errors import ModelError as ModelError
from ._expr import Expr
from ._rules import RULES

if TYPE_CHECKING:
    from ._compiled import CompiledExplorer, CompiledMachine

Value: TypeAlias = Any  # a hashable value from a variable's or a parameter's finite domain
Vars: TypeAlias = Mapping[str, Value]
Params: TypeAlias = Mapping[str, Value]
NO_PARAMS: Params = MappingProxyType({})


class IllegalTransition(ModelError, ValueError):
    """A trigger the machine does not allow in its current configuration; nothing changed."""

    def __init__(self, message: str, *, trigger: str, state: str,
                 failed_guards: tuple[Guard, ...] = (), enabled: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.trigger = trigger
        self.state = state
        self.failed_guards = failed_guards
        self.enabled = enabled


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
    return x.lift(e)


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
        set_(self, "reads", x.names(e.refs()))
        set_(self, "fn", x.compile_fn(f"guard {self.name}", x.GUARD, e))

        def alternatives(items: tuple[Expr, ...]) -> tuple[tuple[str, Callable[..., bool]], ...]:
            if len(items) < 2:
                return ()
            return tuple((i.text(), x.compile_fn(f"guard {self.name}", x.GUARD, i)) for i in items)

        set_(self, "parts", alternatives(x.conjuncts(e)))
        set_(self, "cases", alternatives(x.disjuncts(e)))

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
        return isinstance(y, x.Var) and y.space in ("V", "S") and y.name == name

    if isinstance(e, x.Arith) and same(e.args[1]):
        return f"{name} {e.args[0]}= {e.args[2]._wrap(x._ADD + 1)}"
    if isinstance(e, x.Update) and same(e.args[0]):
        return f"{name}[{e.args[1].text()}] := {e.args[2].text()}"
    if isinstance(e, x.IfElse) and same(e.args[2]):
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
        set_(self, "reads", x.names(r for _, e in items for r in e.refs()))
        set_(self, "fn", x.compile_fn("effect", x.GUARD, updates=items))

    def __call__(self, v: Vars, p: Params) -> Mapping[str, Value]:
        return self.fn(v, p)

    def refs(self) -> tuple[x.Ref, ...]:
        return tuple(dict.fromkeys(r for e in self.updates.values() for r in x.lift(e).refs()))


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
        return " and ".join(g.expr._wrap(x._AND + 1) for g in self.guards)

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
        object.__setattr__(self, "reads", x.names(e.refs()))
        object.__setattr__(self, "fn", x.compile_fn(f"invariant {self.name}", x.INVARIANT, e))


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
    reads: tuple[x.Ref, ...] = field(init=False, compare=False)
    fn: Callable[[Snapshot, Transition, Params, Snapshot], bool] = field(
        init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        e = _expression(f"step property {self.name!r}", self.expr)
        object.__setattr__(self, "expr", e)
        object.__setattr__(self, "text", e.text())
        object.__setattr__(self, "reads", e.refs())
        object.__setattr__(self, "fn", x.compile_fn(f"step property {self.name}", x.STEP, e))


@dataclass(frozen=True, slots=True)
class Config:
    """A configuration: control state plus variable values in declaration order."""

    state: str
    values: tuple[Value, ...]


@dataclass(frozen=True, slots=True)
class Step:
    transition: Transition
    params: Params
    after: Config


@dataclass(frozen=True)
class Protocol:
    """A declared machine. Built once; validated in ``__post_init__``."""

    name: str
    meaning: str
    states: tuple[State, ...]
    initial: str
    variables: tuple[Variable, ...]
    transitions: tuple[Transition, ...]
    invariants: tuple[Invariant, ...] = ()
    step_properties: tuple[StepProperty, ...] = ()
    actors: Mapping[str, str] = field(default_factory=dict)
    # Triggers a caller may be refused: where the model does not enable one of them, an
    # implementation must refuse it (as a caller's mistake) and change nothing. Every other
    # trigger is a step the world takes (a platform answer, a crash) and is never asked for
    # where it is not enabled. The conformance kit probes exactly these.
    refusable: frozenset[str] = frozenset()
    _index: dict[str, int] = field(init=False, repr=False, compare=False)
    _by_source: dict[str, tuple[Transition, ...]] = field(init=False, repr=False, compare=False)
    # Per state: (params, the transitions of one trigger group those params fit, in declaration
    # order), in the order ``enabled`` offers them. Precomputed because the explorer calls
    # ``enabled`` once per configuration and the parameter products dominated its cost.
    _plan: dict[str, tuple[tuple[Params, tuple[Transition, ...]], ...]] = field(
        init=False, repr=False, compare=False)
    _gen: CompiledMachine | None = field(default=None, init=False, repr=False, compare=False)
    _explorer: CompiledExplorer | None = field(default=None, init=False, repr=False,
                                               compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {v.name: i for i, v in enumerate(self.variables)})
        by_source: dict[str, list[Transition]] = {s.name: [] for s in self.states}
        for t in self.transitions:
            for s in t.source:
                by_source.setdefault(s, []).append(t)
        # Declaration order: the order the oracle tries them in.
        object.__setattr__(self, "_by_source", {s: tuple(ts) for s, ts in by_source.items()})
        object.__setattr__(self, "_plan", {
            s: tuple((params, tuple(t for t in group if _params_fit(t, params)))
                     for _trigger, group in _by_trigger(ts) for params in _param_union(group))
            for s, ts in self._by_source.items()})
        from ._validate import validate
        validate(self)

    # -- lookups -------------------------------------------------------------
    def state(self, name: str) -> State:
        for s in self.states:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def state_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.states)

    @property
    def terminal_states(self) -> frozenset[str]:
        return frozenset(s.name for s in self.states if s.terminal)

    @property
    def variable_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variables)

    @property
    def plan(self) -> Mapping[str, tuple[tuple[Params, tuple[Transition, ...]], ...]]:
        """Per state, what ``enabled`` tries, in its order: each parameter assignment with
        the transitions of one trigger group that it fits, in declaration order (the first
        of them whose guards hold fires). Exporters and the trace checker walk it so that
        they offer exactly the steps the oracle does."""
        return MappingProxyType(self._plan)

    def transitions_from(self, state: str) -> tuple[Transition, ...]:
        return self._by_source.get(state, ())

    def triggers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t.trigger for t in self.transitions))

    def rules(self) -> tuple[str, ...]:
        cited = itertools.chain(
            (r for t in self.transitions for r in t.rules),
            (r for i in self.invariants for r in i.rules),
            (r for p in self.step_properties for r in p.rules))
        return tuple(sorted(set(cited), key=rule_sort_key))

    def writes(self) -> frozenset[str]:
        """Every variable some declared effect writes."""
        return frozenset(w for t in self.transitions for w in t.effect.writes)

    def unbreakable(self) -> tuple[Invariant | StepProperty, ...]:
        """The properties no declared step can break: they read neither the control state
        nor the step's label or parameters, and no declared effect writes what they read.
        Their value is the initial configuration's on every state and step the explorer can
        reach, so exploring cannot fail them: only lockstep, against an implementation that
        may write those variables, checks them."""
        props: tuple[Invariant | StepProperty, ...] = (*self.invariants, *self.step_properties)
        return tuple(prop for prop in props
                     if constant_over(prop.expr, self.writes(), ("V", "B", "A")))

    # -- configurations ------------------------------------------------------
    def initial_config(self) -> Config:
        return Config(self.initial, tuple(v.initial for v in self.variables))

    def view(self, config: Config) -> Vars:
        return dict(zip(self._index, config.values, strict=True))

    def snapshot(self, config: Config) -> Snapshot:
        return Snapshot(config.state, self.view(config))

    def broken_invariants(self, config: Config) -> tuple[Invariant, ...]:
        v = self.view(config)
        return tuple(i for i in self.invariants if not i.fn(config.state, v))

    def broken_step_properties(self, before: Config, step: Step) -> tuple[StepProperty, ...]:
        b, a = self.snapshot(before), self.snapshot(step.after)
        return tuple(s for s in self.step_properties
                     if not s.fn(b, step.transition, step.params, a))

    def config(self, state: str, **values: Value) -> Config:
        """A configuration from the initial values, overridden by ``values``."""
        base = dict(zip(self._index, self.initial_config().values, strict=True))
        unknown = set(values) - set(base)
        if unknown:
            raise DeclarationError(f"{self.name}: no variable named {sorted(unknown)}")
        base.update(values)
        return Config(state, tuple(base.values()))

    def replace(self, config: Config, updates: Mapping[str, Value]) -> tuple[Value, ...]:
        if not updates:
            return config.values
        values = list(config.values)
        for name, value in updates.items():
            values[self._index[name]] = value
        return tuple(values)

    # -- the successor function (the semantics every view shares) -------------
    def enabled(self, config: Config) -> Iterator[Step]:
        """Every step the configuration allows, honouring priorities: the generated successor
        function (``_compiled``), the one the explorer runs."""
        gen = self.compiled()
        successors = gen.successors.get(config.state)
        if successors is None:
            return
        labels = gen.labels
        for lid, dest, values, _broken in successors(config.values):
            t, params = labels[lid]
            yield Step(t, params, Config(dest, values))

    def enabled_by_guards(self, config: Config) -> Iterator[Step]:
        """:meth:`enabled` evaluated guard by guard (each declaration's own compiled
        function, as ``fire`` does); a test holds the two equal on every reachable
        configuration."""
        v = self.view(config)
        for params, fitting in self._plan.get(config.state, ()):
            step = self._first_enabled(fitting, config, v, params)
            if step is not None:
                yield step

    def compiled(self) -> CompiledMachine:
        """The generated successor and invariant functions, compiled on first use."""
        gen = self._gen
        if gen is None:
            from ._compiled import compile_machine
            gen = compile_machine(self, step_properties=False)
            object.__setattr__(self, "_gen", gen)
        return gen

    def compiled_explorer(self) -> CompiledExplorer:
        """The generated expansion functions the explorer runs, compiled on first use."""
        gen = self._explorer
        if gen is None:
            from ._compiled import compile_explorer
            gen = compile_explorer(self)
            object.__setattr__(self, "_explorer", gen)
        return gen

    def fire(self, config: Config, trigger: str, params: Params = NO_PARAMS) -> Step:
        """The step ``trigger`` takes from ``config``, or :class:`IllegalTransition`."""
        group = [t for t in self.transitions_from(config.state) if t.trigger == trigger]
        if trigger not in self.triggers():
            raise IllegalTransition(
                f"{self.name}: no trigger named {trigger!r}; triggers are {list(self.triggers())}",
                trigger=trigger, state=config.state)
        v = self.view(config)
        candidates = [t for t in group if _params_fit(t, params)]
        step = self._first_enabled(candidates, config, v, params)
        if step is None:
            raise self._illegal(config, trigger, params, candidates, v)
        return step

    def _first_enabled(self, group: Iterable[Transition], config: Config, v: Vars,
                       params: Params) -> Step | None:
        """The first of ``group`` whose guards pass; every member must fit ``params``."""
        for t in group:
            for g in t.guards:  # a plain loop: this is the explorer's innermost call
                if not g.fn(v, params):
                    break
            else:
                after = Config(t.target(config.state), self.replace(config, t.effect(v, params)))
                return Step(t, params, after)
        return None

    def _illegal(self, config: Config, trigger: str, params: Params,
                 candidates: list[Transition], v: Vars) -> IllegalTransition:
        failed = tuple(g for t in candidates for g in t.guards if not g(v, params))
        enabled = tuple(sorted({s.transition.trigger for s in self.enabled(config)}))
        if not candidates:
            why = f"no {trigger!r} transition leaves state '{config.state}'"
        else:
            why = "guard failed: " + "; ".join(f"{g.name} ({g.text})" for g in failed)
        shown = f" with {dict(params)}" if params else ""
        return IllegalTransition(
            f"{self.name}: cannot {trigger}{shown} in state '{config.state}': {why}; "
            f"enabled here: {list(enabled)}",
            trigger=trigger, state=config.state, failed_guards=failed, enabled=enabled)


def constant_over(e: Expr, written: frozenset[str], spaces: tuple[str, ...]) -> bool:
    """True when ``e`` reads only variables (of ``spaces``) that nothing writes: not the state,
    a step's label or parameters, nor a variable in ``written``."""
    for space, name in e.refs():
        if space not in spaces or name == "state" or name == "*" or name in written:
            return False
    return True


def lockstep_only(props: Iterable[Invariant | StepProperty | Any]) -> list[dict[str, Any]]:
    """The report of properties exploring cannot fail (see :meth:`Protocol.unbreakable`)."""
    kinds = {Invariant: "invariant", StepProperty: "step_property"}
    return [{"kind": kinds.get(type(prop), "system_invariant"), "name": prop.name,
             "rules": list(prop.rules),
             "reads": sorted({n for _, n in prop.expr.refs()}),
             "why": "no declared effect writes what it reads: exploring cannot fail it; "
                    "lockstep checks it against the implementation"}
            for prop in props]


def _by_trigger(transitions: Iterable[Transition]) -> Iterator[tuple[str, list[Transition]]]:
    groups: dict[str, list[Transition]] = {}
    for t in transitions:
        groups.setdefault(t.trigger, []).append(t)
    return iter(groups.items())


def _param_union(group: list[Transition]) -> Iterator[Params]:
    seen: set[tuple[tuple[str, Value], ...]] = set()
    for t in group:
        for p in t.param_choices():
            key = tuple(sorted(p.items()))
            if key not in seen:
                seen.add(key)
                yield p


def _params_fit(t: Transition, params: Params) -> bool:
    return set(params) == {p.name for p in t.params} and all(
        params[p.name] in p.domain for p in t.params)


def rule_sort_key(rule: str) -> tuple[int, str, int]:
    order = "QTMLWARV"
    head = rule.rstrip("0123456789")
    return (order.index(head) if head in order else len(order), head, int(rule[len(head):] or 0))


def check_rules(rules: Iterable[str], where: str) -> None:
    for r in rules:
        if r not in RULES:
            raise DeclarationError(f"{where} cites unknown rule {r!r}; known rules are in "
                                   "settled.model.RULES (PROTOCOL.md)")
