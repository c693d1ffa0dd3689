"""``settled verify``: everything a reviewer needs to trust the protocols, in one run.

For every declared machine: the static checks of its protocol graph, the
exhaustive exploration at default bounds of the machine alone and of its
system (instances that share state, reduced by symmetry), the lockstep campaign (ci profile,
fixed seed) against the bundled SQLite implementation, and the trace check
of that campaign's event logs (every run's log is replayed through the model
by the trace checker), the crash sweep (a crash at every durable boundary of
every operation, ``conformance/_lockstep/_crash_sweep.py``: a boundary never crashed
fails); then the drift check of the generated diagrams and
spec: a checkout's ``diagrams/`` against its tables and tests, or, run from an
installed package, the views shipped in it (``settled/views``) against the
model shipped with them. ``ok`` only when all of it holds.

The coverage overlays (``diagrams/<machine>.coverage.svg``) are written by
``--write`` from the campaign's counts. A fixed seed makes them reproducible,
but they record a random campaign, not the specification, so ``--check``
does not fail on them; ``--write`` keeps them current.

Strict by default: anything a run did not check fails it, by name. A variable an adapter
declares unobservable is ``MACHINE.VARIABLE``; a system no adapter drives,
``MACHINE.system_lockstep``; an implementation no concurrent campaign drives,
``MACHINE.concurrent``. An exception is named with ``allow_unchecked`` (``settled verify
--allow-unchecked approval.retries_allowed``), is printed in the report, and must name
something this run would leave unchecked (a stale exception is bad input).
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from settled import _diagrams
from settled._cmd_views import INDEX, diagram_files, spec_files
from settled.conformance._adapter import AdapterError
from settled.conformance._api import probe, probe_system
from settled.conformance._bundled._suites import SUITES, SYSTEM_SUITES
from settled.conformance._explore import explore
from settled.conformance._explore._system import explore_system
from settled.conformance._liveness import LivenessResult, check_machine, system_classifier
from settled.conformance._liveness import check_system as check_system_liveness
from settled.conformance._lockstep import (
    declared_cases,
    declared_edges,
    declared_values,
    never_alone,
    refusal_goals,
    run_lockstep,
    unfired,
    unfired_cases,
    unfired_edges,
    unfired_values,
    unprobed_refusals,
)
from settled.conformance._lockstep._quiesce import factory_reason
from settled.conformance._profiles import profile
from settled.impl.shared._pg import redact
from settled.model import MACHINES, Protocol, System, static_findings
from settled.model.progress import liveness_of
from settled.model.systems import SYSTEMS

SEED = 20261202

Say = Callable[[str], None]


class Watch:
    """Live progress of a run (a bar on a terminal); this default shows nothing.
    :func:`phases` says how many times :meth:`phase` will be called."""

    def phase(self, text: str) -> None:
        """A phase starts (the same text ``say`` gets)."""

    def explored(self, states: int, frontier: int, seconds: float) -> None:
        """An exploration's count so far (about five times a second)."""


