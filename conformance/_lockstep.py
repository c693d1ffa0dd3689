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
import functools
import json
import os
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
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

from settled.model import Config, IllegalTransition, Params, Protocol, Step, Transition
from settled.model._core import Value

from . import _itf
from ._adapter import Adapter, AdapterError, Refused
from ._explore import _Local
from ._profiles import install_independent_draws
from ._shrink import Divergence, Invalid, cut_at_divergence, longest_paths, run_steps, shrink
from ._trace import TraceError, check_lines

AdapterFactory = Callable[[], Adapter]
EAGER = 4  # weight of a step that keeps an instance's story going
_DRAWN_LISTS = 50_000  # draw lists a campaign keeps (one per tuple of configurations seen)
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


def transition_label(t: Transition) -> str:
    """A transition's name in coverage reports: ``trigger: sources -> dest``."""
    return f"{t.trigger}: {'|'.join(t.source)} -> {t.dest or '(same)'}"


def unfired(protocol: Protocol, fired: Mapping[str, int]) -> list[str]:
    return [label for t in protocol.transitions if (label := transition_label(t)) not in fired]


def ends_early(protocol: Protocol, before: Config, step: Step) -> bool:
    """A step into a terminal state before the instance made a submission; on a machine
    without a ``submissions`` count (approval, ledger), every step into a terminal state.
    The random phase draws it less often, so runs reach the deep states where the hazards
    are (the tour fires each of them in any case)."""
    return (step.after.state in protocol.terminal_states
            and protocol.view(before).get("submissions", 0) == 0)


def edge_key(before: Config, step: Any) -> tuple[str, str, str]:
    """An edge of the graph: (from state, to state, trigger)."""
    return edge_of(before, step.after, step.transition)


def edge_of(before: Config, after: Config, t: Transition) -> tuple[str, str, str]:
    """:func:`edge_key` of a step given by its parts."""
    return (str(before.state), str(after.state), t.trigger)


def declared_edges(protocol: Protocol) -> list[tuple[str, str, str]]:
    """Every (from, to, trigger) the table declares, in declaration order."""
    return list(dict.fromkeys((str(src), str(t.target(src)), t.trigger)
                              for t in protocol.transitions for src in t.source))


def declared_cases(protocol: Protocol) -> list[tuple[str, str, str]]:
    """Every (transition, guard, alternative) of a disjunctive guard."""
    return [(transition_label(t), g.name, name) for t in protocol.transitions
            for g in t.guards for name, _ in g.cases]


def declared_refusals(protocol: Protocol, forbidden: frozenset[str]) -> list[tuple[str, str]]:
    """Every (transition, atom) a caller may be refused for: each guard of a refusable
    transition, or each part of a guard that declares parts."""
    return list(dict.fromkeys((transition_label(t), atom) for t in protocol.transitions
                              if t.trigger in forbidden for g in t.guards for atom in g.atoms()))


def unprobed_refusals(protocol: Protocol, forbidden: frozenset[str],
                      refusals: Mapping[tuple[str, str], int]) -> list[str]:
    """The refusals the model can give for one atom alone (the tour's search found a state
    where it fails alone) that no run of the campaign asked for."""
    probeable = tour_refusals(protocol, forbidden)
    return [f"{label} [{atom}]" for label, atom in declared_refusals(protocol, forbidden)
            if (label, atom) in probeable and not refusals.get((label, atom))]


def never_alone(protocol: Protocol, forbidden: frozenset[str]) -> list[str]:
    """Atoms that never fail alone in a reachable state (a refusal for them always has
    another reason too): no probe can single them out, and the report says so."""
    probeable = tour_refusals(protocol, forbidden)
    return [f"{label} [{atom}]" for label, atom in declared_refusals(protocol, forbidden)
            if (label, atom) not in probeable]


def refused_alone(protocol: Protocol, c: Config, trigger: str,
                  params: Mapping[str, Value]) -> list[tuple[str, str]]:
    """For each transition ``trigger`` could be here, the one atom that refuses it, where
    exactly one does."""
    v = protocol.view(c)
    out = []
    for t in protocol.transitions_from(c.state):
        if t.trigger != trigger or {p.name for p in t.params} != set(params) or not all(
                params[p.name] in p.domain for p in t.params):
            continue
        failing = [a for g in t.guards for a in g.failing_atoms(v, params)]
        if len(failing) == 1:
            out.append((transition_label(t), failing[0]))
    return out


def edge_text(edge: tuple[str, str, str]) -> str:
    source, dest, trigger = edge
    return f"{trigger}: {source} -> {dest}"


def unfired_edges(protocol: Protocol, edges: Mapping[tuple[str, str, str], int]) -> list[str]:
    return [edge_text(e) for e in declared_edges(protocol) if not edges.get(e)]


def unfired_cases(protocol: Protocol, cases: Mapping[tuple[str, str, str], int]) -> list[str]:
    return [f"{label} [{guard}: {case}]" for label, guard, case in declared_cases(protocol)
            if not cases.get((label, guard, case))]


_CASES: dict[int, tuple[Protocol, frozenset[int]]] = {}


def _with_cases(protocol: Protocol) -> frozenset[int]:
    """The ids of the transitions with a disjunctive guard (ids: hashing a transition is slow)."""
    found = _CASES.get(id(protocol))
    if found is None or found[0] is not protocol:
        found = _CASES[id(protocol)] = (protocol, frozenset(
            id(t) for t in protocol.transitions if any(g.cases for g in t.guards)))
    return found[1]


def expected_projection(p: Protocol, config: Config,
                        unobservable: frozenset[str] = frozenset()) -> dict[str, Value]:
    view = p.view(config)
    return {"state": str(config.state),
            **{v.name: view[v.name] for v in p.variables
               if not v.ghost and v.name not in unobservable}}


