"""Systems: instances of a declared machine that really share state, as data.

A :class:`Protocol` describes one instance (one query, one approved call). A
:class:`System` composes ``instances`` copies of one machine with what they
share, declared as data and validated when built:

* ``shared``: variables of the machine held once for the whole system (the
  task's condition version is one number, whichever query reads it). A step
  of one instance that writes a shared variable changes it for all of them.
* ``variables``: variables of the system alone (the session's unattributed
  message, the stock orders draw from), changed by the system's own
  ``transitions`` (``SharedTransition``: guards and an effect over the
  system's variables, no control state) or by ``refinements``.
* ``sync``: triggers of the machine that fire on several instances at once:
  one step takes the trigger on every instance where it is enabled (a worker
  process dying drops every lease it holds; one condition update invalidates
  every pending draft of the task). All participants see the same shared
  values before the step and must agree on what they write; a disagreement
  is a :class:`DeclarationError` the explorer reports at once. A sync step is
  not taken at all where a *model bound* (``Guard.bound``) alone would make
  it skip an instance it concerns, so bounds never fake a partial crash.
* ``per_instance``: sync triggers whose parameters each instance chooses for
  itself. One step still moves every instance where the trigger is enabled,
  but not all with the same parameters: the step is offered once per
  combination of the instances' choices (the calls of one assistant message
  are registered in one transaction, each call a write or a read of its
  own). Its parameters are named per instance, ``q0.kind``, ``q1.kind``; a
  refinement of such a trigger reads only the system's variables.
* ``bind``: a parameter of the machine whose value the system's state decides
  instead of the environment (the confirm call's ``message`` is the session's
  real attribution state, not a free choice).
* ``refinements``: extra guards and effects, over the system's variables, on
  one machine trigger (an order's commit needs stock and takes one).
* ``invariants``: predicates over the whole configuration (all instances).
* ``mutex``: a lock the instances share (:class:`Mutex`): a boolean machine
  variable says whether an instance holds it, a system variable whether
  anyone does. A step in the lock's ``takes`` needs it free unless the
  instance holds it already; every step updates the system variable from the
  instance's flag before and after (one session's operations exclude each
  other: an approval while another call's handler runs is refused).
* ``symmetric`` and ``worker``: instances are interchangeable, and so are the
  values of the ``worker`` parameter, which indexes the machine's per-worker
  tuple variable; the explorer reduces by both (``conformance._system``).

A configuration is a :class:`SystemConfig`: one machine :class:`Config` per
instance, whose shared variables always hold the same values, plus the
system's own variables. :meth:`System.enabled` is the successor function
every view of a system shares, exactly as ``Protocol.enabled`` is for one
machine; the machine's own guards, effects, priorities, invariants and step
properties are used unchanged, so a machine keeps its meaning inside a system.

This module holds the :class:`System` itself (its lookups and its successor
function); the parts it is declared from and the configurations and steps it
takes are in ``_system_parts``, its checks in ``_system_validate``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ._core import Config, DeclarationError, Protocol, Step
from ._parts import Invariant, Params, StepProperty, Value, Variable, Vars
from ._system_parts import (
    Binding,
    Mutex,
    Refinement,
    SharedTransition,
    SystemConfig,
    SystemInvariant,
    SystemStep,
)
from ._system_validate import _validate


@dataclass(frozen=True)
class System:
    """A declared system. Built once; validated in ``__post_init__``."""

    name: str
    meaning: str
    machine: Protocol
    instances: int
    shared: tuple[str, ...] = ()
    variables: tuple[Variable, ...] = ()
    transitions: tuple[SharedTransition, ...] = ()
    sync: tuple[str, ...] = ()
    per_instance: tuple[str, ...] = ()  # sync triggers whose parameters each instance chooses
    bind: tuple[Binding, ...] = ()
    refinements: tuple[Refinement, ...] = ()
    invariants: tuple[SystemInvariant, ...] = ()
    symmetric: bool = True
    worker: tuple[str, str] | None = None  # (parameter, per-worker tuple variable)
    mutex: Mutex | None = None
    _shared_idx: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _vidx: dict[str, int] = field(init=False, repr=False, compare=False)
    _refine: dict[str, Refinement] = field(init=False, repr=False, compare=False)
    _lock: tuple[int, int] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        m = self.machine
        index = {n: i for i, n in enumerate(m.variable_names)}
        object.__setattr__(self, "_shared_idx", tuple(index[n] for n in self.shared if n in index))
        object.__setattr__(self, "_vidx", {v.name: i for i, v in enumerate(self.variables)})
        object.__setattr__(self, "_refine", {r.trigger: r for r in self.refinements})
        mx = self.mutex
        object.__setattr__(self, "_lock", None if mx is None else (
            self._vidx.get(mx.variable, -1), index.get(mx.flag, -1)))
        _validate(self)

    # -- lookups -----------------------------------------------------------------
    @property
    def independent(self) -> bool:
        """True when the instances never interact: no shared or own variables, no
        synchronised or own steps, no bindings, refinements or lock. Each step then moves one
        instance exactly as ``machine.fire`` would."""
        return not (self.shared or self.variables or self.transitions or self.sync
                    or self.bind or self.refinements or self.mutex)

    @property
    def variable_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variables)

    def shared_view(self, config: SystemConfig) -> Vars:
        return self.view_of_shared(config.shared)

    def view_of_shared(self, shared: tuple[Value, ...]) -> Vars:
        """The system's own variables by name, from their values in declaration order."""
        return dict(zip(self._vidx, shared, strict=True))

    @property
    def shared_indices(self) -> tuple[int, ...]:
        """Where the machine's shared variables sit in an instance's values."""
        return self._shared_idx

    def with_shared(self, shared: tuple[Value, ...],
                    updates: Mapping[str, Value]) -> tuple[Value, ...]:
        """The system's variables ``shared`` with ``updates`` (by name) written."""
        return _replace(shared, self._vidx, updates)

    def refined(self, trigger: str, params: Params, sv: Vars,
                shared: tuple[Value, ...]) -> tuple[Value, ...] | None:
        """The system's variables after the refinement of ``trigger`` (``shared`` when it
        has none); None when the refinement's guards refuse the step."""
        ref = self._refine.get(trigger)
        if ref is None:
            return shared
        if not all(g.fn(sv, params) for g in ref.guards):
            return None
        return _replace(shared, self._vidx, ref.effect(sv, params))

    def initial_config(self) -> SystemConfig:
        c = self.machine.initial_config()
        return SystemConfig((c,) * self.instances, tuple(v.initial for v in self.variables))

    def rules(self) -> tuple[str, ...]:
        cited = {r for t in self.transitions for r in t.rules} | {
            r for x in self.refinements for r in x.rules} | {r for i in self.invariants for r in i.rules} | (
            set(self.mutex.rules) if self.mutex else set())
        return tuple(sorted(cited | set(self.machine.rules())))

    def terminal(self, config: SystemConfig) -> bool:
        term = self.machine.terminal_states
        return all(c.state in term for c in config.instances)

    def unbreakable(self) -> tuple[Invariant | StepProperty | SystemInvariant, ...]:
        """The machine's and the system's properties no declared step of the system can break
        (see ``Protocol.unbreakable``): a system invariant that reads only system variables
        nothing writes (no system step, refinement or mutex) and instance variables no
        machine effect writes, and never an instance's state."""
        writes = self.machine.writes()
        steps: tuple[SharedTransition | Refinement, ...] = (*self.transitions, *self.refinements)
        own = {w for t in steps for w in t.effect.writes}
        if self.mutex is not None:
            own.add(self.mutex.variable)
        system = tuple(i for i in self.invariants
                       if all((sp == "S" and n not in own) or (sp == "I" and n != "state"
                                                                  and n not in writes)
                              for sp, n in i.expr.refs()))
        return (*self.machine.unbreakable(), *system)

    def broken_invariants(self, config: SystemConfig) -> tuple[SystemInvariant, ...]:
        if not self.invariants:
            return ()
        states = tuple(c.state for c in config.instances)
        views = tuple(self.machine.view(c) for c in config.instances)
        sv = self.shared_view(config)
        return tuple(i for i in self.invariants if not i.fn(states, views, sv))

    # -- the successor function ----------------------------------------------------
    def enabled(self, config: SystemConfig, local: Callable[[Config], tuple[Step, ...]] | None = None
                ) -> Iterator[SystemStep]:
        """Every step the configuration allows. ``local`` may memoise ``machine.enabled``."""
        steps_of = local or (lambda c: tuple(self.machine.enabled(c)))
        sv = self.shared_view(config)
        bound = {b.param: b.fn(sv) for b in self.bind}
        per: list[tuple[Step, ...]] = []
        for c in config.instances:
            per.append(tuple(s for s in steps_of(c) if _fits(s.params, bound)))
        for i, steps in enumerate(per):
            for s in steps:
                if s.transition.trigger in self.sync:
                    continue
                after = self._apply(config, ((i, s),), sv, s.transition.trigger, s.params)
                if after is not None:
                    yield SystemStep(s.transition.trigger, s.params, ((i, s),), None, after)
        yield from self._sync_steps(config, per, sv, bound)
        for t in self.transitions:
            for p in t.param_choices():
                if all(g.fn(sv, p) for g in t.guards):
                    shared = _replace(config.shared, self._vidx, t.effect(sv, p))
                    yield SystemStep(t.trigger, p, (), t,
                                     SystemConfig(config.instances, shared))

    def _sync_steps(self, config: SystemConfig, per: list[tuple[Step, ...]], sv: Vars,
                    bound: Mapping[str, Value]) -> Iterator[SystemStep]:
        for trigger in self.sync:
            for params, moves in self.sync_groups(
                    trigger, [[(i, s) for s in steps if s.transition.trigger == trigger]
                              for i, steps in enumerate(per)]):
                if any(self.held_back_any(c, trigger, params)
                       for i, c in enumerate(config.instances) if all(j != i for j, _ in moves)):
                    continue
                after = self._apply(config, moves, sv, trigger, params)
                if after is not None:
                    yield SystemStep(trigger, params, moves, None, after)

    def sync_groups(self, trigger: str, choices: list[list[tuple[int, Step]]]
                    ) -> list[tuple[Params, tuple[tuple[int, Step], ...]]]:
        """The sync steps of ``trigger`` from each instance's own steps of it (``choices``, in
        instance order): one per parameter value every concerned instance takes alike; for a
        ``per_instance`` trigger, one per combination of the instances' own choices, with the
        parameters named per instance (``q1.kind``)."""
        if trigger in self.per_instance:
            movers = [c for c in choices if c]
            if not movers:
                return []
            out: list[tuple[Params, tuple[tuple[int, Step], ...]]] = []
            for combo in itertools.product(*movers):
                params = MappingProxyType({f"q{i}.{k}": v for i, s in combo
                                           for k, v in s.params.items()})
                out.append((params, tuple(combo)))
            return out
        groups: dict[tuple[tuple[str, Value], ...], tuple[Params, list[tuple[int, Step]]]] = {}
        for c in choices:
            for i, s in c:
                groups.setdefault(tuple(sorted(s.params.items())), (s.params, []))[1].append((i, s))
        return [(params, tuple(moves))
                for _key, (params, moves) in sorted(groups.items(), key=lambda kv: repr(kv[0]))]

    def held_back_any(self, c: Config, trigger: str, params: Params) -> bool:
        """:meth:`held_back` for a sync step's parameters; a ``per_instance`` trigger's are the
        instance's own, so any choice of them that only a bound refuses holds it back."""
        if trigger not in self.per_instance:
            return self.held_back(c, trigger, params)
        return any(self.held_back(c, trigger, p) for t in self.machine.transitions
                   if t.trigger == trigger for p in t.param_choices())

    def held_back(self, c: Config, trigger: str, params: Params) -> bool:
        """True when only a model bound keeps ``trigger`` from concerning this instance."""
        v = self.machine.view(c)
        for t in self.machine.transitions_from(c.state):
            if t.trigger != trigger or {p.name for p in t.params} != set(params):
                continue
            if all(g.bound or g.fn(v, params) for g in t.guards) and any(g.bound for g in t.guards):
                return True
        return False

    def _apply(self, config: SystemConfig, moves: tuple[tuple[int, Step], ...], sv: Vars,
               trigger: str, params: Params) -> SystemConfig | None:
        ref = self._refine.get(trigger)
        shared = config.shared
        if self._lock is not None:
            locked = self.locked(config, moves, trigger)
            if locked is None:
                return None
            shared = locked
        if ref is not None:
            if not all(g.fn(sv, params) for g in ref.guards):
                return None
            # A refinement's effect is applied once per step, whatever the number of movers.
            shared = _replace(shared, self._vidx, ref.effect(sv, params))
        instances = list(config.instances)
        written: tuple[Value, ...] | None = None
        for i, s in moves:
            mine = tuple(s.after.values[k] for k in self._shared_idx)
            before = tuple(config.instances[i].values[k] for k in self._shared_idx)
            if mine != before:
                if written is not None and written != mine:
                    raise DeclarationError(
                        f"{self.name}: sync step {trigger!r} writes the shared variables "
                        f"{list(self.shared)} differently on two instances ({written} vs {mine}); "
                        "make the effects agree")
                written = mine
            instances[i] = s.after
        if written is not None:
            for j, c in enumerate(instances):
                values = list(c.values)
                for k, x in zip(self._shared_idx, written, strict=True):
                    values[k] = x
                instances[j] = Config(c.state, tuple(values))
        return SystemConfig(tuple(instances), shared)

    def locked(self, config: SystemConfig, moves: tuple[tuple[int, Step], ...],
               trigger: str) -> tuple[Value, ...] | None:
        """The system's variables after the mutex saw the step; None if it refuses it."""
        assert self.mutex is not None and self._lock is not None
        flag = self._lock[1]
        shared = config.shared
        if trigger in self.sync:  # validated not to take the lock; it may not move it either
            if any(config.instances[i].values[flag] != s.after.values[flag] for i, s in moves):
                raise DeclarationError(f"{self.name}: sync step {trigger!r} changes the mutex "
                                       f"flag {self.mutex.flag!r}; a lock moves one instance "
                                       "at a time")
            return shared
        (i, s), = moves
        return self.lock_after(shared, config.instances[i], s.after, trigger)

    def lock_after(self, shared: tuple[Value, ...], before: Config, after: Config,
                   trigger: str) -> tuple[Value, ...] | None:
        """The system's variables after one instance's own step from ``before`` to ``after``
        as the mutex sees it; None when the lock refuses the step."""
        assert self.mutex is not None and self._lock is not None
        var, flag = self._lock
        held = self.mutex.after(shared[var], before.values[flag], after.values[flag], trigger)
        return None if held is None else (*shared[:var], held, *shared[var + 1:])


def _fits(params: Params, bound: Mapping[str, Value]) -> bool:
    return all(not (name in params and params[name] != value) for name, value in bound.items())


def _replace(values: tuple[Value, ...], index: Mapping[str, int],
             updates: Mapping[str, Value]) -> tuple[Value, ...]:
    if not updates:
        return values
    out = list(values)
    for name, value in updates.items():
        out[index[name]] = value
    return tuple(out)



__all__ = ["System"]