def phases(machines: list[str] | None = None) -> int:
    """How many phases :func:`verify` runs for ``machines`` (every machine by default)."""
    count = 1  # the views
    for name in machines or list(MACHINES):
        count += 3 + (name in SYSTEMS) + (name in SUITES)  # static, explore, crash sweep
        count += SYSTEM_SUITE_OF.get(name) in SYSTEM_SUITES
    return count


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
    # Concurrent campaigns checked for linearizability; ``checked`` False likewise.
    concurrent: dict[str, Any] = field(default_factory=dict)
    crash: dict[str, Any] = field(default_factory=dict)  # the crash sweep's report
    # What the run's caller accepts leaving unchecked, by name (``MACHINE.PART``).
    allowed: frozenset[str] = frozenset()

    @property
    def not_checked(self) -> list[str]:
        """Everything this machine's run did not check, by the name an allowance uses."""
        out = [f"{self.name}.{v}" for v in self.lockstep.get("not_checked", [])]
        out += [f"{self.name}.{v}" for v in self.system_lockstep.get("not_checked", [])]
        if self.lockstep.get("quiescence", {}).get("checked") is False:
            out.append(f"{self.name}.quiescence")
        if not self.system_lockstep.get("checked", False):
            out.append(f"{self.name}.system_lockstep")
        if not self.concurrent.get("checked", False):
            out.append(f"{self.name}.concurrent")
        return sorted(set(out))

    @property
    def ok(self) -> bool:
        return (not any(self.static.values()) and self.explore.get("ok", False)
                and self.system.get("ok", False) and self.lockstep.get("ok", False)
                and self.trace_check.get("ok", False) and self.crash.get("ok", False)
                and (not self.system_lockstep.get("checked", False)
                     or self.system_lockstep.get("ok", False))
                and (not self.concurrent.get("checked", False)
                     or self.concurrent.get("ok", False))
                and all(name in self.allowed for name in self.not_checked))

    def to_json(self) -> dict[str, Any]:
        unchecked = self.not_checked
        return {"ok": self.ok, "static": self.static, "explore": self.explore,
                "system": self.system, "lockstep": self.lockstep, "trace_check": self.trace_check,
                "system_lockstep": self.system_lockstep, "concurrent": self.concurrent,
                "crash": self.crash,
                "unchecked": {"allowed": [n for n in unchecked if n in self.allowed],
                              "refused": [n for n in unchecked if n not in self.allowed]}}


def expected_unchecked(machines: Iterable[str]) -> dict[str, str]:
    """What a run over ``machines`` will leave unchecked, by name, and why (known before the
    run: the adapters' declared unobservable variables, the systems no adapter drives, the
    implementations no concurrent campaign drives)."""
    out: dict[str, str] = {}
    for name in machines:
        if name in SUITES:
            suite = SUITES[name]()
            try:
                hidden = probe(suite.adapter, suite.protocol)[2]
            except AdapterError:
                hidden = ()  # the campaign reports the broken adapter itself
            for v in hidden:
                out[f"{name}.{v}"] = "the adapter declares it unobservable"
            why = factory_reason(suite.adapter)
            if why is not None:
                out[f"{name}.quiescence"] = why
        system = SYSTEM_SUITE_OF.get(name)
        if system is None or system not in SYSTEM_SUITES:
            out[f"{name}.system_lockstep"] = f"no adapter drives the {name} system's shared state"
        else:
            sys_suite = SYSTEM_SUITES[system]()
            try:
                hidden = probe_system(sys_suite.adapter, sys_suite.system)[1]
            except AdapterError:
                hidden = ()
            for v in hidden:
                out[f"{name}.{v}"] = "the system adapter declares it unobservable"
        if name not in CONCURRENT_OF:
            out[f"{name}.concurrent"] = f"no concurrent campaign drives the {name} implementation"
    return out


def check_allowances(allow: Iterable[str], machines: Iterable[str]) -> list[str]:
    """``allow``'s names, each something a run over ``machines`` leaves unchecked; a
    ValueError (bad input) naming any other, so a stale or misspelt exception never stands."""
    names = sorted({n.strip() for n in allow if n.strip()})
    if not names:
        return []
    expected = expected_unchecked(machines)
    wrong = [n for n in names if n not in expected]
    if wrong:
        raise ValueError(f"--allow-unchecked names {wrong}, which this run checks or does not "
                         f"know; it leaves unchecked only {sorted(expected) or 'nothing'}")
    return names


def check_static(p: Protocol) -> dict[str, list[str]]:
    return dict(static_findings(p))


def check_explore(p: Protocol, watch: Watch | None = None) -> dict[str, Any]:
    result = explore(p, instances=1, progress=watch.explored if watch else None)
    live = check_machine(result)
    return {"ok": result.ok and result.complete and live.ok, "states": result.states,
            "edges": result.edges, "seconds": round(result.seconds, 2),
            "findings": [f"{f.kind}:{f.name}" for f in result.findings]
            + [f"liveness:{v.prop.name}" for v in live.violated],
            "lockstep_only": [f"{x['kind']}:{x['name']}" for x in result.lockstep_only],
            "progress": _progress(live)}


