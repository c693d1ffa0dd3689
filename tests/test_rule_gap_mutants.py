"""The mutants for rules the catalogue once did not reach (Q6, R3, V1, W4).

Each is in the catalogue, whose slow test (tests/test_mutants.py) kills it under the ci
campaign with a counterexample that diverges on the mutant and that the unmodified
implementation takes like the model does. Here the default run checks the catalogue's rule
coverage and the three cheap approval kills on seed 1, with those two replays.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from settled.conformance._bundled._suites import Suite, approval_suite, query_suite
from settled.conformance._lockstep import Action, replay, run_lockstep, world
from settled.conformance._profiles import profile
from settled.conformance.mutants import Mutant, all_mutants, rule_coverage

NEW = {"Q6-superseded-draft-confirmable": query_suite,
       "R3-approved-call-proposed-again": approval_suite,
       "V1-display-log-decides-recovery": approval_suite,
       "W4-new-token-deduplicated-by-arguments": approval_suite}
CHEAP = {"R3-approved-call-proposed-again", "V1-display-log-decides-recovery",
         "W4-new-token-deduplicated-by-arguments"}


@pytest.fixture(autouse=True)
def counterexamples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SETTLED_COUNTEREXAMPLES", str(tmp_path))
    return tmp_path


def _mutant(name: str) -> Mutant:
    found = [m for m in all_mutants() if m.name == name]
    assert len(found) == 1, name
    return found[0]


def _replay(suite: Suite, steps: Sequence[Action]) -> str | None:
    return replay(world(suite.protocol, suite.instances), suite.adapter, suite.forbidden, steps)


def test_the_catalogue_reaches_q6_r3_v1_and_w4() -> None:
    missing = set(rule_coverage().missing)
    assert not missing & {"Q6", "R3", "V1", "W4"}, missing
    for name in NEW:
        mutant = _mutant(name)
        assert mutant.rule == name.split("-", 1)[0]
        parts = [mutant.adapter_class.__dict__.get(slot)
                 for slot in ("business_class", "runtime_class", "store_class")]
        documented = [p.__doc__ for p in parts if p is not None and p.__doc__]
        assert documented and mutant.rule in documented[0], "the docstring cites the broken rule"


def _killed(name: str, seed: int) -> None:
    mutant, make = _mutant(name), NEW[name]
    suite = make(mutant.adapter_class)
    record = run_lockstep(suite.lockstep(name), profile("ci"), seed=seed)
    assert record.failure is not None, f"seed {seed}: the ci campaign let {name} survive"
    assert record.steps
    assert _replay(suite, record.steps) is not None, record.failure
    assert _replay(make(), record.steps) is None, record.failure


@pytest.mark.parametrize("name", sorted(CHEAP))
def test_the_cheap_new_mutants_die_on_seed_1(name: str) -> None:
    _killed(name, 1)
