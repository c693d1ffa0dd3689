"""The public face of the conformance kit: one runner, one report, one pytest line.

``lockstep(factory, machine)`` runs a whole campaign (the directed coverage
tour, then Hypothesis's random runs) against the implementation behind
``factory()`` and returns a :class:`Report`. ``lockstep_case`` wraps the same
campaign as a test class, one line per implementation in a user's test file.
``load_counterexample`` and ``replay_counterexample`` read a saved
counterexample (a step list or an ITF trace) and run it again.
"""

from __future__ import annotations

import time
import unittest
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from settled.model import Protocol, System

from ._adapter import AdapterError
from ._lockstep import Action, is_machine, make_lockstep, run_lockstep, world
from ._lockstep import _coverage as coverage
from ._lockstep._quiesce import factory_reason
from ._probe import AdapterFactory, probe, probe_system, resolve_machine
from ._profiles import PROFILES
from ._profiles import profile as named_profile
from ._replay import (
    Counterexample,
    CounterexampleError,
    ReplayResult,
    load_counterexample,
    replay_counterexample,
)

__all__ = ["ADAPTER_ERROR", "DIVERGED", "EXIT_CODES", "PASSED", "QUIESCENCE", "AdapterFactory",
           "Counterexample", "CounterexampleError", "ReplayResult", "Report",
           "load_counterexample", "lockstep", "lockstep_case", "probe", "probe_system",
           "profiles", "replay_counterexample", "resolve_machine"]


PASSED, DIVERGED, ADAPTER_ERROR = "passed", "diverged", "adapter_error"
EXIT_CODES = {PASSED: 0, DIVERGED: 1, ADAPTER_ERROR: 3}


