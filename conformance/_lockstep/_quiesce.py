"""The quiescence phase: once a run's faults stop, every instance must settle, and in time.

Safety is checked step by step; an implementation can keep every invariant and still never
finish (a worker polling for ever after an explicit not found). So after the fault-injecting
part of a run (each Hypothesis run, each run of the tour and every replay of the shrinker),
faults stop and every actor is scheduled fairly, as the machine's fairness declaration
(``model/progress.py``) says:

- only the steps fairness requires (weak or strong) are scheduled, never a crash, a fault or
  a person's choice (``never``); a lookup, strongly fair, is therefore always answered;
- the instances take turns, and within an instance its actors take turns (round robin): the
  implementation's own scheduler (``Adapter.own_turn``, for the triggers it names in
  ``Adapter.acting``) decides what it does; the world's steps (the platform finishing a
  query, the business store running a call) are chosen by the kit, rotating through what
  the model enables;
- what the implementation's own turn did is matched to the shortest run of required,
  fault-free model steps that ends where the implementation is (none: it changed nothing
  observable); a state no such run reaches is a divergence.

Each instance must reach a terminal or declared resting state (``model.progress.RESTING``:
a state that waits for a person) within the bound :func:`.._liveness.quiescence_bound`
computes from the configuration where faults stopped: the longest fault-free run of
required steps. The model's required steps form no cycle there, so an implementation that
does not settle is one whose own turns change nothing while the model requires a step of
them: when a whole round of an instance's turns leaves it where it was, it is caught in a
cycle, and the run fails with that cycle (the repeated configuration and the turns that
returned to it) as a :class:`~.._shrink.Divergence`, minimised like any other.

A model whose bound is None (a fair cycle of required, fault-free steps in the model
itself), or that gets stuck outside a terminal or resting state, is a model finding: it is
raised as :class:`ModelFinding`, reported apart, never a pass.

Systems (instances that share a lock or a session) are not quiesced: the per-instance bound
does not hold when one instance waits on another. The report says so.
"""

from __future__ import annotations

import json
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from settled.conformance._lockstep._shrink import Divergence
from settled.model import Config, Params, Progress, Protocol, Step, Transition

from .._adapter import Refused
from ._action import Action, rules_text

if TYPE_CHECKING:
    from ._runner import Runner

IMPLEMENTATION = "implementation"  # the turn of the implementation's own scheduler


class ModelFinding(Exception):
    """The model itself does not settle (no quiescence bound, or stuck): not a pass."""


class Unsettled(Divergence):
    """An instance that did not settle once faults stopped: caught in a cycle."""


@dataclass
class InstanceSettled:
    """One instance's quiescence: where faults stopped, the bound, what it took."""

    instance: int
    start: str  # the state where faults stopped
    bound: int  # the model's longest fault-free fair run to a terminal or resting state
    steps: int = 0  # model steps taken until it settled
    turns: int = 0  # turns it was given (a turn of the implementation may change nothing)
    own_turns: int = 0  # of them, turns of the implementation's own scheduler
    end: str = ""


