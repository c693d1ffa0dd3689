"""What the system explorer reports: a finding, its shortest counterexample (as a numbered
step list and as ITF), the whole result, and :func:`replay_system`, which reads a step list
back (see ``_system.py``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from settled.conformance import _itf
from settled.conformance._counterexample import Found
from settled.model import System, SystemConfig, SystemStep, Value

GENERATOR = "settled explore"


@dataclass(frozen=True, slots=True)
class SystemTraceStep:
    who: str  # "q0", "all" (synchronised) or "system" (the system's own step)
    trigger: str
    params: tuple[tuple[str, Value], ...]

    def text(self) -> str:
        return " ".join([self.who, self.trigger, *(f"{k}={_fmt(v)}" for k, v in self.params)])

    def to_json(self) -> dict[str, Any]:
        return {"who": self.who, "trigger": self.trigger, "params": dict(self.params)}


def _fmt(value: Value) -> str:
    return value if isinstance(value, str) else repr(value).replace(" ", "")


def label(step: SystemStep) -> SystemTraceStep:
    if step.shared is not None:
        who = "system"
    elif step.instance is not None:
        who = f"q{step.instance}"
    else:
        who = "all"
    return SystemTraceStep(who, step.trigger, tuple(sorted(step.params.items())))


@dataclass(frozen=True)
class SystemCounterexample:
    system: System
    steps: tuple[SystemTraceStep, ...]
    configs: tuple[SystemConfig, ...]

    def __len__(self) -> int:
        return len(self.steps)

    def steps_text(self) -> str:
        return "\n".join(f"{n}. {s.text()}" for n, s in enumerate(self.steps, 1))

    def _values(self, c: SystemConfig) -> dict[str, Value]:
        out: dict[str, Value] = dict(self.system.shared_view(c))
        for i, x in enumerate(c.instances):
            out[f"q{i}.state"] = x.state
            out.update({f"q{i}.{k}": v for k, v in self.system.machine.view(x).items()})
        return out

    def to_itf(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        states = [self._values(c) for c in self.configs]
        names = sorted(states[0])
        actions = [(s.trigger, {**dict(s.params), "who": s.who}) for s in self.steps]
        return _itf.itf_trace(self.system.name, names, states, actions,
                              {"status": "violation", "generator": GENERATOR,
                               "model": self.system.name, **meta})

    def to_json(self) -> dict[str, Any]:
        return {"length": len(self.steps), "steps": [s.to_json() for s in self.steps],
                "steps_text": self.steps_text()}


@dataclass(frozen=True)
class SystemFinding(Found):
    counterexample: SystemCounterexample | None = None

    def to_json(self) -> dict[str, Any]:
        return {**self.head_json(), **(self.counterexample.to_json() if self.counterexample else
                                       {"length": None, "steps": [], "steps_text": ""})}


@dataclass
class SystemResult:
    system: str
    instances: int
    workers: int
    symmetry: bool
    states: int  # canonical representatives visited
    states_unreduced: int  # concrete configurations they stand for (orbit sizes, exact)
    edges: int  # steps taken from the visited representatives
    seconds: float
    complete: bool
    findings: list[SystemFinding] = field(default_factory=list)
    independent_product: bool = False
    # Properties no declared step can break: not passing, checked by lockstep only.
    lockstep_only: list[dict[str, Any]] = field(default_factory=list)
    # (space, keys, parent, succ_start, succ, edge masks, visited) when explored for liveness
    # or with keep_graph (masks empty then)
    graph: Any = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.complete and not self.findings

    @property
    def states_per_second(self) -> float:
        return self.states / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"model": self.system, "system": True, "instances": self.instances,
                "workers": self.workers, "symmetry_reduction": self.symmetry,
                "states": self.states, "states_unreduced": self.states_unreduced,
                "edges": self.edges, "seconds": round(self.seconds, 3),
                "states_per_second": round(self.states_per_second),
                "complete": self.complete, "ok": self.ok,
                "independent_product": self.independent_product,
                "findings": [f.to_json() for f in self.findings],
                "lockstep_only": self.lockstep_only}


_LINE = re.compile(r"^\s*(?:\d+\.\s*)?(?P<who>q\d+|all|system)\s+(?P<trigger>\S+)(?P<rest>.*)$")


def replay_system(system: System, text: str) -> list[SystemConfig]:
    """Replay a numbered step list (as ``steps_text`` prints it); a ValueError names the step
    that is not enabled."""
    cfg = system.initial_config()
    out = [cfg]
    for n, line in enumerate((x for x in text.splitlines() if x.strip()), 1):
        m = _LINE.match(line)
        if not m:
            raise ValueError(f"step {n}: cannot read {line!r}; expected 'q0 trigger k=v ...'")
        want = SystemTraceStep(m["who"], m["trigger"], tuple(sorted(
            (k, _parse(v)) for k, v in (kv.split("=", 1) for kv in m["rest"].split()))))
        for step in system.enabled(cfg):
            if label(step) == want:
                cfg = step.after
                out.append(cfg)
                break
        else:
            raise ValueError(f"step {n} ({line.strip()}) is not enabled here")
    return out


def _parse(x: str) -> Value:
    if x in ("True", "False"):
        return x == "True"
    if re.fullmatch(r"-?\d+", x):
        return int(x)
    return x
