"""A lockstep campaign: the directed tour, then Hypothesis's random runs, the first failure
minimised and written as a counterexample.

Hypothesis generates; shrinking is ours. A failing run is a list of model actions, and any
sub-list the model accepts can be replayed on a fresh implementation, so the run is
minimised by delta debugging over the action list (:mod:`.._shrink`). That is far cheaper
than shrinking the random choices behind a run of real transactions, and it yields a short,
numbered, replayable step list.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    get_state_machine_test,
    initialize,
    invariant,
    rule,
)

from settled.conformance._lockstep._shrink import Invalid, cut_at_divergence, run_steps, shrink
from settled.model import Protocol, System

from .._adapter import Adapter, AdapterError
from .._profiles import install_independent_draws
from ._action import MIN_STEPS, REPLAY_BUDGET, Action
from ._contract import adapter_error_in
from ._files import CounterexampleWriteError, write_counterexample
from ._quiesce import ModelFinding, QuiescenceStats
from ._runner import Runner
from ._tour import tour_of
from ._world import history, world

AdapterFactory = Callable[[], Adapter]


@dataclass
class Record:
    """What a campaign saw: coverage, and its first failure minimised."""

    fired: dict[str, int] = field(default_factory=dict)
    failing_steps: list[Action] = field(default_factory=list)
    steps: list[Action] = field(default_factory=list)  # the minimised counterexample
    failure: str | None = None
    seconds_to_failure: float | None = None
    itf_path: Path | None = None
    examples: int = 0  # Hypothesis's random runs
    tour_runs: int = 0  # the directed tour's runs
    edges: dict[tuple[str, str, str], int] = field(default_factory=dict)
    cases: dict[tuple[str, str, str], int] = field(default_factory=dict)
    refusals: dict[tuple[str, str], int] = field(default_factory=dict)  # (transition, atom)
    values: dict[tuple[tuple[str, str, str], str, str], int] = field(default_factory=dict)
    interactions: dict[tuple[str, str], int] = field(default_factory=dict)  # cross-instance
    trace_events: int = 0  # events of the implementation's logs the trace checker accepted
    trace_failure: str | None = None
    spec: Any = None  # (system, factory, forbidden) of the campaign
    adapter_error: str | None = None  # the adapter broke its contract: neither pass nor kill
    counterexample_error: str | None = None  # the counterexample could not be written
    out: Path | None = None  # where counterexamples go (None: the default folder)
    killed_by: str | None = None  # the phase that found the failure: "tour" or "random"
    quiesce: bool = False  # every run ends with the quiescence phase (:mod:`._quiesce`)
    quiescence: QuiescenceStats = field(default_factory=QuiescenceStats)
    model_finding: str | None = None  # the model itself does not settle: neither pass nor kill
    unsettled: bool = False  # the failure was found by the quiescence phase

    def add(self, run: Runner) -> None:
        """Count what ``run`` fired since the last call, and forget it there."""
        _merge(self.fired, run.fired)
        _merge(self.edges, run.edges)
        _merge(self.cases, run.cases)
        _merge(self.refusals, run.refusals)
        _merge(self.values, run.values)
        run.fired, run.edges, run.cases, run.refusals, run.values = {}, {}, {}, {}, {}
        _merge(self.interactions, run.interactions)
        run.interactions = {}
        self.quiescence.merge(run.quiet)
        run.quiet = QuiescenceStats()


def _merge(total: dict[Any, int], more: Mapping[Any, int]) -> None:
    for k, n in more.items():
        total[k] = total.get(k, 0) + n


@functools.cache
def _index(n: int) -> st.SearchStrategy[int]:
    return st.integers(0, n - 1)


def make_lockstep(target: Protocol | System, factory: AdapterFactory, *,
                  instances: int | None = None, forbidden: frozenset[str],
                  name: str = "Lockstep", quiesce: bool = False) -> type[RuleBasedStateMachine]:
    """A RuleBasedStateMachine class checking ``factory()``'s implementation against a
    declared system, or against ``instances`` independent instances of a machine."""
    if isinstance(target, System):
        system = target
    else:
        if instances is None:
            raise TypeError("make_lockstep(protocol, ...) needs instances=")
        system = world(target, instances)
    record = Record(quiesce=quiesce)
    triggers = tuple(dict.fromkeys([*(t.trigger for t in system.machine.transitions),
                                    *(t.trigger for t in system.transitions)]))
    lockstep = _machine_class(system, factory, frozenset(forbidden), record, triggers)
    lockstep.__name__ = lockstep.__qualname__ = name
    lockstep.record = record
    lockstep.spec = (system, factory, frozenset(forbidden))
    lockstep.quiesce = quiesce
    return lockstep


def _machine_class(system: System, factory: AdapterFactory, forbidden: frozenset[str],
                   record: Record, triggers: tuple[str, ...]) -> type[RuleBasedStateMachine]:
    instances, protocol = system.instances, system.machine

    class Lockstep(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.run = Runner(system, factory, forbidden, record.quiesce)
            self.seen: set[str] = set()
            self.deepest = 0
            self.swarm: frozenset[str] | None = None
            record.examples += 1

        @initialize(data=st.data())
        def choose_swarm(self, data: st.DataObject) -> None:
            # Swarm testing: each run switches off a random subset of the action kinds, so
            # the ones left are drawn often enough to pile up (three not-founds in a row) and
            # a rare forbidden probe is not crowded out by common ones. Hypothesis shrinks
            # towards keeping every kind.
            off = data.draw(st.frozensets(st.sampled_from(triggers)), label="swarm: kinds off")
            self.swarm = frozenset(triggers) - off

        @rule(data=st.data())
        def step(self, data: st.DataObject) -> None:
            action = _draw_action(self.run, self.swarm, instances, data)
            if action is None:
                return
            try:
                self.run.apply(action)
            finally:
                self.seen.update(self.run.fired)
                record.add(self.run)
            self.deepest = max(self.deepest, *(protocol.view(c).get("submissions", 0)
                                               for c in self.run.configs))

        @invariant()
        def agrees_with_the_model(self) -> None:
            self.run.check()

        def teardown(self) -> None:
            # Steer generation (Hypothesis's target phase) towards runs that fire
            # many different transitions and reach many submissions.
            hypothesis.target(len(self.seen), label="transitions fired")
            hypothesis.target(self.deepest, label="submissions")
            record.failing_steps = list(self.run.steps)
            try:
                self.run.finish()
            finally:
                record.quiescence.merge(self.run.quiet)
                self.run.quiet = QuiescenceStats()
                record.trace_events += self.run.trace_events
                record.trace_failure = record.trace_failure or self.run.trace_problem

    return Lockstep


def _draw_action(run: Runner, swarm: frozenset[str] | None, instances: int,
                 data: st.DataObject) -> Action | None:
    """The next step: one the model allows, of the swarm's kinds, or about one in five times a
    forbidden one (None when there is none to draw)."""
    # Indices, not sampled_from: the lists change every step, and a fresh
    # sampled_from strategy per draw costs more than the step it picks.
    options = run.options()
    if swarm is not None:
        # The swarm's kinds only; where none of them is enabled, every kind (a run
        # that cannot move would test nothing).
        options = [a for a in options if a.trigger in swarm] or options
    slots = len(options) + len(options) // 4 + 1  # ~1 in 5: ask for something forbidden
    n = data.draw(_index(slots), label="action")
    if n < len(options):
        return options[n]
    return _draw_forbidden(run, swarm, instances, data)


def _draw_forbidden(run: Runner, swarm: frozenset[str] | None, instances: int,
                    data: st.DataObject) -> Action | None:
    """A step the model forbids, for one drawn instance (None when it has none)."""
    i = data.draw(_index(instances), label="instance")
    choices = run.forbidden_choices(i)
    if not choices:
        return None
    # The trigger first, then its parameters: otherwise the many parameter
    # combinations of one trigger (confirm) crowd out the rare probes that matter
    # (a stale worker's begin_submit, a confirmation the system's state refuses).
    by_trigger = run.plans.forbidden_by_trigger(choices)
    if swarm is not None:
        by_trigger = [g for g in by_trigger if g[0].trigger in swarm] or by_trigger
    group = by_trigger[data.draw(_index(len(by_trigger)), label="forbidden trigger")]
    return group[data.draw(_index(len(group)), label="forbidden")]


def run_lockstep(machine: type[RuleBasedStateMachine], profile: settings,
                 seed: int | None = None, *, minimise: bool = True,
                 out: Path | None = None, tour: bool = True) -> Record:
    """Run a lockstep campaign: the coverage tour, then Hypothesis's random runs.

    On failure the run is minimised and written as a counterexample (into
    ``out``, by default ``./settled-counterexamples``). With ``seed`` the
    campaign is reproducible. An adapter that breaks its contract ends the
    campaign with ``adapter_error`` set: neither a pass nor a divergence. ``tour=False``
    skips the directed tour (to measure what the random phase finds alone); the record's
    ``killed_by`` says which phase found the failure.
    """
    record: Record = machine.record  # type: ignore[attr-defined]
    record.__init__(quiesce=machine.quiesce)  # type: ignore[misc,attr-defined]
    record.spec = machine.spec  # type: ignore[attr-defined]
    record.out = out
    start = time.perf_counter()
    try:
        return _campaign(machine, record, profile, seed, minimise, start, tour)
    except AdapterError as exc:
        record.adapter_error = str(exc)
        record.failure = record.killed_by = None
        return record
    except ModelFinding as exc:
        record.model_finding = str(exc)
        record.failure = record.killed_by = None
        return record


def _campaign(machine: type[RuleBasedStateMachine], record: Record, profile: settings,
              seed: int | None, minimise: bool, start: float, with_tour: bool = True) -> Record:
    if with_tour and run_tour(machine) is not None:
        record.seconds_to_failure = time.perf_counter() - start
        record.killed_by = "tour"
        return record
    generate_only = settings(profile, phases=[Phase.explicit, Phase.reuse, Phase.generate,
                                              Phase.target])
    test = get_state_machine_test(machine, settings=generate_only, _min_steps=MIN_STEPS)  # type: ignore[no-untyped-call,unused-ignore]
    if seed is not None:
        test = hypothesis.seed(seed)(test)
    try:
        with install_independent_draws():
            test()
    except Exception as exc:
        adapter = adapter_error_in(exc)
        if adapter is not None:
            raise adapter from None
        finding = _model_finding_in(exc)
        if finding is not None:
            raise finding from None
        record.seconds_to_failure = time.perf_counter() - start
        record.killed_by = "random"
        # Hypothesis replays the failing example last, so teardown recorded its steps.
        system, factory, forbidden = record.spec
        try:
            message = replay(system, factory, forbidden, record.failing_steps,
                             quiesce=record.quiesce)
        except Invalid:
            message = None
        return _failed(record, machine.__name__, list(record.failing_steps),
                       message or f"{type(exc).__name__}: {exc}", minimise=minimise)
    return record


def _model_finding_in(exc: BaseException) -> ModelFinding | None:
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        if isinstance(at, ModelFinding):
            return at
        seen.add(id(at))
        at = at.__cause__ or at.__context__
    return None


def run_tour(machine: type[RuleBasedStateMachine]) -> Record | None:
    """Replay the coverage tour; the record of its first failing path, or None when all
    agree."""
    record: Record = machine.record  # type: ignore[attr-defined]
    system, factory, forbidden = machine.spec  # type: ignore[attr-defined]
    for path in tour_of(system, forbidden):
        runs: list[Runner] = []
        message = replay(system, factory, forbidden, path, keep=runs, quiesce=record.quiesce)
        record.add(runs[0])
        record.tour_runs += 1
        record.trace_events += runs[0].trace_events
        record.trace_failure = record.trace_failure or runs[0].trace_problem
        if message is not None:
            cut = cut_at_divergence(path, len(runs[0].steps), lambda c: replay(
                system, factory, forbidden, c, quiesce=record.quiesce) is not None)
            return _failed(record, machine.__name__, cut, message, minimise=True)
    return None


def _failed(record: Record, name: str, steps: list[Action], message: str, *,
            minimise: bool) -> Record:
    system, factory, forbidden = record.spec
    if minimise:
        steps = minimise_steps(system, factory, forbidden, steps, quiesce=record.quiesce)
        message = replay(system, factory, forbidden, steps, quiesce=record.quiesce) or message
    record.steps = steps
    record.failure = failure_text(name, message, steps)
    runs: list[Runner] = []
    with contextlib.suppress(Invalid, AdapterError):
        replay(system, factory, forbidden, steps, keep=runs, quiesce=record.quiesce)
    record.unsettled = bool(runs) and runs[0].unsettled
    try:
        record.itf_path = write_counterexample(system, name, message, steps,
                                               runs[0].history if runs else None, out=record.out)
    except CounterexampleWriteError as exc:
        record.counterexample_error = str(exc)
    return record


def replay(system: System, factory: AdapterFactory, forbidden: frozenset[str],
           steps: Sequence[Action], keep: list[Runner] | None = None,
           quiesce: bool = False) -> str | None:
    """Replay ``steps`` on a fresh implementation: the divergence, or None if they agree.

    Raises :class:`Invalid` when the model itself rejects the list.
    """
    run = Runner(system, factory, forbidden, quiesce)
    if keep is not None:
        keep.append(run)
    return run_steps(run, steps)


def minimise_steps(system: System, factory: AdapterFactory, forbidden: frozenset[str],
                   steps: list[Action], budget: int = REPLAY_BUDGET,
                   quiesce: bool = False) -> list[Action]:
    """Shrink a failing run (:func:`.._shrink.shrink`: instances apart, cycles cut, ddmin,
    single steps) to a fixpoint or ``budget`` replays."""
    return shrink(steps, lambda c: replay(system, factory, forbidden, c,
                                          quiesce=quiesce) is not None,
                  lambda c: history(system, c, forbidden), budget)


def failure_text(name: str, message: str, steps: Sequence[Action]) -> str:
    listing = "\n".join(f"  {n}. {a.text()}" for n, a in enumerate(steps, start=1))
    return f"{name}: {message}\nreplayable steps ({len(steps)}):\n{listing}"
