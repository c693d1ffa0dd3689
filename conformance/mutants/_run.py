"""Run the bug catalogue: the baseline must pass, every mutant must be killed.

The baseline is the unmodified implementation under every suite in
``SUITES`` (with ``names`` given, only the suites of the chosen mutants'
machines: a baseline of a machine none of them runs on proves nothing about
them). Then each mutant gets its own lockstep campaign, sequentially in this
process: a campaign is a fresh Hypothesis run on fresh files, so the runs
are independent, and one process keeps the import and start-up cost paid
once.

A mutant is *killed* by its lockstep campaign when the campaign ends with a counterexample
whose steps, replayed, diverge again on the mutant and agree with the model on the
unmodified code: the divergence is the bug's and nothing else's. (A crash-window mutant is
killed by the crash sweep instead, when a crash leaves a state the model does not allow.) If the kit
itself raises instead (an exception it did not turn into a divergence), the
mutant counts as not killed and the error is kept as its failure text: the
catalogue then fails loudly instead of crediting the kit with a kill it did
not report.
"""

from __future__ import annotations

import statistics
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import settings

from settled.conformance._bundled._suites import SUITES, SYSTEM_SUITES, Suite, SystemSuite
from settled.conformance._lockstep import Action, Record, replay, run_lockstep
from settled.conformance.mutants import Mutant, all_mutants, rule_coverage

__all__ = ["BaselineResult", "MutantResult", "MutantsReport", "Progress", "run_mutants",
           "select_mutants"]

Progress = Callable[[int, int, str], None]
"""Called before each campaign with (index from 1, total campaigns, what is run)."""


@dataclass(frozen=True, slots=True)
class MutantResult:
    name: str
    rule: str
    machine: str
    killed: bool
    seconds: float  # to the first failure when killed, else the whole campaign
    # the minimised counterexample when killed, or when a kill was found not to be the bug's
    steps: list[Action] | None
    failure: str | None  # the kit's report (or the kit's own error when not killed)
    itf_path: Path | None = None  # the counterexample as an ITF trace (as ``steps``)
    killed_by: str | None = None  # "tour", "random" or "crash" (the crash sweep) when killed

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "rule": self.rule, "killed": self.killed,
                "killed_by": self.killed_by, "seconds": round(self.seconds, 3),
                "steps": None if self.steps is None else len(self.steps)}


@dataclass(frozen=True, slots=True)
class BaselineResult:
    machine: str
    passed: bool
    seconds: float
    failure: str | None


@dataclass(slots=True)
class MutantsReport:
    mutants: list[MutantResult] = field(default_factory=list)
    baseline: list[BaselineResult] = field(default_factory=list)
    tour: bool = True  # False: the directed tour was switched off, the random phase alone ran

    @property
    def killed(self) -> int:
        return sum(m.killed for m in self.mutants)

    @property
    def total(self) -> int:
        return len(self.mutants)

    @property
    def baseline_passed(self) -> bool:
        return all(b.passed for b in self.baseline)

    @property
    def ok(self) -> bool:
        """Every mutant killed and the baseline passed: what ``settled mutants`` exits 0 on."""
        return self.baseline_passed and self.killed == self.total

    @property
    def counterexample_lengths(self) -> list[int]:
        """The step count of each killed mutant's minimised counterexample."""
        return [len(m.steps) for m in self.mutants if m.killed and m.steps is not None]

    def to_json(self) -> dict[str, Any]:
        # Rule coverage is the whole catalogue's, whichever mutants this run chose.
        lengths = sorted(self.counterexample_lengths)
        return {"mutants": [m.to_json() for m in self.mutants], "killed": self.killed,
                "total": self.total, "baseline_passed": self.baseline_passed,
                # over the killed mutants' minimised counterexamples; null when none was killed
                "median_counterexample_steps": statistics.median(lengths) if lengths else None,
                "longest_counterexample_steps": lengths[-1] if lengths else None,
                # the mutant it belongs to (the first in catalogue order among equals)
                "longest_counterexample_mutant": next(
                    (m.name for m in self.mutants if m.killed and m.steps is not None
                     and len(m.steps) == lengths[-1]), None) if lengths else None,
                "tour": self.tour,
                "kills_by_phase": {phase: sum(m.killed_by == phase for m in self.mutants)
                                   for phase in ("tour", "random", "crash")},
                # killed / run, with the tour switched off (--no-tour); null when the tour ran,
                # since the tour's kills then hide what the random phase would find alone
                "random_only_kill_rate": (None if self.tour or not self.total
                                          else round(self.killed / self.total, 3)),
                # rule coverage is the whole catalogue's, whichever mutants this run chose
                **rule_coverage().to_json()}