def check_system(system: System, watch: Watch | None = None) -> dict[str, Any]:
    declared = liveness_of(system)
    result = explore_system(system, progress=watch.explored if watch else None,
                            classify=system_classifier(declared))
    live = check_system_liveness(result, declared)
    return {"ok": result.ok and live.ok, "system": system.meaning, "states": result.states,
            "states_unreduced": result.states_unreduced, "edges": result.edges,
            "seconds": round(result.seconds, 2), "complete": result.complete,
            "findings": [f"{f.kind}:{f.name}" for f in result.findings]
            + [f"liveness:{v.prop.name}" for v in live.violated],
            "lockstep_only": [f"{x['kind']}:{x['name']}" for x in result.lockstep_only],
            "progress": _progress(live)}


def _progress(live: LivenessResult) -> dict[str, Any]:
    """Each progress property's verdict (``liveness:<name>`` in the findings when violated;
    ``settled explore`` prints its lasso)."""
    return {"ok": live.ok, "seconds": round(live.seconds, 2),
            "properties": {v.prop.name: v.verdict for v in live.verdicts},
            "fairness": [f.words() for f in live.liveness.fairness]}


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
    values = unfired_values(suite.protocol, suite.forbidden, record.values)
    failure = record.failure or record.adapter_error
    try:
        not_checked = list(probe(suite.adapter, suite.protocol)[2])
    except AdapterError as exc:
        not_checked, failure = [], failure or str(exc)
    quiet = {**record.quiescence.to_json(), "text": record.quiescence.text(),
             "unsettled": record.unsettled, "model_finding": record.model_finding}
    lockstep = {"ok": failure is None and not missing and not edges and not cases
                and not refusals and not values and record.model_finding is None,
                "quiescence": quiet,
                "not_checked": not_checked,
                "profile": profile_name, "seed": seed, "examples": record.examples,
                "tour_runs": record.tour_runs,
                "steps": sum(record.fired.values()), "seconds": round(seconds, 2),
                "unfired_transitions": missing,
                "edges": len(declared_edges(suite.protocol)), "unfired_edges": edges,
                "guard_alternatives": len(declared_cases(suite.protocol)),
                "unfired_guard_alternatives": cases,
                "refusals": len(refusal_goals(suite.protocol, suite.forbidden)),
                "unprobed_refusals": refusals,
                "parameter_values": len(declared_values(suite.protocol, suite.forbidden)),
                "unfired_parameter_values": values,
                "refusals_never_alone": never_alone(suite.protocol, suite.forbidden),
                "failure": failure, "store": where}
    trace = {"ok": record.trace_failure is None and record.trace_events > 0,
             "events": record.trace_events, "failure": record.trace_failure}
    return lockstep, trace, record


# The system campaign's profile for each verify profile: the tour plus a short random campaign
# (the 2-query system is explored exhaustively already; the lockstep adds the implementation).
SYSTEM_PROFILE = {"dev": "dev", "ci": "dev", "thorough": "ci"}
SYSTEM_SUITE_OF = {"query": "query_system", "approval": "approval_system",
                   "ledger": "ledger_system"}


def check_system_lockstep(machine: str, profile_name: str, seed: int) -> dict[str, Any]:
    """The system's lockstep and the trace check of its runs' logs, or why not checked."""
    from settled.conformance._lockstep import unfired_steps as system_unfired
    from settled.conformance._lockstep._interactions import coverage as interaction_coverage

    name = SYSTEM_SUITE_OF.get(machine)
    if name is None or name not in SYSTEM_SUITES:
        return {"checked": False, "ok": False,
                "why": f"no adapter drives the {machine} system's shared state yet"}
    suite = SYSTEM_SUITES[name]()
    chosen = SYSTEM_PROFILE.get(profile_name, profile_name)
    start = time.perf_counter()
    record = run_lockstep(suite.lockstep(), profile(chosen), seed=seed)
    failure = record.failure or record.adapter_error
    missing = system_unfired(suite.system, record.fired)
    # Cross-instance stories: every interaction the bounded search reaches must be performed;
    # a partial reachable set is said (in the row and on stderr), not counted as complete.
    stories = interaction_coverage(suite.system, suite.forbidden, record.interactions)
    try:
        not_checked = list(probe_system(suite.adapter, suite.system)[1])
    except AdapterError as exc:
        not_checked, failure = [], failure or str(exc)
    return {"checked": True, "suite": name, "system": suite.system.meaning,
            "not_checked": not_checked,
            "ok": failure is None and record.trace_failure is None and record.trace_events > 0
            and not stories.missing,
            "interactions": stories.to_json(),
            "profile": chosen, "seed": seed, "examples": record.examples,
            "tour_runs": record.tour_runs,
            "steps": sum(record.fired.values()), "seconds": round(time.perf_counter() - start, 2),
            "fired": len(record.fired), "declared": len(record.fired) + len(missing),
            "unfired": missing, "failure": failure,
            "trace_check": {"ok": record.trace_failure is None and record.trace_events > 0,
                            "events": record.trace_events, "failure": record.trace_failure}}


