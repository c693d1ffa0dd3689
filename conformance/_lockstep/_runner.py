"""One lockstep run: an implementation (through its adapter) and the model, side by side.

The model side is always a system (:mod:`._world`); a single machine is a system of
independent instances. Each step is drawn from what the model enables; about one in five
instead asks for a refusable action the model forbids there, and the implementation must
refuse it and change nothing. After every step each instance's observation must equal the
model's projection, every invariant must hold, and the system's own variables
(``observe(None)``) must equal the model's. At the end the event log goes through the trace
checker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from settled.conformance._lockstep._shrink import Divergence, Invalid
from settled.model import Config, Step, System, SystemConfig, SystemStep, Transition, Value

from .._adapter import Refused
from ._action import EAGER, SYSTEM, Action, rules_text, transition_label
from ._contract import OutsideDomain, adapter_fault, blame_adapter, perform_refused
from ._coverage import (
    _with_cases,
    absent_refusal,
    edge_of,
    ends_early,
    expected_projection,
    refused_alone,
)
from ._explain import broken_by, why_allowed, why_refused
from ._interactions import interactions_of
from ._observe import Observing
from ._quiesce import QuiescenceStats, not_checked_reason, quiesce, required_steps
from ._world import Plans, plans_for

_DRAWN_LISTS = 50_000  # draw lists a campaign keeps (one per configuration seen)


class Runner(Observing):
    """One run of a system's lockstep (a machine's: a system of independent instances)."""

    def __init__(self, system: System, factory: Any, forbidden: frozenset[str],
                 quiesce: bool = False) -> None:
        super().__init__(system, factory)
        # The quiescence phase (:mod:`._quiesce`) before the run's end, when asked for and
        # the adapter can take its own turns; its figures, and why it did not run.
        self.quiesce = quiesce
        self.quiet = QuiescenceStats()
        self.unsettled = False  # the run failed in the quiescence phase
        self.forbidden = frozenset(forbidden)
        self.plans: Plans = plans_for(system, self.forbidden)
        self.config = system.initial_config()
        # (steps taken when observed, {instance: observation}): what is known to be current
        # (the system's own variables under None)
        self.observed: tuple[int, dict[int | None, dict[str, Value]]] = (-1, {})
        self.history: list[SystemConfig] = [self.config]
        self.fired: dict[str, int] = {}
        self.edges: dict[tuple[str, str, str], int] = {}  # (from, to, trigger) -> times
        self.cases: dict[tuple[str, str, str], int] = {}  # (transition, guard, case) -> times
        self.refusals: dict[tuple[str, str], int] = {}  # (transition, atom refused alone) -> times
        self.values: dict[tuple[tuple[str, str, str], str, str], int] = {}  # (edge, param, value)
        self.protocol_cases = _with_cases(self.protocol)
        self.last: tuple[int, Transition] | None = None  # the last step taken: instance, rule
        self.interactions: dict[tuple[str, str], int] = {}  # (step moving shared, other's state)

    @property
    def configs(self) -> tuple[Config, ...]:
        return self.config.instances

    # -- what may be drawn -----------------------------------------------------
    def options(self) -> list[Action]:
        """Enabled steps, weighted by repetition, eager ones first (the list is shared: do
        not change it)."""
        drawn = self.plans.drawn
        got = drawn.get(self.config)
        if got is None:
            if len(drawn) >= _DRAWN_LISTS:
                drawn.clear()
            got = drawn[self.config] = self._draw_list()
        return got

    def _draw_list(self) -> list[Action]:
        out: list[tuple[int, int, Action]] = []
        if self.plans.independent:
            cache = self.plans.options
            for i, c in enumerate(self.configs):
                got = cache.get((c, i))
                if got is None:
                    got = cache[(c, i)] = self._instance_options(i, c)
                out.extend(got)
        else:
            for a, s in self.plans.enabled(self.config).values():
                out.append((self._weight(s), _step_rank(s), a))
        out.sort(key=_order)  # stable: within a weight and rank, instance and table order
        return [a for w, _, a in out for _ in range(w)]

    def _instance_options(self, i: int, c: Config) -> list[tuple[int, int, Action]]:
        # Ending a story before anything was submitted (a failed check, an invalidated
        # draft) and retries that change nothing are drawn less often, so runs reach deep
        # states. Hypothesis often draws the first element on purpose, so eager steps go
        # first.
        return [(1 if ends_early(self.protocol, c, s) or s.after == c else EAGER,
                 _rank(s.transition), Action(i, s.transition.trigger, s.params))
                for s in self.protocol.enabled(c)]

    def _weight(self, s: SystemStep) -> int:
        ends = any(ends_early(self.protocol, self.configs[i], st) for i, st in s.moves)
        return 1 if ends or s.after == self.config else EAGER

    def forbidden_choices(self, i: int) -> list[Action]:
        """Refusable actions of instance ``i`` the model does not enable here, the system's
        own refusals first (:meth:`system_probes`); a parameter the system binds takes the
        value the system's state gives it. Worked out once per configuration and instance."""
        key = (self.configs[i] if self.plans.independent else self.config, i)
        got = self.plans.forbidden_lists.get(key)
        if got is None:
            got = self.plans.forbidden_lists[key] = self._forbidden_choices(i)
        return got

    def _forbidden_choices(self, i: int) -> list[Action]:
        bound = self.plans.bound_values(self.config)
        probes = self.system_probes(i)
        out, seen = list(probes), {a.key() for a in probes}
        for t in self.protocol.transitions:
            if t.trigger not in self.forbidden or t.trigger in self.system.sync:
                continue
            for choice in t.param_choices():
                if any(name in choice and choice[name] != v for name, v in bound.items()):
                    continue
                a = Action(i, t.trigger, choice, forbidden=True)
                if a.key() not in seen and not self.plans.allows(self.config, a):
                    seen.add(a.key())
                    out.append(a)
        return out

    def system_probes(self, i: int) -> list[Action]:
        """The probes the system's state alone refuses: an action the instance's machine
        enables that the system does not, with each bound parameter at the value the system
        gives it (a confirmation while the session's message is pending). Refusable triggers
        are probed so; while another instance holds a lock, so is every step of this one that
        would take it, refusable or not. Random draws rarely hit them; they are what a system
        adds (none for independent instances)."""
        return system_probes(self.plans, self.config, i)

    # -- taking a step ---------------------------------------------------------
    def apply(self, action: Action) -> None:
        self.steps.append(action)
        if action.forbidden:
            self.last = None
            self._refuse(action)
        else:
            self._take(action)
        self.history.append(self.config)

    def _take(self, action: Action) -> None:
        step = self.plans.step(self.config, action)
        if step is None:
            raise Invalid(f"{action.text()} is not enabled here")
        self._perform(action, step)
        single = len(step.moves) == 1 and step.shared is None
        self.last = (step.moves[0][0], step.moves[0][1].transition) if single else None
        for i, s in step.moves:
            self._count(i, s, action)
        if step.shared is not None:
            label = f"system {step.trigger}"
            self.fired[label] = self.fired.get(label, 0) + 1
        for key in interactions_of(self.system, self.config, step):
            self.interactions[key] = self.interactions.get(key, 0) + 1
        self.config = step.after

    # -- the quiescence phase --------------------------------------------------
    def finish(self) -> None:
        """The quiescence phase (when asked for), then :meth:`Observing.finish`."""
        if self.quiesce:
            try:
                self.settle()
            except BaseException:
                self.adapter.close()
                raise
        super().finish()

    def settle(self) -> None:
        """Faults stop; every instance must settle within its bound (:mod:`._quiesce`)."""
        from settled.model.progress import RESTING, liveness_of

        from .._liveness import is_fault, quiescence_bound

        why = not_checked_reason(self)
        if why is not None:
            self.quiet.not_checked = why
            return
        progress = liveness_of(self.protocol).progress
        if not progress:
            self.quiet.not_checked = (f"{self.protocol.name} declares no progress property "
                                      "(model/progress.py): nothing to demand once faults stop")
            return
        resting = RESTING.get(self.protocol.name, ())
        plans = self.plans
        if plans.required is None:
            plans.required = required_steps(self.protocol, is_fault)

        def bound_of(c: Config) -> Any:
            got = plans.bounds.get(c)
            if got is None:
                got = plans.bounds[c] = quiescence_bound(self.protocol, c, resting=resting)
            return got

        try:
            settled = quiesce(self, resting, plans.required, bound_of, progress)
        except Divergence:
            self.unsettled = True  # found by the phase: its counterexample may need no steps
            raise
        self.quiet.add(settled)

    def take_settling(self, action: Action) -> None:
        """A world's step of the quiescence phase: performed, then checked."""
        self._take(action)
        self.history.append(self.config)
        self.observed = (-1, {})  # the last check's observations are stale now
        self.check(acted=action.target)

    def advance_settling(self, action: Action, check: bool = True) -> None:
        """A step the implementation's own scheduler took: the model follows it (counted;
        the implementation already took it). A turn that took several is checked after its
        last (``check``)."""
        step = self.plans.step(self.config, action)
        if step is None:
            raise Invalid(f"{action.text()} is not enabled here")
        for i, s in step.moves:
            self._count(i, s, action)
        self.config = step.after
        self.history.append(self.config)
        self.observed = (-1, {})  # the last check's observations are stale now
        if check:
            self.check(acted=action.target)

    def _perform(self, action: Action, step: SystemStep) -> None:
        single = step.moves[0] if len(step.moves) == 1 else None
        try:
            self.adapter.perform(action.target, action.trigger, action.params)  # type: ignore[arg-type]
        except Refused as exc:
            why = "" if single is None else (
                f" ({why_allowed(single[1], self.protocol.view(self.configs[single[0]]))})")
            raise Divergence(f"the implementation refused {action.text()}, which the model "
                             f"allows{why}: {exc}") from None
        except Exception as exc:
            if blame_adapter(self.adapter, exc):
                raise adapter_fault(self.adapter, exc, f"performing {action.text()}") from exc
            rules = "" if single is None else f" ({rules_text(single[1].transition.rules)})"
            raise Divergence(f"the implementation raised {type(exc).__name__} on "
                             f"{action.text()}{rules}: {exc}") from exc

    def _count(self, i: int, s: Step, action: Action) -> None:
        """Coverage of one instance's move: its transition, edge and guard alternative."""
        t, before = s.transition, self.configs[i]
        if t.observable is not None:
            self.logged_steps.add(i)
            self.witnessed[t.observable] = self.witnessed.get(t.observable, 0) + 1
        edge = edge_of(before, s.after, t)
        self.edges[edge] = self.edges.get(edge, 0) + 1
        for name, value in s.params.items():
            taken = (edge, name, repr(value))
            self.values[taken] = self.values.get(taken, 0) + 1
        label = transition_label(t)
        if id(t) in self.protocol_cases:
            v = self.protocol.view(before)
            for g in t.guards:
                case = g.case(v, s.params)
                if case is not None:
                    key = (label, g.name, case)
                    self.cases[key] = self.cases.get(key, 0) + 1
        self.fired[label] = self.fired.get(label, 0) + 1

    def _refuse(self, action: Action) -> None:
        if self.plans.allows(self.config, action):
            raise Invalid(f"{action.text()} is allowed here")
        misquote = self.plans.misquotes(self.config, action)
        if misquote is not None:  # the system's state decides these, not the caller
            raise Invalid(misquote)
        if action.instance == SYSTEM or not self.plans.independent:
            self._refuse_in_system(action)
            return
        i = action.instance
        # The last check observed every instance after the previous step: reuse it.
        known = self.observed[1] if self.observed[0] == len(self.steps) - 1 else {}
        before = known.get(i) or self.current(i, self.version())[0]
        perform_refused(self.adapter, i, action,
                        lambda: why_refused(self.protocol, self.configs[i], action))
        # The refused instance is always observed afresh: a refusal that changed it is caught
        # here, whatever the adapter's version says.
        after = self.current(i, self.version(), fresh=True)[0]
        self._unchanged(action, before, after)
        self.observed = (len(self.steps), {i: after})
        self._count_refusal(action)

    def _refuse_in_system(self, action: Action) -> None:
        # The last check observed every instance, and the system, after the previous step:
        # reuse it. Every instance and the system are observed afresh after the refusal (one
        # that changed any of them is caught), and the next check reads those.
        known = self.observed[1] if self.observed[0] == len(self.steps) - 1 else {}
        whole = self.instances + (1 if self.system.variables else 0)
        before = known if len(known) == whole else self._observe_each()
        perform_refused(self.adapter, action.target, action, lambda: self._why_refused(action))
        after = self._observe_each()
        self._unchanged(action, _flat(before), _flat(after))
        self.observed = (len(self.steps), after)
        self._count_refusal(action)

    def _why_refused(self, action: Action) -> str:
        if action.instance == SYSTEM:
            return ""
        c = self.configs[action.instance]
        if any(s.transition.trigger == action.trigger and dict(s.params) == dict(action.params)
               for s in self.protocol.enabled(c)):
            return ("the system does not enable it here (a bound parameter, or a lock another "
                    "instance holds)")
        return why_refused(self.protocol, c, action)

    def _unchanged(self, action: Action, before: Mapping[str, Any],
                   after: Mapping[str, Any]) -> None:
        if after != before:
            changed = ", ".join(f"{k}: {before.get(k)!r} -> {after[k]!r}" for k in sorted(after)
                                if before.get(k) != after[k])
            why = self._why_refused(action)
            raise Divergence(f"{action.text()}: the refusal changed the implementation "
                             f"({changed})" + (f"; the model forbids it: {why}" if why else ""))

    def _count_refusal(self, action: Action) -> None:
        if action.instance == SYSTEM:
            return
        c = self.configs[action.instance]
        keys = refused_alone(self.protocol, c, action.trigger, action.params)
        absent = absent_refusal(self.protocol, c, action.trigger)
        for key in [*keys, absent] if absent is not None else keys:
            self.refusals[key] = self.refusals.get(key, 0) + 1

    def observe_all(self) -> dict[str, Any]:
        """Every instance and the system's own variables, as one flat mapping."""
        return _flat(self._observe_each())

    def _observe_each(self) -> dict[int | None, dict[str, Value]]:
        """Every instance, and the system's own variables (under None) where it has any."""
        out: dict[int | None, dict[str, Value]] = {i: self.observe(i)
                                                   for i in range(self.instances)}
        if self.system.variables:
            out[None] = self.observe_system()
        return out

    # -- checks ----------------------------------------------------------------
    def observe(self, i: int) -> dict[str, Value]:
        """:meth:`Observing.observe`; a value outside the model's domain is a divergence,
        said with the step that led there and the rules it breaks."""
        try:
            return super().observe(i)
        except OutsideDomain as exc:
            raise Divergence(f"{exc} after step {len(self.steps)}"
                             f"{self._explain(i, exc.observed)}") from None

    def check(self, acted: int | None = None) -> None:
        """Every instance against the model. ``acted``: the instance the last step acted on
        (default: the last recorded step's; a quiescence step is not recorded there)."""
        self._check_invariants()
        plans, unobservable = self.plans, self.contract.unobservable
        # An instance a refusal just observed (unchanged) need not be observed again.
        known = self.observed[1] if self.observed[0] == len(self.steps) else {}
        seen: dict[int | None, dict[str, Value]] = {}
        version = self.version()
        # The instance the last step acted on is observed afresh; the others may be reused
        # while the adapter's version stands (see Adapter.version).
        if acted is None and self.steps:
            acted = self.steps[-1].instance
        for i, c in enumerate(self.configs):
            observed, reused = known.get(i), False
            if observed is None:
                observed, reused = self.current(i, version, fresh=i == acted)
            expected = plans.expected.get((c, unobservable))
            if expected is None:
                expected = plans.expected[(c, unobservable)] = expected_projection(
                    self.protocol, c, unobservable)
            diffs = {k: (observed[k], x) for k, x in expected.items() if observed[k] != x}
            if diffs and reused:  # a reused observation is confirmed before it is blamed
                observed = self.hold_to_version(i, observed, version)
                diffs = {k: (observed[k], x) for k, x in expected.items() if observed[k] != x}
            seen[i] = observed
            if diffs:
                raise Divergence(f"q{i} differs from the model after step {len(self.steps)}: "
                                 f"{_diff_text(diffs)}{self._explain(i, observed)}")
        self.observed = (len(self.steps), seen)
        if self.system.variables:
            self._check_system(known)

    def _check_invariants(self) -> None:
        broken_of = self.plans.broken
        for i, c in enumerate(self.configs):
            broken = broken_of.get(c)
            if broken is None:
                broken = broken_of[c] = tuple(b.name for b in self.protocol.broken_invariants(c))
            if broken:
                raise Divergence(f"model invariant {broken[0]} broken on q{i}")
        if self.system.invariants:
            sys_broken = self.plans.broken_system.get(self.config)
            if sys_broken is None:
                sys_broken = self.plans.broken_system[self.config] = tuple(
                    b.name for b in self.system.broken_invariants(self.config))
            if sys_broken:
                raise Divergence(f"system invariant {sys_broken[0]} broken")

    def _check_system(self, known: Mapping[int | None, dict[str, Value]]) -> None:
        observed = known.get(None) or self.observe_system()
        self.observed[1][None] = observed
        expected = self.system.shared_view(self.config)
        diffs = {k: (observed[k], x) for k, x in expected.items() if observed[k] != x}
        if diffs:
            raise Divergence(f"the system differs from the model after step {len(self.steps)}: "
                             f"{_diff_text(diffs)}")

    def _explain(self, i: int, observed: Mapping[str, Value]) -> str:
        """Why a projection differs: the step that led here with its rules, the model's
        invariants and step properties the observed values break, the implementation's own
        recorded error."""
        parts = []
        last = None
        if self.last is not None and self.last[0] == i:
            t = self.last[1]
            parts.append(f"the step was {t.trigger} ({rules_text(t.rules)})")
            if len(self.history) >= 2:
                last = (self.history[-2].instances[i], t, self.steps[-1].params)
        broken = broken_by(self.protocol, self.configs[i], observed, last)
        if broken:
            parts.append("the implementation's state breaks " + "; ".join(broken))
        try:
            error = self.adapter.recorded_error(i)
        except Exception as exc:
            if blame_adapter(self.adapter, exc):
                raise adapter_fault(self.adapter, exc, f"reading q{i}'s recorded error") from exc
            error = f"reading it raised {type(exc).__name__}: {exc}"
        if error:
            parts.append(f"the implementation recorded the error: {error}")
        return "; " + "; ".join(parts) if parts else ""


