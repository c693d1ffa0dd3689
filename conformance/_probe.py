"""What an adapter drives, learnt by building one and closing it again: the machine (or the
system) to check against, its instance count and the variables it cannot observe."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from settled.model import MACHINES, Protocol, System

from ._adapter import Adapter, AdapterError
from ._lockstep import Contract

AdapterFactory = Callable[[], Adapter]


def resolve_machine(machine: str | Protocol | None, adapter: Adapter) -> Protocol:
    """The protocol to check against: a name, a Protocol, or (None) the adapter's own."""
    if isinstance(machine, Protocol):
        return machine
    own = getattr(adapter, "protocol", None)
    if machine is None:
        if not isinstance(own, Protocol):
            raise AdapterError("the adapter has no `protocol` attribute; name the machine")
        return own
    if machine not in MACHINES:
        raise ValueError(f"no machine named {machine!r}; machines are {sorted(MACHINES)}")
    if isinstance(own, Protocol) and own.name == machine:
        return own  # the adapter's own instance of it (its bounds, e.g. its worker count)
    if isinstance(own, Protocol) and own.name != machine:
        raise AdapterError(f"the adapter drives the {own.name!r} machine, not {machine!r}")
    return MACHINES[machine]


def probe(factory: AdapterFactory, machine: str | Protocol | None) -> tuple[Protocol, int,
                                                                          tuple[str, ...]]:
    """Build one adapter to learn the machine, instance count and contract; then close it."""
    adapter = _build(factory)
    try:
        if not isinstance(adapter, Adapter):
            raise AdapterError(f"the adapter factory returned {type(adapter).__name__}, not a "
                               "settled.conformance.Adapter")
        protocol = resolve_machine(machine, adapter)
        instances = getattr(adapter, "instances", None)
        if not isinstance(instances, int) or isinstance(instances, bool) or instances < 1:
            raise AdapterError(f"the adapter's `instances` is {instances!r}; it must be an "
                               "int >= 1")
        contract = Contract(protocol, frozenset(adapter.unobservable))
        return protocol, instances, tuple(sorted(contract.unobservable))
    finally:
        _close(adapter)


def probe_system(factory: AdapterFactory, machine: System | None
                 ) -> tuple[System | None, tuple[str, ...]]:
    """The system to check against (``machine`` if it is one, else the adapter's ``system``
    attribute; None: the adapter drives a machine) and the variables it cannot observe."""
    adapter = _build(factory)
    try:
        own = machine if isinstance(machine, System) else getattr(adapter, "system", None)
        if own is not None and not isinstance(own, System):
            raise AdapterError(f"the adapter's `system` is a {type(own).__name__}, not a "
                               "settled.model System")
        if own is not None and getattr(adapter, "instances", None) != own.instances:
            raise AdapterError(f"the adapter's `instances` is {getattr(adapter, 'instances', None)!r}"
                               f"; its system {own.name!r} has {own.instances}")
        if own is None:
            return None, ()
        if not isinstance(adapter, Adapter):
            raise AdapterError(f"the adapter factory returned {type(adapter).__name__}, not a "
                               "settled.conformance.Adapter")
        contract = Contract(own.machine, frozenset(adapter.unobservable))
        return own, tuple(sorted(contract.unobservable))
    finally:
        _close(adapter)


def _build(factory: AdapterFactory) -> Any:
    """One adapter from the user's factory; what the factory raises is the adapter's error."""
    try:
        return factory()
    except AdapterError:
        raise
    except Exception as exc:
        raise AdapterError(f"the adapter factory raised {type(exc).__name__}: {exc}") from exc


def _close(adapter: Any) -> None:
    close = getattr(adapter, "close", None)
    if callable(close):
        close()
