"""SPIN's findings on a system's Promela model (``_promela_system``) in our words: each run
replayed through ``System.enabled`` into our instance labels, and the comparison with our
search without symmetry reduction."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from settled.model import System, SystemConfig

from ._promela import ExportError, PromelaModel, SpinResult
from ._system import (
    SystemCounterexample,
    SystemFinding,
    SystemResult,
    SystemTraceStep,
    label,
)


# --------------------------------------------------------------------------
# SPIN's findings in our words
# --------------------------------------------------------------------------
def _matches(want: SystemTraceStep, got: SystemTraceStep) -> bool:
    # SPIN's option for a synchronised step is "all" whoever moves; ours names a lone mover.
    return (want.trigger, want.params) == (got.trigger, got.params) and (
        want.who == got.who or want.who == "all")


def replay_labels(system: System, steps: Sequence[SystemTraceStep]
                  ) -> tuple[tuple[SystemTraceStep, ...], tuple[SystemConfig, ...]]:
    """SPIN's run replayed through ``System.enabled``: our labels and configurations."""
    cfg = system.initial_config()
    configs = [cfg]
    out = []
    for n, want in enumerate(steps, 1):
        for step in system.enabled(cfg):
            got = label(step)
            if _matches(want, got):
                out.append(got)
                cfg = step.after
                configs.append(cfg)
                break
        else:
            raise ExportError(f"{system.name}: SPIN's step {n} ({want.text()}) is not a step of "
                              "the system here; the export and the model disagree")
    return tuple(out), tuple(configs)


_KIND = {"system_domain": "domain"}  # our explorer's name for a check


def system_findings(system: System, model: PromelaModel, result: SpinResult
                    ) -> list[SystemFinding]:
    """SPIN's findings as our :class:`SystemFinding`, each with its shortest run."""
    m = system.machine
    out = []
    for f in result.findings:
        c = f.check
        steps, configs = replay_labels(system, f.steps)
        if c.kind == "invariant":
            inv = m.invariants[c.index]
            rules, text = inv.rules, inv.text
        elif c.kind == "system_invariant":
            sinv = system.invariants[c.index]
            rules, text = sinv.rules, sinv.text
        elif c.kind == "step_property":
            sp = m.step_properties[c.index]
            rules, text = sp.rules, sp.text
        elif c.kind == "deadlock":
            rules, text = (), ("a configuration where not every instance is terminal and no "
                               "step is enabled")
        else:
            rules, text = (), f"{c.name} outside its declared domain"
        name = "deadlock" if c.kind == "deadlock" else c.name
        out.append(SystemFinding(_KIND.get(c.kind, c.kind), name, text, tuple(rules),
                                 SystemCounterexample(system, steps, configs)))
    return out


# --------------------------------------------------------------------------
# The two engines side by side
# --------------------------------------------------------------------------
SAFETY = ("invariant", "system_invariant", "step_property", "domain", "deadlock")


def compare_system(ours: SystemResult, spin: SpinResult) -> Any:
    """Our unreduced count (``ours`` explored without symmetry), our steps and the findings
    of the checks both engines make, against SPIN's."""
    from ._promela import Agreement

    if ours.symmetry:
        raise ValueError("compare_system: explore without symmetry (SPIN counts every "
                         "concrete configuration)")
    ours_found = {(f.kind, f.name) for f in ours.findings if f.kind in SAFETY}
    spin_found = {(_KIND.get(f.check.kind, f.check.kind),
                   "deadlock" if f.check.kind == "deadlock" else f.check.name)
                  for f in spin.findings}
    return Agreement(spin.model,
                     {"states": ours.states_unreduced, "steps": ours.edges,
                      "findings": [list(f) for f in sorted(ours_found)]},
                     {"states": spin.states, "steps": spin.steps,
                      "findings": [list(f) for f in sorted(spin_found)]})


def labels_of(model: PromelaModel) -> Iterator[str]:
    for k, step in enumerate(model.labels):
        yield f"{k}: {step.text()}"
