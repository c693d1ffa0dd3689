"""``settled verify``: everything a reviewer needs to trust the protocols, in one run.

For every declared machine: the static checks of its protocol graph, the
exhaustive exploration at default bounds of the machine alone and of its
system (instances that share state, reduced by symmetry), the lockstep campaign (ci profile,
fixed seed) against the bundled SQLite implementation, and the trace check
of that campaign's event logs (every run's log is replayed through the model
by the trace checker), the crash sweep (a crash at every durable boundary of
every operation, ``conformance/_crash_sweep.py``: a boundary never crashed
fails); then the drift check of the generated diagrams and spec. ``ok`` only
when all of it holds.

The coverage overlays (``diagrams/<machine>.coverage.svg``) are written by
``--write`` from the campaign's counts. A fixed seed makes them reproducible,
but they record a random campaign, not the specification, so ``--check``
does not fail on them; ``--write`` keeps them current.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from settled import _diagrams
from settled._cmd_views import diagram_files, spec_files
from settled.conformance._adapter import AdapterError
from settled.conformance._api import probe
from settled.conformance._explore import explore
from settled.conformance._lockstep import (
    declared_cases,
    declared_edges,
    declared_refusals,
    never_alone,
    run_lockstep,
    unfired,
    unfired_cases,
    unfired_edges,
    unprobed_refusals,
)
from settled.conformance._profiles import profile
from settled.conformance._suites import SUITES, SYSTEM_SUITES
from settled.conformance._system import explore_system
from settled.impl.shared._pg import redact
from settled.model import MACHINES, Protocol
from settled.model._graph import static_findings
from settled.model._system import System
from settled.model.systems import SYSTEMS

SEED = 20261202

Say = Callable[[str], None]


@dataclass
class MachineReport:
    name: str
    static: dict[str, list[str]] = field(default_factory=dict)
    explore: dict[str, Any] = field(default_factory=dict)
    system: dict[str, Any] = field(default_factory=dict)
    lockstep: dict[str, Any] = field(default_factory=dict)
    trace_check: dict[str, Any] = field(default_factory=dict)
    # The system's lockstep and the trace check of its logs; ``checked`` False (said in the
    # table and the details) where no adapter drives the system's shared state yet.
    system_lockstep: dict[str, Any] = field(default_factory=dict)
    crash: dict[str, Any] = field(default_factory=dict)  # the crash sweep's report

    @property
    def ok(self) -> bool:
        return (not any(self.static.values()) and self.explore.get("ok", False)
                and self.system.get("ok", False) and self.lockstep.get("ok", False)
                and self.trace_check.get("ok", False) and self.crash.get("ok", False)
                and (not self.system_lockstep.get("checked", False)
                     or self.system_lockstep.get("ok", False)))

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "static": self.static, "explore": self.explore,
                "system": self.system, "lockstep": self.lockstep, "trace_check": self.trace_check,
                "system_lockstep": self.system_lockstep, "crash": self.crash}


def check_static(p: Protocol) -> dict[str, list[str]]:
    return dict(static_findings(p))


def check_explore(p: Protocol) -> dict[str, Any]:
    result = explore(p, instances=1)
    return {"ok": result.ok and result.complete, "states": result.states, "edges": result.edges,
            "seconds": round(result.seconds, 2),
            "findings": [f"{f.kind}:{f.name}" for f in result.findings]}


def check_system(system: System) -> dict[str, Any]:
    result = explore_system(system)
    return {"ok": result.ok, "system": system.meaning, "states": result.states,
            "states_unreduced": result.states_unreduced, "edges": result.edges,
            "seconds": round(result.seconds, 2), "complete": result.complete,
            "findings": [f"{f.kind}:{f.name}" for f in result.findings]}


def check_lockstep(name: str, profile_name: str, seed: int,
                   store: str | None = None) -> tuple[dict[str, Any], dict[str, Any], Any]:
    build = SUITES[name]
    on_pg = store is not None and "store" in inspect.signature(build).parameters
    suite = build(store=store) if on_pg else build()
    where = ("PostgreSQL " + redact(store) if on_pg and store else
             "SQLite files" + (" (this machine has no PostgreSQL store)" if store else ""))
    start = time.perf_counter()
    record = run_lockstep(suite.lockstep(), profile(profile_name), seed=seed)
    seconds = time.perf_counter() - start
    missing = unfired(suite.protocol, record.fired)
    edges = unfired_edges(suite.protocol, record.edges)
    cases = unfired_cases(suite.protocol, record.cases)
    refusals = unprobed_refusals(suite.protocol, suite.forbidden, record.refusals)
    failure = record.failure or record.adapter_error
    try:
        not_checked = list(probe(suite.adapter, suite.protocol)[2])
    except AdapterError as exc:
        not_checked, failure = [], failure or str(exc)
    lockstep = {"ok": failure is None and not missing and not edges and not cases
                and not refusals,
                "not_checked": not_checked,
                "profile": profile_name, "seed": seed, "examples": record.examples,
                "steps": sum(record.fired.values()), "seconds": round(seconds, 2),
                "unfired_transitions": missing,
                "edges": len(declared_edges(suite.protocol)), "unfired_edges": edges,
                "guard_alternatives": len(declared_cases(suite.protocol)),
                "unfired_guard_alternatives": cases,
                "refusals": len(declared_refusals(suite.protocol, suite.forbidden)),
                "unprobed_refusals": refusals,
                "refusals_never_alone": never_alone(suite.protocol, suite.forbidden),
                "failure": failure, "store": where}
    trace = {"ok": record.trace_failure is None and record.trace_events > 0,
             "events": record.trace_events, "failure": record.trace_failure}
    return lockstep, trace, record


# The system campaign's profile for each verify profile: the tour plus a short random campaign
# (the 2-query system is explored exhaustively already; the lockstep adds the implementation).
SYSTEM_PROFILE = {"dev": "dev", "ci": "dev", "thorough": "ci"}
SYSTEM_SUITE_OF = {"query": "query_system", "approval": "approval_system"}


def check_system_lockstep(machine: str, profile_name: str, seed: int) -> dict[str, Any]:
    """The system's lockstep and the trace check of its runs' logs, or why not checked."""
    from settled.conformance._system_lockstep import run_system_lockstep
    from settled.conformance._system_lockstep import unfired as system_unfired

    name = SYSTEM_SUITE_OF.get(machine)
    if name is None or name not in SYSTEM_SUITES:
        return {"checked": False, "ok": False,
                "why": f"no adapter drives the {machine} system's shared state yet"}
    suite = SYSTEM_SUITES[name]()
    chosen = SYSTEM_PROFILE.get(profile_name, profile_name)
    start = time.perf_counter()
    record = run_system_lockstep(suite.lockstep(), profile(chosen), seed=seed)
    failure = record.failure or record.adapter_error
    missing = system_unfired(suite.system, record.fired)
    return {"checked": True, "suite": name, "system": suite.system.meaning,
            "ok": failure is None and record.trace_failure is None and record.trace_events > 0,
            "profile": chosen, "seed": seed, "examples": record.examples,
            "steps": sum(record.fired.values()), "seconds": round(time.perf_counter() - start, 2),
            "fired": len(record.fired), "declared": len(record.fired) + len(missing),
            "unfired": missing, "failure": failure,
            "trace_check": {"ok": record.trace_failure is None and record.trace_events > 0,
                            "events": record.trace_events, "failure": record.trace_failure}}


def check_crash(machine: str, store: str | None = None) -> dict[str, Any]:
    """The crash sweep of ``machine``'s implementation, or why it could not run."""
    from settled.conformance._crash_sweep import sweep_machine

    if machine not in SUITES:
        return {"ok": False, "boundaries": 0, "crashed": 0,
                "failures": [f"no crash sweep for {machine}"]}
    return sweep_machine(machine, store).to_json()