# --------------------------------------------------------------------------
# The adapter contract, enforced
# --------------------------------------------------------------------------
class Contract:
    """What ``observe()`` must return for one machine and one adapter class."""

    def __init__(self, protocol: Protocol, unobservable: frozenset[str]) -> None:
        ghosts = {v.name for v in protocol.variables if v.ghost}
        names = {v.name for v in protocol.variables}
        wrong = sorted(set(unobservable) - (names - ghosts))
        if wrong:
            raise AdapterError(
                f"Adapter.unobservable names {wrong}, which are not observable variables of "
                f"{protocol.name}; its variables are {sorted(names - ghosts)}")
        self.protocol, self.unobservable, self.ghosts = protocol, frozenset(unobservable), ghosts
        self.keys = frozenset({"state"} | (names - ghosts - self.unobservable))
        self.allowed = {v.name: frozenset((_kind(d), d) for d in v.domain)
                        for v in protocol.variables if v.name in self.keys}
        self.allowed["state"] = frozenset((str, s) for s in protocol.state_names)
        self.domains = {v.name: v.domain for v in protocol.variables}
        self.domains["state"] = protocol.state_names

    def check(self, i: int, observed: object) -> dict[str, Value]:
        """``observed`` as a dict, or :class:`AdapterError` naming what is wrong with it."""
        where = f"observe({i})"
        if not isinstance(observed, Mapping):
            raise AdapterError(f"{where} returned {type(observed).__name__}, not a mapping of "
                               "the model's variable names to values")
        keys = set(observed)
        if keys != self.keys:
            missing, extra = sorted(self.keys - keys), sorted(keys - self.keys)
            parts = []
            if missing:
                parts.append(f"left out {missing} (return every variable in the model's words, "
                             "or declare it in Adapter.unobservable)")
            for k in extra:
                if k in self.ghosts:
                    parts.append(f"returned the ghost variable {k!r} (the model's own history, "
                                 "never observed)")
                elif k in self.unobservable:
                    parts.append(f"returned {k!r}, which the adapter declares unobservable")
                else:
                    parts.append(f"returned the unknown key {k!r} (keys are 'state' and "
                                 f"{sorted(self.keys - {'state'})})")
            raise AdapterError(f"{where} " + "; ".join(parts))
        for k, value in observed.items():
            try:
                ok = (_kind(value), value) in self.allowed[k]
            except TypeError:  # unhashable: a list where the domain holds tuples
                ok = False
            if not ok:
                shown = self.domains[k]
                domain = (f"{list(shown[:6])} ... ({len(shown)} values)" if len(shown) > 8
                          else list(shown))
                raise AdapterError(f"{where} gave {k}={value!r} ({type(value).__name__}), "
                                   f"outside its domain {domain}")
        return dict(observed)


def _kind(value: object) -> type:
    """A value's kind for the domain check: an enum of strings is a string; True is no 1."""
    return str if isinstance(value, str) else type(value)


_CONTRACTS: dict[tuple[int, type], Contract] = {}


def contract_for(protocol: Protocol, adapter: Adapter) -> Contract:
    key = (id(protocol), type(adapter))
    found = _CONTRACTS.get(key)
    if found is None or found.protocol is not protocol:
        found = _CONTRACTS[key] = Contract(protocol, frozenset(getattr(adapter, "unobservable",
                                                                        frozenset())))
    return found


def adapter_code(adapter: object) -> frozenset[object]:
    """The code objects of the adapter's own methods (nested functions included)."""
    cls = type(adapter)
    found = _ADAPTER_CODE.get(cls)
    if found is not None:
        return found
    codes: set[object] = set()

    def add(code: Any) -> None:
        if code in codes:
            return
        codes.add(code)
        for const in code.co_consts:
            if hasattr(const, "co_consts"):
                add(const)

    for klass in cls.__mro__:
        if klass in (Adapter, object) or klass.__module__ == "abc":
            continue
        for attr in vars(klass).values():
            fn = getattr(attr, "__func__", attr)
            for f in (fn, getattr(attr, "fget", None)):
                code = getattr(f, "__code__", None)
                # Only what the class body defines: a class attribute may hold an
                # implementation's function (a lookup hook), which stays the implementation's.
                if code is not None and getattr(f, "__qualname__", "").startswith(
                        klass.__qualname__ + "."):
                    add(code)
    found = _ADAPTER_CODE[cls] = frozenset(codes)
    return found


_ADAPTER_CODE: dict[type, frozenset[object]] = {}


def blame_adapter(adapter: object, exc: BaseException) -> bool:
    """Whether ``exc`` started in the adapter's own code rather than the implementation's.

    The innermost frame decides; an exception the adapter raised *from* an
    implementation error is the implementation's.
    """
    if isinstance(exc, AdapterError):
        return True
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if cause is not None and not blame_adapter(adapter, cause):
        return False
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code in adapter_code(adapter)


def adapter_fault(adapter: object, exc: BaseException, doing: str) -> AdapterError:
    if isinstance(exc, AdapterError):
        return exc
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = (f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}"
             if tb is not None else "")
    return AdapterError(f"the adapter's own code raised {type(exc).__name__} while {doing}"
                        f"{where}: {exc}")


