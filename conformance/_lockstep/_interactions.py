"""Cross-instance stories: each step that moves the shared state, taken while another
instance sits in each control state the system explorer reaches it in.

An interaction is ``(step, state)``: ``step`` is the label of an instance's move (its
transition, or ``system <trigger>`` for a synchronised step) that changes the system's
shared variables, and ``state`` is the control state of another instance at that moment.
The reachable ones are found breadth-first over the system's whole reachable space, each
with a shortest run, which the system tour performs on purpose; the kit counts the ones it
performed, and :func:`coverage` says which reachable ones it did not.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from settled.model import System, SystemConfig, SystemStep

from ._action import Action, transition_label
from ._tour import path_to
from ._world import Plans, is_machine, plans_for

# Configurations the reachability search may visit (a deterministic budget, like the tour's);
# past it the reachable set is partial and :func:`coverage` says so, never counting it as
# complete. The declared systems' spaces are far larger (the query system passes 10,000
# configurations with 26 interactions, the approval system with 246 and still growing).
MAX_STATES = 5_000

Interaction = tuple[str, str]  # (the step moving the shared state, another instance's state)


def interactions_of(system: System, before: SystemConfig, step: SystemStep) -> Iterator[Interaction]:
    """The interactions ``step`` from ``before`` performs (none if the shared state stays)."""
    if step.after.shared == before.shared:
        return
    movers = {i for i, _ in step.moves}
    labels = [transition_label(s.transition) for _, s in step.moves]
    if step.shared is not None or len(step.moves) != 1:
        labels = [f"system {step.trigger}"]
    for j in range(system.instances):
        if j in movers:
            continue
        state = str(before.instances[j].state)
        for label in labels:
            yield (label, state)


@dataclass(frozen=True)
class Reachable:
    """Every interaction the explorer reaches, each with a shortest run performing it."""

    runs: Mapping[Interaction, list[Action]]
    states: int  # configurations visited
    complete: bool  # False: the search stopped at MAX_STATES, the set may lack some


def reachable(system: System, forbidden: frozenset[str], max_states: int = MAX_STATES,
              plans: Plans | None = None) -> Reachable:
    """Breadth-first over the system's reachable space (as the kit can take it)."""
    if is_machine(system):  # independent instances share nothing: no stories to tell
        return Reachable({}, 0, True)
    plans = plans or plans_for(system, forbidden)
    start = system.initial_config()
    parent: dict[SystemConfig, tuple[SystemConfig, Action] | None] = {start: None}
    runs: dict[Interaction, list[Action]] = {}
    frontier = [start]
    complete = True
    while frontier:
        nxt: list[SystemConfig] = []
        for c in frontier:
            for a, step in plans.enabled(c).values():
                for key in interactions_of(system, c, step):
                    if key not in runs:
                        runs[key] = [*path_to(parent, c), a]
                if step.after not in parent:
                    if len(parent) >= max_states:
                        complete = False
                        continue
                    parent[step.after] = (c, a)
                    nxt.append(step.after)
        frontier = nxt
    return Reachable(runs, len(parent), complete)


_REACHABLE: dict[tuple[int, frozenset[str]], tuple[System, Reachable]] = {}


def reachable_once(system: System, forbidden: frozenset[str]) -> Reachable:
    """:func:`reachable`, worked out once per system object."""
    key = (id(system), frozenset(forbidden))
    found = _REACHABLE.get(key)
    if found is None or found[0] is not system:
        found = _REACHABLE[key] = (system, reachable(system, forbidden))
    return found[1]


@dataclass(frozen=True)
class Coverage:
    """The interactions performed out of the reachable ones."""

    covered: int
    reachable: int
    missing: tuple[Interaction, ...]
    complete: bool  # the reachable set is the whole one (the search was not cut short)

    @property
    def ok(self) -> bool:
        return self.complete and not self.missing

    def text(self) -> str:
        head = f"interactions {self.covered}/{self.reachable}"
        if not self.complete:
            head += " (reachable set PARTIAL: the search stopped at its bound)"
        if self.missing:
            shown = "; ".join(f"{step} while another is {state}"
                              for step, state in self.missing[:10])
            more = f" and {len(self.missing) - 10} more" if len(self.missing) > 10 else ""
            head += f"; NOT PERFORMED: {shown}{more}"
        return head

    def to_json(self) -> dict[str, object]:
        return {"covered": self.covered, "reachable": self.reachable, "complete": self.complete,
                "missing": [list(m) for m in self.missing], "ok": self.ok}


def coverage(system: System, forbidden: frozenset[str],
             performed: Mapping[Interaction, int]) -> Coverage:
    """Which reachable interactions ``performed`` (as counted by the kit) lacks."""
    found = reachable_once(system, forbidden)
    goals = set(found.runs)
    done = {k for k, n in performed.items() if n > 0} & goals
    missing = tuple(sorted(goals - done))
    return Coverage(len(done), len(goals), missing, found.complete)
