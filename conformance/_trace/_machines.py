"""The machines the trace checker replays, and the domains of what a log may name.

A machine is a declared protocol with its model bounds dropped (``unbounded``), the
domains its logged parameters range over, and how a configuration is normalised before
it is memoised. ``MACHINES`` is the registry ``register_machine`` fills.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from settled.model import APPROVAL, LEDGER, Config, Protocol, Value, build_query_machine


# --------------------------------------------------------------------------
# Machines: the model the checker replays, and the domains of what is logged
# --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Domain:
    """What a logged value may be, as a test and as words for the report."""

    text: str
    test: Callable[[Value], bool]


def finite(values: Iterable[Value]) -> Domain:
    values = tuple(values)
    allowed = {(type(x), x) for x in values}  # True is not 1 here
    return Domain("one of " + ", ".join(json.dumps(x) for x in values),
                  lambda x: (type(x), x) in allowed)


def integers(low: int) -> Domain:
    return Domain(f"an integer >= {low}", lambda x: type(x) is int and x >= low)


WORKER_NAME = Domain("a worker name (a string or an integer)",
                     lambda x: type(x) is str or type(x) is int)


@dataclass(frozen=True)
class Machine:
    """How the checker replays one declared machine.

    ``worker`` names the parameter that says which worker acts; when set, the
    protocol must be declared for two workers (slot 0: the last worker that
    claimed, slot 1: anyone else), ``claims`` are the logged steps after which
    the acting worker becomes slot 0, and ``worker_vars`` the variables indexed
    by worker slot (swapped when that happens).
    """

    protocol: Protocol
    variables: Mapping[str, Domain]
    worker: str | None = None
    claims: frozenset[str] = frozenset()
    worker_vars: tuple[str, ...] = ()
    # Maps a configuration to the representative of its class (configurations no logged step
    # can tell apart); applied after every logged step.
    canon: Callable[[Config], Config] | None = None

    @classmethod
    def of(cls, protocol: Protocol) -> Machine:
        """A machine with no worker abstraction, checked against its declared domains."""
        return cls(protocol, {v.name: finite(v.domain) for v in protocol.variables if v.observable})


def unbounded(protocol: Protocol) -> Protocol:
    """The protocol without its model bounds (guards declared ``bound=True``)."""
    return replace(protocol, transitions=tuple(
        replace(t, guards=tuple(g for g in t.guards if not g.bound)) for t in protocol.transitions))


def query_machine() -> Machine:
    p = unbounded(build_query_machine(workers=2, max_epoch=3, max_task_version=3))
    # Epochs and versions are bounded in the declaration only to keep exploration finite.
    unbounded_ints = {"lease_epoch": 0, "submit_epoch": 0, "task_version": 1,
                      "authorized_version": 0}
    domains = {v.name: integers(unbounded_ints[v.name]) if v.name in unbounded_ints
               else finite(v.domain) for v in p.variables if v.observable}
    return Machine(p, domains, worker="worker", claims=frozenset({"claim"}), worker_vars=("held",),
                   canon=_stale_leases_forgotten(p))


def _stale_leases_forgotten(p: Protocol) -> Callable[[Config], Config]:
    """A lease older than the row's lease_epoch is as good as none to every guard (it can
    never match the epoch again, which only grows); only a hidden crash tells them apart,
    and a crash only clears it. So a stale lease is recorded as none."""
    names = p.variable_names
    held, epoch = names.index("held"), names.index("lease_epoch")

    def canon(c: Config) -> Config:
        leases, current = c.values[held], c.values[epoch]
        if all(x == 0 or x == current for x in leases):
            return c
        values = list(c.values)
        values[held] = tuple(x if x == current else 0 for x in leases)
        return Config(c.state, tuple(values))
    return canon


MACHINES: dict[str, Machine] = {}


def register_machine(name: str, machine: Machine | Protocol) -> None:
    """Let the checker replay traces of another declared machine."""
    MACHINES[name] = machine if isinstance(machine, Machine) else Machine.of(machine)


register_machine("query", query_machine())
register_machine("approval", APPROVAL)
register_machine("ledger", LEDGER)  # one tool call of an assistant message