@dataclass
class Report:
    """What one lockstep campaign found.

    ``status`` is ``passed`` (every run agreed with the model and every event
    log passed the trace checker), ``diverged`` (a counterexample: ``failure``,
    ``steps``, ``counterexample``) or ``adapter_error`` (the adapter broke its
    contract; nothing about the implementation is known). ``not_checked`` names
    the variables the adapter declared unobservable: they were never compared.
    """

    machine: str
    status: str
    profile: str
    seed: int | None
    instances: int
    examples: int
    seconds: float
    trace_events: int
    failure: str | None = None
    adapter_error: str | None = None
    steps: list[Action] = field(default_factory=list)
    counterexample: Path | None = None
    counterexample_error: str | None = None
    not_checked: tuple[str, ...] = ()
    # The unobservable variables the caller accepts by name (``--allow-unchecked``); any other
    # leaves the campaign incomplete: not ok, exit 3.
    allowed_unchecked: tuple[str, ...] = ()
    fired: dict[str, int] = field(default_factory=dict)
    unfired: list[str] = field(default_factory=list)
    edges: dict[tuple[str, str, str], int] = field(default_factory=dict)
    cases: dict[tuple[str, str, str], int] = field(default_factory=dict)
    edges_declared: int = 0
    unfired_edges: list[str] = field(default_factory=list)
    cases_declared: int = 0
    unfired_cases: list[str] = field(default_factory=list)
    refusals: dict[tuple[str, str], int] = field(default_factory=dict)
    # The refusals a campaign must ask for (lockstep.refusal_goals): each guard, or guard part,
    # that alone refuses a transition in some reachable state, and each refusable trigger in
    # each reachable state where no transition takes it. The text and JSON count these.
    refusals_declared: int = 0
    unprobed_refusals: list[str] = field(default_factory=list)
    refusals_never_alone: list[str] = field(default_factory=list)  # no state singles them out
    values: dict[tuple[tuple[str, str, str], str, str], int] = field(default_factory=dict)
    values_declared: int = 0  # (edge, parameter, value) some reachable state takes
    unfired_values: list[str] = field(default_factory=list)
    system: bool = False  # a System's lockstep: ``fired``/``unfired`` count its steps
    # The quiescence phase (faults stop, every progress property must be met within the
    # model's bound): its figures, or why it checked nothing (``QuiescenceStats.to_json``).
    quiescence: dict[str, Any] = field(default_factory=dict)
    quiescence_text: str = ""
    # The model itself does not settle where faults stopped: not a pass, incomplete (exit 3).
    model_finding: str | None = None

    @property
    def unchecked(self) -> tuple[str, ...]:
        """What no run checked that the caller did not accept by name: variables never
        compared with the model, and ``quiescence`` when a machine's phase checked nothing
        (a system's is not run by design, and says so)."""
        names = list(self.not_checked)
        if not self.system and self.quiescence.get("checked") is False:
            names.append(QUIESCENCE)
        return tuple(n for n in names if n not in self.allowed_unchecked)

    @property
    def ok(self) -> bool:
        return self.status == PASSED and not self.unchecked and self.model_finding is None

    @property
    def refusals_probed(self) -> int:
        return self.refusals_declared - len(self.unprobed_refusals)

    @property
    def exit_code(self) -> int:
        """0 passed, 1 diverged, 3 adapter error or a counterexample that could not be written."""
        if self.status == DIVERGED and self.counterexample_error:
            return 3
        if self.status == PASSED and (self.unchecked or self.model_finding):
            return 3  # incomplete: a variable was never compared, and no one accepted that
        return EXIT_CODES[self.status]

    def text(self) -> str:
        head = {PASSED: "PASSED", DIVERGED: "DIVERGED", ADAPTER_ERROR: "ADAPTER ERROR"}[self.status]
        seed = "random" if self.seed is None else str(self.seed)
        runs = (f"{self.examples} random runs" if self.examples or self.status != DIVERGED
                else "found by the directed tour")
        lines = [f"lockstep {self.machine}: {head} ({runs}, {self.instances} "
                 f"instances, profile {self.profile}, seed {seed}, {self.seconds:.1f} s, "
                 f"{self.trace_events} logged events accepted by the trace checker)"]
        if self.status == PASSED and self.system:
            total = len(self.fired) + len(self.unfired)
            lines.append(f"coverage: machine transitions and system steps fired "
                         f"{len(self.fired)}/{total}")
            lines.extend(f"NEVER FIRED: {what}" for what in self.unfired)
        elif self.status == PASSED:
            lines.append(f"coverage: edges {self.edges_declared - len(self.unfired_edges)}/"
                         f"{self.edges_declared}, guard alternatives "
                         f"{self.cases_declared - len(self.unfired_cases)}/{self.cases_declared}"
                         f", refusals {self.refusals_probed}/{self.refusals_declared}, parameter "
                         f"values {self.values_declared - len(self.unfired_values)}/"
                         f"{self.values_declared}")
            for what in (*self.unfired_edges, *self.unfired_cases):
                lines.append(f"NEVER FIRED: {what}")
            lines.extend(f"NEVER TAKEN: {what}" for what in self.unfired_values)
            lines.extend(f"NEVER ASKED: the refusal {what}" for what in self.unprobed_refusals)
            lines.extend(f"NOT PROBED ALONE: {what} (in no reachable state does it alone "
                         "refuse the trigger)" for what in self.refusals_never_alone)
        if self.quiescence_text and self.status == PASSED:
            lines.append(self.quiescence_text)
        if self.model_finding:
            lines.append(f"MODEL FINDING (exit 3): {self.model_finding}")
        if self.allowed_unchecked:
            lines.append(f"ALLOWED UNCHECKED: {', '.join(self.allowed_unchecked)} (not checked; "
                         "accepted by name with --allow-unchecked)")
        variables = [n for n in self.unchecked if n != QUIESCENCE]
        if variables:
            lines.append(f"INCOMPLETE (exit 3): {', '.join(variables)} never compared with "
                         "the model; observe them, or accept each by name with "
                         "--allow-unchecked NAME")
        if QUIESCENCE in self.unchecked:
            lines.append("INCOMPLETE (exit 3): the quiescence phase checked nothing; give the "
                         "adapter own_turn(), or accept it by name with --allow-unchecked "
                         "quiescence")
        if self.not_checked:
            lines.append(f"NOT CHECKED: {', '.join(self.not_checked)} (the adapter declares "
                         "them unobservable; no run compared them with the model)")
        if self.adapter_error:
            lines.append(f"the adapter broke its contract: {self.adapter_error}")
        if self.failure:
            lines.append(self.failure)
        if self.counterexample is not None and self.system:
            lines.append(f"counterexample: {self.counterexample} (the system's step list, "
                         "settled.system-lockstep-steps/1)")
        elif self.counterexample is not None:
            steps = self.counterexample.with_suffix("").with_suffix("").with_suffix(".steps.json")
            lines.append(f"counterexample: {self.counterexample} (replay it with "
                         f"`settled replay {steps} [--adapter MODULE:FACTORY]`)")
        if self.counterexample_error:
            lines.append(f"COUNTEREXAMPLE NOT SAVED: {self.counterexample_error}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "machine": self.machine, "system": self.system, "status": self.status,
            "ok": self.ok,
            "exit_code": self.exit_code, "profile": self.profile, "seed": self.seed,
            "instances": self.instances, "examples": self.examples,
            "seconds": round(self.seconds, 3), "trace_events": self.trace_events,
            "failure": self.failure, "adapter_error": self.adapter_error,
            "steps": [a.text() for a in self.steps],
            "counterexample": None if self.counterexample is None else str(self.counterexample),
            "counterexample_error": self.counterexample_error,
            "not_checked": list(self.not_checked),
            "allowed_unchecked": list(self.allowed_unchecked),
            "unchecked": list(self.unchecked),
            "transitions_fired": len(self.fired), "transitions_unfired": self.unfired,
            "edges_declared": self.edges_declared, "edges_unfired": self.unfired_edges,
            "guard_alternatives_declared": self.cases_declared,
            "guard_alternatives_unfired": self.unfired_cases,
            "refusals_declared": self.refusals_declared,
            "refusals_probed": self.refusals_probed,
            "refusals_unprobed": self.unprobed_refusals,
            "parameter_values_declared": self.values_declared,
            "parameter_values_unfired": self.unfired_values,
            "refusals_never_alone": self.refusals_never_alone,
            "quiescence": self.quiescence, "model_finding": self.model_finding,
        }


