"""Observing the implementation through its adapter: the contract held on every answer,
observations reused on the adapter's word (its ``version``) and held to it, and the event
log the run leaves checked by the trace checker."""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

from settled.conformance._lockstep._shrink import Divergence
from settled.model import System, Value

from .._adapter import Adapter, AdapterError
from .._trace import TraceError, check_lines
from ._action import Action
from ._contract import (
    Contract,
    adapter_fault,
    blame_adapter,
    check_system_observation,
    contract_for,
)


class Observing:
    """The implementation's side of a run: its adapter, what it observed, its log."""

    def __init__(self, system: System, factory: Any) -> None:
        self.system, self.protocol = system, system.machine
        self.instances = system.instances
        try:
            self.adapter: Adapter = factory()
        except AdapterError:
            raise
        except Exception as exc:
            raise AdapterError(f"the adapter factory raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(self.adapter, Adapter):
            raise AdapterError(f"the adapter factory returned {type(self.adapter).__name__}, "
                               "not a settled.conformance.Adapter")
        self.contract: Contract = contract_for(system.machine, self.adapter)
        self.steps: list[Action] = []
        self.logged_steps: set[int] = set()  # instances that took a step the log records
        # (the adapter's version, {instance: observation} under it): an adapter that has a
        # version() is not asked again while it is unchanged; reused counts those answers.
        self.by_version: tuple[Hashable, dict[int, dict[str, Value]]] = (None, {})
        self.reused = 0
        self.trace_events = 0
        self.trace_problem: str | None = None
        # Per observable name: the steps the run took that the model says leave an event.
        self.witnessed: dict[str, int] = {}

    def version(self) -> Hashable | None:
        """The adapter's version (see :meth:`Adapter.version`), or None."""
        try:
            return self.adapter.version()
        except Exception as exc:
            if blame_adapter(self.adapter, exc):
                raise adapter_fault(self.adapter, exc, "reading its version") from exc
            raise Divergence(f"reading the implementation's version after step "
                             f"{len(self.steps)} raised {type(exc).__name__}: {exc}") from exc

    def current(self, i: int, version: Hashable | None, *, fresh: bool = False
                ) -> tuple[dict[str, Value], bool]:
        """Instance ``i`` as observed under ``version``, and whether that observation was
        reused: the one already taken under it, or a fresh one (always fresh when the adapter
        has no version, or when ``fresh``)."""
        if version is None:
            return self.observe(i), False
        held, seen = self.by_version
        if held != version:
            seen = {}
            self.by_version = (version, seen)
        got = None if fresh else seen.get(i)
        if got is not None:
            self.reused += 1
            return got, True
        got = seen[i] = self.observe(i)
        return got, False

    def confirm_reused(self) -> None:
        """An adapter whose version let observations be reused is held to it: every instance
        observed afresh must equal what the kit holds for the current version."""
        if not self.reused:
            return
        version = self.version()
        held, seen = self.by_version
        for i, kept in sorted(seen.items()) if held == version else ():
            self.hold_to_version(i, kept, version)

    def hold_to_version(self, i: int, kept: dict[str, Value], version: Hashable
                        ) -> dict[str, Value]:
        """An observation kept under ``version`` must be what ``observe`` says now, while the
        version still reads the same (when a reused observation disagrees with the model,
        and at the end of a run): the fresh observation, or an :class:`AdapterError`."""
        fresh = self.observe(i)
        if fresh != kept and self.version() == version:
            changed = ", ".join(f"{k}: {kept.get(k)!r} -> {fresh.get(k)!r}"
                                for k in sorted(fresh) if kept.get(k) != fresh.get(k))
            raise AdapterError(
                f"the adapter's version() stayed {version!r}, but observe(q{i}) changed "
                f"({changed}): version() must change whenever an observation may; the kit "
                f"reused {self.reused} observation(s) on its word")
        return fresh

    def observe(self, i: int) -> dict[str, Value]:
        """The adapter's observation of instance ``i``, held to the contract."""
        try:
            observed = self.adapter.observe(i)
        except Exception as exc:  # an implementation that lost track of its own rows
            if blame_adapter(self.adapter, exc):
                raise adapter_fault(self.adapter, exc, f"observing q{i}") from exc
            raise Divergence(f"observing q{i} after step {len(self.steps)} raised "
                             f"{type(exc).__name__}: {exc}") from exc
        return self.contract.check(i, observed)

    def observe_system(self) -> dict[str, Value]:
        """``observe(None)``: the system's own variables, every one, within its domain."""
        try:
            observed = self.adapter.observe(None)  # type: ignore[arg-type]
        except Exception as exc:
            if blame_adapter(self.adapter, exc):
                raise adapter_fault(self.adapter, exc, "observing the system") from exc
            raise Divergence(f"observing the system after step {len(self.steps)} raised "
                             f"{type(exc).__name__}: {exc}") from exc
        return check_system_observation(self.system, observed)

    def finish(self) -> None:
        """Close the implementation; its version must have told the truth, and its event log
        must pass the trace checker."""
        try:
            self.confirm_reused()
        except BaseException:
            self.adapter.close()
            raise
        try:
            lines = list(self.adapter.trace_lines())
        except Exception as exc:
            self.adapter.close()
            if blame_adapter(self.adapter, exc):
                raise adapter_fault(self.adapter, exc, "reading the event log") from exc
            raise Divergence(f"reading the implementation's event log raised "
                             f"{type(exc).__name__}: {exc}") from exc
        self.adapter.close()
        self.check_log(lines)

    def check_log(self, lines: list[Any]) -> None:
        """The run's event log, through the trace checker."""
        bad = next((n for n, line in enumerate(lines, 1) if not isinstance(line, str)), None)
        if bad is not None:
            self.trace_problem = (f"trace_lines() gave a {type(lines[bad - 1]).__name__} as "
                                  f"line {bad}; it must give settled.trace/1 JSON text lines")
            raise AdapterError(self.trace_problem)
        if not lines:
            if not self.logged_steps:
                return  # nothing that leaves an event happened: an empty log is the right one
            self.trace_problem = "the event log is empty, although the run took steps the log records"
            raise AdapterError(self.trace_problem)
        try:
            report = check_lines(lines)
        except TraceError as exc:
            self.trace_problem = (f"the event log does not conform to settled.trace/1: {exc}")
            raise AdapterError(self.trace_problem) from None
        if report.instances < len(self.logged_steps):
            took = len(self.logged_steps)
            self.trace_problem = (
                f"the event log holds {report.instances} instance(s) of {self.protocol.name}, "
                f"but {took} instance(s) took steps the log records")
            raise AdapterError(self.trace_problem)
        self.trace_events = report.events
        if not report.ok:
            self.trace_problem = ("the trace checker rejects the implementation's event log:\n"
                                  + (*report.violations, *report.undecided)[0].text())
            raise Divergence(self.trace_problem)
        self.check_witnessed(lines)

    def check_witnessed(self, lines: list[str]) -> None:
        """Every step the run took whose transition leaves an event (``observable``) left one
        in the log, a step that changes nothing included: fewer events of a name than steps
        is a divergence naming the trigger (a ``perform`` that ignored it, an implementation
        that does not log it)."""
        logged: dict[str, int] = {}
        for line in lines:
            text = line.strip().lstrip("\ufeff")
            if not text:
                continue
            try:
                trigger = json.loads(text).get("trigger")
            except (ValueError, AttributeError):
                continue  # the trace checker accepted the log; nothing else to count here
            if isinstance(trigger, str):
                logged[trigger] = logged.get(trigger, 0) + 1
        short = {name: (n, logged.get(name, 0)) for name, n in sorted(self.witnessed.items())
                 if logged.get(name, 0) < n}
        if not short:
            return
        triggers = {t.observable: t.trigger for t in self.protocol.transitions}
        shown = "; ".join(
            f"{name} (trigger {triggers.get(name, name)}): {n} step(s) taken, {got} event(s)"
            for name, (n, got) in short.items())
        self.trace_problem = (f"the implementation's event log misses steps the model logs: "
                              f"{shown}; each step whose transition leaves an event must leave "
                              "one, a step that changes nothing included (does perform ignore "
                              "the trigger?)")
        raise Divergence(self.trace_problem)