@dataclass
class QuiescenceStats:
    """What the quiescence phase did over a campaign (summed over runs)."""

    runs: int = 0  # runs quiesced
    instances: int = 0  # instances settled
    max_bound: int = 0  # the largest bound met
    bound_total: int = 0
    steps_total: int = 0  # model steps taken
    max_steps: int = 0  # the most one instance took
    turns_total: int = 0
    implementation_turns: int = 0  # turns of the implementation's own scheduler
    not_checked: str | None = None  # why the phase did not run (no own_turn(), a system)

    def add(self, settled: Sequence[InstanceSettled]) -> None:
        """One run's instances, as a run of their own merged in."""
        self.merge(QuiescenceStats(
            runs=1, instances=len(settled),
            max_bound=max((s.bound for s in settled), default=0),
            bound_total=sum(s.bound for s in settled), steps_total=sum(s.steps for s in settled),
            max_steps=max((s.steps for s in settled), default=0),
            turns_total=sum(s.turns for s in settled),
            implementation_turns=sum(s.own_turns for s in settled)))

    def merge(self, other: QuiescenceStats) -> None:
        self.runs += other.runs
        self.instances += other.instances
        self.max_bound = max(self.max_bound, other.max_bound)
        self.bound_total += other.bound_total
        self.steps_total += other.steps_total
        self.max_steps = max(self.max_steps, other.max_steps)
        self.turns_total += other.turns_total
        self.implementation_turns += other.implementation_turns
        self.not_checked = self.not_checked or other.not_checked

    @property
    def problem(self) -> str | None:
        """Why the phase checked nothing (loud in every report), or None when it did."""
        if self.not_checked is not None:
            return self.not_checked
        if not self.runs:
            return "no run reached the phase"
        if not self.max_bound:
            return (f"vacuous: in all {self.runs} run(s) every instance was already terminal or "
                    "resting where faults stopped (bound 0), so no progress was demanded")
        return None

    def to_json(self) -> dict[str, Any]:
        return {"checked": self.problem is None, "not_checked": self.problem,
                "runs": self.runs, "instances": self.instances, "max_bound": self.max_bound,
                "bound_total": self.bound_total, "steps_total": self.steps_total,
                "max_steps": self.max_steps, "turns_total": self.turns_total,
                "implementation_turns": self.implementation_turns}

    def text(self) -> str:
        if self.problem is not None:
            return f"quiescence NOT CHECKED: {self.problem}"
        return (f"quiescence: {self.instances} instance(s) of {self.runs} run(s) settled with "
                f"every progress property met; bound up to {self.max_bound} step(s), taken "
                f"{self.steps_total} of {self.bound_total} allowed (at most {self.max_steps} by "
                f"one instance), {self.implementation_turns} turn(s) of the implementation's "
                "own scheduler")


def not_checked_reason(runner: Runner) -> str | None:
    """Why ``runner``'s implementation cannot be quiesced, or None when it can."""
    if not runner.system.independent:
        return (f"{runner.system.name} is a system whose instances share state; the "
                "per-instance bound does not hold there")
    return adapter_reason(runner.adapter)


def factory_reason(factory: Callable[[], object]) -> str | None:
    """:func:`adapter_reason` for the adapter ``factory`` makes (closed again); None also when
    the factory fails (the campaign reports the broken adapter itself)."""
    try:
        adapter = factory()
    except Exception:
        return None
    try:
        return adapter_reason(adapter)
    finally:
        close = getattr(adapter, "close", None)
        if callable(close):
            close()


def adapter_reason(adapter: object) -> str | None:
    """Why ``adapter`` cannot take part in the quiescence phase, or None when it can."""
    acting: frozenset[str] = getattr(adapter, "acting", frozenset())
    if callable(getattr(adapter, "own_turn", None)):
        return None
    if acting:
        return (f"{type(adapter).__name__} names triggers its own scheduler takes "
                f"(acting) but has no own_turn() to take them")
    return (f"{type(adapter).__name__} has no own_turn() (its own scheduler's turn); an "
            "implementation with no scheduler of its own says so with an empty acting and an "
            "own_turn() that does nothing")


@dataclass
class _Instance:
    settled: InstanceSettled
    rotation: int = 0  # round robin over the instance's turns
    choice: dict[str, int] = field(default_factory=dict)  # round robin over a world actor's steps
    idle: list[str] = field(default_factory=list)  # turns since the last model step
    idle_kinds: set[str] = field(default_factory=set)
    done: bool = False
    seen: list[Config] = field(default_factory=list)  # its configurations since faults stopped


