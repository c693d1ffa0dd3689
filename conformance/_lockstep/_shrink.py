"""Replaying and shrinking a failing lockstep run: one minimiser for machines and systems.

The lockstep kit (:mod:`._lockstep`) replays a step list on a fresh implementation and
shrinks a failing one to a short failing one here, for machines and systems alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, Protocol, TypeVar

from settled.conformance._adapter import Adapter, AdapterError


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
    return _Shrinker(diverges, history, budget).run(steps)


class _Shrinker(Generic[A]):
    """:func:`shrink`'s passes, sharing one budget and one memo of tried candidates."""

    def __init__(self, diverges: Callable[[list[A]], bool],
                 history: Callable[[list[A]], Sequence[Hashable] | None], budget: int) -> None:
        self.diverges, self.history, self.budget = diverges, history, budget
        self.spent = 0
        self.tried: set[tuple[str, ...]] = set()

    @property
    def left(self) -> bool:
        return self.spent < self.budget

    def run(self, steps: list[A]) -> list[A]:
        while self.left:
            before = len(steps)
            steps = self.singles(self.ddmin(self.cut_cycles(self.instances_apart(steps))))
            if len(steps) == before:
                break
        return steps

    def fails(self, candidate: list[A]) -> bool:
        """Whether ``candidate`` still fails: replayed on the model first (free), then, if
        the model accepts it, on the implementation (one unit of the budget)."""
        key = tuple(a.text() + f"@{a.instance}" for a in candidate)
        if key in self.tried or not self.left:
            return False
        self.tried.add(key)
        if self.history(candidate) is None:
            return False
        self.spent += 1
        try:
            return self.diverges(candidate)
        except Invalid:
            return False

    def cut_cycles(self, steps: list[A]) -> list[A]:
        progress = True
        while progress and self.left:
            progress = False
            configs = self.history(steps)
            if configs is None:
                return steps
            for j, k in cycles(configs):
                candidate = steps[:j] + steps[k:]
                if self.fails(candidate):
                    steps, progress = candidate, True
                    break
        return steps

    def ddmin(self, steps: list[A]) -> list[A]:
        n = 2
        while len(steps) >= 2 and self.left:
            size = math.ceil(len(steps) / n)
            chunks = [(a, b) for a, b in ((k * size, min((k + 1) * size, len(steps)))
                                          for k in range(n)) if a < b]
            smaller = self._reduce(steps, chunks)
            if smaller is not None:
                steps, kept_chunk = smaller
                n = 2 if kept_chunk else max(n - 1, 2)
            elif n >= len(steps):
                break
            else:
                n = min(n * 2, len(steps))
        return steps

    def _reduce(self, steps: list[A], chunks: list[tuple[int, int]]
                ) -> tuple[list[A], bool] | None:
        """ddmin's two reductions: a chunk alone ("reduce to subset"; True), then everything
        but a chunk ("reduce to complement"; False); None when neither still fails."""
        if len(chunks) > 1:
            for a, b in chunks:
                if self.fails(steps[a:b]):
                    return steps[a:b], True
        for a, b in chunks:
            candidate = steps[:a] + steps[b:]
            if self.fails(candidate):
                return candidate, False
        return None

    def singles(self, steps: list[A]) -> list[A]:
        k = len(steps) - 1  # from the end: later steps depend on earlier ones, not back
        while k >= 0 and self.left:
            candidate = steps[:k] + steps[k + 1:]
            if self.fails(candidate):
                steps = candidate
            k = min(k - 1, len(steps) - 1)
        return steps

    def instances_apart(self, steps: list[A]) -> list[A]:
        # One instance's steps alone, then the run without one instance's steps: an
        # interleaved story is a set of non-adjacent steps no chunk of the list covers.
        for keep in sorted({a.instance for a in steps}):
            candidate = [a for a in steps if a.instance == keep]
            if len(candidate) < len(steps) and self.fails(candidate):
                return candidate
        for drop in sorted({a.instance for a in steps}):
            candidate = [a for a in steps if a.instance != drop]
            if candidate and self.fails(candidate):
                return self.instances_apart(candidate)
        return steps
