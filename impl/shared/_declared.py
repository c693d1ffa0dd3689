"""The gate every recorded state change of the implementation passes.

Each store writes a state change and its event in one transaction, through one
function per store (``query/_events.append_event`` for queries, the checkpoint's and
the ledger's ``_log``). Those functions call :func:`require_declared` first:
a (trigger, from, to) that the machine's table does not declare raises
:class:`UndeclaredTransition`, and the transaction, state change included, is
rolled back. So the implementation can only move along edges the model has,
whatever bug a caller carries; the lockstep kit and the trace checker find the
rest (a declared edge taken when its guard does not hold).

The names are the ones the event log records: a transition's logged name
(``observed_as``), its source and its destination state. Steps the log cannot
see (``observed_as=None``: a crash, the business store's own commit that the
approval checkpoint cannot watch) may come before a logged one, exactly as the
trace checker allows: the logged edge's source is then any state those hidden
steps reach from the recorded one.
"""

from __future__ import annotations

from functools import cache

from ...model import MACHINES
from ._errors import SettledError


class UndeclaredTransition(SettledError):
    """A state change the machine's table does not declare; nothing was written."""


def _name(state: object) -> str:
    return str(getattr(state, "value", state))


@cache
def declared_edges(machine: str) -> frozenset[tuple[str, str, str]]:
    """(logged trigger, recorded from state, to state) for every logged edge of ``machine``,
    after any number of hidden steps."""
    protocol = MACHINES[machine]
    hidden: dict[str, set[str]] = {}
    for t in protocol.transitions:
        if t.observable is None:
            for source in t.source:
                hidden.setdefault(_name(source), set()).add(_name(t.target(source)))
    edges: set[tuple[str, str, str]] = set()
    for start in map(_name, protocol.state_names):
        reach, todo = {start}, [start]
        while todo:
            for nxt in hidden.get(todo.pop(), ()):
                if nxt not in reach:
                    reach.add(nxt)
                    todo.append(nxt)
        edges.update((t.observable, start, _name(t.target(s)))
                     for t in protocol.transitions if t.observable is not None
                     for s in t.source if _name(s) in reach)
    return frozenset(edges)


def require_declared(machine: str, trigger: str, source: str, dest: str) -> None:
    """Raise :class:`UndeclaredTransition` unless the table of ``machine`` has this edge."""
    source, dest = _name(source), _name(dest)
    if (trigger, source, dest) not in declared_edges(machine):
        raise UndeclaredTransition(
            f"{machine}: {trigger} from {source!r} to {dest!r} is not a transition the model "
            f"declares; the change was not written. The model's edges from {source!r}: "
            f"{sorted((t, d) for t, s, d in declared_edges(machine) if s == source)}")