class Runner:
    """One run: an implementation (through its adapter) and the model, side by side."""

    def __init__(self, protocol: Protocol, factory: AdapterFactory, instances: int,
                 forbidden: frozenset[str]) -> None:
        self.protocol, self.instances, self.forbidden = protocol, instances, forbidden
        try:
            self.adapter = factory()
        except AdapterError:
            raise
        except Exception as exc:
            raise AdapterError(f"the adapter factory raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(self.adapter, Adapter):
            raise AdapterError(f"the adapter factory returned {type(self.adapter).__name__}, "
                               "not a settled.conformance.Adapter")
        self.contract = contract_for(protocol, self.adapter)
        self.plans = plans_for(protocol, forbidden)
        self.logged_steps: set[int] = set()  # instances that took a step the log records
        # (steps taken when observed, {instance: observation}): what is known to be current
        self.observed: tuple[int, dict[int, dict[str, Value]]] = (-1, {})
        # (the adapter's version, {instance: observation} under it): an adapter that has a
        # version() is not asked again while it is unchanged; reused counts those answers.
        self.by_version: tuple[Hashable, dict[int, dict[str, Value]]] = (None, {})
        self.reused = 0
        self.configs = [protocol.initial_config()] * instances
        self.steps: list[Action] = []
        self.history: list[tuple[Config, ...]] = [tuple(self.configs)]
        self.fired: dict[str, int] = {}
        self.edges: dict[tuple[str, str, str], int] = {}  # (from, to, trigger) -> times
        self.cases: dict[tuple[str, str, str], int] = {}  # (transition, guard, case) -> times
        self.refusals: dict[tuple[str, str], int] = {}  # (transition, atom refused alone) -> times
        self.protocol_cases = _with_cases(protocol)
        self.trace_events = 0
        self.trace_problem: str | None = None
        self.last: tuple[int, Transition] | None = None  # the last step taken: instance, rule

    # -- what may be drawn -----------------------------------------------------
    def options(self) -> list[Action]:
        """Enabled steps, weighted by repetition, eager ones first (the list is shared: do
        not change it)."""
        key = tuple(self.configs)
        drawn = self.plans.drawn
        got = drawn.get(key)
        if got is None:
            if len(drawn) >= _DRAWN_LISTS:
                drawn.clear()
            got = drawn[key] = self._draw_list()
        return got

    def _draw_list(self) -> list[Action]:
        out: list[tuple[int, int, Action]] = []
        cache = self.plans.options
        for i, c in enumerate(self.configs):
            got = cache.get((c, i))
            if got is None:
                got = cache[(c, i)] = self._options(i, c)
            out.extend(got)
        out.sort(key=_order)  # stable: within a weight and rank, instance and table order
        return [a for w, _, a in out for _ in range(w)]

    def _options(self, i: int, c: Config) -> list[tuple[int, int, Action]]:
        out = []
        for s in self.protocol.enabled(c):
            # Ending a story before anything was submitted (a failed check,
            # an invalidated draft) and retries that change nothing are drawn
            # less often, so runs reach deep states. Hypothesis often draws
            # the first element on purpose, so eager steps go first.
            early = ends_early(self.protocol, c, s)
            weight = 1 if early or s.after == c else EAGER
            out.append((weight, _rank(s.transition), Action(i, s.transition.trigger, s.params)))
        return out

    def forbidden_choices(self, i: int) -> list[Action]:
        """The refusable actions the model does not enable for instance ``i`` here
        (worked out once per configuration and instance, then reused)."""
        key = (self.configs[i], i)
        got = self.plans.forbidden.get(key)
        if got is None:
            got = self.plans.forbidden[key] = self._forbidden_choices(i)
        return got

    def _forbidden_choices(self, i: int) -> list[Action]:
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
            self.last = None
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
                             f"allows ({_why_allowed(step, self.protocol.view(self.configs[i]))}"
                             f"): {exc}") from None
        except Exception as exc:
            if blame_adapter(self.adapter, exc):
                raise adapter_fault(self.adapter, exc, f"performing {action.text()}") from exc
            raise Divergence(f"the implementation raised {type(exc).__name__} on "
                             f"{action.text()} ({_rules_text(step.transition.rules)}): "
                             f"{exc}") from exc
        self.last = (i, step.transition)
        if step.transition.observable is not None:
            self.logged_steps.add(i)
        edge = edge_key(self.configs[i], step)
        self.edges[edge] = self.edges.get(edge, 0) + 1
        if id(step.transition) in self.protocol_cases:
            v = self.protocol.view(self.configs[i])
            for g in step.transition.guards:
                case = g.case(v, action.params)
                if case is not None:
                    key = (transition_label(step.transition), g.name, case)
                    self.cases[key] = self.cases.get(key, 0) + 1
        self.configs[i] = step.after
        label = transition_label(step.transition)
        self.fired[label] = self.fired.get(label, 0) + 1

    def _refuse(self, action: Action) -> None:
        i = action.instance
        if any(s.transition.trigger == action.trigger and dict(s.params) == dict(action.params)
               for s in self.protocol.enabled(self.configs[i])):
            raise Invalid(f"{action.text()} is allowed here")
        # The last check observed every instance after the previous step: reuse it.
        known = self.observed[1] if self.observed[0] == len(self.steps) - 1 else {}
        before = known.get(i) or self.current(i, self.version())[0]
        perform_refused(self.adapter, i, action,
                        lambda: _why_refused(self.protocol, self.configs[i], action))
        # The refused instance is always observed afresh: a refusal that changed it is caught
        # here, whatever the adapter's version says.
        after = self.current(i, self.version(), fresh=True)[0]
        if after != before:
            changed = ", ".join(f"{k}: {before[k]!r} -> {after[k]!r}" for k in sorted(after)
                                if before.get(k) != after[k])
            raise Divergence(f"{action.text()}: the refusal changed the implementation "
                             f"({changed}); the model forbids it: "
                             f"{_why_refused(self.protocol, self.configs[i], action)}")
        self.observed = (len(self.steps), {i: after})
        for key in refused_alone(self.protocol, self.configs[i], action.trigger, action.params):
            self.refusals[key] = self.refusals.get(key, 0) + 1

    # -- checks ----------------------------------------------------------------
    def version(self) -> Hashable | None:
        """The adapter's version (see :meth:`Adapter.version`), or None."""
        try:
            return self.adapter.version()
        except Exception as exc:
            if blame_adapter(self.adapter, exc):
                raise adapter_fault(self.adapter, exc, "reading its version") from exc
            raise Divergence(f"reading the implementation's version after step "
                             f"{len(self.steps)} raised {type(exc).__name__}: {exc}") from exc

    def current(self, i: int, version: Hashable | None, *, fresh: bool = False
                ) -> tuple[dict[str, Value], bool]:
        """Instance ``i`` as observed under ``version``, and whether that observation was
        reused: the one already taken under it, or a fresh one (always fresh when the adapter
        has no version, or when ``fresh``)."""
        if version is None:
            return self.observe(i), False
        held, seen = self.by_version
        if held != version:
            seen = {}
            self.by_version = (version, seen)
        got = None if fresh else seen.get(i)
        if got is not None:
            self.reused += 1
            return got, True
        got = seen[i] = self.observe(i)
        return got, False

    def confirm_reused(self) -> None:
        """An adapter whose version let observations be reused is held to it: every instance
        observed afresh must equal what the kit holds for the current version."""
        if not self.reused:
            return
        version = self.version()
        held, seen = self.by_version
        for i, kept in sorted(seen.items()) if held == version else ():
            self._hold_to_version(i, kept, version)

    def _hold_to_version(self, i: int, kept: dict[str, Value], version: Hashable
                         ) -> dict[str, Value]:
        """An observation kept under ``version`` must be what ``observe`` says now, while the
        version still reads the same (when a reused observation disagrees with the model,
        and at the end of a run): the fresh observation, or an :class:`AdapterError`."""
        fresh = self.observe(i)
        if fresh != kept and self.version() == version:
            changed = ", ".join(f"{k}: {kept.get(k)!r} -> {fresh.get(k)!r}"
                                for k in sorted(fresh) if kept.get(k) != fresh.get(k))
            raise AdapterError(
                f"the adapter's version() stayed {version!r}, but observe(q{i}) changed "
                f"({changed}): version() must change whenever an observation may; the kit "
                f"reused {self.reused} observation(s) on its word")
        return fresh

    def observe(self, i: int) -> dict[str, Value]:
        """The adapter's observation of instance ``i``, held to the contract."""
        try:
            observed = self.adapter.observe(i)
        except Exception as exc:  # an implementation that lost track of its own rows
            if blame_adapter(self.adapter, exc):
                raise adapter_fault(self.adapter, exc, f"observing q{i}") from exc
            raise Divergence(f"observing q{i} after step {len(self.steps)} raised "
                             f"{type(exc).__name__}: {exc}") from exc
        return self.contract.check(i, observed)

    def check(self) -> None:
        plans, unobservable = self.plans, self.contract.unobservable
        # An instance a refusal just observed (unchanged) need not be observed again.
        known = self.observed[1] if self.observed[0] == len(self.steps) else {}
        seen: dict[int, dict[str, Value]] = {}
        version = self.version()
        # The instance the last step acted on is observed afresh; the others may be reused
        # while the adapter's version stands (see Adapter.version).
        acted = self.steps[-1].instance if self.steps else None
        for i, c in enumerate(self.configs):
            broken = plans.broken.get(c)
            if broken is None:
                broken = plans.broken[c] = tuple(
                    b.name for b in self.protocol.broken_invariants(c))
            if broken:
                raise Divergence(f"model invariant {broken[0]} broken on q{i}")
            observed, reused = known.get(i), False
            if observed is None:
                observed, reused = self.current(i, version, fresh=i == acted)
            expected = plans.expected.get((c, unobservable))
            if expected is None:
                expected = plans.expected[(c, unobservable)] = expected_projection(
                    self.protocol, c, unobservable)
            diffs = {k: (observed[k], x) for k, x in expected.items() if observed[k] != x}
            if diffs and reused:  # a reused observation is confirmed before it is blamed
                observed = self._hold_to_version(i, observed, version)
                diffs = {k: (observed[k], x) for k, x in expected.items() if observed[k] != x}
            seen[i] = observed
            if diffs:
                shown = ", ".join(f"{k}: implementation {o!r}, model {x!r}"
                                  for k, (o, x) in sorted(diffs.items()))
                raise Divergence(f"q{i} differs from the model after step {len(self.steps)}: "
                                 f"{shown}{self._explain(i, observed)}")
        self.observed = (len(self.steps), seen)

    def _explain(self, i: int, observed: Mapping[str, Value]) -> str:
        """Why a projection differs: the step that led here with its rules, the model's
        invariants and step properties the observed values break, the implementation's own
        recorded error."""
        parts = []
        if self.last is not None and self.last[0] == i:
            t = self.last[1]
            parts.append(f"the step was {t.trigger} ({_rules_text(t.rules)})")
        broken = self._broken_by(i, observed)
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

    def _broken_by(self, i: int, observed: Mapping[str, Value]) -> list[str]:
        """The invariants (and, from the model's previous configuration, the step properties)
        the observed values break, read as a model configuration: ghost and unobservable
        variables are taken from the model."""
        p, c = self.protocol, self.configs[i]
        names = [v.name for v in p.variables]
        try:
            values = tuple(observed.get(n, val) if n in observed else val
                           for n, val in zip(names, c.values, strict=True))
            seen = Config(str(observed.get("state", c.state)), values)
            out = [f"invariant {inv.name} ({_rules_text(inv.rules)}): {inv.text}"
                   for inv in p.broken_invariants(seen)]
            if self.last is not None and self.last[0] == i and len(self.history) >= 2:
                before = self.history[-2][i]
                step = _StepLike(self.last[1], self.steps[-1].params, seen)
                out += [f"step property {sp.name} ({_rules_text(sp.rules)}): {sp.text}"
                        for sp in p.broken_step_properties(before, step)]  # type: ignore[arg-type]
        except Exception:  # an observation the model's predicates cannot read: say nothing
            return []
        return out

    def finish(self) -> None:
        """Close the implementation; its version must have told the truth, and its event log
        must pass the trace checker."""
        try:
            self.confirm_reused()
        except BaseException:
            self.adapter.close()
            raise
        try:
            lines = list(self.adapter.trace_lines())
        except Exception as exc:
            self.adapter.close()
            if blame_adapter(self.adapter, exc):
                raise adapter_fault(self.adapter, exc, "reading the event log") from exc
            raise Divergence(f"reading the implementation's event log raised "
                             f"{type(exc).__name__}: {exc}") from exc
        self.adapter.close()
        bad = next((n for n, line in enumerate(lines, 1) if not isinstance(line, str)), None)
        if bad is not None:
            self.trace_problem = (f"trace_lines() gave a {type(lines[bad - 1]).__name__} as "
                                  f"line {bad}; it must give settled.trace/1 JSON text lines")
            raise AdapterError(self.trace_problem)
        if not lines:
            if not self.logged_steps:
                return  # nothing that leaves an event happened: an empty log is the right one
            self.trace_problem = "the event log is empty, although the run took steps the log records"
            raise AdapterError(self.trace_problem)
        try:
            report = check_lines(lines)
        except TraceError as exc:
            self.trace_problem = (f"the event log does not conform to settled.trace/1: {exc}")
            raise AdapterError(self.trace_problem) from None
        if report.instances < len(self.logged_steps):
            took = len(self.logged_steps)
            self.trace_problem = (
                "the event log is empty, although the run took steps the log records"
                if not lines else
                f"the event log holds {report.instances} instance(s) of {self.protocol.name}, "
                f"but {took} instance(s) took steps the log records")
            raise AdapterError(self.trace_problem)
        self.trace_events = report.events
        if not report.ok:
            self.trace_problem = ("the trace checker rejects the implementation's event log:\n"
                                  + (*report.violations, *report.undecided)[0].text())
            raise Divergence(self.trace_problem)


