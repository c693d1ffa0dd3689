"""Fairness and progress: what must eventually happen, and under which fairness, as data.

Safety says nothing bad happens; a progress property says something good
eventually does: ``premise ~> goal`` (leads-to), every run that reaches a
configuration where ``premise`` holds later reaches one where ``goal`` holds.
Whether that is true always depends on which steps the world is assumed to
take eventually, so every machine (and system) declares its fairness next to
its progress properties:

* :class:`Fairness` ``weak`` over a group of steps: a step of the group that
  stays enabled is eventually taken (TLA+'s WF). ``strong``: a step of the
  group enabled infinitely often is taken infinitely often (SF), e.g. "a
  lookup tried again and again is eventually answered", even though a fault
  may answer any single try. ``finite``: the steps happen only finitely
  often (restarts eventually stop: a run that restarts forever cannot make
  progress, and the lockstep's quiescence phase stops faults); a cycle that
  takes one is not fair. ``never``: the steps are never required
  (crashes, faults, a person's choices); said explicitly so a reviewer sees
  it, and it constrains nothing.
* A group (:class:`Steps`) is chosen by actor, by trigger and by parameter
  values: a step belongs when it matches every part that is given (one of
  the actors, one of the triggers, each named parameter one of its values).
* A predicate (:class:`Pred`) is a set of control states (or its
  complement) and simple comparisons of variables with constants, so it
  converts mechanically to any expression language. In a system it is
  quantified over the instances (``some`` or ``every`` instance), plus
  comparisons of the system's own variables.

Everything is validated against the machine (or system) when declared: an
unknown state, trigger, actor, parameter, variable, value or rule, or a
group that matches no step, is a :class:`DeclarationError` naming the fix.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ._core import DeclarationError, Protocol, check_rules
from ._parts import Params, Value, Vars
from ._system import System

WEAK, STRONG, FINITE, NEVER = "weak", "strong", "finite", "never"
KINDS = (WEAK, STRONG, FINITE, NEVER)
ONE, SOME, EVERY = "one", "some", "every"

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge}


@dataclass(frozen=True, slots=True)
class Steps:
    """A group of steps: those matching every given part (one of ``actors``, one of
    ``triggers``, and for each ``(parameter, values)`` in ``params`` one of the values)."""

    actors: tuple[str, ...] = ()
    triggers: tuple[str, ...] = ()
    params: tuple[tuple[str, tuple[Value, ...]], ...] = ()

    def matches(self, actor: str, trigger: str, params: Params) -> bool:
        if self.actors and actor not in self.actors:
            return False
        if self.triggers and trigger not in self.triggers:
            return False
        return all(name in params and params[name] in values for name, values in self.params)

    def text(self) -> str:
        parts = []
        if self.actors:
            parts.append("the " + " or ".join(f"`{a}`" for a in self.actors) + " steps")
        if self.triggers:
            parts.append(("of them " if parts else "the steps ")
                         + ", ".join(f"`{t}`" for t in self.triggers))
        for name, values in self.params:
            parts.append(f"with {name} " + " or ".join(f"`{v!r}`" for v in values))
        return " ".join(parts) or "every step"


@dataclass(frozen=True, slots=True)
class Fairness:
    """``kind`` (weak, strong or never) fairness of a named group of steps, citing rules."""

    name: str
    kind: str
    steps: Steps
    text: str
    rules: tuple[str, ...]

    @property
    def required(self) -> bool:
        return self.kind in (WEAK, STRONG)

    def words(self) -> str:
        """The assumption in words a reviewer can check."""
        group = self.steps.text()
        if self.kind == WEAK:
            return (f"weakly fair: while one of {group} stays enabled, one of them is "
                    "eventually taken")
        if self.kind == STRONG:
            return (f"strongly fair: if one of {group} is enabled again and again, one of "
                    "them is eventually taken")
        if self.kind == FINITE:
            return (f"eventually stops: {group} may happen, but only finitely often (a run "
                    "that repeats one forever is not fair)")
        return f"never required: {group} may never happen"


@dataclass(frozen=True, slots=True)
class Cmp:
    """``variable op value`` with op one of ==, !=, <, <=, >, >=."""

    variable: str
    op: str
    value: Value

    def text(self) -> str:
        return f"{self.variable} {self.op} {self.value!r}"


@dataclass(frozen=True, slots=True)
class Pred:
    """The control state is one of ``states`` (not one of them, with ``outside``; any state
    when ``states`` is empty) and every comparison in ``where`` holds. In a system,
    ``instances`` says for which instances the state part holds (``some`` or ``every``) and
    ``system`` compares the system's own variables; a machine's predicate is ``one``."""

    states: tuple[str, ...] = ()
    outside: bool = False
    where: tuple[Cmp, ...] = ()
    instances: str = ONE
    system: tuple[Cmp, ...] = ()

    def text(self) -> str:
        if not self.states:
            part = "any state"
        elif self.outside:
            part = "state not in {" + ", ".join(self.states) + "}"
        else:
            part = "state in {" + ", ".join(self.states) + "}"
        inner = " and ".join([part, *(c.text() for c in self.where)])
        if self.instances != ONE:
            inner = f"{self.instances} instance has " + inner if self.instances == SOME \
                else f"every instance has {inner}"
        return " and ".join([inner, *(c.text() for c in self.system)])

    def compile(self, names: Iterable[str]) -> Callable[[str, tuple[Value, ...]], bool]:
        """A fast test over (state, values in declaration order ``names``)."""
        index = {n: i for i, n in enumerate(names)}
        states = frozenset(self.states)
        outside = self.outside or not self.states
        checks = tuple((index[c.variable], _OPS[c.op], c.value) for c in self.where)

        def holds(state: str, values: tuple[Value, ...]) -> bool:
            if (state in states) == outside:
                return False
            return all(op(values[i], x) for i, op, x in checks)
        return holds

    def holds_in(self, state: str, v: Vars) -> bool:
        inside = state in self.states
        if self.states and inside == self.outside:
            return False
        return all(_OPS[c.op](v[c.variable], c.value) for c in self.where)


@dataclass(frozen=True, slots=True)
class Progress:
    """``premise ~> goal``: every run that reaches the premise later reaches the goal."""

    name: str
    premise: Pred
    goal: Pred
    text: str
    rules: tuple[str, ...]

    def formula(self) -> str:
        return f"{self.premise.text()} ~> {self.goal.text()}"


@dataclass(frozen=True)
class Liveness:
    """The fairness and progress properties of one machine or system (validated)."""

    target: str
    fairness: tuple[Fairness, ...]
    progress: tuple[Progress, ...]

    @property
    def required(self) -> tuple[Fairness, ...]:
        """The constraints that bind: weak and strong fairness, in declaration order."""
        return tuple(f for f in self.fairness if f.required)

    @property
    def finite(self) -> tuple[Fairness, ...]:
        """The groups that happen only finitely often."""
        return tuple(f for f in self.fairness if f.kind == FINITE)

    def rules(self) -> tuple[str, ...]:
        cited = {r for f in self.fairness for r in f.rules}
        return tuple(sorted(cited | {r for p in self.progress for r in p.rules}))


def declare(target: Protocol | System, fairness: Iterable[Fairness],
            progress: Iterable[Progress]) -> Liveness:
    """The fairness and progress of ``target``, validated against it."""
    out = Liveness(target.name, tuple(fairness), tuple(progress))
    _validate(target, out)
    return out


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------
_StepInfo = tuple[str, str, tuple[str, ...], dict[str, tuple[Value, ...]]]


def _vocabulary(target: Protocol | System) -> tuple[Protocol, list[_StepInfo],
                                                    dict[str, tuple[Value, ...]],
                                                    dict[str, tuple[Value, ...]]]:
    """(machine, steps as (actor, trigger, param names, param domains), machine variables,
    system variables)."""
    machine = target.machine if isinstance(target, System) else target
    steps: list[_StepInfo] = [(t.actor, t.trigger, tuple(p.name for p in t.params),
                               {p.name: p.domain for p in t.params}) for t in machine.transitions]
    own: dict[str, tuple[Value, ...]] = {}
    if isinstance(target, System):
        steps += [(t.actor, t.trigger, tuple(p.name for p in t.params),
                   {p.name: p.domain for p in t.params}) for t in target.transitions]
        own = {v.name: v.domain for v in target.variables}
    return machine, steps, {v.name: v.domain for v in machine.variables}, own


def _validate(target: Protocol | System, live: Liveness) -> None:
    machine, steps, variables, own = _vocabulary(target)
    where = f"{target.name} liveness"
    if not live.progress:
        raise DeclarationError(f"{where}: declares no progress property; declare at least one "
                               "(premise ~> goal) citing its rules")
    names = [f.name for f in live.fairness] + [p.name for p in live.progress]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise DeclarationError(f"{where}: names {dup} are declared twice; rename one")
    actors = {a for a, _t, _p, _d in steps}
    triggers = {t for _a, t, _p, _d in steps}
    for f in live.fairness:
        at = f"{where}: fairness {f.name!r}"
        if f.kind not in KINDS:
            raise DeclarationError(f"{at}: kind {f.kind!r} is none of {list(KINDS)}")
        check_rules(f.rules, at)
        _known(at, "actor", f.steps.actors, actors)
        _known(at, "trigger", f.steps.triggers, triggers)
        domains: dict[str, set[Value]] = {}
        for _a, _t, _p, d in steps:
            for k, dom in d.items():
                domains.setdefault(k, set()).update(dom)
        for pname, values in f.steps.params:
            if pname not in domains:
                raise DeclarationError(f"{at}: no step has a parameter {pname!r}; parameters are "
                                       f"{sorted(domains)}")
            bad = [v for v in values if v not in domains[pname]]
            if bad or not values:
                raise DeclarationError(f"{at}: parameter {pname!r} never takes {bad or 'no value'}; "
                                       f"its values are {sorted(domains[pname], key=repr)}")
        if isinstance(target, System) and target.worker is not None and any(
                n == target.worker[0] for n, _ in f.steps.params):
            raise DeclarationError(f"{at}: names values of {target.worker[0]!r}, which the "
                                   "system's symmetry renames; make the group by actor or trigger")
        if not any(_matches_some(f.steps, a, t, d) for a, t, _p, d in steps):
            raise DeclarationError(f"{at}: the group ({f.steps.text()}) matches no step of "
                                   f"{target.name}; check its actors, triggers and parameters")
    states = set(machine.state_names)
    system = isinstance(target, System)
    for p in live.progress:
        at = f"{where}: progress {p.name!r}"
        check_rules(p.rules, at)
        if not p.rules:
            raise DeclarationError(f"{at}: cites no rule; cite the rules it makes live")
        for side, pred in (("premise", p.premise), ("goal", p.goal)):
            _known(f"{at} {side}", "state", pred.states, states)
            if system and pred.instances not in (SOME, EVERY):
                raise DeclarationError(f"{at} {side}: a system's predicate says for which "
                                       "instances it holds: instances='some' or 'every'")
            if not system and (pred.instances != ONE or pred.system):
                raise DeclarationError(f"{at} {side}: a machine's predicate is about its one "
                                       "instance: drop instances= and system=")
            for c in pred.where:
                _cmp(f"{at} {side}", c, variables)
            for c in pred.system:
                _cmp(f"{at} {side} (system)", c, own)


def _matches_some(group: Steps, actor: str, trigger: str,
                  domains: Mapping[str, tuple[Value, ...]]) -> bool:
    import itertools
    names = list(domains)
    return any(group.matches(actor, trigger, dict(zip(names, vs, strict=True)))
               for vs in itertools.product(*(domains[n] for n in names)))


def _known(at: str, what: str, given: Iterable[str], known: set[str]) -> None:
    unknown = sorted(set(given) - known)
    if unknown:
        raise DeclarationError(f"{at}: unknown {what} {unknown}; the {what}s are {sorted(known)}")


def _cmp(at: str, c: Cmp, domains: Mapping[str, tuple[Value, ...]]) -> None:
    if c.op not in _OPS:
        raise DeclarationError(f"{at}: comparison {c.text()} uses {c.op!r}; use one of "
                               f"{list(_OPS)}")
    if c.variable not in domains:
        raise DeclarationError(f"{at}: comparison {c.text()} reads unknown variable "
                               f"{c.variable!r}; the variables are {sorted(domains)}")
    dom = domains[c.variable]
    if c.op in ("==", "!=") and c.value not in dom:
        raise DeclarationError(f"{at}: comparison {c.text()}: {c.value!r} is outside the domain "
                               f"of {c.variable} {list(dom)}")