def check_views(root: Path, write: bool) -> list[str]:
    files = {**diagram_files(), **spec_files(root)}
    return _diagrams.write_or_check(files, root / "diagrams", check=not write)


def verify(root: Path, *, write: bool = False, profile_name: str = "ci", seed: int = SEED,
           machines: list[str] | None = None, say: Say = lambda line: None,
           store: str | None = None) -> dict[str, Any]:
    """``store``: a postgresql:// URL the lockstep campaigns run against (default: SQLite files)."""
    start = time.perf_counter()
    reports = {}
    for name in machines or list(MACHINES):
        p, report = MACHINES[name], MachineReport(name)
        say(f"{name}: static checks")
        report.static = check_static(p)
        say(f"{name}: exploring every reachable state")
        report.explore = check_explore(p)
        if name in SYSTEMS:
            say(f"{name}: exploring the system ({SYSTEMS[name].meaning})")
            report.system = check_system(SYSTEMS[name])
        else:
            report.system = {"ok": False, "findings": [f"no system declared for {name}"]}
        if name in SUITES:
            against = "the SQLite implementation" if store is None else f"PostgreSQL {redact(store)}"
            say(f"{name}: lockstep campaign ({profile_name} profile) against {against}")
            report.lockstep, report.trace_check, record = check_lockstep(name, profile_name, seed,
                                                                         store)
            if store is not None and not report.lockstep["store"].startswith("PostgreSQL"):
                say(f"{name}: NOTE: no PostgreSQL store for this machine; its campaign ran on "
                    "SQLite files")
            if write:
                svg = _diagrams.coverage_svg(SUITES[name]().protocol, record.edges, record.cases)
                _diagrams.write_or_check({f"{name}.coverage.svg": svg}, root / "diagrams", False)
        else:
            report.lockstep = {"ok": False, "failure": f"no lockstep suite for {name}"}
            report.trace_check = {"ok": False, "events": 0}
        if SYSTEM_SUITE_OF.get(name) in SYSTEM_SUITES:
            say(f"{name}: lockstep of the system ({SYSTEMS[name].meaning} in the implementation)")
        report.system_lockstep = check_system_lockstep(name, profile_name, seed)
        say(f"{name}: crash sweep (a crash at every durable boundary of every operation)")
        report.crash = check_crash(name, store)
        reports[name] = report
    views: dict[str, Any]
    if not _diagrams.is_project(root):
        # An installed wheel run from any folder: the tables are checked above; the committed
        # views exist only in a checkout, so their drift check is skipped, and said so.
        views = {"ok": True, "skipped": f"no settled checkout at {root.resolve()}; the drift check "
                                        "of diagrams/ and SPEC.md needs one (--root CHECKOUT)"}
        say(f"diagrams and spec: {views['skipped']}")
    else:
        say("diagrams and spec: drift check" if not write else "diagrams and spec: regenerating")
        stale = check_views(root, write)
        views = {"ok": write or not stale, "stale" if not write else "written": stale}
    ok = all(r.ok for r in reports.values()) and views["ok"]
    crashed = {"crashed": sum(r.crash.get("crashed", 0) for r in reports.values()),
               "boundaries": sum(r.crash.get("boundaries", 0) for r in reports.values())}
    say(f"durable boundaries crashed: {crashed['crashed']} of {crashed['boundaries']}")
    return {"ok": ok, "root": str(root), "machines": {n: r.to_json() for n, r in reports.items()},
            "views": views, "durable_boundaries": crashed,
            "seconds": round(time.perf_counter() - start, 2)}
