"""The implementation's errors, split by whose fault it was.

``CallerError`` is the caller's mistake: bad input, a stale version, an action
the protocol does not allow in the current state. Fix the call and try again.
``EnvironmentFault`` is the world's: a lost response, a busy database, a
platform that did not answer. The call may be retried *under the same
identity*, never under a new one.

Every error names the value, the state and what to do about it, and every
input error is raised before any row changes.
"""

from __future__ import annotations


class SettledError(Exception):
    """Root of every error the implementation raises on purpose."""


class CallerError(SettledError, ValueError):
    """The caller's mistake; nothing was changed."""


class InvalidInput(CallerError):
    """A value that can never be accepted (wrong type, empty, oversized, unknown field)."""


class NotFound(CallerError, LookupError):
    """An id that names nothing in the store."""


class StaleVersion(CallerError):
    """A version the caller read is no longer current; re-read and try again."""


class NotAllowed(CallerError):
    """The protocol does not allow this action in the current state."""


class InsufficientStock(NotAllowed):
    """An order or stock adjustment asked for more than is in stock; nothing changed (W6)."""

    def __init__(self, sku: str, asked: int, available: int) -> None:
        self.sku, self.asked, self.available = sku, asked, available
        super().__init__(f"sku {sku!r}: asked for {asked}, only {available} in stock; nothing was "
                         "changed, lower the quantity or restock first")

    def __reduce__(self) -> tuple[type[InsufficientStock], tuple[str, int, int]]:
        # Keeps the error picklable across processes despite the custom signature.
        return (type(self), (self.sku, self.asked, self.available))


class IdempotencyConflict(CallerError):
    """The same identity (token, call id, query id) arrived with other arguments."""


class MessagePending(NotAllowed):
    """A newer message's attribution is undecided; ask for confirmation again later (Q9, Q10)."""


class StaleLease(NotAllowed):
    """A worker wrote with an older lease epoch than the row's; nothing changed (Q11)."""


class EnvironmentFault(SettledError):
    """The world failed, not the caller: retry under the same identity."""


class Busy(EnvironmentFault):
    """The database stayed locked past the busy timeout; nothing was written."""


class PlatformUnavailable(EnvironmentFault):
    """The platform did not answer; what it did is unknown.

    ``kind`` names the failure the caller met (``timeout``, ``reset``, ``malformed``,
    ``error``, ``busy``): worth logging, never evidence of what the platform did.
    """

    def __init__(self, message: str, kind: str = "timeout") -> None:
        super().__init__(message)
        self.kind = kind


class LookupFailed(EnvironmentFault):
    """A reconciler lookup did not complete; the outcome is unknown, never ``absent`` (A3)."""
