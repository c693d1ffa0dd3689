"""Lockstep conformance: Hypothesis drives an implementation and the model side by side.

Each step is drawn from what the *model* enables in its current
configuration (drawing uniformly from all actions would waste most steps on
refusals and rarely reach deep states such as a third submission after two
explicit not-founds). The step is applied to the implementation through its
adapter and to the model; then the implementation's projection must equal
the model's configuration and every model invariant must hold. About one
step in five instead asks for an action the model forbids and expects the
implementation to refuse it, changing nothing. After every run the
implementation's own event log is replayed by the trace checker, so the two
checks agree.

Hypothesis generates; shrinking is ours. A failing run is a list of model
actions, and any sub-list the model accepts can be replayed on a fresh
implementation, so the run is minimised by delta debugging over the action
list (each candidate replayed once, candidates the model rejects skipped).
That is far cheaper than shrinking the random choices behind a run of real
transactions, and it yields what a person wants: a short, numbered,
replayable step list, also written as an ITF trace.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, invariant, rule
from settled.model import Config, IllegalTransition, Params, Protocol, Transition
from settled.model._core import Value

from . import _itf
from ._adapter import Adapter, Refused
from ._trace import TraceError, check_lines

AdapterFactory = Callable[[], Adapter]
EAGER = 4  # weight of a step that keeps an instance's story going
MIN_STEPS = 25  # Hypothesis draws many short runs; a floor gets every run into deep states
REPLAY_BUDGET = 400  # replays the minimiser may spend on one failure
WORKER_FIRST = frozenset({"begin_submit", "resubmit"})  # forbidden probes drawn first


@dataclass(frozen=True, slots=True)
class Action:
    """One step of a run: a model trigger on an instance, or a forbidden attempt."""

    instance: int
    trigger: str
    params: Params
    forbidden: bool = False

    def text(self) -> str:
        args = " ".join(f"{k}={v}" for k, v in self.params.items())
        head = "refuse " if self.forbidden else ""
        return f"{head}q{self.instance} {self.trigger}" + (f" {args}" if args else "")


class Divergence(AssertionError):
    """The implementation and the model disagree."""


class Invalid(Exception):
    """A replayed action list the model itself does not accept (a minimiser candidate)."""


def transition_label(t: Transition) -> str:
    """A transition's name in coverage reports: ``trigger: sources -> dest``."""
    return f"{t.trigger}: {'|'.join(t.source)} -> {t.dest or '(same)'}"


def unfired(protocol: Protocol, fired: Mapping[str, int]) -> list[str]:
    return [label for t in protocol.transitions if (label := transition_label(t)) not in fired]


def expected_projection(p: Protocol, config: Config) -> dict[str, Value]:
    view = p.view(config)
    return {"state": str(config.state),
            **{v.name: view[v.name] for v in p.variables if not v.ghost}}


