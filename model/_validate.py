"""Checks a declaration when it is built; every failure is a ``DeclarationError``.

Checked: unique names; declared sources, destinations and initial state;
variable initial values inside their domains; known rule IDs; guards that
read only what they declare, and whose declared parts say what they say;
every state reachable in the protocol graph;
terminal states without exits and non-terminal states with at least one;
and no two transitions with the same trigger and source that can both be
enabled by one valuation unless they declare different priorities.

The ambiguity check is exact and cheap because every guard declares the
variables and parameters it reads: only the product of those domains is
enumerated, never the whole configuration space.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ._core import DeclarationError, Guard, Transition, Value, check_rules

if TYPE_CHECKING:
    from ._core import Protocol


def validate(p: Protocol) -> None:
    _names(p)
    _references(p)
    _refusable(p)
    _domains(p)
    _rule_ids(p)
    for t in p.transitions:
        for g in t.guards:
            _guard_reads(p, t, g)
            _guard_parts(p, t, g)
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


class _Only(dict[str, Value]):
    """A mapping that names the guard when it reads something it did not declare."""

    def __init__(self, values: dict[str, Value], where: str) -> None:
        super().__init__(values)
        self.where = where

    def __missing__(self, key: str) -> Value:
        raise DeclarationError(f"{self.where} reads {key!r} but does not declare it in reads=")


def _domain_of(p: Protocol, t: Transition, name: str) -> tuple[Value, ...]:
    for prm in t.params:
        if prm.name == name:
            return prm.domain
    for v in p.variables:
        if v.name == name:
            return v.domain
    raise DeclarationError(f"{p.name}: guard of {t.trigger!r} declares it reads {name!r}, "
                           "which is neither a variable nor a parameter of the transition")


def _valuations(p: Protocol, t: Transition, names: tuple[str, ...]) -> Iterator[dict[str, Value]]:
    domains = [_domain_of(p, t, n) for n in names]
    for values in itertools.product(*domains):
        yield dict(zip(names, values, strict=True))


def _split(t: Transition, valuation: dict[str, Value]) -> tuple[dict[str, Value], dict[str, Value]]:
    pnames = {prm.name for prm in t.params}
    return ({k: x for k, x in valuation.items() if k not in pnames},
            {k: x for k, x in valuation.items() if k in pnames})


def _guard_reads(p: Protocol, t: Transition, g: Guard) -> None:
    where = f"{p.name}: guard {g.name!r} of {t.trigger!r}"
    for valuation in itertools.islice(_valuations(p, t, g.reads), 64):
        v, prm = _split(t, valuation)
        try:
            g(_Only(v, where), _Only(prm, where))
        except DeclarationError:
            raise
        except Exception as exc:  # a guard must be total over its declared domains
            raise DeclarationError(f"{where} raised {exc!r} on {valuation}") from exc


def _guard_parts(p: Protocol, t: Transition, g: Guard) -> None:
    """A guard's declared parts are a conjunction that says exactly what the guard says,
    checked on every valuation of what it reads (the domains are small)."""
    if not g.parts:
        return
    where = f"{p.name}: guard {g.name!r} of {t.trigger!r}"
    names = [n for n, _ in g.parts]
    if len(names) < 2 or len(set(names)) != len(names):
        raise DeclarationError(f"{where} declares parts {names}; give two or more, each named "
                               "once (a single condition needs no parts)")
    for checked, valuation in enumerate(_valuations(p, t, g.reads), 1):
        if checked > _MAX_PART_VALUATIONS:
            raise DeclarationError(f"{where}: its parts cannot be checked, the guard reads more "
                                   f"than {_MAX_PART_VALUATIONS:,} valuations; split the guard")
        v, prm = _split(t, valuation)
        try:
            agree = g(v, prm) == all(fn(_Only(v, where), _Only(prm, where)) for _n, fn in g.parts)
        except DeclarationError:
            raise
        except Exception as exc:  # a part must be total over the guard's declared domains
            raise DeclarationError(f"{where}: a part raised {exc!r} on {valuation}") from exc
        if not agree:
            raise DeclarationError(f"{where}: its parts {names} disagree with the guard when "
                                   f"{valuation}; the guard must hold exactly when all parts do")


_MAX_PART_VALUATIONS = 100_000


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
            if a.trigger != b.trigger or a.priority != b.priority:
                continue
            if {x.name for x in a.params} != {x.name for x in b.params}:
                continue
            witness = _overlap(p, a, b)
            if witness is not None:
                raise DeclarationError(
                    f"{p.name}: {a.trigger!r} from {s!r} is ambiguous: {_label(a)} and {_label(b)} "
                    f"are both enabled when {witness}; make the guards exclusive or set priority=")


def _label(t: Transition) -> str:
    return f"[{t.guard_text or 'always'}] -> {t.dest or 'same state'}"


def _overlap(p: Protocol, a: Transition, b: Transition) -> dict[str, Value] | None:
    names = tuple(dict.fromkeys(r for g in (*a.guards, *b.guards) for r in g.reads))
    for valuation in _valuations(p, a, names):
        v, prm = _split(a, valuation)
        if all(g(v, prm) for g in a.guards) and all(g(v, prm) for g in b.guards):
            return valuation
    return None
