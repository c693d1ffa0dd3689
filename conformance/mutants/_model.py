"""Model mutants: a declared machine with one change, checked by both engines.

Each mutant is made through the model's public API: the machine's transitions are
replaced (``dataclasses.replace``) by ones whose guards or effects are new expressions;
no file is edited. The change is described in words rendered from those expressions.

Two kinds:

- **Safety mutants** (a guard dropped, an effect altered, a bound off by one): each breaks
  named invariants or step properties. Both engines must find it, with the SAME findings:
  our explorer's (kind, property) set equals SPIN's (:func:`conformance._promela.compare`),
  and it holds every finding the catalogue names.
- **Liveness mutants** (issue 25): each keeps every invariant and step property, has no
  deadlock and no trap, and yet a progress property fails under the declared fairness.
  Both engines must find it as a lasso (our fair-cycle search; SPIN's acceptance cycle of
  the LTL formula) and no safety check of either engine may find anything.

The ledger machine has no numeric bound (no counter is compared with a limit in a guard),
so it has no off-by-one mutant; the approval and query machines have one each.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from settled.model import APPROVAL, LEDGER, QUERY, Effect, Guard, Protocol, Transition
from settled.model import expr as x
from settled.model.expr import V

GUARD_DROPPED = "guard_dropped"
EFFECT_ALTERED = "effect_altered"
BOUND_OFF_BY_ONE = "bound_off_by_one"
LIVENESS = "liveness"


@dataclass(frozen=True)
class ModelMutant:
    """One change to a declared machine, and what both engines must find in it."""

    name: str
    machine: str
    kind: str  # guard_dropped | effect_altered | bound_off_by_one | liveness
    rules: tuple[str, ...]
    change: str  # the change, rendered from the expressions
    protocol: Protocol = field(repr=False)
    # safety: (kind, property) findings both engines must report (among others they share)
    finds: tuple[tuple[str, str], ...] = ()
    # liveness: the progress property both engines must find violated, as a lasso
    progress: str = ""


# --------------------------------------------------------------------------
# Changes through the declaration's public API
# --------------------------------------------------------------------------
def _pick(p: Protocol, trigger: str, dest: str | None, source: str | None = None,
          having: str | None = None) -> int:
    """The index of the one transition of ``p`` with that trigger and destination (and
    source state, and a guard of that name, when given); a catalogue entry that no longer
    fits the model fails here."""
    found = [i for i, t in enumerate(p.transitions)
             if t.trigger == trigger and t.dest == dest
             and (source is None or source in t.source)
             and (having is None or any(g.name == having for g in t.guards))]
    if len(found) != 1:
        raise LookupError(f"{p.name}: {len(found)} transitions {trigger} -> {dest} "
                          f"(from {source or 'any state'}, guarded by {having or 'anything'}), "
                          "expected one")
    return found[0]


def _with(p: Protocol, index: int, t: Transition) -> Protocol:
    ts = list(p.transitions)
    ts[index] = t
    return dataclasses.replace(p, transitions=tuple(ts))


def _where(t: Transition) -> str:
    return f"`{t.trigger}` ({', '.join(t.source)} -> {t.dest or 'same state'})"


def drop_guard(p: Protocol, trigger: str, dest: str | None, guard: str,
               source: str | None = None) -> tuple[Protocol, str]:
    """``p`` with the guard named ``guard`` removed from one transition."""
    i = _pick(p, trigger, dest, source, guard)
    t = p.transitions[i]
    [g] = [g for g in t.guards if g.name == guard]
    mutant = _with(p, i, dataclasses.replace(t, guards=tuple(x for x in t.guards if x is not g)))
    return mutant, f"{_where(t)}: guard {g.name} `{g.text}` dropped"


def shift_bound(p: Protocol, *where: tuple[str, str | None, str], by: int = 1,
                ) -> tuple[Protocol, str]:
    """``p`` with one limit off by ``by``: in each named guard (``(trigger, destination,
    guard name)``), the one comparison (``<``, ``<=``, ``>``, ``>=``) of something with a
    number is rebuilt with the number plus ``by``; every other part is kept. A limit used
    by two exclusive guards (under the limit, at the limit) moves in both, as a constant
    off by one would."""
    ts = list(p.transitions)
    said = []
    for trigger, dest, guard in where:
        i = _pick(p, trigger, dest, None, guard)
        t = ts[i]
        [g] = [g for g in t.guards if g.name == guard]
        shifted: list[str] = []

        def walk(e: x.Expr, shifted: list[str] = shifted) -> x.Expr:
            if (isinstance(e, x.Compare) and e.op in ("<", "<=", ">", ">=")
                    and isinstance(e.args[2], x.Const) and type(e.args[2].value) is int):
                shifted.append(e.text())
                return x.Compare(e.op, e.args[1], x.Const(e.args[2].value + by))
            if not isinstance(e, x.Node):
                return e
            return type(e)(*(walk(a) if isinstance(a, x.Expr) else a for a in e.args))

        new = Guard(g.name, walk(g.expr), bound=g.bound)
        if len(shifted) != 1:
            raise LookupError(f"{p.name}: guard {g.name} `{g.text}` has {len(shifted)} "
                              "numeric limits, expected one")
        ts[i] = dataclasses.replace(t, guards=tuple(new if y is g else y for y in t.guards))
        said.append(f"{_where(t)}: guard {g.name} `{g.text}` becomes `{new.text}`")
    return dataclasses.replace(p, transitions=tuple(ts)), "; ".join(said)


def alter_effect(p: Protocol, trigger: str, dest: str | None, updates: dict[str, object],
                 source: str | None = None, having: str | None = None) -> tuple[Protocol, str]:
    """``p`` with one transition's effect on the given variables replaced."""
    i = _pick(p, trigger, dest, source, having)
    t = p.transitions[i]
    effect = Effect({**t.effect.updates, **updates})
    return (_with(p, i, dataclasses.replace(t, effect=effect)),
            f"{_where(t)}: effect `{t.effect.text}` becomes `{effect.text}`")