QUIESCENCE = "quiescence"  # the name that accepts a lockstep without its quiescence phase


def _allowed(allow: Iterable[str], not_checked: tuple[str, ...],
             quiesced: bool = True) -> tuple[str, ...]:
    """The names of ``allow``, each a variable the adapter declares unobservable, or
    ``quiescence`` for an adapter the quiescence phase cannot run on (``quiesced`` False)."""
    names = tuple(sorted(set(allow)))
    known = (*not_checked, *(() if quiesced else (QUIESCENCE,)))
    wrong = [n for n in names if n not in known]
    if wrong:
        raise ValueError(f"--allow-unchecked names {wrong}, which this run checks: the adapter "
                         f"does not declare unobservable (it declares "
                         f"{list(not_checked) or 'none'}"
                         + (")" if quiesced else "; and quiescence, which cannot run on it)"))
    return names


def _campaign(factory: AdapterFactory, system: System, not_checked: tuple[str, ...],
              profile: str, settings: Any, seed: int | None, out: Path | str | None,
              name: str | None, start: float) -> Report:
    """One campaign of the one kit, on a declared system or a machine's independent
    instances (:func:`._lockstep.world`), and its report."""
    protocol = system.machine
    suite = make_lockstep(system, factory, forbidden=protocol.refusable,
                          name=name or system.name, quiesce=True)
    record = run_lockstep(suite, settings, seed=seed, out=None if out is None else Path(out))
    status = (ADAPTER_ERROR if record.adapter_error else DIVERGED if record.failure else PASSED)
    passed = status == PASSED
    common = dict(
        failure=record.failure, adapter_error=record.adapter_error, steps=list(record.steps),
        counterexample=record.itf_path, counterexample_error=record.counterexample_error,
        not_checked=not_checked, fired=dict(record.fired),
        quiescence=record.quiescence.to_json(), quiescence_text=record.quiescence.text(),
        model_finding=record.model_finding)
    head = (system.name, status, profile, seed, system.instances, record.examples,
            time.perf_counter() - start, record.trace_events)
    if not is_machine(system):
        return Report(*head, **common,  # type: ignore[arg-type]
                      unfired=coverage.unfired_steps(system, record.fired) if passed else [], system=True)
    refusable = protocol.refusable
    return Report(
        *head, **common,  # type: ignore[arg-type]
        unfired=coverage.unfired(protocol, record.fired) if passed else [],
        edges=dict(record.edges), cases=dict(record.cases),
        edges_declared=len(coverage.declared_edges(protocol)),
        unfired_edges=coverage.unfired_edges(protocol, record.edges) if passed else [],
        cases_declared=len(coverage.declared_cases(protocol)),
        unfired_cases=coverage.unfired_cases(protocol, record.cases) if passed else [],
        refusals=dict(record.refusals),
        refusals_declared=len(coverage.refusal_goals(protocol, refusable)),
        unprobed_refusals=coverage.unprobed_refusals(protocol, refusable, record.refusals) if passed else [],
        refusals_never_alone=coverage.never_alone(protocol, refusable),
        values=dict(record.values), values_declared=len(coverage.declared_values(protocol, refusable)),
        unfired_values=coverage.unfired_values(protocol, refusable, record.values) if passed else [])


