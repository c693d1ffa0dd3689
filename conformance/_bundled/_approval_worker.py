"""The approval runtime in a thread of its own, parked at its seams (see ``_approval_adapter``).

The runtime chains its steps (``execute`` checkpoints, enters the handler, commits,
checkpoints the result and answers in one call), while the model takes them one at a
time. So each instance's runtime lives in a thread of its own (SQLite connections belong
to the thread that opened them) and its calls are *parked* at the runtime's own seams:
the crash hook at ``R1``, at ``handler_entered``, ``R5`` (after the commit) and ``R6``,
and the injectable lookup function. :class:`_Worker` resumes a parked call with an
instruction (go on, lose the answer, crash here, answer the lookup from a source).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from settled.impl.approval._approval import HANDLER_ENTERED, ApprovalRuntime
from settled.impl.approval._reconciler import LookupAnswer
from settled.impl.shared._crash import CrashNow

__all__ = ["PARKS", "WAIT", "LostAnswer"]

PARKS: Final = frozenset({"R1", HANDLER_ENTERED, "R5", "R6"})
WAIT: Final = 60.0  # seconds a parked call may take to reach its next seam


class LostAnswer(ConnectionError):
    """The handler's answer never arrived: not a caller error, so the outcome is uncertain."""


@dataclass(frozen=True, slots=True)
class _Reply:
    kind: str  # parked | done | raised | crashed | ok
    value: Any = None


class _Worker:
    """One instance's runtime, in a thread of its own; runs one runtime call at a time."""

    def __init__(self, open_runtime: Callable[[Callable[[str], None], Any], ApprovalRuntime],
                 answer_lookup: Callable[[str, str, str, Mapping[str, Any]], LookupAnswer]) -> None:
        self._open, self._answer = open_runtime, answer_lookup
        self._inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._outbox: queue.Queue[_Reply] = queue.Queue()
        self._armed: set[str] = set()
        self._runtime: ApprovalRuntime | None = None  # touched by the runtime's thread only
        self.parked: str | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True, name="approval-runtime")
        self._thread.start()
        _check(self._wait())

    # -- the adapter's side ------------------------------------------------------------------
    def call(self, method: str, *args: Any, crash_at: str | None = None,
             **kwargs: Any) -> _Reply:
        if self.parked:
            raise RuntimeError(f"the runtime is still inside a call (at {self.parked})")
        return self._send("call", method, args, crash_at, kwargs)

    def resume(self, instruction: str, arg: Any = None) -> _Reply:
        if not self.parked:
            raise RuntimeError(f"the runtime is not inside a call, so it cannot {instruction}")
        return self._send(instruction, arg)

    def crash(self) -> None:
        """Kill the parked call where it is, or restart an idle runtime from the files."""
        _check(self.resume("crash") if self.parked else self._send("restart"))

    def stop(self) -> None:
        if self._thread.is_alive():
            if self.parked:
                self.crash()
            self._send("stop")
        self._thread.join(WAIT)

    def _send(self, *command: Any) -> _Reply:
        self._inbox.put(command)
        return self._wait()

    def _wait(self) -> _Reply:
        try:
            reply = self._outbox.get(timeout=WAIT)
        except queue.Empty:
            raise RuntimeError(f"the runtime did not reach a seam within {WAIT:.0f}s") from None
        self.parked = reply.value if reply.kind == "parked" else None
        return reply

    # -- the runtime's thread ----------------------------------------------------------------
    def _serve(self) -> None:
        self._outbox.put(self._restart())
        while True:
            command, *rest = self._inbox.get()
            if command == "stop":
                self._close()
                self._outbox.put(_Reply("ok"))
                return
            self._outbox.put(self._restart() if command == "restart" else self._run(*rest))

    def _run(self, method: str, args: tuple[Any, ...], crash_at: str | None,
             kwargs: Mapping[str, Any]) -> _Reply:
        if self._runtime is None:
            return _Reply("raised", RuntimeError("the runtime could not be opened"))
        self._armed = {crash_at} if crash_at else set()
        try:
            return _Reply("done", getattr(self._runtime, method)(*args, **kwargs))
        except CrashNow as crash:  # a hard exit: nothing after the point ran
            restarted = self._restart()  # a new process opens the same files
            return restarted if restarted.kind == "raised" else _Reply("crashed", crash.point)
        except Exception as exc:  # the reply carries it to the adapter's thread
            return _Reply("raised", exc)

    def _restart(self) -> _Reply:
        self._close()
        try:
            self._runtime = self._open(self._hook, self._lookup)
        except Exception as exc:
            return _Reply("raised", exc)
        return _Reply("ok")

    def _close(self) -> None:
        if self._runtime is not None:
            self._runtime.close()
            self._runtime = None

    def _hook(self, point: str) -> None:
        if point in self._armed:
            self._armed.discard(point)
            raise CrashNow(point)
        if point in PARKS:
            self._park(point)

    def _park(self, point: str) -> Any:
        self._outbox.put(_Reply("parked", point))
        instruction, arg = self._inbox.get()
        if instruction == "crash":
            raise CrashNow(point)
        if instruction == "fail":
            raise LostAnswer(f"the answer was lost at {point}")
        if instruction == "crash_at":
            self._armed.add(arg)
        return arg

    def _lookup(self, token: str, tool: str, args: Mapping[str, Any]) -> LookupAnswer:
        source = self._park("lookup")
        return self._answer(source, token, tool, args)


def _check(reply: _Reply) -> _Reply:
    if reply.kind == "raised":
        raise reply.value
    return reply