def quiesce(runner: Runner, resting: Sequence[str],
            required: Callable[[Transition, Params], bool],
            bound_of: Callable[[Config], Any],
            progress: Sequence[Progress] = ()) -> list[InstanceSettled]:
    """Run ``runner``'s quiescence phase (see the module): each instance settled with every
    progress property in ``progress`` met, or an :class:`Unsettled` divergence naming the
    properties left unmet, or a :class:`ModelFinding`."""
    protocol = runner.protocol
    ends = set(resting) | {str(s) for s in protocol.terminal_states}
    acting = frozenset(getattr(runner.adapter, "acting", frozenset()))
    states: dict[int, _Instance] = {}
    for i, c in enumerate(runner.configs):
        bound = bound_of(c)
        if bound.steps is None:
            cycle = "; ".join(f"{t} {dict(p)}" if p else t for t, p in bound.cycle)
            raise ModelFinding(f"{protocol.name}: no quiescence bound from q{i} in {c.state}: "
                               f"the model has a fair cycle of fault-free required steps "
                               f"({cycle}); the implementation may loop without breaking it")
        states[i] = _Instance(InstanceSettled(i, str(c.state), int(bound.steps)), seen=[c])
    while True:
        live = [i for i, s in states.items() if not s.done]
        if not live:
            break
        for i in live:
            st = states[i]
            enabled = [s for s in protocol.enabled(runner.configs[i])
                       if required(s.transition, s.params)]
            if not enabled:
                _end(runner, i, st, ends, progress)
                continue
            kinds = _kinds(enabled, acting)
            kind = kinds[st.rotation % len(kinds)]
            st.rotation += 1
            st.settled.turns += 1
            if kind == IMPLEMENTATION:
                st.settled.own_turns += 1
                taken = _implementation_turn(runner, i, st, required)
            else:
                taken = _world_turn(runner, i, st, kind, [
                    s for s in enabled if s.transition.actor == kind
                    and s.transition.trigger not in acting])
            if taken:
                st.seen.extend(taken)
                st.idle, st.idle_kinds = [], set()
                if st.settled.steps > st.settled.bound:
                    raise Unsettled(_over_bound(runner, i, st, progress))
                continue
            st.idle.append(kind)
            st.idle_kinds.add(kind)
            if st.idle_kinds >= set(kinds):
                raise Unsettled(_cycle_text(runner, i, st, enabled, progress))
    return [states[i].settled for i in sorted(states)]


def _kinds(enabled: list[Step], acting: frozenset[str]) -> list[str]:
    out: list[str] = []
    if any(s.transition.trigger in acting for s in enabled):
        out.append(IMPLEMENTATION)
    out.extend(sorted({s.transition.actor for s in enabled
                       if s.transition.trigger not in acting}))
    return out


def _end(runner: Runner, i: int, st: _Instance, ends: set[str],
         progress: Sequence[Progress]) -> None:
    c = runner.configs[i]
    if str(c.state) not in ends:
        raise ModelFinding(
            f"{runner.protocol.name}: q{i} is stuck in {c.state}, neither terminal nor "
            f"resting, with no step fairness requires enabled (from {st.settled.start})")
    unmet = unmet_progress(runner.protocol, progress, st.seen)
    if unmet:
        raise Unsettled(
            f"q{i} settled in {c.state} once faults stopped ({st.settled.steps} of at most "
            f"{st.settled.bound} step(s) from {st.settled.start}) with {_unmet_text(unmet)}")
    st.done = True
    st.settled.end = str(c.state)


def _world_turn(runner: Runner, i: int, st: _Instance, actor: str, steps: list[Step]
                ) -> list[Config]:
    """The world's actor takes one of its enabled steps, chosen in rotation."""
    n = st.choice.get(actor, 0)
    st.choice[actor] = n + 1
    s = steps[n % len(steps)]
    runner.take_settling(Action(i, s.transition.trigger, dict(s.params)))
    st.settled.steps += 1
    return [runner.configs[i]]


