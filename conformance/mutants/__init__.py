"""The bug catalogue: variants of the implementation, each breaking one rule.

Each mutant is a small subclass of a part of the bundled implementation,
made the way a real engineer might get it wrong, plus the adapter that
drives it. ``settled mutants`` runs the lockstep kit against each of them and
against the unmodified implementation: every mutant must be killed, the
baseline must pass. Nothing here is a switch inside ``impl/``.
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


def all_mutants() -> list[Mutant]:
    """Every mutant of every machine, in catalogue order."""
    found: list[Mutant] = []
    for module in ("query", "approval", "ledger", "query_system", "approval_system"):
        try:
            imported = __import__(f"{__name__}.{module}", fromlist=["MUTANTS"])
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{module}":
                raise
            continue
        found.extend(imported.MUTANTS)
    return found


__all__ = ["Mutant", "all_mutants"]
