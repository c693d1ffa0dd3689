"""Traces written by the model itself: random walks emitted in the trace format.

The model is a perfectly conforming implementation of itself, so a walk's
log must always check clean; a walk with one event altered must not. Tests
use these to exercise the checker, and the benchmark uses them to measure it
on a million events without needing a million real transactions.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

from settled.conformance._trace import SCHEMA_ID
from settled.model import Config, Protocol, Step


def event_of(p: Protocol, instance: str, seq: int, before: Config, step: Step) -> dict[str, Any]:
    params = {k: (f"w{v}" if k == "worker" else v) for k, v in step.params.items()}
    values = p.view(step.after)
    logged = {v.name: values[v.name] for v in p.variables if v.observable}
    return {"schema": SCHEMA_ID, "machine": p.name, "instance": instance, "seq": seq,
            "trigger": step.transition.observable, "params": params, "from": str(before.state),
            "to": str(step.after.state), "vars": logged}


def walk(p: Protocol, instance: str, rng: random.Random, max_steps: int = 60) -> Iterator[dict[str, Any]]:
    """One random run of an instance, as the events its implementation would log."""
    config, seq = p.initial_config(), 0
    for _ in range(max_steps):
        steps = list(p.enabled(config))
        if not steps:
            return
        # Settling early (a failed check, an invalidated draft) makes a short,
        # dull run; weigh the steps that keep the query alive more.
        weights = [1 if s.after.state in p.terminal_states else 6 for s in steps]
        step = rng.choices(steps, weights)[0]
        if step.transition.observable is not None:
            seq += 1
            yield event_of(p, instance, seq, config, step)
        config = step.after


def trace_lines(p: Protocol, instances: int, seed: int = 0, max_steps: int = 60) -> Iterator[str]:
    rng = random.Random(seed)
    for i in range(instances):
        for event in walk(p, f"{p.name}-{i}", rng, max_steps):
            yield json.dumps(event, separators=(",", ":"))