@dataclass(frozen=True, slots=True)
class _StepLike:
    transition: Transition
    params: Params
    after: Config


def perform_refused(adapter: Adapter, instance: int | None, action: Action,
                    why: Callable[[], str] = lambda: "") -> None:
    """Ask the implementation to take ``action``, which the model forbids: it must refuse
    (raise :class:`Refused`). Anything else is a divergence, or the adapter's own fault;
    ``why()`` says why the model forbids it."""
    try:
        adapter.perform(instance, action.trigger, action.params)  # type: ignore[arg-type]
    except Refused:
        return
    except Exception as exc:
        if blame_adapter(adapter, exc):
            raise adapter_fault(adapter, exc, f"performing {action.text()}") from exc
        raise Divergence(f"the implementation raised {type(exc).__name__} instead of "
                         f"{action.text()}: {exc}") from exc
    reason = why()
    raise Divergence(f"the implementation did not {action.text()}, which the model forbids"
                     + (f": {reason}" if reason else ""))


def _rules_text(rules: Sequence[str]) -> str:
    return "rule " + rules[0] if len(rules) == 1 else "rules " + ", ".join(rules)


def _why_allowed(step: Any, v: Mapping[str, Value]) -> str:
    t = step.transition
    held = ", ".join(f"{g.name}: {g.text}" for g in t.guards)
    return (f"{t.trigger} from {step.transition.source[0] if len(t.source) == 1 else 'here'}"
            f", {_rules_text(t.rules)}" + (f"; its guards hold: {held}" if held else ""))


