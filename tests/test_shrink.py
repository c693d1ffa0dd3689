"""The replay helpers shared by the machine and the system lockstep."""

from __future__ import annotations

from settled.conformance._lockstep import Action
from settled.conformance._lockstep._shrink import cut_at_divergence, longest_paths


def a(trigger: str, instance: int = 0) -> Action:
    return Action(instance, trigger, {})


def test_longest_paths_drops_every_path_that_starts_another_and_duplicates() -> None:
    short, longer, other = [a("x")], [a("x"), a("y")], [a("x", 1)]
    kept = longest_paths([short, longer, other, list(longer)])
    assert kept == [other, longer]  # shortest first; x on q1 starts nothing of q0's


def test_longest_paths_of_nothing_is_nothing() -> None:
    assert longest_paths([]) == []


def test_a_failing_path_is_cut_after_the_step_that_diverged_when_the_cut_still_fails() -> None:
    path = [a("x"), a("y"), a("z")]
    assert cut_at_divergence(path, 2, lambda c: True) == path[:2]


def test_a_cut_that_no_longer_fails_keeps_the_whole_path() -> None:
    """A divergence found at the end (the event log) may need every step."""
    path = [a("x"), a("y"), a("z")]
    assert cut_at_divergence(path, 2, lambda c: False) == path
    assert cut_at_divergence(path, 3, lambda c: True) == path
    assert cut_at_divergence(path, 0, lambda c: True) == path
