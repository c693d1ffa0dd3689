"""The ``lockstep`` section of ``settled bench``: the conformance kit against the implementation.

Steps per second of the query suite's lockstep machine (its platform in-process, then over
HTTP), next to a no-op machine with the same rule shape, the same settings and seed. Its
own room: it measures the kit, and shares nothing with the other sections but their sizes.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import hypothesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, invariant, rule

from settled._bench_sizes import FULL, SEED, Say, Sizes, _rate, _ratio
from settled.conformance._bundled._suites import query_suite
from settled.conformance._lockstep import MIN_STEPS

__all__ = ["bench_lockstep"]


@dataclass
class _Tally:
    steps: int = 0
    options: int = 0  # summed size of the lists the lockstep step drew its action from
    forbidden: int = 0
    forbidden_lists: int = 0


def _bench_settings(sizes: Sizes) -> settings:
    # Generation only (no shrinking, no targeting): both machines run the same
    # kind of search, and a failure in the real one is reported, not minimised.
    return settings(max_examples=sizes.lockstep_examples, stateful_step_count=sizes.lockstep_steps,
                    deadline=None, database=None, derandomize=False, phases=[Phase.generate],
                    suppress_health_check=list(HealthCheck))


def _counted_lockstep(tally: _Tally, transport: str | None = None) -> type[RuleBasedStateMachine]:
    base = query_suite(transport=transport).lockstep("BenchLockstep")

    class Counted(base):  # type: ignore[misc, valid-type]
        """The suite's machine, counting steps and the size of what each step draws from."""

        def __init__(self) -> None:
            super().__init__()
            options, forbidden = self.run.options, self.run.forbidden_choices

            def counted_options() -> list[Any]:
                out: list[Any] = options()
                tally.steps += 1  # the step rule calls this exactly once
                tally.options += len(out) + len(out) // 4 + 1  # with the step's "forbidden" slots
                return out

            def counted_forbidden(i: int) -> list[Any]:
                out: list[Any] = forbidden(i)
                tally.forbidden, tally.forbidden_lists = tally.forbidden + len(out), tally.forbidden_lists + 1
                return out

            self.run.options, self.run.forbidden_choices = counted_options, counted_forbidden

    return Counted


def _noop_machine(tally: _Tally, size: int, forbidden: int, instances: int) -> type[RuleBasedStateMachine]:
    """The lockstep rule's shape with nothing behind it: the same draws, no model, no files."""
    slots = st.integers(0, size - 1)
    options = size - size // 5
    instance, refusals = st.integers(0, instances - 1), st.integers(0, max(forbidden, 1) - 1)

    class NoOp(RuleBasedStateMachine):
        @rule(data=st.data())
        def step(self, data: st.DataObject) -> None:
            tally.steps += 1
            if data.draw(slots, label="action") >= options:
                data.draw(instance, label="instance")
                data.draw(refusals, label="forbidden trigger")
                data.draw(refusals, label="forbidden")

        @invariant()
        def agrees(self) -> None:
            pass

    return NoOp


def _timed_run(machine: type[RuleBasedStateMachine], sizes: Sizes, seed: int) -> float:
    test = get_state_machine_test(machine, settings=_bench_settings(sizes), _min_steps=MIN_STEPS)  # type: ignore[no-untyped-call,unused-ignore]
    start = time.perf_counter()
    hypothesis.seed(seed)(test)()
    return time.perf_counter() - start


def bench_lockstep(sizes: Sizes = FULL, say: Say = lambda _: None) -> dict[str, Any]:
    """Lockstep steps per second against the implementation (its platform in-process, and
    over HTTP), and a no-op machine's, same settings."""
    real, noop, http = _Tally(), _Tally(), _Tally()
    real_s = noop_s = http_s = 0.0
    # One untimed example first: what a campaign pays once (the template files, the trace
    # checker's machines, imports) is not a per-step cost, and the no-op machine has none.
    for transport in (None, "http"):
        _timed_run(_counted_lockstep(_Tally(), transport),
                   dataclasses.replace(sizes, lockstep_examples=1), SEED - 1)
    for r in range(sizes.rounds):
        say(f"lockstep: round {r + 1}/{sizes.rounds}: {sizes.lockstep_examples} examples of up "
            f"to {sizes.lockstep_steps} steps, then the no-op machine")
        real_s += _timed_run(_counted_lockstep(real), sizes, SEED + r)
        size = round(real.options / real.steps)
        forbidden = round(real.forbidden / real.forbidden_lists) if real.forbidden_lists else 1
        noop_s += _timed_run(_noop_machine(noop, size, forbidden, query_suite().instances), sizes,
                             SEED + r)
        # The same campaign with the platform served over HTTP on 127.0.0.1 (same seed).
        say(f"lockstep: round {r + 1}/{sizes.rounds}: the same over HTTP")
        http_s += _timed_run(_counted_lockstep(http, "http"), sizes, SEED + r)
    steps, noop_steps = _rate(real.steps, real_s), _rate(noop.steps, noop_s)
    http_steps = _rate(http.steps, http_s)
    return {"steps_per_second": steps, "http_steps_per_second": http_steps,
            "http_slowdown": _ratio(steps, http_steps), "http_steps": http.steps,
            "noop_steps_per_second": noop_steps,
            "ratio": _ratio(noop_steps, steps), "steps": real.steps, "noop_steps": noop.steps,
            "draw_list_size": round(real.options / real.steps, 1), "seed": SEED,
            "examples": sizes.rounds * sizes.lockstep_examples,
            "stateful_step_count": sizes.lockstep_steps}
