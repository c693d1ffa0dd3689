"""What the conformance kit needs from an implementation: one small interface.

An adapter drives one implementation through the steps of a declared
machine, instance by instance, and reports what the implementation holds in
the machine's own terms. The kit never looks further: another database or
another language behind an event log is checked by writing one adapter.

The contract:

- ``perform(i, trigger, params)`` makes the implementation take the model
  step ``trigger`` on instance ``i``: a user action, a worker step, a platform
  event or a crash. Where the step names the world's behaviour (a lost
  answer, a timeout) the adapter arranges it, e.g. by arming a platform fault
  before the call. If the implementation refuses the action as a caller
  mistake, ``perform`` raises :class:`Refused` and must have changed nothing.
  The kit asks for a step the model does not enable only for the triggers the
  model declares ``refusable``.
- ``observe(i)`` returns the projection: ``{"state": ..., <variable>: ...}``
  with *every* variable of the machine that is not a ghost (ghosts are the
  model's own history and never observed), in the model's words and within
  the variable's domain. A variable the implementation cannot show is named
  in ``unobservable``; the report then says it was NOT CHECKED. A missing
  key, an unknown key or a value of another kind is an :class:`AdapterError`;
  a value of its kind outside the domain is a divergence (the implementation's).
- ``trace_lines()`` returns the implementation's event log in the public
  ``settled.trace/1`` format, for the trace checker. A run that took logged
  steps with an empty or unreadable log is an :class:`AdapterError`.
- ``close()`` releases files and connections.
- ``version()`` (optional) returns a value that changes whenever anything
  ``observe`` could report may have changed: a database's change counters
  with what the adapter itself keeps. The instance a step acts on is always
  observed afresh; the others' observations are reused while it is unchanged
  (after a refused action, most often). The default, None, has every
  instance observed after every step. The kit holds an adapter to its word:
  a reused observation that disagrees with the model is observed again, and
  at the end of every run that reused one every instance is observed afresh;
  a difference under an unchanged version is an :class:`AdapterError`.

- ``recover_crash(i, trigger, params)`` (optional, for the crash sweep,
  ``conformance/_lockstep/_crash_sweep.py``): a crash at a durable boundary unwound the
  step ``trigger`` on ``i`` with no cleanup (a
  :class:`~settled.impl.shared._crash.CrashNow` raised at a commit or after a
  platform call; it may have left a transaction open); close what the dead
  process held and open the implementation again from its durable state, as
  a restart does, taking no model step of its own beyond the restart the
  model's crash transitions declare. Without it the sweep reports the
  machine NOT CHECKED.

A *system's* adapter (an attribute ``system``, see ``conformance/README.md``)
also gets ``perform(None, trigger, params)`` for a synchronised step or a step
of the system itself, performed once, and ``observe(None)``, which returns the
system's own variables.

An exception raised by the adapter's own code (a ``KeyError`` in its trigger
map) is an :class:`AdapterError`, reported apart from the implementation's
errors: it says the adapter is wrong, not the implementation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Mapping
from typing import ClassVar

from settled.model import Protocol, Value


class Refused(Exception):
    """The implementation refused an action, as a caller's mistake."""


class AdapterError(Exception):
    """The adapter broke its contract (its own exception, a bad observation or log).

    Never a pass and never a divergence: the campaign stops and says what the
    adapter got wrong, so a fault in the glue is not blamed on the implementation.
    """


class Adapter(ABC):
    """Drives one implementation of ``protocol`` with ``instances`` instances."""

    protocol: Protocol
    instances: int
    # Non-ghost variables this implementation cannot show; each is reported as NOT CHECKED.
    unobservable: ClassVar[frozenset[str]] = frozenset()

    @abstractmethod
    def perform(self, instance: int, trigger: str, params: Mapping[str, Value]) -> None:
        """Take one model step; :class:`Refused` (and no change) if the implementation refuses."""

    @abstractmethod
    def observe(self, instance: int) -> Mapping[str, Value]:
        """The implementation's state of ``instance`` as model names and values."""

    @abstractmethod
    def trace_lines(self) -> Iterable[str]:
        """The implementation's event log as ``settled.trace/1`` JSON lines."""

    def recorded_error(self, instance: int) -> str | None:
        """The implementation's own error text recorded for ``instance`` (a failed query's or
        call's error), quoted in a divergence message; None when it recorded none. Optional."""
        return None

    def version(self) -> Hashable | None:
        """A value that changes whenever anything :meth:`observe` reports may have changed;
        None (the default): no such value, observe every instance after every step. Optional."""
        return None

    def recover_crash(self, instance: int, trigger: str, params: Mapping[str, Value]) -> None:
        """A crash at a durable boundary unwound ``trigger`` on ``instance``: restart what died
        from the durable state (see the module's contract). Optional: the crash sweep reports
        an adapter without it as NOT CHECKED."""
        raise NotImplementedError(f"{type(self).__name__} has no recover_crash")

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release files and connections."""
