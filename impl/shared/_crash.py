"""Named crash points: where a worker can die between two durable facts.

Each point sits *between* transactions, never inside one, so a crash there
leaves exactly the state a real power cut at that moment would leave:

- ``after_submitting_commit``: ``submitting`` is committed, the platform has
  not been called (Q12, Q13);
- ``after_platform_stored``: the submit call returned (with no fault armed
  the platform stored the submission), the worker has not recorded what it
  learnt (Q13); the model's ``crash_after_platform_stored``;
- ``after_terminal_stored``: the terminal state and its result
  notification are committed (one transaction), the worker has not gone
  on; recovery must neither lose nor repeat the notification (Q24, Q25).

A :class:`CrashPoints` object is armed with the points to die at and a mode:
``"raise"`` raises :class:`CrashNow`, which unwinds without any cleanup (the
in-process lockstep kit then drops the worker and opens a fresh one);
``"exit"`` calls ``os._exit(77)`` (child-process crash tests). ``CrashNow``
derives from ``BaseException`` so that no ``except Exception`` on the way up
can swallow it and carry on as if the process had survived.

Durable boundaries: the named points above are the protocol's windows; every
other place a crash can fall is a *boundary*, reported (never acted on) by the
code that crosses it: :mod:`._db` and :mod:`._pg` just before and just after
each ``COMMIT`` (``before_commit`` / ``after_commit``), and a client wrapped
by :func:`watched` after each call to the far side (``after_call``). A boundary
costs nothing until a hook is installed (:func:`install_boundary_hook`): the
conformance kit's crash sweep installs one that counts the boundaries of an
operation and raises :class:`CrashNow` (or exits) at the k-th. The far side's
own commits, made inside a watched call, and the writes a test makes as the
world (:func:`unwatched`) are not the implementation's boundaries.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final, Literal, TypeVar

from ._errors import InvalidInput

__all__ = ["BOUNDARY_KINDS", "CRASH_EXIT_CODE", "CRASH_POINTS", "BoundaryHook", "CrashNow",
           "CrashPoints", "boundary", "commit_boundary", "install_boundary_hook", "unwatched",
           "watched"]

CRASH_POINTS: Final = ("after_submitting_commit", "after_platform_stored", "after_terminal_stored")
CRASH_EXIT_CODE: Final = 77

Mode = Literal["raise", "exit"]


class CrashNow(BaseException):
    """The process 'dies' here; nothing after this point runs."""

    def __init__(self, point: str) -> None:
        super().__init__(f"crash at {point!r}")
        self.point = point


class CrashPoints:
    """The armed crash points of one worker; each fires once, then disarms."""

    def __init__(self, armed: Iterable[str] = (), mode: Mode = "raise") -> None:
        if mode not in ("raise", "exit"):
            raise InvalidInput(f"crash mode must be 'raise' or 'exit', got {mode!r:.80}")
        self.mode: Mode = mode
        self._armed: set[str] = set()
        self.reached: list[str] = []
        for point in armed:
            self.arm(point)

    def arm(self, point: str) -> None:
        if point not in CRASH_POINTS:
            raise InvalidInput(f"unknown crash point {point!r:.80}; the points are {list(CRASH_POINTS)}")
        self._armed.add(point)

    @property
    def armed(self) -> frozenset[str]:
        return frozenset(self._armed)

    def hit(self, point: str) -> None:
        """Called by the worker at ``point``; dies there if the point is armed."""
        if point not in CRASH_POINTS:
            raise InvalidInput(f"unknown crash point {point!r:.80}; the points are {list(CRASH_POINTS)}")
        self.reached.append(point)
        if point not in self._armed:
            return
        self._armed.discard(point)
        if self.mode == "exit":
            os._exit(CRASH_EXIT_CODE)
        raise CrashNow(point)


# --------------------------------------------------------------------------- boundaries
BOUNDARY_KINDS: Final = ("before_commit", "after_commit", "after_call")
BoundaryHook = Callable[[str, str], None]  # (kind, where), e.g. ("after_commit", "agent.db")
_HOOKS: list[BoundaryHook] = []
_LOCAL = threading.local()  # .outside: how many unwatched scopes this thread is in


def install_boundary_hook(hook: BoundaryHook) -> Callable[[], None]:
    """Call ``hook(kind, where)`` at every durable boundary, in whichever thread crosses it;
    returns the function that removes it. ``hook`` may raise :class:`CrashNow` or exit."""
    _HOOKS.append(hook)

    def remove() -> None:
        if hook in _HOOKS:
            _HOOKS.remove(hook)
    return remove


def _outside() -> int:
    found: int = getattr(_LOCAL, "outside", 0)
    return found


def boundary(kind: str, where: str) -> None:
    """Report a durable boundary to the installed hooks (none in production)."""
    if not _HOOKS or _outside():
        return
    for hook in tuple(_HOOKS):
        hook(kind, where)


def commit_boundary(kind: str, conn: Any) -> None:
    """A commit boundary of ``conn``: named by its database file (SQLite) or ``postgresql``.
    Reads the name only when a hook is installed."""
    if not _HOOKS or _outside():
        return
    where = "postgresql"
    if isinstance(conn, sqlite3.Connection):
        rows = conn.execute("PRAGMA database_list").fetchall()
        where = (os.path.basename(str(rows[0][2])) or "memory") if rows else "sqlite"
    boundary(kind, where)


@contextmanager
def unwatched() -> Iterator[None]:
    """Boundaries crossed in this scope (this thread) are not the implementation's: the far
    side's own commits inside a call to it, a test's writes as the world."""
    _LOCAL.outside = _outside() + 1
    try:
        yield
    finally:
        _LOCAL.outside -= 1


T = TypeVar("T")


class _Watched:
    """A client whose every public call is a boundary after it returns (or raises)."""

    def __init__(self, client: Any, name: str) -> None:
        self._client, self._name = client, name

    @property
    def wrapped(self) -> Any:
        """The client itself (what a test arms faults on)."""
        return self._client

    def __getattr__(self, attr: str) -> Any:
        found = getattr(self._client, attr)
        if attr.startswith("_") or not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                with unwatched():
                    return found(*args, **kwargs)
            finally:
                boundary("after_call", f"{self._name}.{attr}")
        return call


def watched(client: T, name: str) -> T:
    """``client`` with a boundary after each public call (the far side's own commits inside
    it are not the caller's). Attributes that are not methods pass through unchanged."""
    return _Watched(client, name)  # type: ignore[return-value]
