"""The bug catalogue: variants of the implementation, each breaking one rule.

Each mutant is a small subclass of a part of the bundled implementation,
made the way a real engineer might get it wrong, plus the adapter that
drives it. ``settled mutants`` runs the lockstep kit against each of them and
against the unmodified implementation: every mutant must be killed, the
baseline must pass. Nothing here is a switch inside ``impl/``.

A mutant differs from the shipped code by its bug and nothing else. Each line of the bug
carries a ``# bug`` comment (``# bug …; shipped: <the shipped text it replaces>``; on a line
of its own it marks the next statement; ``# bug deleted; shipped: <line>`` puts back a line
the bug removed); a module-level function of ``impl/`` is copied under ``fork_of``. With
its bug reverted, every override is the shipped method or a plain delegation to it
(``_shipped.py``, checked by ``tests/test_mutants_shipped.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .._adapter import Adapter


@dataclass(frozen=True)
class Mutant:
    name: str  # named after the rule it breaks, e.g. "Q14-lost-response-recorded-as-failed"
    rule: str  # the rule ID it breaks
    machine: str  # "query", "approval", "ledger" or a system ("query_system"): its suite
    description: str
    adapter_class: Callable[..., Adapter]
    # what must kill it: the lockstep campaign, or the crash sweep (a crash at every durable
    # boundary, conformance/_lockstep/_crash_sweep.py) for a bug only a crash between two commits shows
    campaign: str = "lockstep"


def all_mutants() -> list[Mutant]:
    """Every mutant of every machine, in catalogue order."""
    found: list[Mutant] = []
    for module in ("query", "approval", "ledger", "query_system", "approval_system", "crash"):
        try:
            imported = __import__(f"{__name__}.{module}", fromlist=["MUTANTS"])
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{module}":
                raise
            continue
        found.extend(imported.MUTANTS)
    return found


# Rules of PROTOCOL.md that no implementation in this repository can break, with why. The
# rule-coverage figure divides by the other rules: a mutant needs code to break. Every rule
# has an implementation here today (the tool-call ledger included), so none is excluded.
UNBREAKABLE: dict[str, str] = {}


@dataclass(frozen=True)
class RuleCoverage:
    """Which breakable rules the catalogue has at least one mutant for."""

    covered: tuple[str, ...]  # breakable rules some mutant is named after
    missing: tuple[str, ...]  # breakable rules no mutant is named after
    excluded: dict[str, str]  # rule -> why no implementation here can break it

    @property
    def total(self) -> int:
        return len(self.covered) + len(self.missing)

    def to_json(self) -> dict[str, object]:
        return {
            "rules_with_mutants": len(self.covered), "rules_total": self.total,
            "rules_ratio": round(len(self.covered) / self.total, 3) if self.total else None,
            "rules_total_divides_by": "rules of docs/PROTOCOL.md that an implementation in this "
                                      "repository can break (every rule minus rules_excluded)",
            "rules_without_mutants": list(self.missing),
            "rules_excluded": dict(self.excluded),
        }


def rule_coverage(mutants: list[Mutant] | None = None) -> RuleCoverage:
    """The catalogue's (or ``mutants``') coverage of the breakable rules of PROTOCOL.md."""
    from settled.model import RULES, rule_sort_key

    named = {m.rule for m in (all_mutants() if mutants is None else mutants)}
    breakable = sorted((r for r in RULES if r not in UNBREAKABLE), key=rule_sort_key)
    return RuleCoverage(tuple(r for r in breakable if r in named),
                        tuple(r for r in breakable if r not in named), dict(UNBREAKABLE))


__all__ = ["UNBREAKABLE", "Mutant", "RuleCoverage", "all_mutants", "rule_coverage"]
