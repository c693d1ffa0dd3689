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
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Final, Literal

from ._errors import InvalidInput

__all__ = ["CRASH_EXIT_CODE", "CRASH_POINTS", "CrashNow", "CrashPoints"]

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
