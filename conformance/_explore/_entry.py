"""The explorer's entry points: ``explore`` (steps from the table's successor function),
``explore_via_transitions`` (steps fired through the ``transitions`` oracle) and the
search both run.
"""

from __future__ import annotations

import time
from typing import Any

from settled.model import Protocol, lockstep_only

from .._counterexample import DEADLOCK, TRAP, Finding
from .._paused import gc_paused
from ._findings import _coverage, _stuck, _violations
from ._local import Progress, Successors, _Local
from ._result import ExploreResult
from ._space import _Space


# --------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------
def explore(protocol: Protocol, *, instances: int = 1, max_states: int | None = None,
            progress: Progress | None = None) -> ExploreResult:
    """Explore one instance of ``protocol`` exhaustively (or up to ``max_states``).

    ``progress(states, frontier, seconds)`` is called at most about five times
    a second. ``max_states`` stops the search once that many states are known
    (it may overshoot by one state's successors); the result then says
    ``complete = False`` and gives no deadlock, trap, unreached or unfired verdict.
    ``instances`` must be 1: several instances of a machine are a declared system
    (``settled.model.systems``, explored by ``explore_system``).
    """
    return _run(protocol, protocol.enabled, instances, max_states, progress, "table")


def explore_via_transitions(protocol: Protocol, instances: int = 1, max_states: int | None = None,
                            *, progress: Progress | None = None) -> ExploreResult:
    """:func:`explore`, with every local step fired through the ``transitions`` oracle
    (see ``_oracle_check``)."""
    from settled.conformance._explore._oracle_check import explore_via_transitions as via

    return via(protocol, instances, max_states, progress=progress)


def _run(protocol: Protocol, successors: Successors, instances: int, max_states: int | None,
         progress: Progress | None, stepper: str) -> ExploreResult:
    t0 = time.perf_counter()
    if instances != 1:
        raise ValueError(f"explore: one instance of a machine (got instances={instances}); "
                         "several are a declared system: explore_system, or settled explore "
                         "--queries N")
    if max_states is not None and max_states < 1:
        raise ValueError(f"explore: max_states must be at least 1 (or None), got {max_states}")
    with gc_paused():  # many live tuples: see _paused
        local = _Local(protocol, successors, max_states, progress, t0)
        space = _Space(local)
    complete = space.complete
    bounds: dict[str, Any] = {"instances": 1, "max_states": max_states,
                              "complete": complete, "local_configs": space.states,
                              "stepper": stepper}
    meta = {"bounds": bounds}
    violations = _violations(space, meta)
    deadlocks = _stuck(space, space.deadlocks, DEADLOCK, meta)
    traps: list[Finding] = []
    unreached: list[Finding] = []
    unfired: list[Finding] = []
    if complete:
        good = space.can_settle()
        dead = set(space.deadlocks)
        traps = _stuck(space, (g for g in range(space.states) if not good[g] and g not in dead),
                       TRAP, meta) if good.count(0) > len(dead) else []
        unreached, unfired = _coverage(space)
    seconds = time.perf_counter() - t0
    if progress is not None:
        progress(space.states, space.states - space.head, seconds)
    return ExploreResult(
        model=protocol.name, bounds=bounds, states=space.states, edges=space.edges,
        seconds=round(seconds, 6), states_per_second=round(space.states / seconds, 1) if seconds else 0.0,
        violations=violations, deadlocks=deadlocks, traps=traps, unreached_states=unreached,
        unfired_transitions=unfired, _space=space,
        lockstep_only=lockstep_only(protocol.unbreakable()))
