"""Checks a system when it is built; every failure is a ``DeclarationError``.

Checked: at least one instance; shared variables the machine declares; system
variables that neither clash nor repeat and start inside their domains; sync and
per-instance triggers of the machine; bindings, refinements and the system's own
transitions that read only what the system declares and cite known rules; the mutex's
variable, flag and triggers; the worker symmetry's parameter and variable; and a step
function that runs from the initial configuration. This is its own room, as a
machine's checks are (``_validate``): :class:`~._system.System` calls :func:`_validate`
from ``__post_init__`` and nothing here is needed to run a system.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._core import DeclarationError, check_rules
from ._system_parts import Mutex

if TYPE_CHECKING:
    from ._system import System


def _validate(s: System) -> None:
    """Every declaration error of ``s``, the first one raised as a :class:`DeclarationError`."""
    _validate_variables(s)
    _validate_steps(s)
    if s.mutex is not None:
        _validate_mutex(s, s.mutex)
    m = s.machine
    if s.worker is not None:
        param, var = s.worker
        if param not in {p.name for t in m.transitions for p in t.params} or \
                var not in set(m.variable_names):
            raise DeclarationError(f"{s.name}: worker symmetry names parameter {param!r} and "
                                   f"variable {var!r}; both must be declared by {m.name}")
    # The step function must run from the initial configuration (catches a broken binding).
    try:
        for _ in s.enabled(s.initial_config()):
            pass
    except (KeyError, TypeError) as e:
        raise DeclarationError(f"{s.name}: the system's guards or effects fail on the initial "
                               f"configuration: {e!r}") from e


def _validate_variables(s: System) -> None:
    """The instance count, the shared variables and the system's own variables."""
    m = s.machine
    names = set(m.variable_names)
    own = [v.name for v in s.variables]
    if s.instances < 1:
        raise DeclarationError(f"{s.name}: a system needs at least one instance, got {s.instances}")
    for n in s.shared:
        if n not in names:
            raise DeclarationError(f"{s.name}: shared variable {n!r} is not a variable of "
                                   f"{m.name}; declare it there or in the system's variables")
    clash = sorted(set(own) & names)
    if clash or len(own) != len(set(own)):
        raise DeclarationError(f"{s.name}: system variables clash or repeat: {clash or own}")
    for v in s.variables:
        if not v.domain or v.initial not in v.domain:
            raise DeclarationError(f"{s.name}: system variable {v.name!r} starts at {v.initial!r}, "
                                   f"outside its domain {list(v.domain)}")


def _validate_steps(s: System) -> None:
    """Sync triggers, bindings, refinements, the system's own transitions and invariants."""
    m = s.machine
    triggers = set(m.triggers())
    own = [v.name for v in s.variables]
    for t in s.sync:
        if t not in triggers:
            raise DeclarationError(f"{s.name}: sync trigger {t!r} is not a trigger of {m.name}")
    for t in s.per_instance:
        if t not in s.sync:
            raise DeclarationError(f"{s.name}: per-instance trigger {t!r} is not a sync trigger; "
                                   "list it in sync too")
    params = {p.name for t in m.transitions for p in t.params}
    for b in s.bind:
        if b.param not in params:
            raise DeclarationError(f"{s.name}: bound parameter {b.param!r} is no parameter of {m.name}")
        _reads_own(s, f"binding of {b.param!r}", b.reads, set(own))
    for r in s.refinements:
        if r.trigger not in triggers:
            raise DeclarationError(f"{s.name}: refinement of unknown trigger {r.trigger!r}")
        check_rules(r.rules, f"{s.name}: refinement of {r.trigger!r}")
        # A per-instance trigger's parameters are each instance's own: not the step's to read.
        readable = set() if r.trigger in s.per_instance else {
            p.name for t in m.transitions if t.trigger == r.trigger for p in t.params}
        for g in r.guards:
            _reads_own(s, f"refinement guard {g.name!r}", g.reads, set(own) | readable)
    for t2 in s.transitions:
        check_rules(t2.rules, f"{s.name}: transition {t2.trigger!r}")
        if t2.trigger in triggers:
            raise DeclarationError(f"{s.name}: system transition {t2.trigger!r} shadows a trigger "
                                   f"of {m.name}; rename it")
        for g in t2.guards:
            _reads_own(s, f"guard {g.name!r} of {t2.trigger!r}", g.reads,
                       set(own) | {p.name for p in t2.params})
    for i in s.invariants:
        check_rules(i.rules, f"{s.name}: invariant {i.name!r}")


def _validate_mutex(s: System, mx: Mutex) -> None:
    m = s.machine
    check_rules(mx.rules, f"{s.name}: mutex {mx.variable!r}")
    own = {v.name: v for v in s.variables}
    var = own.get(mx.variable)
    if var is None or set(var.domain) != {"free", "held"}:
        raise DeclarationError(f"{s.name}: the mutex's variable {mx.variable!r} must be a system "
                               "variable over ('free', 'held')")
    flag = {v.name: v for v in m.variables}.get(mx.flag)
    if flag is None or set(flag.domain) != {False, True}:
        raise DeclarationError(f"{s.name}: the mutex's flag {mx.flag!r} must be a boolean "
                               f"variable of {m.name}")
    unknown = sorted(mx.takes - set(m.triggers()))
    if unknown:
        raise DeclarationError(f"{s.name}: the mutex takes unknown triggers {unknown}")
    both = sorted(mx.takes & set(s.sync))
    if both:
        raise DeclarationError(f"{s.name}: sync triggers {both} take the mutex; a lock is "
                               "taken by one instance at a time")


def _reads_own(s: System, what: str, reads: tuple[str, ...], allowed: set[str]) -> None:
    unknown = sorted(set(reads) - allowed)
    if unknown:
        raise DeclarationError(f"{s.name}: {what} reads {unknown}, which the system does not "
                               f"declare; it may read {sorted(allowed)}")