def _implementation_turn(runner: Runner, i: int, st: _Instance,
                         required: Callable[[Transition, Params], bool]) -> list[Config]:
    """The implementation's own scheduler acts on instance ``i``; its steps are matched (the
    configurations they pass through; none when its turn changed nothing)."""
    before = runner.configs[i]
    logged = _logged(runner)
    try:
        runner.adapter.own_turn(i)  # type: ignore[attr-defined]
    except Refused as exc:
        raise Divergence(f"q{i}'s own scheduler refused its turn in {before.state} once faults "
                         f"stopped: {exc}") from None
    except Exception as exc:
        from ._contract import adapter_fault, blame_adapter

        if blame_adapter(runner.adapter, exc):
            raise adapter_fault(runner.adapter, exc, f"own_turn(q{i})") from exc
        raise Divergence(f"q{i}'s own scheduler raised {type(exc).__name__} in {before.state} "
                         f"once faults stopped: {exc}") from exc
    observed = runner.current(i, runner.version(), fresh=True)[0]
    after = _logged(runner)
    events = _gained(logged, after)
    remaining = st.settled.bound - st.settled.steps
    path = _match(runner, before, observed, remaining, required, events)
    if path is None:
        said = "" if not events or events == {()} else \
            f" (its event log gained: {_events_text(events)})"
        raise Divergence(
            f"q{i}'s own scheduler, in {before.state} once faults stopped, led to a state no "
            f"run of {remaining} or fewer fault-free required steps reaches{said}: observed "
            f"{_brief(observed)}")
    for n, s in enumerate(path, 1):
        runner.advance_settling(Action(i, s.transition.trigger, dict(s.params)),
                                check=n == len(path))
    st.settled.steps += len(path)
    return [s.after for s in path]


def _logged(runner: Runner) -> Counter[tuple[str, str]] | None:
    """The events in the implementation's log so far, by (log instance, event name); None:
    it cannot be read now (the run's end reads it again and reports why)."""
    try:
        lines = list(runner.adapter.trace_lines())
    except Exception:
        return None
    out: Counter[tuple[str, str]] = Counter()
    for line in lines:
        try:
            event = json.loads(line) if isinstance(line, str) else None
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("trigger"), str):
            out[(str(event.get("instance")), event["trigger"])] += 1
    return out


def _gained(before: Counter[tuple[str, str]] | None, after: Counter[tuple[str, str]] | None
            ) -> set[tuple[str, ...]] | None:
    """What each log instance gained, as sorted event names (a turn of one model instance may
    also log a companion record, whose events are its own): the runs a turn's steps may be."""
    if before is None or after is None:
        return None
    by: dict[str, list[str]] = {}
    for (instance, name), n in (after - before).items():
        by.setdefault(instance, []).extend([name] * n)
    return {tuple(sorted(names)) for names in by.values()} or {()}


def _events_text(events: set[tuple[str, ...]]) -> str:
    return "; ".join(", ".join(names) for names in sorted(events) if names)


def _match(runner: Runner, start: Config, observed: dict[str, Any], depth: int,
           required: Callable[[Transition, Params], bool],
           events: set[tuple[str, ...]] | None = None) -> list[Step] | None:
    """The shortest run of required, fault-free steps from ``start`` whose end the
    implementation shows as ``observed`` (the empty run when it shows ``start``) and whose
    steps leave exactly the events its log gained (``events``; None: not read). Two runs to
    the same state (a lookup that saw the cancel, or the cancel call answered) are told apart
    by the event the implementation logged."""
    from ._coverage import expected_projection

    protocol, hidden = runner.protocol, runner.contract.unobservable
    want = events

    def shows(c: Config, logged: tuple[str, ...]) -> bool:
        if want is not None and logged not in want:
            return False
        x = expected_projection(protocol, c, hidden)
        return all(observed.get(k) == v for k, v in x.items())

    Node = tuple[Config, tuple[str, ...]]
    root: Node = (start, ())
    if shows(*root):
        return []
    parents: dict[Node, tuple[Node, Step] | None] = {root: None}
    frontier: deque[tuple[Node, int]] = deque([(root, 0)])
    while frontier:
        (c, logged), d = frontier.popleft()
        if d >= depth:
            continue
        for s in protocol.enabled(c):
            if not required(s.transition, s.params):
                continue
            name = s.transition.observable
            more = logged if name is None else tuple(sorted((*logged, name)))
            if want is not None and not any(_within(more, w) for w in want):
                continue
            node: Node = (s.after, more)
            if node in parents:
                continue
            parents[node] = ((c, logged), s)
            if shows(*node):
                path: list[Step] = []
                at: Node = node
                while parents[at] is not None:
                    prev, step = parents[at]  # type: ignore[misc]
                    path.append(step)
                    at = prev
                return path[::-1]
            frontier.append((node, d + 1))
    return None


