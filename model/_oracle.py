"""The executable oracle: a ``transitions.Machine`` fed from a declared table.

Guards become the machine's ``conditions`` and effects its ``before``
callbacks; nothing about the protocol is written here a second time. The
machine is built with ``auto_transitions=False`` (otherwise it would add a
``to_<state>`` jump for every state and accept anything) and transitions are
added in declaration order, which is the order the machine tries them in.

A trigger that is not allowed raises :class:`IllegalTransition` with the
failed guards and the triggers that *are* enabled, and leaves the oracle
exactly as it was: the machine only moves after a condition set passed, and
the effect is computed before anything is assigned.
"""

from __future__ import annotations

from typing import Any

from transitions import EventData, Machine, MachineError

from ._core import Config, IllegalTransition, Protocol
from ._parts import Params, Transition, Value


class _Model:
    """The object the ``transitions`` machine drives: a state and the variables."""

    state: str

    def __init__(self, values: dict[str, Value]) -> None:
        self.values = values


class Oracle:
    """One instance of a declared machine, stepped through ``transitions``."""

    def __init__(self, protocol: Protocol, config: Config | None = None) -> None:
        self.protocol = protocol
        start = config or protocol.initial_config()
        self._model = _Model(dict(protocol.view(start)))
        self._machine = Machine(
            model=self._model, states=list(protocol.state_names), initial=start.state,
            auto_transitions=False, send_event=True, ignore_invalid_triggers=False)
        for state in protocol.state_names:
            for t in protocol.transitions_from(state):
                self._machine.add_transition(
                    t.trigger, state, t.dest, conditions=[self._condition(t)],
                    before=[self._effect(t)])

    @property
    def config(self) -> Config:
        values = tuple(self._model.values[n] for n in self.protocol.variable_names)
        return Config(self._model.state, values)

    def reset(self, config: Config) -> None:
        """Put the oracle in ``config`` (reusing one machine is far cheaper than building one)."""
        self._machine.set_state(config.state, model=self._model)
        self._model.values = dict(self.protocol.view(config))

    def try_fire(self, trigger: str, **params: Value) -> Config | None:
        """Take ``trigger`` if allowed; None (and no change) if not, without a diagnosis."""
        try:
            moved = self._model.trigger(trigger, **params)  # type: ignore[attr-defined]
        except (MachineError, AttributeError):
            return None
        return self.config if moved else None

    def fire(self, trigger: str, **params: Value) -> Config:
        """Take ``trigger`` with ``params``; :class:`IllegalTransition` if not allowed."""
        before = self.config
        try:
            moved = self._model.trigger(trigger, **params)  # type: ignore[attr-defined]
        except MachineError:
            moved = False
        except AttributeError:
            moved = False
        if not moved:
            self.protocol.fire(before, trigger, params)  # raises with the diagnosis
            raise IllegalTransition(  # the table allows it but the machine did not: a bug here
                f"{self.protocol.name}: oracle refused {trigger} that the table allows",
                trigger=trigger, state=before.state)
        return self.config

    def _condition(self, t: Transition) -> Any:
        names = {p.name for p in t.params}

        def condition(event: EventData) -> bool:
            params: Params = event.kwargs
            if set(params) != names or any(params[p.name] not in p.domain for p in t.params):
                return False
            return all(g(self._model.values, params) for g in t.guards)
        return condition

    def _effect(self, t: Transition) -> Any:
        def effect(event: EventData) -> None:
            self._model.values.update(t.effect(dict(self._model.values), event.kwargs))
        return effect
