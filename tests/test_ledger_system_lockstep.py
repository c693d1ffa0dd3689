"""The ledger system's lockstep: the calls of one assistant message, in the real runtime."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from settled.conformance import lockstep
from settled.conformance._bundled._ledger_system_adapter import LedgerSystemAdapter, ledger_system
from settled.conformance._lockstep import (
    SYSTEM,
    SystemAction,
    declared_edges,
    load_steps,
    replay,
    unfired_edges,
)
from settled.impl.ledger._ledger import LedgerRuntime
from settled.impl.shared._db import write
from settled.model._system import DeclarationError, System
from settled.model.ledger import LEDGER
from settled.model.systems import build_ledger_system


def q(i: int, trigger: str, **params: Any) -> SystemAction:
    return SystemAction(i, trigger, params, who=f"q{i}")


def every(trigger: str, **params: Any) -> SystemAction:
    return SystemAction(SYSTEM, trigger, params, who="all")


KINDS = {"q0.kind": "write", "q1.kind": "read", "q2.kind": "write"}


class OnlyTheLastUnpairedCallRecovered(LedgerRuntime):
    """L4 broken across the calls of a message: a restart recovers only the newest unpaired
    call (the one after the checkpoint's last result, as a resume from the leaf would
    see it); the message's earlier unpaired calls stay registered under the dead run."""

    def resume(self, session_id: str) -> bool:
        with write(self.connection) as conn:
            row = conn.execute("SELECT run_id FROM sessions WHERE session_id = ?",
                               (session_id,)).fetchone()
            if row["run_id"] == self.run_id:
                return False
            conn.execute("UPDATE sessions SET run_id = ? WHERE session_id = ?",
                         (self.run_id, session_id))
            rows: list[sqlite3.Row] = conn.execute(
                "SELECT call_id, state FROM ledger WHERE session_id = ? AND state != 'continued' "
                "ORDER BY position", (session_id,)).fetchall()
            unpaired = [r for r in rows if r["state"] != "paired"][-1:]
            for r in [x for x in rows if x["state"] == "paired"] + unpaired:
                source = self._model_state(conn, r["call_id"], r["state"])
                to = "paired" if r["state"] == "paired" else "recovering"
                conn.execute("UPDATE ledger SET state = ? WHERE call_id = ?", (to, r["call_id"]))
                self._log(conn, r["call_id"], "restart", source, to)
        return True


class _Mutated(LedgerSystemAdapter):
    runtime_class = OnlyTheLastUnpairedCallRecovered


@pytest.fixture(scope="module")
def system() -> System:
    return ledger_system(3)


def _replay(system: System, cls: type, steps: list[SystemAction]) -> str | None:
    return replay(system, lambda: cls(3), system.machine.refusable, steps)


# --------------------------------------------------------------------------- the declaration
def test_register_is_one_step_for_every_call_each_with_its_own_kind(system: System) -> None:
    steps = [s for s in system.enabled(system.initial_config()) if s.trigger == "register"]
    assert len(steps) == 2 ** 3  # one per combination of the calls' kinds
    assert all(len(s.moves) == 3 for s in steps)
    mixed = next(s for s in steps if dict(s.params) == KINDS)
    assert [LEDGER.view(c)["kind"] for c in mixed.after.instances] == ["write", "read", "write"]


def test_a_per_instance_trigger_must_be_synchronised() -> None:
    import dataclasses

    with pytest.raises(DeclarationError, match="not a sync trigger"):
        dataclasses.replace(build_ledger_system(calls=2), per_instance=("run",))


# --------------------------------------------------------------------------- shared, really
def test_one_restart_recovers_every_unpaired_call_of_the_message(system: System) -> None:
    steps = [every("register", **KINDS), q(1, "run"), q(1, "pair"), every("crash"),
             q(0, "resume"), q(2, "contract_upgraded"), q(2, "recover_pair")]
    assert _replay(system, LedgerSystemAdapter, steps) is None


def test_the_turn_continues_once_every_call_is_paired(system: System) -> None:
    steps = [every("register", **KINDS), q(0, "run"), q(0, "pair"), q(1, "permission_revoked"),
             q(1, "reject"), q(1, "pair"), q(2, "reject"), q(2, "pair"), every("continue")]
    assert _replay(system, LedgerSystemAdapter, steps) is None


# --------------------------------------------------------------------------- the campaign
def test_the_ledger_system_campaign_passes_and_covers_every_edge(tmp_path: Path) -> None:
    report = lockstep(LedgerSystemAdapter, profile="dev", seed=0, out=tmp_path)
    assert report.ok, report.text()
    assert report.system and report.machine == "ledger_system" and report.instances == 3
    assert report.trace_events > 0


def test_the_tour_takes_every_edge_of_the_ledger_in_the_system(system: System) -> None:
    from settled.conformance._bundled._suites import ledger_system_suite
    from settled.conformance._lockstep import run_tour

    machine = ledger_system_suite().lockstep()
    failed = run_tour(machine)
    assert failed is None, failed.failure
    assert declared_edges(LEDGER) and unfired_edges(LEDGER, machine.record.edges) == []  # type: ignore[attr-defined]


@pytest.mark.rule("L4")
def test_the_ledger_system_lockstep_can_fail_a_partial_recovery_is_caught(
        system: System, tmp_path: Path) -> None:
    report = lockstep(_Mutated, profile="dev", seed=0, out=tmp_path)
    assert report.status == "diverged" and report.exit_code == 1, report.text()
    assert report.counterexample is not None
    name, steps = load_steps(report.counterexample)
    assert name == "ledger_system"
    assert _replay(system, _Mutated, steps) is not None
    assert _replay(system, LedgerSystemAdapter, steps) is None


def test_verify_checks_the_ledger_system() -> None:
    from settled import _verify

    got = _verify.check_system_lockstep("ledger", "dev", 0)
    assert got["checked"] and got["ok"], got
    assert got["suite"] == "ledger_system" and got["unfired"] == []