class Runner:
    """One run: an implementation (through its adapter) and the model, side by side."""

    def __init__(self, protocol: Protocol, factory: AdapterFactory, instances: int,
                 forbidden: frozenset[str]) -> None:
        self.protocol, self.instances, self.forbidden = protocol, instances, forbidden
        self.adapter = factory()
        self.configs = [protocol.initial_config()] * instances
        self.steps: list[Action] = []
        self.history: list[tuple[Config, ...]] = [tuple(self.configs)]
        self.fired: dict[str, int] = {}
        self.edges: dict[tuple[str, str, str], int] = {}  # (from, to, trigger) -> times
        self.trace_events = 0
        self.logged_steps = 0  # steps that leave an event in the implementation's log
        self.trace_problem: str | None = None

    # -- what may be drawn -----------------------------------------------------
    def options(self) -> list[Action]:
        """Enabled steps, weighted by repetition, eager ones first."""
        out: list[tuple[int, int, Action]] = []
        for i, c in enumerate(self.configs):
            for s in self.protocol.enabled(c):
                # Ending a story before anything was submitted (a failed check,
                # an invalidated draft) and retries that change nothing are drawn
                # less often, so runs reach deep states. Hypothesis often draws
                # the first element on purpose, so eager steps go first.
                early = (s.after.state in self.protocol.terminal_states
                         and self.protocol.view(c).get("submissions", 1) == 0)
                weight = 1 if early or s.after == c else EAGER
                out.append((weight, _rank(s.transition), Action(i, s.transition.trigger, s.params)))
        out.sort(key=lambda wra: (-wra[0], wra[1]))
        return [a for w, _, a in out for _ in range(w)]

    def forbidden_choices(self, i: int) -> list[Action]:
        enabled = {(s.transition.trigger, tuple(s.params.items()))
                   for s in self.protocol.enabled(self.configs[i])}
        out, seen = [], set()
        for t in self.protocol.transitions:
            if t.trigger in self.forbidden:
                for params in t.param_choices():
                    key = (t.trigger, tuple(params.items()))
                    if key not in enabled and key not in seen:
                        seen.add(key)
                        out.append(Action(i, t.trigger, params, forbidden=True))
        return out

    # -- taking a step ---------------------------------------------------------
    def apply(self, action: Action) -> None:
        self.steps.append(action)
        if action.forbidden:
            self._refuse(action)
        else:
            self._take(action)
        self.history.append(tuple(self.configs))

    def _take(self, action: Action) -> None:
        i = action.instance
        try:
            step = self.protocol.fire(self.configs[i], action.trigger, action.params)
        except IllegalTransition as exc:
            raise Invalid(str(exc)) from None
        try:
            self.adapter.perform(i, action.trigger, action.params)
        except Refused as exc:
            raise Divergence(f"the implementation refused {action.text()}, which the model "
                             f"allows: {exc}") from None
        except Exception as exc:
            raise Divergence(f"the implementation raised {type(exc).__name__} on "
                             f"{action.text()}: {exc}") from exc
        edge = (str(self.configs[i].state), str(step.after.state), action.trigger)
        self.edges[edge] = self.edges.get(edge, 0) + 1
        self.configs[i] = step.after
        label = transition_label(step.transition)
        self.fired[label] = self.fired.get(label, 0) + 1
        self.logged_steps += step.transition.observable is not None

    def _refuse(self, action: Action) -> None:
        i = action.instance
        if any(s.transition.trigger == action.trigger and dict(s.params) == dict(action.params)
               for s in self.protocol.enabled(self.configs[i])):
            raise Invalid(f"{action.text()} is allowed here")
        before = dict(self.adapter.observe(i))
        try:
            self.adapter.perform(i, action.trigger, action.params)
        except Refused:
            pass
        except Exception as exc:
            raise Divergence(f"the implementation raised {type(exc).__name__} instead of "
                             f"{action.text()}: {exc}") from exc
        else:
            raise Divergence(f"the implementation did not {action.text()}, which the model "
                             "forbids")
        if dict(self.adapter.observe(i)) != before:
            raise Divergence(f"{action.text()}: the refusal changed the implementation")

    # -- checks ----------------------------------------------------------------
    def check(self) -> None:
        for i, c in enumerate(self.configs):
            broken = self.protocol.broken_invariants(c)
            if broken:
                raise Divergence(f"model invariant {broken[0].name} broken on q{i}")
            try:
                observed = dict(self.adapter.observe(i))
            except Exception as exc:  # an implementation that lost track of its own rows
                raise Divergence(f"observing q{i} after step {len(self.steps)} raised "
                                 f"{type(exc).__name__}: {exc}") from exc
            diffs = {k: (observed[k], x) for k, x in expected_projection(self.protocol, c).items()
                     if k in observed and observed[k] != x}
            if diffs:
                shown = ", ".join(f"{k}: implementation {o!r}, model {x!r}"
                                  for k, (o, x) in sorted(diffs.items()))
                raise Divergence(f"q{i} differs from the model after step {len(self.steps)}: "
                                 f"{shown}")

    def finish(self) -> None:
        """Close the implementation; its event log must pass the trace checker."""
        try:
            lines = list(self.adapter.trace_lines())
        finally:
            self.adapter.close()
        if not lines and not self.logged_steps:
            return  # nothing that leaves an event happened: an empty log is the right one
        try:
            report = check_lines(lines)
        except TraceError as exc:
            self.trace_problem = f"the implementation's event log is unreadable: {exc}"
            raise Divergence(self.trace_problem) from None
        self.trace_events = report.events
        if not report.ok:
            self.trace_problem = ("the trace checker rejects the implementation's event log:\n"
                                  + (*report.violations, *report.undecided)[0].text())
            raise Divergence(self.trace_problem)