def lockstep(adapter_factory: AdapterFactory,
             machine: str | Protocol | System | None = None, *,
             profile: str = "ci", seed: int | None = None, out: Path | str | None = None,
             name: str | None = None, allow_unchecked: Iterable[str] = ()) -> Report:
    """Run the lockstep kit on the implementation behind ``adapter_factory``.

    A variable the adapter declares unobservable leaves the campaign incomplete (not
    ``ok``, exit 3) unless ``allow_unchecked`` names it; naming a variable the adapter does
    not declare unobservable is a ``ValueError``.

    ``machine`` is a machine name (``"query"``, ``"approval"``), a
    :class:`~settled.model.Protocol`, or None for the adapter's own
    ``protocol``. ``profile`` is ``dev``, ``ci`` or ``thorough``; ``seed``
    makes the campaign reproducible. A counterexample is written into
    ``out`` (default ``./settled-counterexamples``). Never raises for what the
    adapter or the implementation does: the report says it.
    """
    settings = named_profile(profile)
    start = time.perf_counter()
    if isinstance(machine, System) or machine is None:
        try:
            system, not_checked = probe_system(adapter_factory, machine)
        except AdapterError as exc:
            label = getattr(machine, "name", "?")
            return Report(str(label), ADAPTER_ERROR, profile, seed, 0, 0,
                          time.perf_counter() - start, 0, adapter_error=str(exc))
        if system is not None:
            allowed = _allowed(allow_unchecked, not_checked)
            report = _campaign(adapter_factory, system, not_checked, profile, settings,
                               seed, out, name, start)
            report.allowed_unchecked = allowed
            return report
        assert not isinstance(machine, System)
    try:
        protocol, instances, not_checked = probe(adapter_factory, machine)
    except AdapterError as exc:
        label = machine if isinstance(machine, str) else getattr(machine, "name", "?")
        return Report(str(label), ADAPTER_ERROR, profile, seed, 0, 0,
                      time.perf_counter() - start, 0, adapter_error=str(exc))
    from settled.model.progress import liveness_of

    quiesced = factory_reason(adapter_factory) is None and bool(liveness_of(protocol).progress)
    allowed = _allowed(allow_unchecked, not_checked, quiesced=quiesced)
    report = _campaign(adapter_factory, world(protocol, instances), not_checked, profile,
                       settings, seed, out, name, start)
    report.allowed_unchecked = allowed
    return report


def lockstep_case(adapter_factory: AdapterFactory, machine: str | Protocol | None = None, *,
                  profile: str = "dev", seed: int | None = 0,
                  out: Path | str | None = None,
                  allow_unchecked: Iterable[str] = ()) -> type[unittest.TestCase]:
    """A test class running one lockstep campaign; one line per implementation::

        TestMyQueries = lockstep_case(MyAdapter, "query")

    pytest and unittest both collect it. The test fails with the report's text
    (the minimised counterexample, or what the adapter got wrong). The default
    profile is ``dev`` with seed 0, so the test is quick and reproducible.
    """

    class LockstepCase(unittest.TestCase):
        def test_conforms_to_the_model(self) -> None:
            report = lockstep(adapter_factory, machine, profile=profile, seed=seed, out=out,
                              allow_unchecked=allow_unchecked)
            if not report.ok:
                self.fail(report.text())

    LockstepCase.__name__ = LockstepCase.__qualname__ = "LockstepCase"
    return LockstepCase


def profiles() -> Sequence[str]:
    return tuple(PROFILES)
