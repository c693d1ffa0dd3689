"""The crash sweep: a crash at every durable boundary of every operation, held to the model.

(a) the implementation reports its boundaries (commits, platform calls) only to an
installed hook, and not the far side's or the world's; (b) the bundled implementations
pass the sweep with every boundary crashed; (c) the sweep can fail: a boundary never
crashed, an adapter that cannot restart, and each crash-window mutant of the catalogue.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from settled._verify import MachineReport, check_crash
from settled.conformance._bundled._ledger_adapter import LedgerAdapter
from settled.conformance._bundled._suites import sweep_machine
from settled.conformance._lockstep._crash_sweep import (
    Operation,
    allowed,
    operations,
    sweep,
)
from settled.conformance.mutants import Mutant, all_mutants
from settled.conformance.mutants.crash import MUTANTS
from settled.impl.shared._crash import install_boundary_hook, unwatched, watched
from settled.impl.shared._db import connect, write
from settled.model import LEDGER, QUERY
from settled.model._parts import Value


# --------------------------------------------------------------------------- (a) boundaries
def test_a_commit_is_a_boundary_before_and_after_only_while_a_hook_is_installed(
        tmp_path: Path) -> None:
    conn = connect(tmp_path / "store.db")
    conn.execute("CREATE TABLE t (x INTEGER)")
    seen: list[tuple[str, str]] = []
    with write(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    remove = install_boundary_hook(lambda kind, where: seen.append((kind, where)))
    try:
        with write(conn):
            conn.execute("INSERT INTO t VALUES (2)")
        with unwatched(), write(conn):  # the world's write: not the implementation's
            conn.execute("INSERT INTO t VALUES (3)")
    finally:
        remove()
    with write(conn):
        conn.execute("INSERT INTO t VALUES (4)")
    assert seen == [("before_commit", "store.db"), ("after_commit", "store.db")]


def test_a_crash_before_the_commit_leaves_nothing_once_the_connection_closes(
        tmp_path: Path) -> None:
    conn = connect(tmp_path / "store.db")
    conn.execute("CREATE TABLE t (x INTEGER)")

    class Boom(BaseException):
        pass

    def crash(kind: str, where: str) -> None:
        if kind == "before_commit":
            raise Boom

    remove = install_boundary_hook(crash)
    try:
        with pytest.raises(Boom), write(conn):
            conn.execute("INSERT INTO t VALUES (1)")
    finally:
        remove()
    conn.close()  # the dead process's connection: its open transaction rolls back
    assert connect(tmp_path / "store.db").execute("SELECT COUNT(*) FROM t").fetchone()[0] == 0


def test_a_watched_client_reports_each_call_after_it_and_hides_its_own_commits(
        tmp_path: Path) -> None:
    far = connect(tmp_path / "far.db")
    far.execute("CREATE TABLE t (x INTEGER)")

    class Far:
        def store(self, x: int) -> int:
            with write(far):
                far.execute("INSERT INTO t VALUES (?)", (x,))
            return x

        def fail(self) -> None:
            raise ConnectionError("no answer")

    client = watched(Far(), "far")
    seen: list[tuple[str, str]] = []
    remove = install_boundary_hook(lambda kind, where: seen.append((kind, where)))
    try:
        assert client.store(7) == 7
        with pytest.raises(ConnectionError):
            client.fail()
    finally:
        remove()
    assert seen == [("after_call", "far.store"), ("after_call", "far.fail")]


# --------------------------------------------------------------------------- (b) it passes
def test_every_ledger_boundary_is_crashed_in_process_and_in_a_child_and_allowed() -> None:
    report = sweep_machine("ledger")
    assert report.ok, report.failures + report.never_crashed
    assert report.operations == len(LEDGER.transitions)
    assert len(report.crashed) == len(report.boundaries) > 0
    assert report.child_crashed, "no boundary was crashed in a hard-exiting child"
    assert report.child_skipped is None


@pytest.mark.slow
@pytest.mark.parametrize("machine", ["query", "approval"])
def test_every_boundary_of_the_bundled_implementation_is_crashed_and_allowed(
        machine: str) -> None:
    report = sweep_machine(machine)
    assert report.ok, report.failures + report.never_crashed
    assert len(report.crashed) == len(report.boundaries) > 0


def test_the_query_worker_crashes_after_each_platform_call_and_around_each_commit() -> None:
    report = sweep_machine_only("query", {"submit_answered", "lookup_succeeded#1"})
    assert report.ok, report.failures + report.never_crashed
    kinds = {report.boundaries[key] for key in report.crashed}
    assert ("after_call", "platform.submit") in kinds
    assert ("after_call", "platform.lookup") in kinds
    assert {("before_commit", "agent.db"), ("after_commit", "agent.db")} <= kinds


def test_an_adapter_with_threads_says_its_child_sample_was_skipped() -> None:
    report = sweep_machine_only("approval", {"approve#1"})
    assert report.ok, report.failures
    assert report.child_skipped and "threads" in report.child_skipped
    assert not report.child_crashed


def test_a_crash_after_the_operation_may_be_followed_by_the_models_crash() -> None:
    op = next(o for o in operations(QUERY) if o.name == "begin_submit")
    hows = {how for how, _c, _free in allowed(QUERY, op)}
    assert {"before", "after", "crash from before", "crash from after"} <= hows


def sweep_machine_only(machine: str, names: set[str]):  # type: ignore[no-untyped-def]
    from settled.conformance._bundled._approval_adapter import ApprovalAdapter
    from settled.conformance._bundled._query_adapter import QueryAdapter
    from settled.conformance._bundled._suites import SUITES

    factory = {"query": lambda: QueryAdapter(1, 2),
               "approval": lambda: ApprovalAdapter(1)}[machine]
    return sweep(SUITES[machine]().protocol, factory, machine=machine,
                 only=lambda op: op.name in names)


# --------------------------------------------------------------------------- (c) it can fail
class _ExtraCommitOnce(LedgerAdapter):
    """Its first run of ``pair`` commits once more than every later run: the sweep counts a
    boundary that no re-run reaches."""

    runs: ClassVar[list[int]] = [0]

    def perform(self, instance: int, trigger: str, params: Mapping[str, Value]) -> None:
        super().perform(instance, trigger, params)
        if trigger == "pair":
            self.runs[0] += 1
            if self.runs[0] == 1:
                conn = self._rt(self.items[instance]).connection
                with write(conn):
                    conn.execute("UPDATE sessions SET leaf_id = leaf_id")


def test_a_boundary_never_crashed_fails_the_sweep_and_verify_naming_it() -> None:
    _ExtraCommitOnce.runs[0] = 0
    report = sweep(LEDGER, lambda: _ExtraCommitOnce(1), machine="ledger",
                   only=lambda op: op.name == "pair#1")
    assert not report.ok
    assert report.never_crashed == ["pair#1 boundary 3 (before_commit sessions.db)",
                                    "pair#1 boundary 4 (after_commit sessions.db)"]
    doc = report.to_json()
    assert doc["never_crashed"] and doc["crashed"] < doc["boundaries"]
    machine = MachineReport("ledger", explore={"ok": True}, system={"ok": True},
                            lockstep={"ok": True}, trace_check={"ok": True}, crash=doc,
                            system_lockstep={"checked": True, "ok": True},
                            concurrent={"checked": True, "ok": True})
    assert not machine.ok
    machine.crash = {**doc, "ok": True, "never_crashed": []}
    assert machine.ok


def test_an_empty_sweep_is_not_a_pass() -> None:
    report = sweep(LEDGER, lambda: LedgerAdapter(1), machine="ledger", only=lambda op: False)
    assert not report.ok
    assert "no durable boundary" in report.to_json()["failures"][0]


class _NoRestart(LedgerAdapter):
    def recover_crash(self, instance: int, trigger: str, params: Mapping[str, Value]) -> None:
        raise NotImplementedError("_NoRestart has no recover_crash")


def test_an_adapter_that_cannot_restart_is_reported_not_checked() -> None:
    report = sweep(LEDGER, lambda: _NoRestart(1), machine="ledger",
                   only=lambda op: op.name == "run")
    assert not report.ok
    assert report.failures and all("NOT CHECKED" in f for f in report.failures)


class _ShowsHalfDone(LedgerAdapter):
    """Pretends a crash left the call paired with no result: a state no model run has."""

    def observe(self, instance: int) -> Mapping[str, Value]:
        seen = dict(super().observe(instance))
        if getattr(self, "crashed_once", False):
            seen["result"] = "unknown"
        return seen

    def recover_crash(self, instance: int, trigger: str, params: Mapping[str, Value]) -> None:
        super().recover_crash(instance, trigger, params)
        self.crashed_once = True


def test_a_state_the_model_does_not_allow_after_a_crash_fails_naming_the_boundary() -> None:
    report = sweep(LEDGER, lambda: _ShowsHalfDone(1), machine="ledger",
                   only=lambda op: op.name == "run")
    assert not report.ok and not report.never_crashed
    assert report.failures[0].startswith("run boundary 1 (before_commit business.db)")
    assert "result: implementation 'unknown'" in report.failures[0]


# Each crash-window mutant, swept over the operations its split step performs (the whole
# sweep runs in `settled mutants` and the slow catalogue test).
SPLIT_STEP = {"Q12-counted-before-submitting": {"begin_submit"},
              "Q25-notification-after-the-outcome": {"submit_rejected", "lookup_succeeded#1"},
              "R6-result-after-its-state": {"save_result"},
              "W6-record-after-the-change-unhooked": {"commit"},
              "L4-paired-before-its-result": {"pair#1"},
              "L1-receipt-after-the-change-unhooked": {"run"}}


def test_the_catalogue_has_two_crash_window_mutants_per_implementation() -> None:
    assert {m.name for m in MUTANTS} == set(SPLIT_STEP)
    assert set(MUTANTS) <= set(all_mutants())
    for machine in ("query", "approval", "ledger"):
        assert sum(m.machine == machine for m in MUTANTS) >= 2, machine
    assert all(m.campaign == "crash_sweep" for m in MUTANTS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_each_crash_window_mutant_is_killed_by_the_sweep_and_the_implementation_passes(
        mutant: Mutant) -> None:
    from settled.conformance._bundled._suites import SUITES

    protocol = SUITES[mutant.machine]().protocol
    args = (1, 2) if mutant.machine == "query" else (1,)

    def chosen(op: Operation) -> bool:
        return op.name in SPLIT_STEP[mutant.name]

    killed = sweep(protocol, lambda: mutant.adapter_class(*args), machine=mutant.machine,
                   only=chosen)
    assert killed.failures, f"the sweep let {mutant.name} survive"
    assert not killed.never_crashed
    assert any("does not allow" in f for f in killed.failures), killed.failures
    bundled = {"query": "QueryAdapter", "approval": "ApprovalAdapter",
               "ledger": "LedgerAdapter"}[mutant.machine]
    base = next(c for c in mutant.adapter_class.__mro__ if c.__name__ == bundled)  # type: ignore[union-attr]
    passed = sweep(protocol, lambda: base(*args), machine=mutant.machine, only=chosen)
    assert passed.ok, passed.failures + passed.never_crashed


@pytest.mark.slow
def test_settled_mutants_kills_the_crash_window_mutants_with_the_crash_sweep() -> None:
    from settled.conformance.mutants._run import _crash_mutant

    for mutant in MUTANTS:
        result = _crash_mutant(mutant)
        assert result.killed and result.killed_by == "crash", (mutant.name, result.failure)


def test_verify_runs_the_sweep_and_counts_the_crashed_boundaries() -> None:
    doc = check_crash("ledger")
    assert doc["ok"] and doc["crashed"] == doc["boundaries"] > 0
    assert doc["boundaries_per_operation"]["register"] >= 2
    assert check_crash("no-such-machine")["ok"] is False


def test_a_store_file_opened_at_its_version_commits_nothing(tmp_path: Path) -> None:
    from settled.impl.shared._db import apply_schema

    conn = connect(tmp_path / "s.db")
    apply_schema(conn, "CREATE TABLE a (x INTEGER)", 1, "s")
    seen: list[str] = []
    remove = install_boundary_hook(lambda kind, where: seen.append(kind))
    try:
        apply_schema(conn, "CREATE TABLE a (x INTEGER)", 1, "s")
    finally:
        remove()
    assert seen == []
    with pytest.raises(RuntimeError, match="schema version 1"):
        apply_schema(conn, "", 2, "s")