def _rank(t: Transition) -> int:
    if t.actor == "worker":
        return 3 if t.trigger == "claim" else 0
    return {"platform": 1, "user": 2}.get(t.actor, 4)


# --------------------------------------------------------------------------
# Hypothesis drives runs
# --------------------------------------------------------------------------
@dataclass
class Record:
    """What a campaign saw: coverage, and its first failure minimised."""

    fired: dict[str, int] = field(default_factory=dict)
    failing_steps: list[Action] = field(default_factory=list)
    steps: list[Action] = field(default_factory=list)  # the minimised counterexample
    failure: str | None = None
    seconds_to_failure: float | None = None
    itf_path: Path | None = None
    examples: int = 0
    edges: dict[tuple[str, str, str], int] = field(default_factory=dict)
    trace_events: int = 0  # events of the implementation's logs the trace checker accepted
    trace_failure: str | None = None
    spec: Any = None  # (protocol, factory, instances, forbidden) of the machine


def make_lockstep(protocol: Protocol, factory: AdapterFactory, *, instances: int,
                  forbidden: frozenset[str], name: str = "Lockstep") -> type[RuleBasedStateMachine]:
    """A RuleBasedStateMachine class checking ``factory()``'s implementation against ``protocol``."""
    record = Record()

    class Lockstep(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.run = Runner(protocol, factory, instances, forbidden)
            self.seen: set[str] = set()
            self.deepest = 0
            record.examples += 1

        @rule(data=st.data())
        def step(self, data: st.DataObject) -> None:
            options: list[Action | None] = list(self.run.options())
            options += [None] * (len(options) // 4 + 1)  # ~1 in 5: ask for something forbidden
            action = data.draw(st.sampled_from(options), label="action")
            if action is None:
                i = data.draw(st.integers(0, instances - 1), label="instance")
                choices = self.run.forbidden_choices(i)
                if not choices:
                    return
                # The trigger first, then its parameters: otherwise the many
                # parameter combinations of one trigger (confirm) crowd out the
                # rare probes that matter (a stale worker's begin_submit).
                triggers = sorted({a.trigger for a in choices},
                                  key=lambda t: (t not in WORKER_FIRST, t))
                trigger = data.draw(st.sampled_from(triggers), label="forbidden trigger")
                action = data.draw(st.sampled_from([a for a in choices if a.trigger == trigger]),
                                   label="forbidden")
            try:
                self.run.apply(action)
            finally:
                _merge(record.fired, self.run.fired)
                _merge(record.edges, self.run.edges)
                self.seen.update(self.run.fired)
                self.run.fired, self.run.edges = {}, {}
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
                record.trace_events += self.run.trace_events
                record.trace_failure = record.trace_failure or self.run.trace_problem

    Lockstep.__name__ = Lockstep.__qualname__ = name
    Lockstep.record = record
    Lockstep.spec = (protocol, factory, instances, forbidden)
    return Lockstep


def _merge(total: dict[Any, int], more: Mapping[Any, int]) -> None:
    for k, n in more.items():
        total[k] = total.get(k, 0) + n


def tour(protocol: Protocol, forbidden: frozenset[str] = frozenset()) -> list[list[Action]]:
    """For every transition, the shortest run of one instance that fires it, and that run
    extended by each step that can follow it; and for every
    guard of a transition a caller may be refused, the shortest run to a state where that
    guard alone refuses it, ending in the refused action.

    Replayed before the random campaign, the tour guarantees transition and
    refusal coverage: random runs rarely reach, say, a third not-found in a
    row, or a re-confirmation quoting a notification.
    """
    start = protocol.initial_config()
    parent: dict[Config, tuple[Config, Action] | None] = {start: None}
    frontier, paths, probes = [start], {}, {}
    pairs: dict[tuple[str, str], list[Action]] = {}
    while frontier:
        nxt = []
        for c in frontier:
            for s in protocol.enabled(c):
                label = transition_label(s.transition)
                action = Action(0, s.transition.trigger, s.params)
                if label not in paths:
                    paths[label] = [*_path_to(parent, c), action]
                    # ... and one step further along each way out: a bug often shows
                    # only in what follows a transition (a retry that is then answered).
                    for then in protocol.enabled(s.after):
                        pair = (label, transition_label(then.transition))
                        follow = Action(0, then.transition.trigger, then.params)
                        pairs.setdefault(pair, [*paths[label], follow])
                if s.after not in parent:
                    parent[s.after] = (c, action)
                    nxt.append(s.after)
            for refusal, refused in _refusals(protocol, c, forbidden):
                if refusal not in probes:
                    probes[refusal] = [*_path_to(parent, c), refused]
        frontier = nxt
    fires = [paths[transition_label(t)] for t in protocol.transitions
             if transition_label(t) in paths]
    return fires + [pairs[k] for k in sorted(pairs)] + [probes[k] for k in sorted(probes)]


def _refusals(protocol: Protocol, c: Config,
              forbidden: frozenset[str]) -> list[tuple[tuple[str, str, str], Action]]:
    """(transition, guard, params) → a forbidden action refused here by that guard alone."""
    if not forbidden:
        return []
    v = protocol.view(c)
    enabled = {(s.transition.trigger, tuple(s.params.items())) for s in protocol.enabled(c)}
    out = []
    for t in protocol.transitions_from(c.state):
        if t.trigger not in forbidden:
            continue
        for params in t.param_choices():
            failing = [g for g in t.guards if not g(v, params)]
            if len(failing) == 1 and (t.trigger, tuple(params.items())) not in enabled:
                key = (transition_label(t), failing[0].name, repr(sorted(params.items())))
                out.append((key, Action(0, t.trigger, params, forbidden=True)))
    return out


def _path_to(parent: Mapping[Config, tuple[Config, Action] | None], c: Config) -> list[Action]:
    out: list[Action] = []
    link = parent[c]
    while link is not None:
        c, action = link
        out.append(action)
        link = parent[c]
    return out[::-1]


def run_tour(machine: type[RuleBasedStateMachine]) -> Record | None:
    """Replay the coverage tour; its first failing path, or None when all agree."""
    record: Record = machine.record  # type: ignore[attr-defined]
    protocol, factory, instances, forbidden = machine.spec  # type: ignore[attr-defined]
    for path in tour(protocol, forbidden):
        runs: list[Runner] = []
        message = replay(protocol, factory, instances, forbidden, path, keep=runs)
        _merge(record.fired, runs[0].fired)
        _merge(record.edges, runs[0].edges)
        record.trace_events += runs[0].trace_events
        record.trace_failure = record.trace_failure or runs[0].trace_problem
        if message is not None:
            return _failed(record, machine.__name__, path, message, minimise=True)
    return None


def _failed(record: Record, name: str, steps: list[Action], message: str, *,
            minimise: bool) -> Record:
    protocol, factory, instances, forbidden = record.spec
    if minimise:
        steps = minimise_steps(protocol, factory, instances, forbidden, steps)
        message = replay(protocol, factory, instances, forbidden, steps) or message
    record.steps = steps
    record.failure = failure_text(name, message, steps)
    record.itf_path = write_counterexample(protocol, name, message, steps, factory, instances,
                                           forbidden)
    return record


def run_lockstep(machine: type[RuleBasedStateMachine], profile: settings,
                 seed: int | None = None, *, minimise: bool = True) -> Record:
    """Run a lockstep campaign: the coverage tour, then Hypothesis's random runs.

    On failure the run is minimised and written as a counterexample. With
    ``seed`` the campaign is reproducible.
    """
    record: Record = machine.record  # type: ignore[attr-defined]
    record.__init__()  # type: ignore[misc]
    record.spec = machine.spec  # type: ignore[attr-defined]
    start = time.perf_counter()
    if run_tour(machine) is not None:
        record.seconds_to_failure = time.perf_counter() - start
        return record
    generate_only = settings(profile, phases=[Phase.explicit, Phase.reuse, Phase.generate,
                                              Phase.target])
    test = get_state_machine_test(machine, settings=generate_only, _min_steps=MIN_STEPS)
    if seed is not None:
        test = hypothesis.seed(seed)(test)
    try:
        test()
    except Exception as exc:
        record.seconds_to_failure = time.perf_counter() - start
        # Hypothesis replays the failing example last, so teardown recorded its steps.
        protocol, factory, instances, forbidden = record.spec
        try:
            message = replay(protocol, factory, instances, forbidden, record.failing_steps)
        except Invalid:
            message = None
        return _failed(record, machine.__name__, list(record.failing_steps),
                       message or f"{type(exc).__name__}: {exc}", minimise=minimise)
    return record


# --------------------------------------------------------------------------
# Replaying and minimising a failing run
# --------------------------------------------------------------------------
def replay(protocol: Protocol, factory: AdapterFactory, instances: int, forbidden: frozenset[str],
           steps: Sequence[Action], keep: list[Runner] | None = None) -> str | None:
    """Replay ``steps`` on a fresh implementation: the divergence, or None if they agree.

    Raises :class:`Invalid` when the model itself rejects the list.
    """
    run = Runner(protocol, factory, instances, forbidden)
    if keep is not None:
        keep.append(run)
    try:
        for action in steps:
            run.apply(action)
            run.check()
    except Divergence as exc:
        run.adapter.close()
        return str(exc)
    except Invalid:
        run.adapter.close()
        raise
    try:
        run.finish()
    except Divergence as exc:
        return str(exc)
    return None


def minimise_steps(protocol: Protocol, factory: AdapterFactory, instances: int,
                   forbidden: frozenset[str], steps: list[Action],
                   budget: int = REPLAY_BUDGET) -> list[Action]:
    """Delta debugging (ddmin) over the action list, then single removals."""
    spent = 0

    def fails(candidate: list[Action]) -> bool:
        nonlocal spent
        spent += 1
        try:
            return replay(protocol, factory, instances, forbidden, candidate) is not None
        except Invalid:
            return False

    n = 2
    while len(steps) >= 2 and spent < budget:
        size = math.ceil(len(steps) / n)
        for k in range(n):
            candidate = steps[:k * size] + steps[(k + 1) * size:]
            if candidate != steps and fails(candidate):
                steps, n = candidate, max(n - 1, 2)
                break
        else:
            if n >= len(steps):
                break
            n = min(n * 2, len(steps))
    k = 0
    while k < len(steps) and spent < budget:
        candidate = steps[:k] + steps[k + 1:]
        if fails(candidate):
            steps = candidate
        else:
            k += 1
    return steps


def failure_text(name: str, message: str, steps: Sequence[Action]) -> str:
    listing = "\n".join(f"  {n}. {a.text()}" for n, a in enumerate(steps, start=1))
    return f"{name}: {message}\nreplayable steps ({len(steps)}):\n{listing}"


def counterexample_dir() -> Path:
    return Path(os.environ.get("SETTLED_COUNTEREXAMPLES",
                               Path(tempfile.gettempdir()) / "settled-counterexamples"))


def write_counterexample(protocol: Protocol, name: str, message: str, steps: Sequence[Action],
                         factory: AdapterFactory, instances: int,
                         forbidden: frozenset[str]) -> Path:
    """The minimised run as an ITF trace of the model's configurations."""
    runs: list[Runner] = []
    with contextlib.suppress(Invalid):
        replay(protocol, factory, instances, forbidden, steps, keep=runs)
    history = runs[0].history if runs else [tuple([protocol.initial_config()] * instances)]
    states: list[dict[str, Any]] = []
    for configs in history:
        state: dict[str, Any] = {}
        for i, c in enumerate(configs):
            for k, v in {"state": str(c.state), **protocol.view(c)}.items():
                state[f"q{i}.{k}"] = v
        states.append(state)
    actions = [(a.trigger, {"instance": a.instance, "refused": a.forbidden, **a.params})
               for a in steps][: len(states) - 1]
    meta = {"status": "violation", "violated": message, "generator": f"settled lockstep {name}"}
    trace = _itf.itf_trace(protocol.name, sorted(states[0]), states[: len(actions) + 1], actions,
                           meta)
    directory = counterexample_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"lockstep-{name}.itf.json"
    _itf.write_itf(path, trace)
    return path
