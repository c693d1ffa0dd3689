"""Saved counterexamples: read a step list or an ITF trace written by the kit, and run it
again on a fresh implementation (``settled replay``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from settled.conformance._lockstep._shrink import Invalid
from settled.model import Protocol

from . import _itf
from ._adapter import AdapterError
from ._lockstep import STEPS_SCHEMA, Action, replay, world
from ._probe import AdapterFactory, probe


@dataclass(frozen=True)
class Counterexample:
    """A saved lockstep run: which machine, how many instances, its steps."""

    machine: str
    instances: int
    steps: tuple[Action, ...]
    divergence: str | None = None


class CounterexampleError(ValueError):
    """A file that is not a readable lockstep counterexample; the message says why."""


def load_counterexample(path: Path | str) -> Counterexample:
    """Read a step list (``*.steps.json``) or an ITF trace (``*.itf.json``) written by the kit."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CounterexampleError(f"cannot read {p}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CounterexampleError(f"{p} is not JSON: {exc}") from None
    if not isinstance(doc, Mapping):
        raise CounterexampleError(f"{p} holds a {type(doc).__name__}, not a counterexample")
    try:
        if doc.get("schema") == STEPS_SCHEMA:
            return _from_steps(doc)
        if "states" in doc and "vars" in doc:
            return _from_itf(doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise CounterexampleError(f"{p}: malformed counterexample ({type(exc).__name__}: "
                                  f"{exc})") from None
    raise CounterexampleError(f"{p} is neither a step list ({STEPS_SCHEMA}) nor an ITF trace")


def _from_steps(doc: Mapping[str, Any]) -> Counterexample:
    steps = tuple(Action(int(s["instance"]), str(s["trigger"]), dict(s.get("params", {})),
                         bool(s.get("refused", False))) for s in doc["steps"])
    return Counterexample(str(doc["machine"]), int(doc["instances"]), steps,
                          doc.get("divergence"))


def _from_itf(doc: Mapping[str, Any]) -> Counterexample:
    trace = _itf.read_itf(doc)
    meta = trace["#meta"]
    machine = str(meta.get("source"))
    instances = meta.get("instances")
    if instances is None:  # older files: count the q<i>.state variables
        instances = sum(1 for v in trace["vars"] if str(v).endswith(".state"))
    steps = []
    for state in trace["states"][1:]:
        picks = {k: _pick(v) for k, v in state[_itf.NONDET_PICKS].items()}
        picks = {k: v for k, v in picks.items() if v is not _NONE}
        instance = int(picks.pop("instance"))
        refused = bool(picks.pop("refused", False))
        params = {k: tuple(v) if isinstance(v, list) else v for k, v in picks.items()}
        steps.append(Action(instance, str(state[_itf.ACTION_TAKEN]), params, refused))
    return Counterexample(machine, int(instances), tuple(steps), meta.get("violated"))


_NONE = object()


def _pick(v: Any) -> Any:
    if isinstance(v, Mapping) and v.get("tag") == "Some":
        return v["value"]
    if isinstance(v, Mapping) and v.get("tag") == "None":
        return _NONE
    return v


@dataclass(frozen=True)
class ReplayResult:
    """``divergence`` is the implementation's disagreement, None when the steps now agree."""

    counterexample: Counterexample
    divergence: str | None
    adapter_error: str | None = None

    @property
    def exit_code(self) -> int:
        return 3 if self.adapter_error else 1 if self.divergence else 0

    def text(self) -> str:
        n = len(self.counterexample.steps)
        listing = "\n".join(f"  {k}. {a.text()}"
                            for k, a in enumerate(self.counterexample.steps, start=1))
        if self.adapter_error:
            return f"replay: ADAPTER ERROR: {self.adapter_error}"
        if self.divergence:
            return f"replay: STILL DIVERGES after {n} steps: {self.divergence}\n{listing}"
        return f"replay: the {n} steps now agree with the model (the divergence is gone)"

    def to_json(self) -> dict[str, Any]:
        return {"machine": self.counterexample.machine, "steps": len(self.counterexample.steps),
                "diverges": self.divergence is not None, "divergence": self.divergence,
                "adapter_error": self.adapter_error, "exit_code": self.exit_code}


def replay_counterexample(counterexample: Counterexample, adapter_factory: AdapterFactory,
                          machine: str | Protocol | None = None) -> ReplayResult:
    """Run the saved steps on a fresh implementation; whether it still diverges.

    Raises :class:`CounterexampleError` when the model itself does not accept
    the steps (a file from another model version, or edited by hand).
    """
    try:
        protocol, instances, _ = probe(adapter_factory, machine or counterexample.machine)
    except AdapterError as exc:
        return ReplayResult(counterexample, None, str(exc))
    if protocol.name != counterexample.machine:
        raise CounterexampleError(f"the counterexample is for {counterexample.machine!r}, the "
                                  f"adapter drives {protocol.name!r}")
    if instances < counterexample.instances:
        raise CounterexampleError(f"the counterexample uses {counterexample.instances} "
                                  f"instances; the adapter has {instances}")
    try:
        message = replay(world(protocol, instances), adapter_factory, protocol.refusable,
                         counterexample.steps)
    except Invalid as exc:
        raise CounterexampleError(f"the model does not accept these steps: {exc}") from None
    except AdapterError as exc:
        return ReplayResult(counterexample, None, str(exc))
    return ReplayResult(counterexample, message)
