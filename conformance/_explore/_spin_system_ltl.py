"""A system's progress properties on SPIN: each ``premise ~> goal`` of
``settled.model.progress.liveness_of(system)`` as LTL under the system's declared fairness,
pan's acceptance-cycle search, and a violation mapped back to a lasso in our instance labels
(numbered steps and ITF, as our fair-cycle check gives one).

The model is the system's export (``_promela_system``) instrumented as a machine's is
(``_spin_ltl.instrument``): its safety checks dropped, every option recording the fairness
groups of its step, the ``timeout`` option replaced by a stutter, ``en_<i>`` ("some option
of group i is enabled") and the weak monitor recomputed in ``after_step()``, which every
option and the initial ``d_step`` end with. An option's groups are those of the step our
explorer's edge mask classifies: a local step's machine label, a synchronised step's first
mover (every label it may take must agree, else the export refuses), the system's own step.

Instances: a system's predicates are quantified over its instances (``some`` instance in
the premise, ``every`` instance in the goal, ``model._liveness.Pred``), so one formula per
property covers every instance: the premise is the disjunction (or conjunction) of the
instance predicate over ``q0 .. q<n-1>``, each instance's variables renamed as the export
renames them. No instance is left out and no symmetry argument is needed.

Fairness: the declaration's weak and strong fairness is over groups of steps (actors,
triggers, parameters), not over processes. The export is one process (so every stored
state is one of our configurations), and pan's ``-f`` (weak fairness among processes)
would constrain nothing in it: no declared group is expressible as ``-f``. Every group is
in the model and the formula: weak groups as the ``[]<>fair`` monitor, strong ones as
``(<>[]!en_i || []<>tk_i)``, finite ones as ``<>[]!tf``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from settled.model import System

from ._promela import ExportError, PromelaModel
from ._spin_ltl import (
    LTL_NOT_CHECKED,
    LTL_VIOLATED,
    ProgressAgreement,
    SpinLiveness,
    _lit,
    instrument,
    pred_parts,
    run_pan_ltl,
)


def _pred(model: PromelaModel, system: System, rename: Callable[[str, int], str],
          pred: Any) -> str:
    """A system's predicate: the instance part over every instance (``some``: any of them,
    ``every``: all), and the comparisons of the system's own variables."""
    from ._promela import _kind

    kinds = {v.name: _kind(v.initial) for v in system.machine.variables}
    one = pred_parts(model.codes, pred, kinds)
    parts = ["started"]
    if one:
        inst = "(" + " && ".join(one) + ")"
        joiner = " || " if pred.instances == "some" else " && "
        parts.append("(" + joiner.join(rename(inst, i) for i in range(system.instances)) + ")")
    parts += [f"(v_{c.variable} {c.op} {_lit(model.codes, c.value)})" for c in pred.system]
    return "(" + " && ".join(parts) + ")"


def render_system_ltl(model: PromelaModel, system: System, liveness: Any, prop: Any) -> str:
    """``model`` (``render_system(system)``) with ``prop`` as LTL under ``liveness``'s
    fairness (see the module's docstring)."""
    from ._promela_system import _SystemRender

    if len(model.steps_of) != len(model.labels) or len(model.conditions) != len(model.labels):
        raise ExportError(f"{system.name}: the model carries no fairness keys or conditions "
                          "for its options (render it with render_system)")
    rename = _SystemRender(system).rename

    def member(k: int, f: Any) -> bool:
        got = {bool(f.steps.matches(a, t, p)) for a, t, p in model.steps_of[k]}
        if len(got) != 1:
            raise ExportError(f"option {k} ({model.labels[k].text()}): the steps it may be "
                              f"differ on the fairness group {f.name}")
        return got.pop()

    return instrument(model, liveness, member, _pred(model, system, rename, prop.premise),
                      _pred(model, system, rename, prop.goal), inline=True)


def run_system_ltl(model: PromelaModel, system: System, liveness: Any, prop: Any,
                   **pan: Any) -> SpinLiveness:
    """pan's acceptance-cycle search of one progress property of ``system``; a property the
    renderer cannot write is ``not_checked`` (``_spin_ltl.run_pan_ltl`` for the verdicts)."""
    try:
        text = render_system_ltl(model, system, liveness, prop)
    except ExportError as e:
        return SpinLiveness(prop.name, LTL_NOT_CHECKED, why=f"not rendered in Promela: {e}")
    return run_pan_ltl(text, prop.name, model.labels, **pan)


def system_lasso(system: System, spin: SpinLiveness) -> Any:
    """SPIN's lasso replayed through ``System.enabled``: a ``Lasso`` (``_liveness``) in our
    instance labels, printed as numbered steps and written as ITF with ``loop`` set.
    ExportError when a step is not ours or the cycle does not return to its start."""
    from settled.conformance._liveness import Lasso

    from ._promela_system_findings import replay_labels
    from ._system import SystemCounterexample

    pre = [s for s in spin.prefix if s is not None]
    cyc = [s for s in spin.cycle if s is not None]  # None: a stutter, nothing moves
    steps, configs = replay_labels(system, [*pre, *cyc])
    loop = len(pre)
    if configs[-1] != configs[loop]:
        raise ExportError(f"{system.name}: SPIN's cycle for {spin.name} does not return to "
                          "the configuration it starts from, replayed here")
    shown = SystemCounterexample(system, (), ())
    states = [shown._values(c) for c in configs]
    if cyc:
        states.pop()  # the cycle's last step returns to the state at ``loop``
    names = sorted([*system.variable_names,
                    *(f"q{i}.{n}" for i in range(system.instances)
                      for n in ("state", *system.machine.variable_names))])
    actions = tuple((s.trigger, {**dict(s.params), "who": s.who}) for s in steps)
    meta = {"property": spin.name, "engine": "spin", "instances": system.instances}
    return Lasso(system.name, steps[:loop], steps[loop:], tuple(states), actions, loop, names,
                 meta)


@dataclass(frozen=True)
class SystemProgress(ProgressAgreement):
    """One progress property of a system: our verdict beside SPIN's, with SPIN's lasso in
    our instance labels when it found one."""

    lasso: Any = None

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(),
                "spin_lasso": self.lasso.to_json() if self.lasso is not None else None}


def compare_system_progress(model: PromelaModel, system: System, ours: Any, liveness: Any
                            ) -> list[SystemProgress]:
    """Every progress property of ``liveness``: ``ours`` (a ``LivenessResult`` of the same
    system and liveness) beside SPIN's verdict, one pan per property
    (:func:`run_system_ltl`)."""
    verdicts = {v.prop.name: v.verdict for v in ours.verdicts}
    out = []
    for p in liveness.progress:
        spin = run_system_ltl(model, system, liveness, p)
        lasso = system_lasso(system, spin) if spin.verdict == LTL_VIOLATED else None
        out.append(SystemProgress(p.name, verdicts.get(p.name, LTL_NOT_CHECKED), spin, lasso))
    return out