def remove(p: Protocol, keep: Callable[[Transition], bool], what: str) -> tuple[Protocol, str]:
    """``p`` without the transitions ``keep`` refuses (at least one)."""
    gone = [t for t in p.transitions if not keep(t)]
    if not gone:
        raise LookupError(f"{p.name}: no transition to remove ({what})")
    return (dataclasses.replace(p, transitions=tuple(t for t in p.transitions if keep(t))),
            f"{what}: " + "; ".join(f"{_where(t)} removed" for t in gone))


def add_guard(p: Protocol, triggers: Sequence[str], guard: Guard) -> tuple[Protocol, str]:
    """``p`` with ``guard`` added to every transition of the given triggers."""
    hit = [t for t in p.transitions if t.trigger in triggers]
    if not hit:
        raise LookupError(f"{p.name}: no transition of {list(triggers)}")
    ts = tuple(dataclasses.replace(t, guards=(*t.guards, guard)) if t.trigger in triggers
               else t for t in p.transitions)
    return (dataclasses.replace(p, transitions=ts),
            f"{', '.join(sorted(set(triggers)))}: guard {guard.name} `{guard.text}` added")


# --------------------------------------------------------------------------
# The catalogue
# --------------------------------------------------------------------------
def _mutant(name: str, machine: str, kind: str, rules: tuple[str, ...],
            made: tuple[Protocol, str], finds: tuple[tuple[str, str], ...] = (),
            progress: str = "") -> ModelMutant:
    protocol, change = made
    return ModelMutant(name, machine, kind, rules, change, protocol, finds, progress)


