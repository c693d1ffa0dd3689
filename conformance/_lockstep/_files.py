"""Counterexamples on disk: a failing run as an ITF trace and a step list that
``settled replay`` reads again."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from settled.model import Params, System, SystemConfig

from .. import _itf
from ._action import SYSTEM, Action
from ._world import is_machine, plans_for

STEPS_SCHEMA = "settled.lockstep-steps/1"
SYSTEM_STEPS_SCHEMA = "settled.system-lockstep-steps/1"


class CounterexampleWriteError(OSError):
    """A counterexample could not be written: its own error, never a pass."""


def counterexample_dir(out: Path | None = None) -> Path:
    """``out``, else $SETTLED_COUNTEREXAMPLES, else ``./settled-counterexamples``."""
    if out is not None:
        return Path(out)
    env = os.environ.get("SETTLED_COUNTEREXAMPLES")
    return Path(env) if env else Path.cwd() / "settled-counterexamples"


def safe_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def write_counterexample(system: System, name: str, message: str, steps: Sequence[Action],
                         history: Sequence[SystemConfig] | None, *,
                         out: Path | None = None) -> Path:
    """The minimised run on disk; returns the file ``settled replay`` is pointed at.

    A machine's campaign writes ``lockstep-NAME.itf.json`` (the model's configurations as
    an ITF trace) and ``lockstep-NAME.steps.json``; a declared system's writes
    ``system-lockstep-NAME.steps.json``. :class:`CounterexampleWriteError` if a file cannot
    be written.
    """
    directory = counterexample_dir(out)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not is_machine(system):
            path = directory / f"system-lockstep-{safe_name(name)}.steps.json"
            write_system_steps(path, system, message, steps)
            return path
        path = directory / f"lockstep-{safe_name(name)}.itf.json"
        _itf.write_itf(path, _itf_of(system, name, message, steps, history))
        steps_file(directory / f"lockstep-{safe_name(name)}.steps.json", system, steps, message)
    except OSError as exc:
        raise CounterexampleWriteError(
            f"cannot write the counterexample into {directory}: "
            f"{exc.strerror or exc}; choose a writable folder with --out") from exc
    return path


def _itf_of(system: System, name: str, message: str, steps: Sequence[Action],
            history: Sequence[SystemConfig] | None) -> dict[str, Any]:
    protocol = system.machine
    configs = list(history or [system.initial_config()])
    if len(configs) == len(steps) and steps and not steps[-1].forbidden:
        # The last step diverged (the implementation raised or refused) before the runner
        # recorded it: the model's side of that step still belongs in the trace.
        step = plans_for(system).step(configs[-1], steps[-1])
        if step is not None:
            configs.append(step.after)
    elif len(configs) == len(steps) and steps:
        configs.append(configs[-1])
    states: list[dict[str, Any]] = []
    for recorded in configs:
        state: dict[str, Any] = {}
        for i, c in enumerate(recorded.instances):
            for k, v in {"state": str(c.state), **protocol.view(c)}.items():
                state[f"q{i}.{k}"] = v
        states.append(state)
    actions = [(a.trigger, {"instance": a.instance, "refused": a.forbidden, **a.params})
               for a in steps][: len(states) - 1]
    meta = {"status": "violation", "violated": message, "generator": f"settled lockstep {name}",
            "instances": system.instances}
    return _itf.itf_trace(protocol.name, sorted(states[0]), states[: len(actions) + 1], actions,
                          meta)


def steps_file(path: Path, system: System, steps: Sequence[Action], message: str) -> None:
    """A machine's counterexample as a step list (``settled.lockstep-steps/1``)."""
    doc = {"schema": STEPS_SCHEMA, "machine": system.machine.name,
           "instances": system.instances, "divergence": message,
           "steps": [{"instance": a.instance, "trigger": a.trigger, "params": dict(a.params),
                      "refused": a.forbidden} for a in steps]}
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def write_system_steps(path: Path, system: System, message: str,
                       steps: Sequence[Action]) -> None:
    """A system's counterexample as ``settled.system-lockstep-steps/1``."""
    doc = {"schema": SYSTEM_STEPS_SCHEMA, "system": system.name, "instances": system.instances,
           "divergence": message,
           "steps": [{"who": a.who, "trigger": a.trigger, "params": dict(a.params),
                      "refused": a.forbidden} for a in steps]}
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def write_steps(system: System, name: str, message: str, steps: Sequence[Action],
                out: Path | None = None) -> Path:
    """A system run as ``system-lockstep-NAME.steps.json`` in ``out``; returns its path."""
    directory = counterexample_dir(out)
    path = directory / f"system-lockstep-{safe_name(name)}.steps.json"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_system_steps(path, system, message, steps)
    except OSError as exc:
        raise CounterexampleWriteError(
            f"cannot write the counterexample into {directory}: {exc.strerror or exc}; choose a "
            "writable folder with --out") from exc
    return path


def load_steps(path: Path | str) -> tuple[str, list[Action]]:
    """(system name, steps) of a file :func:`write_steps` wrote."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    if doc.get("schema") != SYSTEM_STEPS_SCHEMA:
        raise ValueError(f"{path} is not a {SYSTEM_STEPS_SCHEMA} file")
    steps = []
    for s in doc["steps"]:
        who = str(s["who"])
        instance = int(who[1:]) if who.startswith("q") else SYSTEM
        params: Params = {k: tuple(v) if isinstance(v, list) else v
                          for k, v in s["params"].items()}
        steps.append(Action(instance, str(s["trigger"]), params,
                            bool(s.get("refused", False)), who=who))
    return str(doc["system"]), steps