def _why_refused(protocol: Protocol, c: Config, action: Action) -> str:
    """The failing guard conjuncts of every transition ``action`` could be, with their rules;
    or that no transition of that trigger leaves the current state."""
    v = protocol.view(c)
    found = []
    for t in protocol.transitions_from(c.state):
        if t.trigger != action.trigger:
            continue
        failing = [g for g in t.guards if not g(v, action.params)]
        if failing:
            found.append(f"guard {' and '.join(g.name for g in failing)} fails ("
                         + "; ".join(g.text for g in failing) + f"), {_rules_text(t.rules)}")
    if found:
        return " | ".join(found)
    rules = sorted({r for t in protocol.transitions if t.trigger == action.trigger
                    for r in t.rules})
    return (f"no {action.trigger} leaves state {c.state}"
            + (f" ({_rules_text(rules)})" if rules else ""))


def _order(wra: tuple[int, int, Action]) -> tuple[int, int]:
    return (-wra[0], wra[1])


class Plans:
    """What a campaign works out once per configuration and reuses in every run: the
    weighted options, the forbidden choices, and whether the invariants hold."""

    def __init__(self, protocol: Protocol) -> None:
        self.protocol = protocol
        self.options: dict[tuple[Config, int], list[tuple[int, int, Action]]] = {}
        self.forbidden: dict[tuple[Config, int], list[Action]] = {}
        self.broken: dict[Config, tuple[str, ...]] = {}
        self.expected: dict[tuple[Config, frozenset[str]], dict[str, Value]] = {}
        self.grouped: dict[int, tuple[list[Action], list[list[Action]]]] = {}
        # The whole draw list per tuple of configurations (bounded: emptied when full).
        self.drawn: dict[tuple[Config, ...], list[Action]] = {}


    def forbidden_by_trigger(self, choices: list[Action]) -> list[list[Action]]:
        """``choices`` grouped by trigger, worker steps first (worked out once per list)."""
        got = self.grouped.get(id(choices))
        if got is None or got[0] is not choices:
            groups: dict[str, list[Action]] = {}
            for a in choices:
                groups.setdefault(a.trigger, []).append(a)
            order = sorted(groups, key=lambda t: (t not in WORKER_FIRST, t))
            got = self.grouped[id(choices)] = (choices, [groups[t] for t in order])
        return got[1]


@functools.cache
def _index(n: int) -> st.SearchStrategy[int]:
    return st.integers(0, n - 1)


_PLANS: dict[tuple[int, frozenset[str]], Plans] = {}


def plans_for(protocol: Protocol, forbidden: frozenset[str]) -> Plans:
    key = (id(protocol), frozenset(forbidden))
    found = _PLANS.get(key)
    if found is None or found.protocol is not protocol:
        found = _PLANS[key] = Plans(protocol)
    return found


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
    cases: dict[tuple[str, str, str], int] = field(default_factory=dict)
    refusals: dict[tuple[str, str], int] = field(default_factory=dict)  # (transition, atom)
    trace_events: int = 0  # events of the implementation's logs the trace checker accepted
    trace_failure: str | None = None
    spec: Any = None  # (protocol, factory, instances, forbidden) of the machine
    adapter_error: str | None = None  # the adapter broke its contract: neither pass nor kill
    counterexample_error: str | None = None  # the counterexample could not be written
    out: Path | None = None  # where counterexamples go (None: the default folder)
    killed_by: str | None = None  # the phase that found the failure: "tour" or "random"


