"""Checks a declaration when it is built; every failure is a ``DeclarationError``.

Checked: unique names; declared sources, destinations and initial state;
variable initial values inside their domains; known rule IDs; guards,
effects and properties that read only declared variables and parameters and
are typed against their domains (a condition is a truth value, an effect
writes a value of its variable's kind, a constant compared with a variable
is one of its values); every state reachable in the protocol graph;
terminal states without exits and non-terminal states with at least one;
and no two transitions with the same trigger and source that can both be
enabled by one valuation unless they declare different priorities.

The ambiguity check is exact and cheap because every guard's expression says
the variables and parameters it reads: only the product of those domains is
enumerated, never the whole configuration space.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from ._core import DeclarationError, check_rules
from ._expr import check
from ._expr_nodes import lift
from ._expr_text import Ref
from ._expr_types import Env
from ._parts import Transition, Value

if TYPE_CHECKING:
    from ._core import Protocol


def validate(p: Protocol) -> None:
    _names(p)
    _references(p)
    _refusable(p)
    _domains(p)
    _rule_ids(p)
    for t in p.transitions:
        _transition_types(p, t)
    _property_types(p)
    _reachability(p)
    _exits(p)
    _ambiguity(p)


def _names(p: Protocol) -> None:
    for kind, names in (("state", [s.name for s in p.states]),
                        ("variable", [v.name for v in p.variables])):
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise DeclarationError(f"{p.name}: {kind} declared twice: {dupes}")


def _refusable(p: Protocol) -> None:
    unknown = sorted(set(p.refusable) - {t.trigger for t in p.transitions})
    if unknown:
        raise DeclarationError(f"{p.name}: refusable names no trigger: {unknown}; "
                               "list only the machine's own triggers")


def _references(p: Protocol) -> None:
    known = set(p.state_names)
    if p.initial not in known:
        raise DeclarationError(f"{p.name}: initial state {p.initial!r} is not declared")
    for t in p.transitions:
        for s in t.source:
            if s not in known:
                raise DeclarationError(
                    f"{p.name}: transition {t.trigger!r} has undeclared source {s!r}; declare it")
        if t.dest is not None and t.dest not in known:
            raise DeclarationError(
                f"{p.name}: transition {t.trigger!r} has undeclared destination {t.dest!r}; declare it")
        if not t.source:
            raise DeclarationError(f"{p.name}: transition {t.trigger!r} has no source state")


def _domains(p: Protocol) -> None:
    for v in p.variables:
        if not v.domain:
            raise DeclarationError(f"{p.name}: variable {v.name!r} has an empty domain")
        if v.initial not in v.domain:
            raise DeclarationError(f"{p.name}: variable {v.name!r} starts at {v.initial!r}, "
                                   f"outside its domain {list(v.domain)}")
    for t in p.transitions:
        for prm in t.params:
            if not prm.domain:
                raise DeclarationError(f"{p.name}: parameter {prm.name!r} of {t.trigger!r} "
                                       "has an empty domain")


def _rule_ids(p: Protocol) -> None:
    for t in p.transitions:
        check_rules(t.rules, f"{p.name}: transition {t.trigger!r}")
        if not t.rules:
            raise DeclarationError(f"{p.name}: transition {t.trigger!r} cites no rule")
    for i in p.invariants:
        check_rules(i.rules, f"{p.name}: invariant {i.name!r}")
    for s in p.step_properties:
        check_rules(s.rules, f"{p.name}: step property {s.name!r}")


def _env(p: Protocol, t: Transition, where: str) -> Env:
    domains: dict[Ref, tuple[Value, ...]] = {("V", v.name): v.domain for v in p.variables}
    domains.update({("P", prm.name): prm.domain for prm in t.params})
    return Env(where, domains)


def _transition_types(p: Protocol, t: Transition) -> None:
    """Every guard reads only declared variables and the step's parameters, and is a truth
    value; every effect writes declared variables with values of their kind."""
    for g in t.guards:
        check(g.expr, _env(p, t, f"{p.name}: guard {g.name!r} of {t.trigger!r}"))
    domains = {v.name: v.domain for v in p.variables}
    where = f"{p.name}: effect of {t.trigger!r} ({t.effect.text})"
    for name, e in t.effect.updates.items():
        if name not in domains:
            raise DeclarationError(f"{where} writes {name!r}, which is not a variable; the "
                                   f"variables are {sorted(domains)}")
        check(lift(e), _env(p, t, where), expect="value", into=domains[name])


def _property_types(p: Protocol) -> None:
    states = p.state_names
    for i in p.invariants:
        env = Env(f"{p.name}: invariant {i.name!r}",
                  {**{("V", v.name): v.domain for v in p.variables}, ("STATE", "state"): states})
        check(i.expr, env)
    params: dict[str, set[Value]] = {}
    for t in p.transitions:
        for prm in t.params:
            params.setdefault(prm.name, {None}).update(prm.domain)
    snap: dict[Ref, Iterable[Value]] = {}
    for side in ("B", "A"):
        snap.update({(side, v.name): v.domain for v in p.variables})
        snap[(side, "state")] = states
    snap.update({("P", n): tuple(d) for n, d in params.items()})
    snap[("T", "trigger")] = p.triggers()
    snap[("T", "actor")] = tuple({t.actor for t in p.transitions})
    for sp in p.step_properties:
        check(sp.expr, Env(f"{p.name}: step property {sp.name!r}", snap))


def _domain_of(p: Protocol, t: Transition, name: str) -> tuple[Value, ...]:
    for prm in t.params:
        if prm.name == name:
            return prm.domain
    for v in p.variables:
        if v.name == name:
            return v.domain
    raise DeclarationError(f"{p.name}: guard of {t.trigger!r} reads {name!r}, which is neither "
                           "a variable nor a parameter of the transition")


def _valuations(p: Protocol, t: Transition, names: tuple[str, ...]) -> Iterator[dict[str, Value]]:
    domains = [_domain_of(p, t, n) for n in names]
    for values in itertools.product(*domains):
        yield dict(zip(names, values, strict=True))


def _split(t: Transition, valuation: dict[str, Value]) -> tuple[dict[str, Value], dict[str, Value]]:
    pnames = {prm.name for prm in t.params}
    return ({k: x for k, x in valuation.items() if k not in pnames},
            {k: x for k, x in valuation.items() if k in pnames})


def _reachability(p: Protocol) -> None:
    seen, frontier = {p.initial}, [p.initial]
    while frontier:
        s = frontier.pop()
        for t in p.transitions_from(s):
            d = t.target(s)
            if d not in seen:
                seen.add(d)
                frontier.append(d)
    unreachable = [s for s in p.state_names if s not in seen]
    if unreachable:
        raise DeclarationError(f"{p.name}: states unreachable from {p.initial!r}: {unreachable}; "
                               "add a transition into them or remove them")


def _exits(p: Protocol) -> None:
    for s in p.states:
        out = p.transitions_from(s.name)
        if s.terminal and out:
            raise DeclarationError(
                f"{p.name}: terminal state {s.name!r} has outgoing transitions "
                f"{sorted({t.trigger for t in out})}; terminal states absorb")
        if not s.terminal and not out:
            raise DeclarationError(f"{p.name}: non-terminal state {s.name!r} has no way out; "
                                   "mark it terminal or give it a transition")


def _ambiguity(p: Protocol) -> None:
    for s in p.state_names:
        group = p.transitions_from(s)
        for a, b in itertools.combinations(group, 2):
            if a.trigger != b.trigger:
                continue
            if {x.name for x in a.params} != {x.name for x in b.params}:
                continue
            witness = _overlap(p, a, b)
            if witness is not None:
                raise DeclarationError(
                    f"{p.name}: {a.trigger!r} from {s!r} is ambiguous: {_label(a)} and {_label(b)} "
                    f"are both enabled when {witness}; make the guards exclusive")


def _label(t: Transition) -> str:
    return f"[{t.guard_text or 'always'}] -> {t.dest or 'same state'}"


def _overlap(p: Protocol, a: Transition, b: Transition) -> dict[str, Value] | None:
    names = tuple(dict.fromkeys(r for g in (*a.guards, *b.guards) for r in g.reads))
    for valuation in _valuations(p, a, names):
        v, prm = _split(a, valuation)
        if all(g(v, prm) for g in a.guards) and all(g(v, prm) for g in b.guards):
            return valuation
    return None
