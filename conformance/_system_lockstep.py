"""Lockstep of a declared :class:`~settled.model._system.System`: instances that share state.

The machine lockstep (``_lockstep``) drives independent instances: each step
moves one of them. A system's steps are drawn from ``System.enabled``
instead, the successor function every view of a system shares, so a run
contains:

- *instance steps* (``q1 confirm ...``): one instance moves; the adapter gets
  ``perform(1, trigger, params)``;
- *synchronised steps* (``all condition_updated``, ``all crash worker=0``):
  every instance the trigger concerns moves at once; the adapter performs the
  step ONCE, as ``perform(None, trigger, params)`` (one condition update of the
  task, one worker process dying);
- the system's *own steps* (``system message_received``): no instance moves,
  the system's variables change; again ``perform(None, trigger, params)``.

After every step each instance's observation (``observe(i)``, held to the
machine's contract, shared machine variables included) must equal the
model's, and ``observe(None)`` must return the system's own variables (every
one, within its domain: anything else is an :class:`AdapterError`) equal to
the model's. Machine invariants are checked on every instance and the
system's invariants on the whole. About one step in five asks instead for a
refusable action the system does not enable for an instance (its bound
parameters set from the system's state, as the real call would see it): the
implementation must refuse it and change nothing, on any instance or in the
system. At the end of every run the implementation's event log goes through
the trace checker, as in the machine lockstep.

A failing run is minimised by delta debugging over its step list and written
as ``system-lockstep-NAME.steps.json`` (``settled.system-lockstep-steps/1``);
:func:`replay_steps` runs such a list again. Before the random runs, a
directed tour (:func:`system_tour`: shortest runs found breadth-first over a
bounded part of the system's space) is replayed; the report lists the machine
transitions and system steps no run fired.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, invariant, rule

from settled.model._core import Params, Value
from settled.model._system import System, SystemConfig, SystemStep

from ._adapter import Adapter, AdapterError, Refused
from ._lockstep import (
    EAGER,
    MIN_STEPS,
    REPLAY_BUDGET,
    Action,
    CounterexampleWriteError,
    Record,
    Runner,
    _adapter_error,
    _safe,
    adapter_fault,
    blame_adapter,
    contract_for,
    counterexample_dir,
    ends_early,
    expected_projection,
    perform_refused,
    transition_label,
)
from ._lockstep import (
    tour as machine_tour,
)
from ._profiles import install_independent_draws
from ._shrink import Divergence, Invalid, cut_at_divergence, longest_paths, run_steps, shrink

AdapterFactory = Callable[[], Adapter]
STEPS_SCHEMA = "settled.system-lockstep-steps/1"
SYSTEM = -1  # the ``instance`` of a step no single instance takes (sync or the system's own)


@dataclass(frozen=True, slots=True)
class SystemAction(Action):
    """A step of a system run. ``who`` is ``q<i>``, ``all`` (a sync step) or ``system``."""

    who: str = ""
    # Refused by the system's state alone (a bound parameter, a lock another instance holds).
    bound: bool = field(default=False, compare=False)

    def text(self) -> str:
        args = " ".join(f"{k}={v}" for k, v in self.params.items())
        head = "refuse " if self.forbidden else ""
        return f"{head}{self.who} {self.trigger}" + (f" {args}" if args else "")

    @property
    def target(self) -> int | None:
        """The instance ``perform``/``observe`` get: None for a sync or system step."""
        return None if self.instance == SYSTEM else self.instance


def action_of(step: SystemStep) -> SystemAction:
    if step.shared is not None:
        return SystemAction(SYSTEM, step.trigger, step.params, who="system")
    if step.instance is not None:
        return SystemAction(step.instance, step.trigger, step.params, who=f"q{step.instance}")
    return SystemAction(SYSTEM, step.trigger, step.params, who="all")


def _key(a: SystemAction) -> tuple[str, str, tuple[tuple[str, Value], ...]]:
    return (a.who, a.trigger, tuple(sorted(a.params.items())))


class SystemPlans:
    """Per-configuration work shared by every run of a campaign."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.steps: dict[SystemConfig, dict[Any, tuple[SystemAction, SystemStep]]] = {}
        self.options: dict[SystemConfig, list[SystemAction]] = {}
        self.forbidden: dict[tuple[SystemConfig, int], list[SystemAction]] = {}
        self.bound: dict[tuple[SystemConfig, int], list[SystemAction]] = {}

    def enabled(self, config: SystemConfig) -> dict[Any, tuple[SystemAction, SystemStep]]:
        got = self.steps.get(config)
        if got is None:
            got = {}
            for s in self.system.enabled(config):
                a = action_of(s)
                got[_key(a)] = (a, s)
            self.steps[config] = got
        return got