def _within(some: tuple[str, ...], every: tuple[str, ...]) -> bool:
    """``some`` is a sub-multiset of ``every`` (both sorted)."""
    return not (Counter(some) - Counter(every))


def _brief(observed: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in sorted(observed.items()))


def unmet_progress(protocol: Protocol, progress: Sequence[Progress], seen: Sequence[Config]
                   ) -> list[Progress]:
    """The properties ``premise ~> goal`` whose premise held in ``seen`` (an instance's
    configurations since faults stopped, in order) with the goal holding nowhere after."""
    views = [(str(c.state), protocol.view(c)) for c in seen]
    out = []
    for p in progress:
        owed = False
        for state, v in views:
            if p.premise.holds_in(state, v):
                owed = True
            if owed and p.goal.holds_in(state, v):
                owed = False
        if owed:
            out.append(p)
    return out


def _unmet_text(unmet: Sequence[Progress]) -> str:
    said = "; ".join(f"{p.name} ({p.formula()}, rules {', '.join(p.rules)})" for p in unmet)
    return f"progress propert{'y' if len(unmet) == 1 else 'ies'} unmet: {said}"


def _cycle_text(runner: Runner, i: int, st: _Instance, enabled: list[Step],
                progress: Sequence[Progress]) -> str:
    c = runner.configs[i]
    view = runner.protocol.view(c)
    config = ", ".join(f"{k}={view[k]!r}" for k in sorted(view))
    turns = "; ".join(f"{n}. {kind}: nothing changed" for n, kind in enumerate(st.idle, 1))
    needed = sorted({f"{s.transition.trigger} ({rules_text(s.transition.rules)})"
                     for s in enabled})
    unmet = unmet_progress(runner.protocol, progress, st.seen)
    lead = f"{_unmet_text(unmet)}: " if unmet else ""
    return (f"q{i} did not settle once faults stopped: {lead}after {st.settled.steps} of at most "
            f"{st.settled.bound} step(s) from {st.settled.start} it is caught in a cycle, "
            f"back in the same configuration after every turn of a round: "
            f"[{c.state}: {config}] -> {turns} -> [{c.state}] again; the model requires one "
            f"of: {', '.join(needed)}")


def _over_bound(runner: Runner, i: int, st: _Instance, progress: Sequence[Progress]) -> str:
    unmet = unmet_progress(runner.protocol, progress, st.seen)
    lead = f"{_unmet_text(unmet)}: " if unmet else ""
    return (f"q{i} did not settle once faults stopped: {lead}it took {st.settled.steps} steps, "
            f"more than the bound "
            f"{st.settled.bound} from {st.settled.start}, and is in {runner.configs[i].state}")


def required_steps(protocol: Protocol, fault: Callable[[Transition, Params], bool]
                   ) -> Callable[[Transition, Params], bool]:
    """The steps the quiescence phase schedules: required by fairness, and not a fault."""
    from settled.model.progress import liveness_of

    from .._liveness import REQUIRED, classifier

    classify = classifier(liveness_of(protocol))

    def required(t: Transition, params: Params) -> bool:
        return bool(classify(t.actor, t.trigger, params) & REQUIRED) and not fault(t, params)
    return required
