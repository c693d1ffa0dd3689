"""The trace checker's findings: one instance's :class:`Violation` and the whole
:class:`CheckReport`, each with its text and JSON forms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from settled.model import Value


# --------------------------------------------------------------------------
# Findings
# --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Violation:
    """One instance's verdict when it is not "conforms": what, where, and why.

    ``kind`` is ``step`` (no configuration consistent with the log takes the
    event), ``out_of_domain`` (a name or value the machine does not declare),
    ``incomplete_log`` (a seq gap, a reordering, an instance starting
    mid-stream) or ``undecided`` (the hidden-step search hit its limit: not a
    violation, not a pass).
    """

    instance: str
    line: int
    event: Mapping[str, Any]
    kind: str = "step"
    message: str = ""
    machine: str = ""
    state_before: Mapping[str, Any] = field(default_factory=dict)
    candidates: tuple[Mapping[str, Any], ...] = ()
    candidates_total: int = 0
    unlogged: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    enabled: tuple[str, ...] = ()
    failed_guards: tuple[tuple[str, str], ...] = ()
    diffs: tuple[tuple[str, Value, Value], ...] = ()  # (field, observed, expected)
    broken: tuple[str, ...] = ()  # invariants and step properties the step would break
    rules: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"instance": self.instance, "machine": self.machine, "line": self.line,
                "kind": self.kind, "message": self.message, "event": dict(self.event),
                "rules": list(self.rules), "broken": list(self.broken),
                "state_before": {k: _plain(v) for k, v in self.state_before.items()},
                "candidates": [{k: _plain(v) for k, v in c.items()} for c in self.candidates],
                "candidates_total": self.candidates_total,
                "unlogged_possible": {k: [_plain(x) for x in v] for k, v in self.unlogged.items()},
                "enabled": list(self.enabled),
                "failed_guards": [{"name": n, "text": t} for n, t in self.failed_guards],
                "diffs": [{"field": f, "observed": _plain(o), "expected": _plain(x)}
                          for f, o, x in self.diffs]}

    def text(self) -> str:
        ev = self.event
        head = f"line {self.line}: {self.machine or ev.get('machine', '?')} {self.instance!r}"
        if "seq" in ev:
            head += f" seq {ev['seq']}"
        if self.kind == "step":
            head += (f": {ev.get('trigger')} {ev.get('from')} -> {ev.get('to')} does not conform: "
                     f"{self.message}")
        else:
            head += f": {self.kind}: {self.message}"
        parts = [head]
        if self.rules or self.broken:
            cites = ", ".join(self.rules)
            if self.broken:
                cites += ("; " if cites else "") + "breaks " + ", ".join(self.broken)
            parts.append(f"  rules: {cites}")
        if self.kind in ("step", "undecided") and self.candidates_total:
            shown = len(self.candidates)
            more = (f" ({self.candidates_total - shown} more not shown)"
                    if self.candidates_total > shown else "")
            parts.append(f"  consistent with the log so far: {self.candidates_total} distinct "
                         f"over the logged variables{more}:")
            parts += [f"    {_brief(c)}" for c in self.candidates]
            if self.unlogged:
                parts.append("  not logged, possibly: " + "; ".join(
                    f"{k} in {{{', '.join(str(_plain(x)) for x in v)}}}"
                    for k, v in self.unlogged.items()))
            parts.append(f"  enabled there: {', '.join(self.enabled) or '(nothing)'}")
        if self.failed_guards:
            parts.append("  guards failed in every candidate: "
                         + "; ".join(f"{n} ({t})" for n, t in self.failed_guards))
        for f, o, x in self.diffs:
            parts.append(f"  {f}: observed {_plain(o)!r}, model expects {_plain(x)!r}")
        return "\n".join(parts)


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple | frozenset) else str(v) if isinstance(v, str) else v


def _brief(state: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_plain(v)}" for k, v in state.items())


@dataclass(frozen=True)
class CheckReport:
    """The verdicts of one trace: every instance judged, the non-conforming ones listed."""

    events: int
    instances: int
    seconds: float
    violations: tuple[Violation, ...]
    undecided: tuple[Violation, ...] = ()
    stopped_early: bool = False  # --first: reading stopped at the first problem

    @property
    def ok(self) -> bool:
        return not self.violations and not self.undecided and self.events > 0

    @property
    def exit_code(self) -> int:
        return 1 if self.violations else 3 if self.undecided else 0

    @property
    def conforming(self) -> int:
        """Instances judged conforming (none when --first stopped the reading early)."""
        return 0 if self.stopped_early else self.unjudged_or_conforming

    @property
    def unjudged(self) -> int:
        """Instances left unjudged because --first stopped the reading early."""
        return self.unjudged_or_conforming if self.stopped_early else 0

    @property
    def unjudged_or_conforming(self) -> int:
        return self.instances - len(self.violations) - len(self.undecided)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "exit_code": self.exit_code, "events": self.events,
                "instances": self.instances,
                "verdicts": {"conforms": self.conforming, "violation": len(self.violations),
                             "undecided": len(self.undecided), "not_judged": self.unjudged},
                "stopped_early": self.stopped_early, "seconds": round(self.seconds, 3),
                "violations": [v.to_json() for v in self.violations],
                "undecided": [v.to_json() for v in self.undecided]}


TraceReport: TypeAlias = CheckReport
