"""Why the model allows or forbids a step, and what an observation breaks: the words of a
divergence."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from settled.model import Config, Params, Protocol, Transition, Value

from ._action import Action, rules_text


@dataclass(frozen=True, slots=True)
class _StepLike:
    transition: Transition
    params: Params
    after: Config


def why_allowed(step: Any, v: Mapping[str, Value]) -> str:
    t = step.transition
    held = ", ".join(f"{g.name}: {g.text}" for g in t.guards)
    return (f"{t.trigger} from {step.transition.source[0] if len(t.source) == 1 else 'here'}"
            f", {rules_text(t.rules)}" + (f"; its guards hold: {held}" if held else ""))


def why_refused(protocol: Protocol, c: Config, action: Action) -> str:
    """The failing guard conjuncts of every transition ``action`` could be, with their rules;
    or that no transition of that trigger leaves the current state."""
    v = protocol.view(c)
    found = []
    for t in protocol.transitions_from(c.state):
        if t.trigger != action.trigger:
            continue
        failing = [g for g in t.guards if not g(v, action.params)]
        if failing:
            found.append(f"guard {' and '.join(g.name for g in failing)} fails ("
                         + "; ".join(g.text for g in failing) + f"), {rules_text(t.rules)}")
    if found:
        return " | ".join(found)
    rules = sorted({r for t in protocol.transitions if t.trigger == action.trigger
                    for r in t.rules})
    return (f"no {action.trigger} leaves state {c.state}"
            + (f" ({rules_text(rules)})" if rules else ""))



def broken_by(protocol: Protocol, c: Config, observed: Mapping[str, Value],
              last: tuple[Config, Transition, Params] | None) -> list[str]:
    """The invariants (and, from the model's previous configuration ``last`` gives with the
    step taken, the step properties) the observed values break, read as a model
    configuration: ghost and unobservable variables are taken from the model ``c``."""
    names = [v.name for v in protocol.variables]
    try:
        values = tuple(observed.get(n, val) if n in observed else val
                       for n, val in zip(names, c.values, strict=True))
        seen = Config(str(observed.get("state", c.state)), values)
        out = [f"invariant {inv.name} ({rules_text(inv.rules)}): {inv.text}"
               for inv in protocol.broken_invariants(seen)]
        if last is not None:
            before, t, params = last
            step = _StepLike(t, params, seen)
            out += [f"step property {sp.name} ({rules_text(sp.rules)}): {sp.text}"
                    for sp in protocol.broken_step_properties(before, step)]  # type: ignore[arg-type]
    except Exception:  # an observation the model's predicates cannot read: say nothing
        return []
    return out