# The implementation each machine's concurrent campaign drives (conformance/_bundled/_races.py).
CONCURRENT_OF = {"query": "query", "approval": "business", "ledger": "ledger"}


def check_concurrent(machine: str, seed: int, store: str | None = None) -> dict[str, Any]:
    """Concurrent campaigns (controlled schedules, then free threads) checked for
    linearizability, or why not checked."""
    from settled.conformance._bundled._races import SCHEDULES, run_campaign

    implementation = CONCURRENT_OF.get(machine)
    if implementation is None:
        return {"checked": False, "ok": False,
                "why": f"no concurrent campaign drives the {machine} implementation yet"}
    start = time.perf_counter()
    runs = {mode: run_campaign(implementation, seed, mode=mode, store=store)
            for mode in ("controlled", "free")}
    failed = next((r for r in runs.values() if not r.ok), None)
    return {"checked": True, "implementation": implementation, "seed": seed,
            "ok": failed is None, "schedules": SCHEDULES,
            "operations": {mode: r.result.checked for mode, r in runs.items()},
            "store": ("PostgreSQL" if all(r.history.meta.get("store") == "postgresql"
                                          for r in runs.values())
                      else "SQLite" + (" (this machine has no PostgreSQL store)" if store else "")),
            "seconds": round(time.perf_counter() - start, 2),
            "failure": None if failed is None else failed.report()}


def check_crash(machine: str, store: str | None = None) -> dict[str, Any]:
    """The crash sweep of ``machine``'s implementation, or why it could not run."""
    from settled.conformance._bundled._suites import sweep_machine

    if machine not in SUITES:
        return {"ok": False, "boundaries": 0, "crashed": 0,
                "failures": [f"no crash sweep for {machine}"]}
    return sweep_machine(machine, store).to_json()


# The views an installed package ships (diagrams/ as the package settled.views; in a
# checkout, settled/views is a link to diagrams/).
SHIPPED = Path(__file__).parent / "views"