def system_probes(plans: Plans, config: SystemConfig, i: int) -> list[Action]:
    """:meth:`Runner.system_probes` of instance ``i`` in ``config`` (cached per pair)."""
    system = plans.system
    if not (system.bind or system.mutex):
        return []
    key = (config, i)
    got = plans.probes.get(key)
    if got is not None:
        return got
    bound = plans.bound_values(config)
    probes: list[Action] = plans.probes.setdefault(key, [])
    mine, shared = config.instances[i], config.shared
    lock = system.mutex is not None
    for s in system.machine.enabled(mine):
        t = s.transition
        if t.trigger in system.sync:
            continue
        # A step the lock refuses (another instance holds it) is probed, refusable or not:
        # the implementation must refuse it (SessionBusy) and change nothing.
        if t.trigger not in plans.forbidden and not (
                lock and system.lock_after(shared, mine, s.after, t.trigger) is None):
            continue
        params = {**s.params, **{n: v for n, v in bound.items() if n in s.params}}
        a = Action(i, t.trigger, params, forbidden=True, bound=True)
        if not plans.allows(config, a) and a not in probes:
            probes.append(a)
    return probes


def _flat(each: Mapping[int | None, Mapping[str, Value]]) -> dict[str, Any]:
    """Observations by instance (the system's under None) as one flat mapping."""
    return {f"{'system' if i is None else f'q{i}'}.{k}": v
            for i, observed in each.items() for k, v in observed.items()}


def _diff_text(diffs: Mapping[str, tuple[Value, Value]]) -> str:
    return ", ".join(f"{k}: implementation {o!r}, model {x!r}" for k, (o, x) in sorted(diffs.items()))


def _order(wra: tuple[int, int, Action]) -> tuple[int, int]:
    return (-wra[0], wra[1])


def _rank(t: Transition) -> int:
    if t.actor == "worker":
        return 3 if t.trigger == "claim" else 0
    return {"platform": 1, "user": 2}.get(t.actor, 4)


def _step_rank(s: SystemStep) -> int:
    return _rank(s.moves[0][1].transition) if s.moves and s.shared is None else 4