_PLANS: dict[int, SystemPlans] = {}


def plans_for(system: System) -> SystemPlans:
    found = _PLANS.get(id(system))
    if found is None or found.system is not system:
        found = _PLANS[id(system)] = SystemPlans(system)
    return found


class SystemRunner:
    """One run: the implementation (through its adapter) and the system model, side by side."""

    def __init__(self, system: System, factory: AdapterFactory, forbidden: frozenset[str]) -> None:
        self.system, self.protocol, self.forbidden = system, system.machine, forbidden
        self.instances = system.instances
        try:
            self.adapter = factory()
        except AdapterError:
            raise
        except Exception as exc:
            raise AdapterError(f"the adapter factory raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(self.adapter, Adapter):
            raise AdapterError(f"the adapter factory returned {type(self.adapter).__name__}, "
                               "not a settled.conformance.Adapter")
        self.contract = contract_for(self.protocol, self.adapter)
        self.plans = plans_for(system)
        self.config = system.initial_config()
        self.steps: list[SystemAction] = []
        self.history: list[SystemConfig] = [self.config]
        self.fired: dict[str, int] = {}
        self.logged_steps: set[int] = set()
        self.trace_events = 0
        self.trace_problem: str | None = None

    # -- what may be drawn -----------------------------------------------------
    def options(self) -> list[SystemAction]:
        """Enabled steps, weighted: steps that change something come first and more often."""
        got = self.plans.options.get(self.config)
        if got is None:
            weighted: list[tuple[int, SystemAction]] = []
            for a, s in self.plans.enabled(self.config).values():
                # Ending drafts before anything ran (an update invalidating them all) and
                # steps that change nothing are drawn less often, so runs reach deep states.
                ends = any(ends_early(self.protocol, self.config.instances[i], st_)
                           for i, st_ in s.moves)
                weight = 1 if ends or s.after == self.config else EAGER
                weighted.append((weight, a))
            weighted.sort(key=lambda wa: -wa[0])
            got = self.plans.options[self.config] = [a for w, a in weighted for _ in range(w)]
        return got

    def forbidden_choices(self, i: int) -> list[SystemAction]:
        """Refusable actions of instance ``i`` the system does not enable here; a parameter
        the system binds takes the value the system's state gives it."""
        key = (self.config, i)
        got = self.plans.forbidden.get(key)
        if got is not None:
            return got
        bound = self._bound_values()
        enabled = set(self.plans.enabled(self.config))
        # First the probes the system's state alone refuses (see system_probes).
        probes = self.system_probes(i)
        out, seen = list(probes), {_key(a) for a in probes}
        for t in self.protocol.transitions:
            if t.trigger not in self.forbidden or t.trigger in self.system.sync:
                continue
            for choice in t.param_choices():
                if any(name in choice and choice[name] != v for name, v in bound.items()):
                    continue
                a = SystemAction(i, t.trigger, choice, forbidden=True, who=f"q{i}")
                k = _key(a)
                if k not in enabled and k not in seen:
                    seen.add(k)
                    out.append(a)
        self.plans.forbidden[key] = out
        return out

    def _bound_values(self) -> dict[str, Value]:
        """The value the system's state gives each parameter it binds."""
        sv = self.system.shared_view(self.config)
        return {b.param: b.fn(sv) for b in self.system.bind}

    def system_probes(self, i: int) -> list[SystemAction]:
        """The probes the system's state alone refuses: an action the instance's machine
        enables that the system does not, with each bound parameter at the value the system
        gives it (a confirmation while the session's message is pending). Refusable triggers
        are probed so; while another instance holds a lock, so is every step of this one that
        would take it, refusable or not (an approval, a new call, a recovery's lookup while
        another call's runtime holds the session: the implementation must refuse each and
        change nothing). Random draws rarely hit them; they are what a system adds. Worked
        out once per configuration and instance."""
        key = (self.config, i)
        got = self.plans.bound.get(key)
        if got is not None:
            return got
        bound = self._bound_values()
        enabled = set(self.plans.enabled(self.config))
        probes: list[SystemAction] = self.plans.bound.setdefault(key, [])
        mine, shared = self.config.instances[i], self.config.shared
        lock = self.system.mutex is not None
        for s in self.protocol.enabled(mine):
            t = s.transition
            if t.trigger in self.system.sync:
                continue
            # A step the lock refuses (another instance holds it) is probed, refusable or not:
            # the implementation must refuse it (SessionBusy) and change nothing.
            if t.trigger not in self.forbidden and not (
                    lock and self.system.lock_after(shared, mine, s.after, t.trigger) is None):
                continue
            params = {**s.params, **{n: v for n, v in bound.items() if n in s.params}}
            a = SystemAction(i, t.trigger, params, forbidden=True, who=f"q{i}", bound=True)
            if _key(a) not in enabled and a not in probes:
                probes.append(a)
        return probes

    # -- taking a step ---------------------------------------------------------
    def apply(self, action: SystemAction) -> None:
        self.steps.append(action)
        if action.forbidden:
            self._refuse(action)
        else:
            self._take(action)
        self.history.append(self.config)

    def _take(self, action: SystemAction) -> None:
        found = self.plans.enabled(self.config).get(_key(action))
        if found is None:
            raise Invalid(f"{action.text()} is not enabled in the system here")
        step = found[1]
        self._perform(action)
        for i, s in step.moves:
            if s.transition.observable is not None:
                self.logged_steps.add(i)
            label = transition_label(s.transition)
            self.fired[label] = self.fired.get(label, 0) + 1
        if step.shared is not None:
            label = f"system {step.trigger}"
            self.fired[label] = self.fired.get(label, 0) + 1
        self.config = step.after

    def _perform(self, action: SystemAction) -> None:
        try:
            self.adapter.perform(action.target, action.trigger, action.params)  # type: ignore[arg-type]
        except Refused as exc:
            raise Divergence(f"the implementation refused {action.text()}, which the model "
                             f"allows: {exc}") from None
        except Exception as exc:
            if blame_adapter(self.adapter, exc):
                raise adapter_fault(self.adapter, exc, f"performing {action.text()}") from exc
            raise Divergence(f"the implementation raised {type(exc).__name__} on "
                             f"{action.text()}: {exc}") from exc

    def _refuse(self, action: SystemAction) -> None:
        if _key(SystemAction(action.instance, action.trigger, action.params, who=action.who)) \
                in self.plans.enabled(self.config):
            raise Invalid(f"{action.text()} is allowed here")
        sv = self.system.shared_view(self.config)
        for b in self.system.bind:  # the system's state decides these, not the caller
            if b.param in action.params and action.params[b.param] != b.fn(sv):
                raise Invalid(f"{action.text()}: {b.param} is {b.fn(sv)!r} here ({b.text})")
        before = self.observe_all()
        perform_refused(self.adapter, action.instance, action)
        after = self.observe_all()
        if after != before:
            changed = sorted(k for k in before if before[k] != after[k])
            raise Divergence(f"{action.text()}: the refusal changed the implementation "
                             f"({', '.join(changed)})")

    # -- checks ----------------------------------------------------------------
    def observe(self, i: int) -> dict[str, Value]:
        try:
            observed = self.adapter.observe(i)
        except Exception as exc:
            if blame_adapter(self.adapter, exc):
                raise adapter_fault(self.adapter, exc, f"observing q{i}") from exc
            raise Divergence(f"observing q{i} after step {len(self.steps)} raised "
                             f"{type(exc).__name__}: {exc}") from exc
        return self.contract.check(i, observed)

    def observe_system(self) -> dict[str, Value]:
        """``observe(None)``: the system's own variables, every one, within its domain."""
        try:
            observed = self.adapter.observe(None)  # type: ignore[arg-type]
        except Exception as exc:
            if blame_adapter(self.adapter, exc):
                raise adapter_fault(self.adapter, exc, "observing the system") from exc
            raise Divergence(f"observing the system after step {len(self.steps)} raised "
                             f"{type(exc).__name__}: {exc}") from exc
        return check_system_observation(self.system, observed)

    def observe_all(self) -> dict[str, Any]:
        out: dict[str, Any] = {f"q{i}": self.observe(i) for i in range(self.instances)}
        out["system"] = self.observe_system()
        return out

    def check(self) -> None:
        for i, c in enumerate(self.config.instances):
            broken = self.protocol.broken_invariants(c)
            if broken:
                raise Divergence(f"model invariant {broken[0].name} broken on q{i}")
        broken_sys = self.system.broken_invariants(self.config)
        if broken_sys:
            raise Divergence(f"system invariant {broken_sys[0].name} broken")
        unobservable = self.contract.unobservable
        for i, c in enumerate(self.config.instances):
            observed = self.observe(i)
            expected = expected_projection(self.protocol, c, unobservable)
            diffs = {k: (observed[k], x) for k, x in expected.items() if observed[k] != x}
            if diffs:
                shown = ", ".join(f"{k}: implementation {o!r}, model {x!r}"
                                  for k, (o, x) in sorted(diffs.items()))
                raise Divergence(f"q{i} differs from the model after step {len(self.steps)}: "
                                 f"{shown}")
        observed_sys = self.observe_system()
        expected_sys = self.system.shared_view(self.config)
        diffs_sys = {k: (observed_sys[k], x) for k, x in expected_sys.items()
                     if observed_sys[k] != x}
        if diffs_sys:
            shown = ", ".join(f"{k}: implementation {o!r}, model {x!r}"
                              for k, (o, x) in sorted(diffs_sys.items()))
            raise Divergence(f"the system differs from the model after step {len(self.steps)}: "
                             f"{shown}")

    def confirm_reused(self) -> None:
        """Nothing to confirm: a system's runner observes every instance after every step
        (it does not use an adapter's version)."""

    def finish(self) -> None:
        """Close the implementation; its event log must pass the trace checker."""
        Runner.finish(self)  # type: ignore[arg-type]


def check_system_observation(system: System, observed: object) -> dict[str, Value]:
    """``observed`` as a dict of the system's variables, or :class:`AdapterError` saying why not."""
    where = "observe(None)"
    if not isinstance(observed, Mapping):
        raise AdapterError(f"{where} returned {type(observed).__name__}, not a mapping of the "
                           f"system's variables {list(system.variable_names)} to values")
    keys, wanted = set(observed), set(system.variable_names)
    if keys != wanted:
        parts = []
        if wanted - keys:
            parts.append(f"left out the system variable(s) {sorted(wanted - keys)} (return "
                         "every variable of the system)")
        if keys - wanted:
            parts.append(f"returned the unknown key(s) {sorted(map(str, keys - wanted))} (the "
                         f"system's variables are {sorted(wanted)})")
        raise AdapterError(f"{where} " + "; ".join(parts))
    for v in system.variables:
        value = observed[v.name]
        if not any(type(value) is type(d) and value == d for d in v.domain) and not (
                isinstance(value, str) and value in v.domain):
            raise AdapterError(f"{where} gave {v.name}={value!r} ({type(value).__name__}), "
                               f"outside its domain {list(v.domain)}")
    return dict(observed)


# --------------------------------------------------------------------------
# Hypothesis drives runs
# --------------------------------------------------------------------------
def make_system_lockstep(system: System, factory: AdapterFactory, *, forbidden: frozenset[str],
                         name: str = "SystemLockstep") -> type[RuleBasedStateMachine]:
    """A RuleBasedStateMachine class checking ``factory()``'s implementation against ``system``."""
    record = Record()
    index = functools_cache_index()

    class SystemLockstep(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.run = SystemRunner(system, factory, forbidden)
            self.seen: set[str] = set()
            record.examples += 1

        @rule(data=st.data())
        def step(self, data: st.DataObject) -> None:
            options = self.run.options()
            slots = len(options) + len(options) // 4 + 1  # ~1 in 5: ask for something forbidden
            n = data.draw(index(slots), label="action")
            if n < len(options):
                action = options[n]
            else:
                i = data.draw(index(system.instances), label="instance")
                choices = self.run.forbidden_choices(i)
                if not choices:
                    return
                groups: dict[str, list[SystemAction]] = {}
                for a in choices:  # the bound probes first (Hypothesis favours the first)
                    groups.setdefault(("bound " if a.bound else "") + a.trigger, []).append(a)
                group = list(groups.values())[data.draw(index(len(groups)),
                                                        label="forbidden trigger")]
                action = group[data.draw(index(len(group)), label="forbidden")]
            try:
                self.run.apply(action)
            finally:
                for k, v in self.run.fired.items():
                    record.fired[k] = record.fired.get(k, 0) + v
                self.seen.update(self.run.fired)
                self.run.fired = {}

        @invariant()
        def agrees_with_the_model(self) -> None:
            self.run.check()

        def teardown(self) -> None:
            hypothesis.target(len(self.seen), label="transitions fired")
            record.failing_steps = list(self.run.steps)
            try:
                self.run.finish()
            finally:
                record.trace_events += self.run.trace_events
                record.trace_failure = record.trace_failure or self.run.trace_problem

    SystemLockstep.__name__ = SystemLockstep.__qualname__ = name
    SystemLockstep.record = record
    SystemLockstep.spec = (system, factory, forbidden)
    return SystemLockstep


def functools_cache_index() -> Callable[[int], st.SearchStrategy[int]]:
    cache: dict[int, st.SearchStrategy[int]] = {}

    def index(n: int) -> st.SearchStrategy[int]:
        got = cache.get(n)
        if got is None:
            got = cache[n] = st.integers(0, n - 1)
        return got

    return index


TOUR_EDGES = 15_000  # steps the tour's breadth-first search may follow (a deterministic budget)


def system_tour(system: System, forbidden: frozenset[str]) -> list[list[SystemAction]]:
    """Shortest runs, found breadth-first: one that fires each machine transition, each
    synchronised step and each system step; and, for each refusal the system's state alone
    decides (a bound parameter) and each step that can come right before it, one ending in
    that refused action. Then the same search again from the first configuration reached
    with each other value of the system's own variables (the shared stock gone, a message
    pending), so each step is also fired there: an order's handler refused because the
    stock is gone, not only because another writer changed a product.

    The refusals are what a system adds: a confirmation refused because the session's
    message is pending, reached after a draft was made, or after the message arrived, or
    after another query moved. Each search follows at most ``TOUR_EDGES`` steps.
    """
    plans = plans_for(system)
    goals: dict[tuple[Any, ...], list[SystemAction]] = {}
    start = system.initial_config()
    firsts = _tour_search(system, plans, forbidden, start, [], goals)
    for shared, (config, path) in sorted(firsts.items(), key=lambda kv: repr(kv[0])):
        if shared != start.shared:
            _tour_search(system, plans, forbidden, config, path, goals)
    _lift_machine_runs(system, forbidden, goals)
    return longest_paths([goals[k] for k in sorted(goals, key=repr)])


def _lift_machine_runs(system: System, forbidden: frozenset[str],
                       goals: dict[tuple[Any, ...], list[SystemAction]]) -> None:
    """A machine transition the bounded searches did not fire (it lies deeper than
    ``TOUR_EDGES``, say a third not-found in a row) gets the machine tour's run to it, taken
    by the system's first instance, where the system model accepts that run."""
    fired = {k[1] for k in goals if k[0] == "fires"}
    missing = {transition_label(t) for t in system.machine.transitions} - fired
    if not missing:
        return
    m = system.machine
    for path in machine_tour(m, forbidden):
        c, lifted = m.initial_config(), []
        for a in path:
            if a.forbidden or not missing:
                break
            step = m.fire(c, a.trigger, a.params)
            c = step.after
            lifted.append(SystemAction(0, a.trigger, a.params, who="q0"))
            label = transition_label(step.transition)
            if label in missing and system_history(system, lifted) is not None:
                goals[("lifted", label)] = list(lifted)
                missing.discard(label)


def _tour_search(system: System, plans: SystemPlans, forbidden: frozenset[str],
                 start: SystemConfig, prefix: list[SystemAction],
                 goals: dict[tuple[Any, ...], list[SystemAction]]
                 ) -> dict[tuple[Value, ...], tuple[SystemConfig, list[SystemAction]]]:
    """One bounded breadth-first search from ``start`` (reached by ``prefix``), adding goals;
    returns the first configuration (and its run) reached with each value of the system's
    own variables."""
    parent: dict[SystemConfig, tuple[SystemConfig, SystemAction] | None] = {start: None}
    firsts = {start.shared: (start, list(prefix))}
    frontier = [start]
    edges = 0
    while frontier and edges < TOUR_EDGES:
        nxt: list[SystemConfig] = []
        for c in frontier:
            path = [*prefix, *_path(parent, c)]
            for a, step in plans.enabled(c).values():
                edges += 1
                labels = [transition_label(m.transition) for _, m in step.moves]
                if step.shared is not None or len(step.moves) != 1:
                    labels.append(f"{a.who} {a.trigger}")
                for label in labels:  # under each value of the system's own variables
                    goals.setdefault(("fires", label, c.shared), [*path, a])
                after = _Probe(system, plans, forbidden, step.after)
                for i in range(system.instances):
                    for probe in after.probes(i):
                        key = ("probe", probe.trigger, tuple(sorted(probe.params.items())),
                               a.who == f"q{i}", a.trigger)
                        goals.setdefault(key, [*path, a, probe])
                if step.after not in parent:
                    parent[step.after] = (c, a)
                    nxt.append(step.after)
                    firsts.setdefault(step.after.shared, (step.after, [*path, a]))
        frontier = nxt
    return firsts


class _Probe:
    """Just enough of a runner to list the system probes of a configuration (a system with
    neither bound parameters nor a lock has none)."""

    def __init__(self, system: System, plans: SystemPlans, forbidden: frozenset[str],
                 config: SystemConfig) -> None:
        self.system, self.protocol, self.plans = system, system.machine, plans
        self.forbidden, self.config = forbidden, config

    def _bound_values(self) -> dict[str, Value]:
        return SystemRunner._bound_values(self)  # type: ignore[arg-type]

    def probes(self, i: int) -> list[SystemAction]:
        if not (self.system.bind or self.system.mutex):
            return []
        return SystemRunner.system_probes(self, i)  # type: ignore[arg-type]


def _path(parent: Mapping[SystemConfig, tuple[SystemConfig, SystemAction] | None],
          c: SystemConfig) -> list[SystemAction]:
    out: list[SystemAction] = []
    link = parent[c]
    while link is not None:
        c, action = link
        out.append(action)
        link = parent[c]
    return out[::-1]


_TOURS: dict[tuple[int, frozenset[str]], tuple[System, list[list[SystemAction]]]] = {}


def tour(system: System, forbidden: frozenset[str]) -> list[list[SystemAction]]:
    """:func:`system_tour`, worked out once per system object."""
    key = (id(system), frozenset(forbidden))
    found = _TOURS.get(key)
    if found is None or found[0] is not system:
        found = _TOURS[key] = (system, system_tour(system, forbidden))
    return found[1]


_tour = tour  # run_system_lockstep's own parameter is called tour


def run_system_lockstep(machine: type[RuleBasedStateMachine], profile: settings,
                        seed: int | None = None, *, minimise: bool = True,
                        out: Path | None = None, tour: bool = True) -> Record:
    """The directed tour (unless ``tour`` is false), then Hypothesis's random runs of a
    system; the first failure minimised and written, ``killed_by`` the phase that found it."""
    record: Record = machine.record  # type: ignore[attr-defined]
    record.__init__()  # type: ignore[misc]
    record.spec = machine.spec  # type: ignore[attr-defined]
    record.out = out
    start = time.perf_counter()
    system, factory, forbidden = record.spec
    failing: Callable[[], list[SystemAction]] = lambda: [  # noqa: E731
        a for a in record.failing_steps if isinstance(a, SystemAction)]
    generate_only = settings(profile, phases=[Phase.explicit, Phase.reuse, Phase.generate,
                                              Phase.target])
    test = get_state_machine_test(machine, settings=generate_only, _min_steps=MIN_STEPS)
    if seed is not None:
        test = hypothesis.seed(seed)(test)
    try:
        for path in _tour(system, forbidden) if tour else []:  # the directed runs first
            keep: list[SystemRunner] = []
            found = replay_steps(system, factory, forbidden, path, keep=keep)
            for k, v in keep[0].fired.items():
                record.fired[k] = record.fired.get(k, 0) + v
            record.trace_events += keep[0].trace_events
            record.examples += 1
            if found is not None:
                cut: list[SystemAction] = cut_at_divergence(
                    path, len(keep[0].steps),
                    lambda c: replay_steps(system, factory, forbidden, c) is not None)
                record.failing_steps = list(cut)
                record.killed_by = "tour"
                raise Divergence(found)
        record.killed_by = "random"  # a failure from here on is the random phase's
        with install_independent_draws():
            test()
        record.killed_by = None
    except Exception as exc:
        adapter = _adapter_error(exc)
        if adapter is not None:
            record.adapter_error, record.killed_by = str(adapter), None
            return record
        record.seconds_to_failure = time.perf_counter() - start
        steps = failing()
        try:
            message = replay_steps(system, factory, forbidden, steps)
            if minimise and message is not None:
                steps = minimise_steps(system, factory, forbidden, steps)
                message = replay_steps(system, factory, forbidden, steps) or message
        except Invalid:
            message = None
        except AdapterError as err:
            record.adapter_error, record.killed_by = str(err), None
            return record
        message = message or f"{type(exc).__name__}: {exc}"
        record.steps = list(steps)
        listing = "\n".join(f"  {n}. {a.text()}" for n, a in enumerate(steps, start=1))
        record.failure = f"{machine.__name__}: {message}\nreplayable steps ({len(steps)}):\n{listing}"
        try:
            record.itf_path = write_steps(system, machine.__name__, message, steps, out)
        except CounterexampleWriteError as err:
            record.counterexample_error = str(err)
    return record


# --------------------------------------------------------------------------
# Replaying and minimising
# --------------------------------------------------------------------------
def replay_steps(system: System, factory: AdapterFactory, forbidden: frozenset[str],
                 steps: Sequence[SystemAction], keep: list[SystemRunner] | None = None
                 ) -> str | None:
    """Replay ``steps`` on a fresh implementation: the divergence, or None if they agree.

    Raises :class:`Invalid` when the system model itself rejects the list.
    """
    run = SystemRunner(system, factory, forbidden)
    if keep is not None:
        keep.append(run)
    return run_steps(run, steps)


def system_history(system: System, steps: Sequence[SystemAction]) -> list[SystemConfig] | None:
    """The system model's configurations before and after each step, or None when the model
    rejects the list (a step it does not enable, a refusal of something it allows, or a
    refusal quoting a value the system's state decides otherwise)."""
    plans = plans_for(system)
    config = system.initial_config()
    out = [config]
    for a in steps:
        found = plans.enabled(config).get(_key(a))
        if a.forbidden:
            sv = system.shared_view(config)
            if found is not None or any(b.param in a.params and a.params[b.param] != b.fn(sv)
                                        for b in system.bind):
                return None
        elif found is None:
            return None
        else:
            config = found[1].after
        out.append(config)
    return out


def minimise_steps(system: System, factory: AdapterFactory, forbidden: frozenset[str],
                   steps: list[SystemAction], budget: int = REPLAY_BUDGET) -> list[SystemAction]:
    """Shrink a failing system run with the machine lockstep's minimiser
    (:func:`._shrink.shrink`): instances apart, cycles cut, ddmin, single steps."""
    return shrink(steps,
                  lambda c: replay_steps(system, factory, forbidden, c) is not None,
                  lambda c: system_history(system, c), budget)


def write_steps(system: System, name: str, message: str, steps: Sequence[SystemAction],
                out: Path | None = None) -> Path:
    """The minimised run as ``system-lockstep-NAME.steps.json``; returns its path."""
    directory = counterexample_dir(out)
    path = directory / f"system-lockstep-{_safe(name)}.steps.json"
    doc = {"schema": STEPS_SCHEMA, "system": system.name, "instances": system.instances,
           "divergence": message,
           "steps": [{"who": a.who, "trigger": a.trigger, "params": dict(a.params),
                      "refused": a.forbidden} for a in steps]}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        raise CounterexampleWriteError(
            f"cannot write the counterexample into {directory}: {exc.strerror or exc}; choose a "
            "writable folder with --out") from exc
    return path


def load_steps(path: Path | str) -> tuple[str, list[SystemAction]]:
    """(system name, steps) of a file :func:`write_steps` wrote."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    if doc.get("schema") != STEPS_SCHEMA:
        raise ValueError(f"{path} is not a {STEPS_SCHEMA} file")
    steps = []
    for s in doc["steps"]:
        who = str(s["who"])
        instance = int(who[1:]) if who.startswith("q") else SYSTEM
        params: Params = {k: tuple(v) if isinstance(v, list) else v
                          for k, v in s["params"].items()}
        steps.append(SystemAction(instance, str(s["trigger"]), params,
                                  bool(s.get("refused", False)), who=who))
    return str(doc["system"]), steps


def unfired(system: System, fired: Mapping[str, int]) -> list[str]:
    """Machine transitions and system steps no run of the campaign took."""
    labels = [transition_label(t) for t in system.machine.transitions]
    labels += [f"system {t.trigger}" for t in system.transitions]
    return [x for x in dict.fromkeys(labels) if x not in fired]
