"""The ledger machine (L1–L5) and the ledger system of one turn, as declared.

The whole machine and the three-call system are explored: no violation,
deadlock or trap, every state reached, every transition fired. Then each
property is shown to be able to fail: a twisted copy of the table (a
recovery that mints a new operation_id, a receipt written apart from the
change, ...) is explored and the property that guards against it is broken.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from settled.conformance._explore import explore, explore_via_transitions
from settled.conformance._explore._system import explore_system
from settled.model import MACHINES, SYSTEMS, Effect, Guard, IllegalTransition, Protocol, Transition
from settled.model._expr import V, when
from settled.model._oracle import Oracle
from settled.model._system_parts import Refinement
from settled.model.ledger import LEDGER, LedgerState
from settled.model.systems import build_ledger_system

S = LedgerState


def fire(*triggers: str | tuple[str, dict[str, Any]]) -> Oracle:
    oracle = Oracle(LEDGER)
    for item in triggers:
        trigger, params = (item, {}) if isinstance(item, str) else item
        oracle.fire(trigger, **params)
    return oracle


def v(oracle: Oracle) -> dict[str, Any]:
    return dict(LEDGER.view(oracle.config))


WRITE = ("register", {"kind": "write"})
READ = ("register", {"kind": "read"})


def test_the_ledger_is_registered_everywhere() -> None:
    assert MACHINES["ledger"] is LEDGER and SYSTEMS["ledger"].machine is LEDGER
    assert set(LEDGER.rules()) == {"L1", "L2", "L3", "L4", "L5"}


def test_the_explorer_finds_nothing_wrong_in_the_machine() -> None:
    result = explore(LEDGER)
    assert result.complete and result.findings == []
    assert explore_via_transitions(LEDGER).ok


@pytest.mark.rule("L4")
def test_the_three_call_system_finds_nothing_wrong() -> None:
    result = explore_system(build_ledger_system(calls=3))
    assert result.complete and result.ok, [f.name for f in result.findings]
    assert result.states > 1_000


@pytest.mark.rule("L1")
@pytest.mark.rule("L4")
def test_happy_path_registers_runs_pairs_and_continues() -> None:
    o = fire(WRITE, "run", "pair", "continue")
    assert o.config.state == S.CONTINUED
    assert v(o).items() >= {"operation_id": "original", "receipt": "success",
                            "result": "success", "executions": 1, "ran_under": "original"}.items()


@pytest.mark.rule("L2")
@pytest.mark.rule("L4")
def test_a_crash_without_receipt_continues_under_the_original_operation_id() -> None:
    o = fire(WRITE, "crash", "resume", "run", "pair")
    assert v(o)["run"] == "resumed" and v(o)["operation_id"] == "original"
    assert v(o)["ran_under"] == "original" and v(o)["executions"] == 1


@pytest.mark.rule("L5")
def test_after_an_upgrade_the_receipt_decides_and_no_receipt_is_unknown() -> None:
    assert v(fire(WRITE, "run", "contract_upgraded", "crash", "recover_pair"))["result"] == "success"
    assert v(fire(WRITE, "reject", "contract_upgraded", "crash", "recover_pair"))["result"] == "error"
    o = fire(WRITE, "contract_upgraded", "crash", "recover_pair")
    assert v(o)["result"] == "unknown" and v(o)["executions"] == 0
    with pytest.raises(IllegalTransition):
        fire(WRITE, "contract_upgraded", "crash", "resume")  # never re-run under a new contract


@pytest.mark.rule("L5")
def test_a_read_re_checks_the_permission_on_recovery() -> None:
    assert v(fire(READ, "permission_revoked", "crash", "recover_pair"))["result"] == "error"
    o = fire(READ, "crash", "resume", "run", "pair")
    assert v(o)["result"] == "success"
    with pytest.raises(IllegalTransition):
        fire(READ, "permission_revoked", "run")


@pytest.mark.rule("L3")
def test_a_redelivered_call_id_with_other_parameters_is_refused() -> None:
    o = fire(WRITE)
    before = o.config
    o.fire("reregister", params="same")
    assert o.config == before
    with pytest.raises(IllegalTransition, match="same_params"):
        o.fire("reregister", params="other")


# --- twisted machines: each breaks a property ------------------------------------------------


def twist(find: Callable[[Transition], bool], change: Callable[[Transition], Transition | None],
          add: Iterable[Transition] = ()) -> Protocol:
    changed = [change(t) if find(t) else t for t in LEDGER.transitions]
    return dataclasses.replace(LEDGER, name="twisted",
                               transitions=(*(t for t in changed if t is not None), *add))


def broken(p: Protocol) -> set[str]:
    return {f.name for f in explore(p, max_states=5_000).violations}


def _is(trigger: str, guard: str | None = None) -> Callable[[Transition], bool]:
    return lambda t: t.trigger == trigger and (guard is None or guard in {g.name for g in t.guards})


def _effect(updates: dict[str, Any]) -> Effect:
    return Effect(updates)


@pytest.mark.rule("L2")
def test_twist_recovery_minting_a_new_operation_id_is_caught() -> None:
    p = twist(_is("resume"), lambda t: dataclasses.replace(
        t, effect=_effect({"operation_id": "new"})))
    assert {"original_operation_id", "operation_id_minted_once"} <= broken(p)
    # Running the call again under the new id is what the per-call invariant then catches.
    twice = LEDGER.config(S.RECEIPTED, operation_id="new", receipt="success", executions=2,
                          ran_under="both")
    assert {i.name for i in LEDGER.broken_invariants(twice)} >= {
        "one_operation_id_per_call", "executed_at_most_once", "original_operation_id"}


@pytest.mark.rule("L1")
def test_twist_a_change_without_its_receipt_is_caught() -> None:
    p = twist(_is("run"), lambda t: dataclasses.replace(
        t, effect=_effect({"executions": V.executions + 1})))
    assert "change_commits_with_receipt" in broken(p)


@pytest.mark.rule("L4")
def test_twist_a_result_contradicting_its_receipt_is_caught() -> None:
    p = twist(_is("recover_pair", "rejection_receipt"), lambda t: dataclasses.replace(
        t, effect=_effect({"result": "success"})))
    assert "result_matches_receipt" in broken(p)


@pytest.mark.rule("L5")
def test_twist_an_upgraded_call_reported_not_executed_is_caught() -> None:
    p = twist(_is("recover_pair", "contract_upgraded"), lambda t: dataclasses.replace(
        t, effect=_effect({"result": "not_executed"})))
    assert "never_not_executed_if_may_have_run" in broken(p)


@pytest.mark.rule("L4")
def test_twist_recovery_running_a_receipted_call_again_is_caught() -> None:
    p = twist(_is("recover_pair", "success_receipt"), lambda t: dataclasses.replace(
        t, effect=_effect({"result": "success", "executions": V.executions + 1})))
    assert {"executed_at_most_once", "recovery_runs_nothing"} <= broken(p)


@pytest.mark.rule("L2")
def test_twist_a_crash_that_changes_more_than_the_run_is_caught() -> None:
    p = twist(_is("crash"), lambda t: dataclasses.replace(
        t, effect=_effect({"run": "resumed", "operation_id": when(V.operation_id != "none", "new",
                                                                       V.operation_id)})))
    assert {"crash_changes_only_the_run", "run_change_keeps_operation_id"} <= broken(p)


@pytest.mark.rule("L3")
def test_twist_a_conflict_that_overwrites_the_entry_is_caught() -> None:
    p = twist(_is("reregister"), lambda t: dataclasses.replace(
        t, guards=(), effect=_effect({"receipt": "none", "result": "none"})))
    assert "conflict_changes_nothing" in broken(p)


@pytest.mark.rule("L4")
def test_twist_a_turn_that_continues_with_an_unpaired_call_is_caught() -> None:
    honest = build_ledger_system(calls=2)
    assert explore_system(honest).ok
    no_guard = dataclasses.replace(honest, refinements=tuple(
        r for r in honest.refinements if r.trigger != "continue") + (
        Refinement("continue", ("L4",), guards=(Guard("any", True),)),))
    early = dataclasses.replace(no_guard, machine=twist(
        _is("continue"), lambda t: dataclasses.replace(t, source=(S.PAIRED, S.REGISTERED))))
    found = {f.name for f in explore_system(early, max_states=20_000).findings}
    assert "no_unpaired_call_survives_recovery" in found
