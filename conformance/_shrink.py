"""Replaying and shrinking a failing lockstep run: one minimiser for machines and systems.

The lockstep kit (:mod:`._lockstep`) replays a step list on a fresh implementation and
shrinks a failing one to a short failing one here, for machines and systems alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Protocol, TypeVar

from ._adapter import Adapter, AdapterError


class Divergence(AssertionError):
    """The implementation and the model disagree."""


class Invalid(Exception):
    """A replayed action list the model itself does not accept (a minimiser candidate)."""


class Step(Protocol):
    """What the shrinker needs of a step: its instance and its text."""

    @property
    def instance(self) -> int: ...

    def text(self) -> str: ...


A = TypeVar("A", bound=Step)


class Run(Protocol[A]):  # type: ignore[misc]
    """A lockstep runner: one fresh implementation beside the model."""

    @property
    def adapter(self) -> Adapter: ...

    def apply(self, action: A) -> None: ...

    def check(self) -> None: ...

    def finish(self) -> None: ...


def run_steps(run: Run[A], steps: Sequence[A]) -> str | None:
    """Replay ``steps`` on ``run``: the divergence, or None if they agree.

    Raises :class:`Invalid` when the model rejects the list, and
    :class:`AdapterError` when the adapter itself fails; the adapter is closed
    on every way out but a pass (the caller may still read it then).
    """
    close = run.adapter.close
    try:
        for action in steps:
            run.apply(action)
            run.check()
    except Divergence as exc:
        close()
        return str(exc)
    except (Invalid, AdapterError):
        close()
        raise
    try:
        run.finish()
    except Divergence as exc:
        return str(exc)
    return None


def longest_paths(paths: Sequence[list[A]]) -> list[list[A]]:
    """The paths that start no other path, shortest first (equal lengths keep their order).

    A lockstep replay compares the implementation with the model after every step, so a
    path that starts a longer one is checked, step by step, when the longer one is
    replayed: dropping it saves a fresh implementation and checks the same steps. The
    event log is checked once, at the end of the longer run; the trace checker reads it
    forward, so what the shorter run logged is judged there too (a log line a later step
    rewrites is the one case the shorter run alone would have seen).
    """
    texts = [tuple(f"{a.text()}@{a.instance}" for a in path) for path in paths]
    starts = {text[:k] for text in texts for k in range(1, len(text))}
    kept: dict[tuple[str, ...], list[A]] = {}
    for path, text in zip(paths, texts, strict=True):
        if text not in starts:
            kept.setdefault(text, path)
    return sorted(kept.values(), key=len)


def cut_at_divergence(path: list[A], applied: int, diverges: Callable[[list[A]], bool]
                      ) -> list[A]:
    """A failing path cut after the step that diverged (``applied`` steps were taken), when
    the cut still fails on a fresh implementation; else the whole path (a divergence found
    at the end, in the event log, may need every step)."""
    cut = path[:applied]
    if 0 < applied < len(path) and diverges(cut):
        return cut
    return path


def cycles(history: Sequence[Hashable]) -> list[tuple[int, int]]:
    """Every stretch ``[j, k)`` of steps that returns the model to the configuration it left
    (``history[j] == history[k]``), longest first: removing one leaves a run the model accepts."""
    where: dict[Hashable, list[int]] = {}
    for n, configs in enumerate(history):
        where.setdefault(configs, []).append(n)
    found = [(j, k) for seen in where.values() for x, j in enumerate(seen) for k in seen[x + 1:]]
    return sorted(found, key=lambda jk: (jk[0] - jk[1], jk[0]))


def shrink(steps: list[A], diverges: Callable[[list[A]], bool],
           history: Callable[[list[A]], Sequence[Hashable] | None], budget: int) -> list[A]:
    """Shrink a failing step list by delta debugging, to a fixpoint or the budget.

    ``history(steps)`` is the model's configurations before and after each step,
    or None when the model rejects the list; ``diverges(steps)`` replays a list
    the model accepts on a fresh implementation (it may raise :class:`Invalid`,
    read as "does not fail").

    Each round tries, in order: keeping one instance's steps alone or dropping one
    instance's steps, cutting a cycle (a stretch of steps after which the model is
    back in a configuration it was in before), ddmin over the list (removing chunks,
    then their complements), and removing single steps anywhere (so non-adjacent
    steps go too). Every candidate is first replayed on the model alone, which is
    cheap; only a valid run is replayed on the implementation, and only those count
    against ``budget``.
    """
    spent = 0
    tried: set[tuple[str, ...]] = set()

    def fails(candidate: list[A]) -> bool:
        nonlocal spent
        key = tuple(a.text() + f"@{a.instance}" for a in candidate)
        if key in tried or spent >= budget:
            return False
        tried.add(key)
        if history(candidate) is None:
            return False
        spent += 1
        try:
            return diverges(candidate)
        except Invalid:
            return False

    def cut_cycles(steps: list[A]) -> list[A]:
        progress = True
        while progress and spent < budget:
            progress = False
            configs = history(steps)
            if configs is None:
                return steps
            for j, k in cycles(configs):
                candidate = steps[:j] + steps[k:]
                if fails(candidate):
                    steps, progress = candidate, True
                    break
        return steps

    def ddmin(steps: list[A]) -> list[A]:
        n = 2
        while len(steps) >= 2 and spent < budget:
            size = math.ceil(len(steps) / n)
            chunks = [(k * size, min((k + 1) * size, len(steps))) for k in range(n)]
            chunks = [(a, b) for a, b in chunks if a < b]
            done = False
            for a, b in chunks:  # a chunk alone (ddmin's "reduce to subset")
                candidate = steps[a:b]
                if len(chunks) > 1 and fails(candidate):
                    steps, n, done = candidate, 2, True
                    break
            if not done:
                for a, b in chunks:  # everything but a chunk ("reduce to complement")
                    candidate = steps[:a] + steps[b:]
                    if fails(candidate):
                        steps, n, done = candidate, max(n - 1, 2), True
                        break
            if not done:
                if n >= len(steps):
                    break
                n = min(n * 2, len(steps))
        return steps

    def singles(steps: list[A]) -> list[A]:
        k = len(steps) - 1  # from the end: later steps depend on earlier ones, not back
        while k >= 0 and spent < budget:
            candidate = steps[:k] + steps[k + 1:]
            if fails(candidate):
                steps = candidate
            k = min(k - 1, len(steps) - 1)
        return steps

    def instances_apart(steps: list[A]) -> list[A]:
        # One instance's steps alone, then the run without one instance's steps: an
        # interleaved story is a set of non-adjacent steps no chunk of the list covers.
        for keep in sorted({a.instance for a in steps}):
            candidate = [a for a in steps if a.instance == keep]
            if len(candidate) < len(steps) and fails(candidate):
                return candidate
        for drop in sorted({a.instance for a in steps}):
            candidate = [a for a in steps if a.instance != drop]
            if candidate and fails(candidate):
                return instances_apart(candidate)
        return steps

    while spent < budget:
        before = len(steps)
        steps = singles(ddmin(cut_cycles(instances_apart(steps))))
        if len(steps) == before:
            break
    return steps