def catalogue() -> tuple[ModelMutant, ...]:
    """Every model mutant, safety then liveness, ledger then approval then query."""
    lookups = ("lookup_found", "lookup_absent", "lookup_conflict", "lookup_failed")
    return (
        # ---- ledger -----------------------------------------------------------------
        _mutant("ledger-resume-despite-receipt", "ledger", GUARD_DROPPED, ("L4",),
                drop_guard(LEDGER, "resume", "registered", "no_receipt"),
                (("invariant", "executed_at_most_once"),)),
        _mutant("ledger-upgraded-write-paired-not-executed", "ledger", EFFECT_ALTERED, ("L5",),
                alter_effect(LEDGER, "recover_pair", "paired", {"result": "not_executed"},
                             having="contract_upgraded"),
                (("invariant", "never_not_executed_if_may_have_run"),)),
        # ---- approval ---------------------------------------------------------------
        _mutant("approval-rerun-after-commit", "approval", GUARD_DROPPED, ("A6",),
                drop_guard(APPROVAL, "lookup_absent", "executing", "nothing_committed"),
                (("invariant", "at_most_one_commit"),)),
        _mutant("approval-retries-regardless-of-retry-safe", "approval", EFFECT_ALTERED,
                ("A5",), alter_effect(APPROVAL, "execute", "executing",
                                      {"retries_allowed": True}),
                (("invariant", "retries_only_if_retry_safe"),)),
        _mutant("approval-one-retry-too-many", "approval", BOUND_OFF_BY_ONE, ("A5",),
                shift_bound(APPROVAL, ("retry", None, "retry_left"),
                            ("outcome_uncertain", "recovering", "no_retry_left")),
                (("domain", "handler_entries"),)),
        # ---- query ------------------------------------------------------------------
        _mutant("query-stale-lease-submits", "query", GUARD_DROPPED, ("Q11", "Q12"),
                drop_guard(QUERY, "begin_submit", "submitting", "fresh_lease"),
                (("step_property", "stale_lease_changes_nothing"),)),
        _mutant("query-not-found-not-counted", "query", EFFECT_ALTERED, ("Q15", "Q16"),
                alter_effect(QUERY, "lookup_not_found", "not_found",
                             {"not_found_seen": V.not_found_seen},
                             source="submission_unknown"),
                (("invariant", "resubmission_follows_not_found"),)),
        _mutant("query-fourth-submission", "query", BOUND_OFF_BY_ONE, ("Q16",),
                shift_bound(QUERY, ("resubmit", "submitting", "under_limit"),
                            ("resubmit", "submission_retry_exhausted", "at_limit")),
                (("invariant", "at_most_three_submissions"), ("domain", "submissions"))),
        # ---- liveness (issue 25) ----------------------------------------------------
        _mutant("approval-deadline-expiry-removed", "approval", LIVENESS, ("A2",),
                remove(APPROVAL, lambda t: t.trigger != "expire", "the deadline's expiry"),
                progress="approval_decided_or_expired"),
        _mutant("query-not-found-never-resubmitted", "query", LIVENESS, ("Q16",),
                remove(QUERY, lambda t: not (t.trigger == "resubmit"
                                             and t.dest == "submitting"),
                       "not_found with no way back to submitting"),
                progress="not_found_resubmitted"),
        _mutant("approval-recovery-guard-dead-after-crash", "approval", LIVENESS, ("A4",),
                add_guard(APPROVAL, lookups, Guard("runtime_running", V.running)),
                progress="uncertain_write_resolved"),
    )


