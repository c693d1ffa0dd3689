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

This module holds the machine itself (:class:`Protocol`: its lookups, its
configurations and its successor function) with the configuration and step types;
the parts it is declared from are in ``_parts``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ._errors import DeclarationError as DeclarationError
from ._errors import ModelError as ModelError
from ._expr_nodes import Expr
from ._parts import (
    NO_PARAMS,
    Guard,
    Invariant,
    Params,
    Snapshot,
    State,
    StepProperty,
    Transition,
    Value,
    Variable,
    Vars,
)
from ._rules import RULES

if TYPE_CHECKING:
    from ._compiled import CompiledExplorer, CompiledMachine


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