def check_views(root: Path | None, write: bool) -> list[str]:
    """The stale or missing views: ``root``'s diagrams/ against the tables and its tests/, or
    (``root`` None) the views shipped with the installed package against its tables and the
    rule -> tests index shipped with them."""
    if root is None:
        try:
            index = json.loads((SHIPPED / INDEX).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            index = {}  # then the index itself is reported missing or stale
        files = {**diagram_files(), **spec_files(None, tests=index)}
        return _diagrams.write_or_check(files, SHIPPED, check=True)
    from settled._cmd_review import SITE, review_files

    site = SITE.relative_to("diagrams").as_posix()
    files = {**diagram_files(), **spec_files(root),
             **{f"{site}/{name}": data for name, data in review_files(root).items()}}
    return _diagrams.write_or_check(files, root / "diagrams", check=not write)


def _check_machine(name: str, report: MachineReport, phase: Say, say: Say, *, profile_name: str,
                   seed: int, store: str | None, watch: Watch, views: Path | None) -> MachineReport:
    """Every check of one machine, into ``report``; ``views``: the checkout whose coverage
    diagram the campaign rewrites (None: written nowhere)."""
    p = MACHINES[name]
    phase(f"{name}: static checks")
    report.static = check_static(p)
    phase(f"{name}: exploring every reachable state, then its progress under fairness")
    report.explore = check_explore(p, watch)
    if name in SYSTEMS:
        phase(f"{name}: exploring the system ({SYSTEMS[name].meaning})")
        report.system = check_system(SYSTEMS[name], watch)
    else:
        report.system = {"ok": False, "findings": [f"no system declared for {name}"]}
    if name in SUITES:
        against = "the SQLite implementation" if store is None else f"PostgreSQL {redact(store)}"
        phase(f"{name}: lockstep campaign ({profile_name} profile) against {against}")
        report.lockstep, report.trace_check, record = check_lockstep(name, profile_name, seed,
                                                                     store)
        if store is not None and not report.lockstep["store"].startswith("PostgreSQL"):
            say(f"{name}: NOTE: no PostgreSQL store for this machine; its campaign ran on "
                "SQLite files")
        if views is not None:
            svg = _diagrams.coverage_svg(SUITES[name]().protocol, record.edges, record.cases)
            _diagrams.write_or_check({f"{name}.coverage.svg": svg}, views / "diagrams", False)
    else:
        report.lockstep = {"ok": False, "failure": f"no lockstep suite for {name}"}
        report.trace_check = {"ok": False, "events": 0}
    if SYSTEM_SUITE_OF.get(name) in SYSTEM_SUITES:
        phase(f"{name}: lockstep of the system ({SYSTEMS[name].meaning} in the "
              "implementation)")
    report.system_lockstep = check_system_lockstep(name, profile_name, seed)
    if name in CONCURRENT_OF:
        say(f"{name}: concurrent campaigns ({CONCURRENT_OF[name]}: controlled schedules and "
            "free threads) checked for linearizability")
    report.concurrent = check_concurrent(name, seed, store)
    phase(f"{name}: crash sweep (a crash at every durable boundary of every operation)")
    report.crash = check_crash(name, store)
    return report


def verify(root: Path | None, *, write: bool = False, profile_name: str = "ci", seed: int = SEED,
           machines: list[str] | None = None, say: Say = lambda line: None,
           store: str | None = None, watch: Watch | None = None,
           allow_unchecked: Iterable[str] = ()) -> dict[str, Any]:
    """``root``: the checkout whose views are checked (or written); None checks the views
    shipped with the installed package. ``store``: a postgresql:// URL the lockstep campaigns
    run against (default: SQLite files). ``allow_unchecked``: what the caller accepts leaving
    unchecked, by name (see the module's docstring); a ValueError before any work when a name
    is not something this run leaves unchecked."""
    if write and root is None:
        raise ValueError("write needs a checkout: the installed package's views are not ours "
                         "to rewrite")
    allowed = frozenset(check_allowances(allow_unchecked, machines or list(MACHINES)))
    watch = watch or Watch()

    def phase(text: str) -> None:
        say(text)
        watch.phase(text)

    start = time.perf_counter()
    reports = {}
    for name in machines or list(MACHINES):
        reports[name] = _check_machine(name, MachineReport(name, allowed=allowed), phase, say,
                                       profile_name=profile_name, seed=seed, store=store,
                                       watch=watch, views=root if write else None)
    views: dict[str, Any]
    where = str(SHIPPED.resolve()) if root is None else str((root / "diagrams").resolve())
    source = "installed package" if root is None else "checkout"
    phase(f"diagrams and spec: regenerating in {where}" if write else
        f"diagrams and spec: drift check of the {source}'s views in {where}")
    stale = check_views(root, write)
    views = {"ok": write or not stale, "stale" if not write else "written": stale,
             "source": source, "directory": where}
    ok = all(r.ok for r in reports.values()) and views["ok"]
    crashed = {"crashed": sum(r.crash.get("crashed", 0) for r in reports.values()),
               "boundaries": sum(r.crash.get("boundaries", 0) for r in reports.values())}
    say(f"durable boundaries crashed: {crashed['crashed']} of {crashed['boundaries']}")
    unchecked = [n for r in reports.values() for n in r.not_checked]
    return {"ok": ok, "root": None if root is None else str(root),
            "unchecked": {"allowed": [n for n in unchecked if n in allowed],
                          "refused": [n for n in unchecked if n not in allowed]},
            "machines": {n: r.to_json() for n, r in reports.items()},
            "views": views, "durable_boundaries": crashed,
            "seconds": round(time.perf_counter() - start, 2)}