# --------------------------------------------------------------------------
# Both engines on one mutant
# --------------------------------------------------------------------------
@dataclass
class MutantCheck:
    """What each engine found in one mutant, and whether that is what the catalogue asks.

    ``ours``/``spin``: the (kind, property) safety findings of each engine; for a liveness
    mutant also each engine's verdict on its progress property and whether it came with a
    lasso (a prefix and a cycle). ``problems`` says, in words, every way the check failed;
    it is empty only when the mutant is found as the catalogue says."""

    mutant: ModelMutant
    ours: list[list[str]]
    spin: list[list[str]]
    agreement: Any  # conformance._promela.Agreement: states, steps and findings side by side
    ours_seconds: float
    spin_seconds: float  # spin, cc and pan, every run for this mutant
    ours_progress: str = ""
    spin_progress: str = ""
    ours_lasso: bool = False
    spin_lasso: bool = False
    spin_why: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        m = self.mutant
        doc: dict[str, Any] = {
            "name": m.name, "machine": m.machine, "kind": m.kind, "rules": list(m.rules),
            "change": m.change, "ours": self.ours, "spin": self.spin,
            "ours_seconds": round(self.ours_seconds, 3),
            "spin_seconds": round(self.spin_seconds, 3), "found": self.found,
            "problems": self.problems}
        if m.kind == LIVENESS:
            doc.update(progress=m.progress, ours_progress=self.ours_progress,
                       spin_progress=self.spin_progress, ours_lasso=self.ours_lasso,
                       spin_lasso=self.spin_lasso, spin_why=self.spin_why)
        return doc


def check(m: ModelMutant) -> MutantCheck:
    """Run our explorer (and, for a liveness mutant, our fair-cycle search) and SPIN (pan's
    safety search, and for a liveness mutant the LTL acceptance-cycle search of its progress
    property) on ``m``. SPIN missing or failing raises (:class:`SpinUnavailable`,
    :class:`SpinFailed`): a mutant SPIN did not check is never reported found."""
    from settled.conformance._explore import explore
    from settled.conformance._explore._promela import LTL_VIOLATED, compare, render_machine, run_ltl, run_spin
    from settled.conformance._liveness import VIOLATED, check_machine
    from settled.model.progress import liveness_of

    p = m.protocol
    t0 = time.perf_counter()
    explored = explore(p)
    ours_found = sorted({(f.kind, f.name) for f in explored.violations}
                        | ({("deadlock", "")} if explored.deadlocks else set()))
    live = check_machine(explored) if m.kind == LIVENESS else None
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    rendered = render_machine(p)
    spin = run_spin(rendered, trails=False)
    agreement = compare(explored, spin)
    spin_found = sorted({(f.check.kind, f.check.name) for f in spin.findings})
    ltl = None
    if m.kind == LIVENESS:
        declared = liveness_of(p)
        [prop] = [q for q in declared.progress if q.name == m.progress]
        ltl = run_ltl(rendered, declared, prop)
    spin_s = time.perf_counter() - t0
    out = MutantCheck(m, [list(f) for f in ours_found], [list(f) for f in spin_found],
                      agreement, ours_s, spin_s)
    problems = out.problems
    if not spin.complete:
        problems.append("pan did not finish the safety search")
    problems += [f"the engines disagree: {d}" for d in agreement.disagreements]
    if m.kind != LIVENESS:
        for engine, found in (("ours", ours_found), ("SPIN", spin_found)):
            missing = [f for f in m.finds if f not in found]
            if missing:
                problems.append(f"{engine} did not find {missing}")
        return out
    assert live is not None and ltl is not None
    [verdict] = [v for v in live.verdicts if v.prop.name == m.progress]
    out.ours_progress, out.spin_progress, out.spin_why = verdict.verdict, ltl.verdict, ltl.why
    out.ours_lasso = verdict.lasso is not None
    out.spin_lasso = bool(ltl.cycle)
    if explored.traps:
        ours_found.append(("trap", str(len(explored.traps))))
    for engine, found in (("ours", ours_found), ("SPIN", spin_found)):
        if found:
            problems.append(f"a safety check of {engine} found it: {found}")
    if not (verdict.verdict == VIOLATED and out.ours_lasso):
        problems.append(f"our check: {m.progress} is {verdict.verdict}, not a lasso")
    if not (ltl.verdict == LTL_VIOLATED and out.spin_lasso):
        problems.append(f"SPIN: {m.progress} is {ltl.verdict}, not a lasso "
                        f"({ltl.why or 'no cycle in the trail'})")
    return out
