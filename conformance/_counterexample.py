"""Counterexamples: the numbered steps and ITF traces the explorer reports, parsed back and
replayed through the table.

A :class:`TraceStep` is one step of one instance (``q<i> trigger k=v``) or of every instance at
once (``all trigger``); a :class:`Counterexample` is the shortest run to a :class:`Finding`,
written as numbered steps and as ITF (``docs/ITF.md``). :func:`parse_steps` reads the numbered
form back and :func:`replay` fires it through ``Protocol.fire``, failing on the first step the
table does not allow."""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from settled.model import Config, IllegalTransition, Protocol, Value

from . import _itf

INVARIANT = "invariant"
STEP_PROPERTY = "step_property"
DOMAIN = "domain"
DEADLOCK = "deadlock"
TRAP = "trap"
UNREACHED = "unreached_state"
UNFIRED = "unfired_transition"

GENERATOR = "settled explore"


# --------------------------------------------------------------------------
# Steps, counterexamples, findings
# --------------------------------------------------------------------------
def _fmt(value: Value) -> str:
    return value if isinstance(value, str) else repr(value).replace(" ", "")


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One step of a global run: ``instance`` fires ``trigger`` with ``params``.

    ``instance`` is ``None`` for a step written ``all``: it fires on every
    instance where it is enabled (see :func:`replay`).
    """

    instance: int | None
    trigger: str
    params: tuple[tuple[str, Value], ...] = ()

    @property
    def params_dict(self) -> dict[str, Value]:
        return dict(self.params)

    def text(self) -> str:
        who = "all" if self.instance is None else f"q{self.instance}"
        return " ".join([who, self.trigger, *(f"{k}={_fmt(v)}" for k, v in self.params)])

    def to_json(self) -> dict[str, Any]:
        return {"instance": self.instance, "trigger": self.trigger,
                "params": {k: to_plain(v) for k, v in self.params}}


@dataclass(frozen=True)
class Counterexample:
    """A shortest run from the initial state: ``len(configs) == len(steps) + 1``."""

    protocol: Protocol
    steps: tuple[TraceStep, ...]
    configs: tuple[tuple[Config, ...], ...]
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def instances(self) -> int:
        return len(self.configs[0])

    def __len__(self) -> int:
        return len(self.steps)

    def steps_text(self) -> str:
        """The numbered step list; :func:`replay` accepts it back as it is."""
        return "\n".join(f"{n}. {s.text()}" for n, s in enumerate(self.steps, 1))

    def var_names(self) -> list[str]:
        return [f"q{i}.{name}" for i in range(self.instances)
                for name in ("state", *self.protocol.variable_names)]

    def state_values(self, configs: tuple[Config, ...]) -> dict[str, Value]:
        out: dict[str, Value] = {}
        for i, c in enumerate(configs):
            out[f"q{i}.state"] = c.state
            out.update({f"q{i}.{k}": v for k, v in self.protocol.view(c).items()})
        return out

    def to_itf(self) -> dict[str, Any]:
        actions = [(s.trigger, {**s.params_dict, "instance": s.instance}) for s in self.steps]
        names = sorted({p.name for t in self.protocol.transitions for p in t.params} | {"instance"})
        meta = {"status": "violation", "generator": GENERATOR, "model": self.protocol.name,
                **self.meta}
        return _itf.itf_trace(self.protocol.name, self.var_names(),
                              [self.state_values(c) for c in self.configs], actions, meta,
                              nondet_names=names)

    def to_json(self) -> dict[str, Any]:
        return {"length": len(self.steps), "steps": [s.to_json() for s in self.steps],
                "steps_text": self.steps_text(),
                "states": [{f"q{i}": {"state": c.state, **{k: to_plain(v) for k, v in
                                                          self.protocol.view(c).items()}}
                            for i, c in enumerate(g)} for g in self.configs]}


@dataclass(frozen=True)
class Found:
    """What every finding of an explorer (of a machine or of a system) says: its kind, the
    property or step it is about, what it means, and the rules it breaks."""

    kind: str
    name: str
    text: str
    rules: tuple[str, ...]

    def head_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "text": self.text, "rules": list(self.rules)}

    @property
    def file_name(self) -> str:
        return f"{self.kind}-{re.sub(r'[^A-Za-z0-9_.+-]+', '_', self.name)}.itf.json"


@dataclass(frozen=True)
class Finding(Found):
    """One thing the explorer found; ``counterexample`` is the shortest run to it, if any."""

    instance: int | None = None
    counterexample: Counterexample | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {**self.head_json(), "instance": self.instance,
                               **{k: to_plain(v) for k, v in self.detail.items()}}
        if self.counterexample is not None:
            out.update(self.counterexample.to_json())
        else:
            out.update({"length": None, "steps": [], "steps_text": "", "states": []})
        return out


def to_plain(x: Any) -> Any:
    """A JSON-ready copy: tuples and sets become lists, enums their values."""
    if isinstance(x, enum.Enum):
        return to_plain(x.value)
    if isinstance(x, (bool, int, float, str)) or x is None:
        return x
    if isinstance(x, (tuple, list)):
        return [to_plain(e) for e in x]
    if isinstance(x, (set, frozenset)):
        return sorted((to_plain(e) for e in x), key=lambda e: json.dumps(e, sort_keys=True))
    if isinstance(x, Mapping):
        return {str(k): to_plain(v) for k, v in x.items()}
    return repr(x)



# --------------------------------------------------------------------------
# Replay
# --------------------------------------------------------------------------
_LINE = re.compile(r"^\s*(?:\d+\.\s+)?(q(\d+)|all)\s+(\S+)((?:\s+\S+=\S+)*)\s*$")


def parse_steps(protocol: Protocol, text: str) -> list[TraceStep]:
    """Read a step list written by :meth:`Counterexample.steps_text` back."""
    steps = []
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _LINE.match(line)
        if m is None:
            raise ValueError(f"cannot read step {line!r}; expected e.g. '5. q0 claim worker=0'")
        instance = None if m.group(1) == "all" else int(m.group(2))
        trigger = m.group(3)
        params = []
        for token in m.group(4).split():
            name, _, shown = token.partition("=")
            params.append((name, _param_value(protocol, trigger, name, shown)))
        steps.append(TraceStep(instance, trigger, tuple(params)))
    return steps


def _param_value(protocol: Protocol, trigger: str, name: str, shown: str) -> Value:
    for t in protocol.transitions:
        if t.trigger != trigger:
            continue
        for prm in t.params:
            if prm.name == name:
                for value in prm.domain:
                    if _fmt(value) == shown:
                        return value
    raise ValueError(f"{protocol.name}: {trigger} has no parameter {name} with a value shown as {shown!r}")


def replay(protocol: Protocol, steps: Sequence[TraceStep] | str, *,
           instances: int = 1) -> list[tuple[Config, ...]]:
    """Run ``steps`` through ``Protocol.fire`` from the initial state; the states along.

    A step with ``instance=None`` fires on every
    instance where it is enabled and must be enabled on at least one.
    :class:`IllegalTransition` if a step is not allowed.
    """
    if isinstance(steps, str):
        steps = parse_steps(protocol, steps)
    state = tuple(protocol.initial_config() for _ in range(instances))
    out = [state]
    for step in steps:
        params = MappingProxyType(step.params_dict)
        if step.instance is None:
            configs = list(state)
            fired = False
            for i, c in enumerate(state):
                try:
                    configs[i] = protocol.fire(c, step.trigger, params).after
                    fired = True
                except IllegalTransition:
                    pass
            if not fired:
                protocol.fire(state[0], step.trigger, params)  # raises with the diagnosis
            state = tuple(configs)
        else:
            configs = list(state)
            configs[step.instance] = protocol.fire(state[step.instance], step.trigger, params).after
            state = tuple(configs)
        out.append(state)
    return out