def select_mutants(names: Iterable[str] | None = None) -> list[Mutant]:
    """The catalogue, or the named mutants in catalogue order; ValueError naming unknown names."""
    catalogue = all_mutants()
    if names is None:
        return catalogue
    wanted = set(names)
    unknown = sorted(wanted - {m.name for m in catalogue})
    if unknown:
        known = ", ".join(m.name for m in catalogue)
        raise ValueError(f"no mutant named {', '.join(map(repr, unknown))}; the catalogue has: {known}")
    return [m for m in catalogue if m.name in wanted]


def run_mutants(profile: settings, seed: int | None = None, names: Sequence[str] | None = None,
                progress: Progress | None = None, out: Path | None = None,
                tour: bool = True, seeded_only: bool = False) -> MutantsReport:
    """Run the baseline, then every (or every named) mutant's campaign, one after another;
    ``tour=False`` runs the mutants' campaigns without the directed tour (the baseline keeps
    it: it checks the implementation, not the random phase). ``seeded_only`` (with no
    names): every machine's baseline and every mutant whose campaign takes the seed, the
    crash-window mutants left out (their crash sweep takes none: one run answers every
    seed)."""
    if seeded_only and names is not None:
        raise ValueError("run_mutants: seeded_only selects the mutants itself; give no names")
    mutants = [m for m in select_mutants(names)
               if not (seeded_only and m.campaign == "crash_sweep")]
    machines = ([*SUITES, *SYSTEM_SUITES] if names is None
                else sorted({m.machine for m in mutants}))
    total = len(machines) + len(mutants)
    report = MutantsReport(tour=tour)
    for n, machine in enumerate(machines, start=1):
        if progress is not None:
            progress(n, total, f"baseline {machine}")
        report.baseline.append(_baseline(machine, _suite(machine)(), profile, seed, out))
    for n, mutant in enumerate(mutants, start=len(machines) + 1):
        if progress is not None:
            progress(n, total, mutant.name)
        report.mutants.append(_mutant(mutant, profile, seed, out, tour))
    return report


def _suite(machine: str) -> Callable[..., Suite | SystemSuite]:
    """The suite builder of a machine or a system (``query_system``), by name."""
    return SUITES[machine] if machine in SUITES else SYSTEM_SUITES[machine]


def _campaign(suite: Suite | SystemSuite, name: str, profile: settings, seed: int | None,
              out: Path | None = None,
              tour: bool = True) -> tuple[Record | None, float, str | None]:
    """The campaign's record and duration, or (None, duration, the kit's own error).

    An adapter error is the kit's own error here: the bundled adapters broke their
    contract, which is neither a kill nor a pass."""
    start = time.perf_counter()
    try:
        record = run_lockstep(suite.lockstep(name), profile, seed=seed, out=out, tour=tour)
    except Exception:  # the kit must not take the whole catalogue down with it
        return None, time.perf_counter() - start, f"the kit raised:\n{traceback.format_exc()}"
    if record.adapter_error is not None:
        return None, time.perf_counter() - start, f"adapter error: {record.adapter_error}"
    return record, time.perf_counter() - start, None


def _baseline(machine: str, suite: Suite | SystemSuite, profile: settings, seed: int | None,
              out: Path | None = None) -> BaselineResult:
    record, seconds, error = _campaign(suite, f"baseline-{machine}", profile, seed, out)
    failure = error if record is None else record.failure or (
        f"the model itself has a finding: {record.model_finding}" if record.model_finding
        else None)
    return BaselineResult(machine, failure is None, seconds, failure)