def make_lockstep(protocol: Protocol, factory: AdapterFactory, *, instances: int,
                  forbidden: frozenset[str], name: str = "Lockstep") -> type[RuleBasedStateMachine]:
    """A RuleBasedStateMachine class checking ``factory()``'s implementation against ``protocol``."""
    record = Record()
    TRIGGERS = tuple(dict.fromkeys(t.trigger for t in protocol.transitions))

    class Lockstep(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.run = Runner(protocol, factory, instances, forbidden)
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
            off = data.draw(st.frozensets(st.sampled_from(TRIGGERS)), label="swarm: kinds off")
            self.swarm = frozenset(TRIGGERS) - off

        @rule(data=st.data())
        def step(self, data: st.DataObject) -> None:
            # Indices, not sampled_from: the lists change every step, and a fresh
            # sampled_from strategy per draw costs more than the step it picks.
            options = self.run.options()
            if self.swarm is not None:
                # The swarm's kinds only; where none of them is enabled, every kind (a run
                # that cannot move would test nothing).
                options = [a for a in options if a.trigger in self.swarm] or options
            slots = len(options) + len(options) // 4 + 1  # ~1 in 5: ask for something forbidden
            n = data.draw(_index(slots), label="action")
            action: Action
            if n < len(options):
                action = options[n]
            else:
                i = data.draw(_index(instances), label="instance")
                choices = self.run.forbidden_choices(i)
                if not choices:
                    return
                # The trigger first, then its parameters: otherwise the many
                # parameter combinations of one trigger (confirm) crowd out the
                # rare probes that matter (a stale worker's begin_submit).
                by_trigger = self.run.plans.forbidden_by_trigger(choices)
                if self.swarm is not None:
                    by_trigger = ([g for g in by_trigger if g[0].trigger in self.swarm]
                                  or by_trigger)
                group = by_trigger[data.draw(_index(len(by_trigger)), label="forbidden trigger")]
                action = group[data.draw(_index(len(group)), label="forbidden")]
            try:
                self.run.apply(action)
            finally:
                _merge(record.fired, self.run.fired)
                _merge(record.edges, self.run.edges)
                _merge(record.cases, self.run.cases)
                _merge(record.refusals, self.run.refusals)
                self.seen.update(self.run.fired)
                self.run.fired, self.run.edges, self.run.cases = {}, {}, {}
                self.run.refusals = {}
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


_TOURS: dict[tuple[int, frozenset[str]],
             tuple[Protocol, list[list[Action]], frozenset[tuple[str, str]]]] = {}


def tour(protocol: Protocol, forbidden: frozenset[str] = frozenset()) -> list[list[Action]]:
    """:func:`directed_tour`, computed once per protocol object (a search of the whole space)."""
    return _tour(protocol, forbidden)[1]


def tour_refusals(protocol: Protocol, forbidden: frozenset[str]) -> frozenset[tuple[str, str]]:
    """The (transition, atom) refusals the tour's search found a state for, where that atom
    alone refuses the transition (the tour probes each of them)."""
    return _tour(protocol, forbidden)[2]


def _tour(protocol: Protocol, forbidden: frozenset[str]
          ) -> tuple[Protocol, list[list[Action]], frozenset[tuple[str, str]]]:
    key = (id(protocol), frozenset(forbidden))
    found = _TOURS.get(key)
    if found is None or found[0] is not protocol:
        probed: set[tuple[str, str]] = set()
        paths = _directed_tour(protocol, frozenset(forbidden), probed)
        found = _TOURS[key] = (protocol, paths, frozenset(probed))
    return found


def directed_tour(protocol: Protocol,
                  forbidden: frozenset[str] = frozenset()) -> list[list[Action]]:
    return _directed_tour(protocol, forbidden, set())


def _directed_tour(protocol: Protocol, forbidden: frozenset[str],
                   probed: set[tuple[str, str]]) -> list[list[Action]]:
    """For every transition, the shortest run of one instance that fires it, and that run
    extended by each step that can follow it; for every edge, guard alternative and value of
    a variable of at most three values at an edge, the shortest run that fires it; and for every
    guard of a transition a caller may be refused (each part of a guard that declares
    parts), the shortest run to a state where that guard, or part, alone refuses it, ending
    in the refused action. ``probed`` receives the (transition, atom) of each such probe.

    Replayed before the random campaign, the tour guarantees transition and
    refusal coverage: random runs rarely reach, say, a third not-found in a
    row, or a re-confirmation quoting a notification.
    """
    # The space is walked through the explorer's compiled successor function, in its
    # breadth-first order (the ids): the first run found to anything is a shortest one.
    space = _Local(protocol, protocol.enabled, None, checks=False)
    configs, labels, label_dest = space.configs, space.labels, space.label_dest
    parent: list[tuple[int, Action] | None] = [None] * len(configs)  # None: not yet reached
    paths: dict[str, list[Action]] = {}
    probes: dict[tuple[str, str, str], list[Action]] = {}
    pairs: dict[tuple[str, str], list[Action]] = {}
    ways: dict[tuple[str, ...], list[Action]] = {}
    # Every edge is also fired with each value of each variable of at most three values where
    # it can be: a cancel request, a clarification, a re-run, a task version moved on by a
    # condition update change what a step must do (Q21: success stands over a cancel
    # request; Q24: a late result leaves a moved task's phase alone), and a random campaign
    # may miss the combination. (Wider domains: counters, epochs, lease tables, would more
    # than double the tour; the random phase covers them.)
    flags = [v.name for v in protocol.variables if not v.ghost and len(v.domain) <= 3]
    refusals = _Refusals(protocol, forbidden)
    flags_seen: dict[tuple[str, str, str], set[tuple[tuple[str, str], ...]]] = {}
    names: dict[int, str] = {}

    def name_of(t: Transition) -> str:
        found = names.get(id(t))
        if found is None:
            found = names[id(t)] = transition_label(t)
        return found

    for cid in range(space.expanded):
        c = configs[cid]
        v = protocol.view(c)
        # Once per configuration, not per step; an edge seen before with the same values of
        # every flag has had each of its flag keys already.
        flagged = tuple((f, repr(v[f])) for f in flags)
        here = space.labels_from(cid)
        for k in here:
            t, params = labels[k]
            dest = label_dest[k]
            label = name_of(t)
            action = Action(0, t.trigger, params)
            if label not in paths:
                paths[label] = [*_path_to(parent, cid), action]
                # ... and one step further along each way out: a bug often shows
                # only in what follows a transition (a retry that is then answered).
                for then in space.labels_from(dest):
                    t2, params2 = labels[then]
                    pairs.setdefault((label, name_of(t2)),
                                     [*paths[label], Action(0, t2.trigger, params2)])
            # Every edge (from, to, trigger) and every alternative of a disjunctive guard
            # gets its own shortest run: a transition with several sources or ways in is
            # not covered by firing it once.
            edge = edge_of(c, configs[dest], t)
            seen = flags_seen.get(edge)
            if seen is None:
                seen = flags_seen[edge] = set()
            keys: list[tuple[str, ...]] = [
                ("edge", *edge),
                *(("case", label, g.name, case) for g in t.guards
                  if g.cases and (case := g.case(v, params)) is not None)]
            if flagged not in seen:
                seen.add(flagged)
                keys += [("flag", *edge, f, r) for f, r in flagged]
            for key in keys:
                if key not in ways:
                    ways[key] = [*_path_to(parent, cid), action]
            if parent[dest] is None and dest != 0:  # id 0 is the initial configuration
                parent[dest] = (cid, action)
        for refusal, refused in refusals(c, v, [labels[k] for k in here]):
            if refusal not in probes:
                probes[refusal] = [*_path_to(parent, cid), refused]
    probed.update((label, atom) for label, atom, _params in probes)
    fires = [paths[transition_label(t)] for t in protocol.transitions
             if transition_label(t) in paths]
    known = {_path_text(path) for path in fires}
    more = []
    for way in sorted(ways, key=repr):
        if (text := _path_text(ways[way])) not in known:
            known.add(text)
            more.append(ways[way])
    everything = (fires + more + [pairs[k] for k in sorted(pairs)]
                  + [probes[k] for k in sorted(probes)])
    # Only the paths that start no other one: the longer one checks the same steps
    # (:func:`._shrink.longest_paths`). Shortest first, and a failing path is cut at the
    # step that diverged (run_tour); the minimiser then shortens it further.
    return longest_paths(everything)


def _path_text(path: Sequence[Action]) -> tuple[str, ...]:
    return tuple(a.text() for a in path)


# A refusal one atom alone gives: (transition, atom, params), the refused action, and the
# (trigger, params) step that must not be enabled for it to be one.
_Candidate = tuple[tuple[str, str, str], "Action", tuple[str, tuple[tuple[str, Value], ...]]]


class _Refusals:
    """(transition, atom, params) → a forbidden action refused in a configuration by that
    atom (a guard, or one part of a guard that declares parts) alone. The candidates are
    worked out once per state and values of the variables the forbidden transitions' guards
    read (most configurations of a search share them); a candidate that another transition
    of its trigger enables in the configuration is no refusal there."""

    def __init__(self, protocol: Protocol, forbidden: frozenset[str]) -> None:
        self.protocol, self.forbidden = protocol, forbidden
        guards = [g for t in protocol.transitions if t.trigger in forbidden for g in t.guards]
        names = [v.name for v in protocol.variables]
        reads = {r for g in guards for r in g.reads}
        # A guard that declares no reads may read anything: then every variable counts.
        self.reads = (names if any(not g.reads for g in guards)
                      else [n for n in names if n in reads])
        self.memo: dict[tuple[Any, ...], list[_Candidate]] = {}
        # Per state: each forbidden transition leaving it, with its label and parameter choices.
        self.plans: dict[str, list[tuple[Transition, str, list[tuple[Params, Any]]]]] = {}

    def __call__(self, c: Config, v: Mapping[str, Value],
                 here: Sequence[tuple[Transition, Params]]
                 ) -> list[tuple[tuple[str, str, str], Action]]:
        """The refusals of ``c``, where ``here`` are the steps it enables."""
        if not self.forbidden:
            return []
        key = (c.state, tuple(v[n] for n in self.reads))
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = self._candidates(c.state, v)
        if not found:
            return []
        enabled = {(t.trigger, tuple(params.items())) for t, params in here}
        return [(refusal, action) for refusal, action, step in found if step not in enabled]

    def _candidates(self, state: str, v: Mapping[str, Value]) -> list[_Candidate]:
        plan = self.plans.get(state)
        if plan is None:
            plan = self.plans[state] = [
                (t, transition_label(t), [(p, tuple(p.items())) for p in t.param_choices()])
                for t in self.protocol.transitions_from(state) if t.trigger in self.forbidden]
        out = []
        for t, label, choices in plan:
            for params, items in choices:
                failing = [a for g in t.guards for a in g.failing_atoms(v, params)]
                if len(failing) == 1:
                    key = (label, failing[0], repr(sorted(items)))
                    out.append((key, Action(0, t.trigger, params, forbidden=True), (t.trigger, items)))
        return out


def _path_to(parent: Sequence[tuple[int, Action] | None], c: int) -> list[Action]:
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
        _merge(record.cases, runs[0].cases)
        _merge(record.refusals, runs[0].refusals)
        record.trace_events += runs[0].trace_events
        record.trace_failure = record.trace_failure or runs[0].trace_problem
        if message is not None:
            cut = cut_at_divergence(path, len(runs[0].steps), lambda c: replay(
                protocol, factory, instances, forbidden, c) is not None)
            return _failed(record, machine.__name__, cut, message, minimise=True)
    return None


def _failed(record: Record, name: str, steps: list[Action], message: str, *,
            minimise: bool) -> Record:
    protocol, factory, instances, forbidden = record.spec
    if minimise:
        steps = minimise_steps(protocol, factory, instances, forbidden, steps)
        message = replay(protocol, factory, instances, forbidden, steps) or message
    record.steps = steps
    record.failure = failure_text(name, message, steps)
    try:
        record.itf_path = write_counterexample(protocol, name, message, steps, factory, instances,
                                               forbidden, out=record.out)
    except CounterexampleWriteError as exc:
        record.counterexample_error = str(exc)
    return record


def _adapter_error(exc: BaseException) -> AdapterError | None:
    if isinstance(exc, AdapterError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _adapter_error(inner)
            if found is not None:
                return found
    return None


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
    record.__init__()  # type: ignore[misc]
    record.spec = machine.spec  # type: ignore[attr-defined]
    record.out = out
    start = time.perf_counter()
    try:
        return _campaign(machine, record, profile, seed, minimise, start, tour)
    except AdapterError as exc:
        record.adapter_error = str(exc)
        record.failure = None
        return record


def _campaign(machine: type[RuleBasedStateMachine], record: Record, profile: settings,
              seed: int | None, minimise: bool, start: float, with_tour: bool = True) -> Record:
    if with_tour and run_tour(machine) is not None:
        record.seconds_to_failure = time.perf_counter() - start
        record.killed_by = "tour"
        return record
    generate_only = settings(profile, phases=[Phase.explicit, Phase.reuse, Phase.generate,
                                              Phase.target])
    test = get_state_machine_test(machine, settings=generate_only, _min_steps=MIN_STEPS)
    if seed is not None:
        test = hypothesis.seed(seed)(test)
    try:
        with install_independent_draws():
            test()
    except Exception as exc:
        adapter = _adapter_error(exc)
        if adapter is not None:
            raise adapter from None
        record.seconds_to_failure = time.perf_counter() - start
        record.killed_by = "random"
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
    return run_steps(run, steps)


def model_history(protocol: Protocol, instances: int,
                  steps: Sequence[Action]) -> list[tuple[Config, ...]] | None:
    """The model's configurations before and after each step, or None when the model rejects
    the list (a step it does not enable, or a refusal of something it allows)."""
    configs = [protocol.initial_config()] * instances
    out = [tuple(configs)]
    for a in steps:
        if not 0 <= a.instance < instances:
            return None
        c = configs[a.instance]
        if a.forbidden:
            if any(s.transition.trigger == a.trigger and dict(s.params) == dict(a.params)
                   for s in protocol.enabled(c)):
                return None
        else:
            try:
                configs[a.instance] = protocol.fire(c, a.trigger, a.params).after
            except IllegalTransition:
                return None
        out.append(tuple(configs))
    return out


def minimise_steps(protocol: Protocol, factory: AdapterFactory, instances: int,
                   forbidden: frozenset[str], steps: list[Action],
                   budget: int = REPLAY_BUDGET) -> list[Action]:
    """Shrink a failing action list (:func:`._shrink.shrink`, the model's configurations
    from :func:`model_history`), to a fixpoint or ``budget`` replays."""
    return shrink(steps,
                  lambda c: replay(protocol, factory, instances, forbidden, c) is not None,
                  lambda c: model_history(protocol, instances, c), budget)


def failure_text(name: str, message: str, steps: Sequence[Action]) -> str:
    listing = "\n".join(f"  {n}. {a.text()}" for n, a in enumerate(steps, start=1))
    return f"{name}: {message}\nreplayable steps ({len(steps)}):\n{listing}"


class CounterexampleWriteError(OSError):
    """A counterexample could not be written: its own error, never a pass."""


def counterexample_dir(out: Path | None = None) -> Path:
    """``out``, else $SETTLED_COUNTEREXAMPLES, else ``./settled-counterexamples``."""
    if out is not None:
        return Path(out)
    env = os.environ.get("SETTLED_COUNTEREXAMPLES")
    return Path(env) if env else Path.cwd() / "settled-counterexamples"


def write_counterexample(protocol: Protocol, name: str, message: str, steps: Sequence[Action],
                         factory: AdapterFactory, instances: int,
                         forbidden: frozenset[str], *, out: Path | None = None) -> Path:
    """The minimised run as an ITF trace of the model's configurations, plus its step list.

    Writes ``lockstep-NAME.itf.json`` and ``lockstep-NAME.steps.json`` (what
    ``settled replay`` reads); :class:`CounterexampleWriteError` if either cannot be written.
    """
    runs: list[Runner] = []
    with contextlib.suppress(Invalid, AdapterError):
        replay(protocol, factory, instances, forbidden, steps, keep=runs)
    history = list(runs[0].history if runs else [tuple([protocol.initial_config()] * instances)])
    if len(history) == len(steps) and steps:
        # The last step diverged (the implementation raised or refused) before the runner
        # recorded it: the model's side of that step still belongs in the trace.
        last, configs = steps[-1], list(history[-1])
        with contextlib.suppress(IllegalTransition):
            if not last.forbidden:
                i = last.instance
                configs[i] = protocol.fire(configs[i], last.trigger, last.params).after
            history.append(tuple(configs))
    states: list[dict[str, Any]] = []
    for recorded in history:
        state: dict[str, Any] = {}
        for i, c in enumerate(recorded):
            for k, v in {"state": str(c.state), **protocol.view(c)}.items():
                state[f"q{i}.{k}"] = v
        states.append(state)
    actions = [(a.trigger, {"instance": a.instance, "refused": a.forbidden, **a.params})
               for a in steps][: len(states) - 1]
    meta = {"status": "violation", "violated": message, "generator": f"settled lockstep {name}",
            "instances": instances}
    trace = _itf.itf_trace(protocol.name, sorted(states[0]), states[: len(actions) + 1], actions,
                           meta)
    directory = counterexample_dir(out)
    path = directory / f"lockstep-{_safe(name)}.itf.json"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _itf.write_itf(path, trace)
        steps_file(directory / f"lockstep-{_safe(name)}.steps.json", protocol, instances, steps,
                   message)
    except OSError as exc:
        raise CounterexampleWriteError(
            f"cannot write the counterexample into {directory}: "
            f"{exc.strerror or exc}; choose a writable folder with --out") from exc
    return path


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


STEPS_SCHEMA = "settled.lockstep-steps/1"


def steps_file(path: Path, protocol: Protocol, instances: int, steps: Sequence[Action],
               message: str) -> None:
    """A counterexample as a step list (``settled.lockstep-steps/1``), for ``settled replay``."""
    doc = {"schema": STEPS_SCHEMA, "machine": protocol.name, "instances": instances,
           "divergence": message,
           "steps": [{"instance": a.instance, "trigger": a.trigger, "params": dict(a.params),
                      "refused": a.forbidden} for a in steps]}
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
