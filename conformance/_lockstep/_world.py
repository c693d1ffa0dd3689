"""The model side of a run: a declared system, or a single machine as a system of
independent instances.

Every run steps a :class:`~settled.model._system.System`. A machine's campaign wraps the
machine in one (:func:`world`): no shared or own variables, no synchronised steps, no
bindings, no lock; each step then moves one instance exactly as ``Protocol.fire`` says, and
the kit takes that shortcut. :class:`Plans` holds what a campaign works out once per
configuration and reuses in every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from settled.model import Config, IllegalTransition, Protocol, System, SystemConfig, SystemStep, Value

from ._action import SYSTEM, Action, transition_label

_WORLDS: dict[tuple[int, int], System] = {}
_DRAWN_LISTS = 50_000  # draw lists a campaign keeps (one per tuple of configurations seen)


def world(protocol: Protocol, instances: int) -> System:
    """``instances`` independent instances of ``protocol``, as a system (one per pair)."""
    key = (id(protocol), instances)
    found = _WORLDS.get(key)
    if found is None or found.machine is not protocol:
        found = _WORLDS[key] = System(
            protocol.name, f"{instances} independent instance(s) of {protocol.name}",
            protocol, instances)
    return found


def is_machine(system: System) -> bool:
    """Whether ``system`` is a single machine's campaign (:func:`world`), not a declared one."""
    return _WORLDS.get((id(system.machine), system.instances)) is system


def action_of(step: SystemStep) -> Action:
    """The run's step for a model step."""
    if step.shared is not None:
        return Action(SYSTEM, step.trigger, step.params, who="system")
    if step.instance is not None:
        return Action(step.instance, step.trigger, step.params)
    return Action(SYSTEM, step.trigger, step.params, who="all")


class Plans:
    """What a campaign works out once per configuration and reuses in every run: the
    enabled steps, the weighted options, the forbidden choices, whether invariants hold."""

    def __init__(self, system: System, forbidden: frozenset[str]) -> None:
        self.system, self.protocol, self.forbidden = system, system.machine, forbidden
        self.independent = system.independent
        self.steps: dict[SystemConfig, dict[Any, tuple[Action, SystemStep]]] = {}
        self.options: dict[Any, list[tuple[int, int, Action]]] = {}
        self.forbidden_lists: dict[Any, list[Action]] = {}
        self.probes: dict[tuple[SystemConfig, int], list[Action]] = {}
        self.broken: dict[Config, tuple[str, ...]] = {}
        self.broken_system: dict[SystemConfig, tuple[str, ...]] = {}
        self.expected: dict[tuple[Config, frozenset[str]], dict[str, Value]] = {}
        self.grouped: dict[int, tuple[list[Action], list[list[Action]]]] = {}
        # The whole draw list per configuration (bounded: emptied when full).
        self.drawn: dict[SystemConfig, list[Action]] = {}
        # The quiescence phase's bounds per configuration, and its step filter.
        self.bounds: dict[Config, Any] = {}
        self.required: Any = None

    def enabled(self, config: SystemConfig) -> dict[Any, tuple[Action, SystemStep]]:
        """Every step the system allows in ``config``, by :meth:`Action.key`."""
        got = self.steps.get(config)
        if got is None:
            if len(self.steps) >= _DRAWN_LISTS:
                self.steps.clear()
            got = {}
            for s in self.system.enabled(config):
                a = action_of(s)
                got[a.key()] = (a, s)
            self.steps[config] = got
        return got

    def step(self, config: SystemConfig, action: Action) -> SystemStep | None:
        """The model's step for ``action`` (not a refusal) in ``config``, or None."""
        i = action.instance
        if self.independent and i != SYSTEM:
            if not 0 <= i < len(config.instances):
                return None
            try:
                s = self.protocol.fire(config.instances[i], action.trigger, action.params)
            except IllegalTransition:
                return None
            after = SystemConfig((*config.instances[:i], s.after, *config.instances[i + 1:]),
                                 config.shared)
            return SystemStep(action.trigger, s.params, ((i, s),), None, after)
        found = self.enabled(config).get(action.key())
        return None if found is None else found[1]

    def allows(self, config: SystemConfig, action: Action) -> bool:
        """Whether the model takes ``action`` (as a step, not a refusal) in ``config``."""
        i = action.instance
        if self.independent and i != SYSTEM:
            return 0 <= i < len(config.instances) and any(
                s.transition.trigger == action.trigger and dict(s.params) == dict(action.params)
                for s in self.protocol.enabled(config.instances[i]))
        return action.key() in self.enabled(config)

    def bound_values(self, config: SystemConfig) -> dict[str, Value]:
        """The value the system's state gives each parameter it binds."""
        if not self.system.bind:
            return {}
        sv = self.system.shared_view(config)
        return {b.param: b.fn(sv) for b in self.system.bind}

    def misquotes(self, config: SystemConfig, action: Action) -> str | None:
        """Why a refusal quotes a bound parameter the system's state decides otherwise."""
        for b in self.system.bind:
            if b.param in action.params:
                value = b.fn(self.system.shared_view(config))
                if action.params[b.param] != value:
                    return f"{action.text()}: {b.param} is {value!r} here ({b.text})"
        return None

    def forbidden_by_trigger(self, choices: list[Action]) -> list[list[Action]]:
        """``choices`` grouped by trigger: the system's bound probes first, then worker
        steps (worked out once per list)."""
        from ._action import WORKER_FIRST

        got = self.grouped.get(id(choices))
        if got is None or got[0] is not choices:
            groups: dict[tuple[bool, str], list[Action]] = {}
            for a in choices:
                groups.setdefault((a.bound, a.trigger), []).append(a)
            order = sorted(groups, key=lambda bt: (not bt[0], bt[1] not in WORKER_FIRST, bt[1]))
            got = self.grouped[id(choices)] = (choices, [groups[k] for k in order])
        return got[1]

    def labels(self, step: SystemStep) -> list[str]:
        """The coverage labels a step fires: each moved instance's transition, and the
        system's own step."""
        out = [transition_label(s.transition) for _, s in step.moves]
        if step.shared is not None:
            out.append(f"system {step.trigger}")
        return out


_PLANS: dict[tuple[int, frozenset[str]], Plans] = {}


def plans_for(system: System, forbidden: frozenset[str] | None = None) -> Plans:
    """The campaign's :class:`Plans` (one per system object and refusable set)."""
    chosen = system.machine.refusable if forbidden is None else frozenset(forbidden)
    key = (id(system), chosen)
    found = _PLANS.get(key)
    if found is None or found.system is not system:
        found = _PLANS[key] = Plans(system, chosen)
    return found


def history(system: System, steps: Sequence[Action],
            forbidden: frozenset[str] | None = None) -> list[SystemConfig] | None:
    """The model's configurations before and after each step, or None when the model
    rejects the list (a step it does not enable, a refusal of something it allows, or a
    refusal quoting a value the system's state decides otherwise)."""
    plans = plans_for(system, forbidden)
    config = system.initial_config()
    out = [config]
    for a in steps:
        if a.instance != SYSTEM and not 0 <= a.instance < system.instances:
            return None
        if a.forbidden:
            if plans.allows(config, a) or plans.misquotes(config, a) is not None:
                return None
        else:
            step = plans.step(config, a)
            if step is None:
                return None
            config = step.after
        out.append(config)
    return out