def _crash_mutant(mutant: Mutant) -> MutantResult:
    """A crash-window mutant: killed when the crash sweep finds a state the model does not
    allow (or a boundary it could not crash: the sweep then fails as well, so a kill is only
    counted with a failure naming a boundary)."""
    from settled.conformance._bundled._suites import sweep_machine

    start = time.perf_counter()
    try:
        report = sweep_machine(mutant.machine, adapter_class=mutant.adapter_class)
    except Exception:
        return MutantResult(mutant.name, mutant.rule, mutant.machine, False,
                            time.perf_counter() - start, None,
                            f"the crash sweep raised:\n{traceback.format_exc()}")
    seconds = time.perf_counter() - start
    if not report.failures:
        return MutantResult(mutant.name, mutant.rule, mutant.machine, False, seconds, None,
                            f"the crash sweep passed: {len(report.crashed)} of "
                            f"{len(report.boundaries)} boundaries crashed, every state allowed")
    return MutantResult(mutant.name, mutant.rule, mutant.machine, True, seconds, None,
                        "\n".join(report.failures), None, "crash")


def _replayed(machine: str, adapter_class: Callable[..., Any] | None,
              steps: Sequence[Action]) -> tuple[str, str]:
    """The steps replayed on a fresh instance of the shipped code (``adapter_class`` None) or
    of a mutant: ("diverges", the divergence), ("agrees", "") or ("raises", the error)."""
    try:
        suite = _suite(machine)() if adapter_class is None else _suite(machine)(adapter_class)
        lockstep = suite.lockstep(f"replay-{machine}")
        system, factory, forbidden = lockstep.spec  # type: ignore[attr-defined]
        message = replay(system, factory, forbidden, steps, quiesce=lockstep.quiesce)  # type: ignore[attr-defined]
    except Exception as exc:  # neither a divergence nor an agreement: the kit's own error
        return "raises", f"{type(exc).__name__}: {exc}"
    return ("agrees", "") if message is None else ("diverges", message)


def _not_the_bugs(again: tuple[str, str], shipped: tuple[str, str]) -> str | None:
    """Why a lockstep kill is not the bug's (None when it is): replayed, its steps must
    diverge again on the mutant and agree with the model on the shipped code, which differs
    from the mutant by the bug alone."""
    if again[0] == "agrees":
        return ("replayed on the mutant, the counterexample's steps agree with the model "
                "(the kill does not reproduce)")
    if again[0] == "raises":
        return f"replayed on the mutant, the counterexample's steps raised {again[1]}"
    if shipped[0] == "diverges":
        return f"the counterexample's steps fail on the shipped code too:\n{shipped[1]}"
    if shipped[0] == "raises":
        return f"replayed on the shipped code, the counterexample's steps raised {shipped[1]}"
    return None


def _mutant(mutant: Mutant, profile: settings, seed: int | None,
            out: Path | None = None, tour: bool = True) -> MutantResult:
    if mutant.campaign == "crash_sweep":
        return _crash_mutant(mutant)
    suite = _suite(mutant.machine)(mutant.adapter_class)
    record, seconds, error = _campaign(suite, mutant.name, profile, seed, out, tour)
    if record is None or record.failure is None:
        return MutantResult(mutant.name, mutant.rule, mutant.machine, False, seconds, None, error)
    to_failure = record.seconds_to_failure if record.seconds_to_failure is not None else seconds
    failure = record.failure
    why = _not_the_bugs(_replayed(mutant.machine, mutant.adapter_class, record.steps),
                        _replayed(mutant.machine, None, record.steps))
    if why is not None:  # not killed; the counterexample is kept, to be looked at
        return MutantResult(mutant.name, mutant.rule, mutant.machine, False, seconds,
                            list(record.steps), f"{failure}\nNOT THE BUG'S KILL: {why}",
                            record.itf_path)
    if record.counterexample_error:  # still a kill: the divergence was found, only not saved
        failure = f"{failure}\nCOUNTEREXAMPLE NOT SAVED: {record.counterexample_error}"
    return MutantResult(mutant.name, mutant.rule, mutant.machine, True, to_failure,
                        list(record.steps), failure, record.itf_path, record.killed_by)
