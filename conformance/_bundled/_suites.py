"""The lockstep suites: for each declared machine, how the kit drives its implementation.

A suite names the model, an adapter factory for the bundled implementation,
how many instances run side by side and which caller actions the kit may
ask to be refused. ``settled verify``, ``settled mutants`` and the tests all
build their lockstep machines from here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis.stateful import RuleBasedStateMachine

from settled.conformance._adapter import Adapter
from settled.conformance._lockstep import make_lockstep
from settled.conformance._lockstep._crash_sweep import SweepReport, sweep
from settled.model import Protocol, System, build_query_machine


@dataclass(frozen=True)
class Suite:
    machine: str
    protocol: Protocol
    adapter: Callable[[], Adapter]
    instances: int
    forbidden: frozenset[str]

    def lockstep(self, name: str | None = None, *,
                 quiesce: bool = True) -> type[RuleBasedStateMachine]:
        """The campaign's machine; ``quiesce`` ends every run with the quiescence phase."""
        return make_lockstep(self.protocol, self.adapter, instances=self.instances,
                             forbidden=self.forbidden, name=name or self.machine,
                             quiesce=quiesce)


@functools.cache
def _query_machine(workers: int) -> Protocol:
    """Built once per process: campaigns share one protocol (and so one tour and contract)."""
    return build_query_machine(workers=workers)


def query_suite(adapter_class: type[Adapter] | None = None, store: str | None = None,
                transport: str | None = None) -> Suite:
    """``store``: a postgresql:// URL to run against (a fresh schema per run); default files.
    ``transport``: ``http`` carries the platform calls over HTTP on 127.0.0.1 (default: the
    adapter's own, in-process for the bundled one)."""
    from settled.conformance._bundled._query_adapter import QueryAdapter

    cls = adapter_class or QueryAdapter
    protocol = _query_machine(2)
    # An adapter class that takes no store (a user's own) is called as before.
    extra: dict[str, str] = {} if store is None else {"store": store}
    if transport is not None:
        extra["transport"] = transport
    return Suite("query", protocol, lambda: cls(3, 2, **extra),  # type: ignore[call-arg]
                 instances=3, forbidden=protocol.refusable)


def approval_suite(adapter_class: type[Adapter] | None = None, store: str | None = None) -> Suite:
    """``store``: a postgresql:// URL for the business store (a fresh schema per run)."""
    from settled.conformance._bundled._approval_adapter import ApprovalAdapter
    from settled.model import APPROVAL

    cls = adapter_class or ApprovalAdapter
    extra = {} if store is None else {"store": store}
    return Suite("approval", APPROVAL, lambda: cls(3, **extra),  # type: ignore[call-arg]
                 instances=3, forbidden=APPROVAL.refusable)


# machine name -> suite builder taking an optional adapter class (a mutant's)
SUITES: dict[str, Callable[..., Suite]] = {"query": query_suite}
SUITES["approval"] = approval_suite


def ledger_suite(adapter_class: type[Adapter] | None = None) -> Suite:
    from settled.conformance._bundled._ledger_adapter import LedgerAdapter
    from settled.model import LEDGER

    cls = adapter_class or LedgerAdapter
    return Suite("ledger", LEDGER, lambda: cls(3), instances=3,  # type: ignore[call-arg]
                 forbidden=LEDGER.refusable)


SUITES["ledger"] = ledger_suite


@dataclass(frozen=True)
class SystemSuite:
    """A system's lockstep: the declared system and an adapter of the bundled implementation
    whose instances really share what the system declares shared."""

    machine: str  # the suite's name
    system: System
    adapter: Callable[[], Adapter]
    forbidden: frozenset[str]

    @property
    def protocol(self) -> Protocol:
        return self.system.machine

    @property
    def instances(self) -> int:
        return self.system.instances

    def lockstep(self, name: str | None = None, *,
                 quiesce: bool = True) -> type[RuleBasedStateMachine]:
        """``quiesce``: asked for, the phase says it does not check a system (NOT CHECKED)."""
        return make_lockstep(self.system, self.adapter, forbidden=self.forbidden,
                             name=name or self.machine, quiesce=quiesce)


def query_system_suite(adapter_class: type[Adapter] | None = None,
                       transport: str | None = None) -> SystemSuite:
    """Two queries of one task and session, two worker processes; ``transport`` as in
    :func:`query_suite`."""
    from settled.conformance._bundled._query_system_adapter import QuerySystemAdapter, query_system

    cls = adapter_class or QuerySystemAdapter
    system = query_system(2, 2)
    extra = {} if transport is None else {"transport": transport}
    return SystemSuite("query_system", system, lambda: cls(2, 2, **extra),  # type: ignore[call-arg]
                       forbidden=system.machine.refusable)


SYSTEM_SUITES: dict[str, Callable[..., SystemSuite]] = {"query_system": query_system_suite}


def approval_system_suite(adapter_class: type[Adapter] | None = None) -> SystemSuite:
    """Two order calls drawing on one unit of one product's stock."""
    from settled.conformance._bundled._approval_system_adapter import ApprovalSystemAdapter, approval_system

    cls = adapter_class or ApprovalSystemAdapter
    system = approval_system(2, 1)
    return SystemSuite("approval_system", system, lambda: cls(2, 1),  # type: ignore[call-arg]
                       forbidden=system.machine.refusable)


SYSTEM_SUITES["approval_system"] = approval_system_suite


def ledger_system_suite(adapter_class: type[Adapter] | None = None) -> SystemSuite:
    """The three tool calls of one assistant message, registered, recovered and continued
    together in one session."""
    from settled.conformance._bundled._ledger_system_adapter import LedgerSystemAdapter, ledger_system

    cls = adapter_class or LedgerSystemAdapter
    system = ledger_system(3)
    return SystemSuite("ledger_system", system, lambda: cls(3),  # type: ignore[call-arg]
                       forbidden=system.machine.refusable)


SYSTEM_SUITES["ledger_system"] = ledger_system_suite


def sweep_machine(machine: str, store: str | None = None,
                  adapter_class: Callable[..., Adapter] | None = None) -> SweepReport:
    """The sweep of a bundled machine's implementation (one instance driven): ``store`` a
    postgresql:// URL where the implementation has a PostgreSQL store (query, approval),
    else SQLite files; ``adapter_class`` a mutant's adapter in place of the bundled one."""
    from settled.impl.shared._pg import redact

    if machine not in SUITES:
        raise ValueError(f"no crash sweep for {machine!r}; the machines are {sorted(SUITES)}")
    protocol = SUITES[machine]().protocol
    factory: Callable[[], Adapter]
    extra: dict[str, Any] = {} if store is None else {"store": store}
    if machine == "query":
        from settled.conformance._bundled._query_adapter import QueryAdapter
        query_cls: Callable[..., Adapter] = adapter_class or QueryAdapter
        factory = lambda: query_cls(1, 2, **extra)  # noqa: E731
    elif machine == "approval":
        from settled.conformance._bundled._approval_adapter import ApprovalAdapter
        approval_cls: Callable[..., Adapter] = adapter_class or ApprovalAdapter
        factory = lambda: approval_cls(1, **extra)  # noqa: E731
    else:
        from settled.conformance._bundled._ledger_adapter import LedgerAdapter
        ledger_cls: Callable[..., Adapter] = adapter_class or LedgerAdapter
        factory = lambda: ledger_cls(1)  # noqa: E731
        store = None  # the ledger runtime keeps SQLite files only
    where = "SQLite files" if store is None else f"PostgreSQL {redact(store)}"
    return sweep(protocol, factory, machine=machine, store=where)
