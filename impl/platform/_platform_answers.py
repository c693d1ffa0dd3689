"""What the platform's calls answer, and the faults that can strike them.

The vocabulary both transports share: the in-process :class:`~._platform.SyntheticPlatform`
and the HTTP client (:class:`~._http_client.HttpPlatform`) answer with these values, and
the query store and the worker read them through :class:`PlatformClient`. It is its own
room because it is what the caller sees of the platform, whichever side carries the call;
how the platform decides its answers lives in :mod:`._platform`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, Protocol

from ..shared._errors import InvalidInput
from ._orders_data import SqlValue

__all__ = [
    "CANCEL_AFTER",
    "CANCEL_BEFORE",
    "FAULT_KIND",
    "LOOKUP_FAULTS",
    "SUBMIT_AFTER",
    "SUBMIT_BEFORE",
    "CancelAnswer",
    "CheckAnswer",
    "Fault",
    "LookupAnswer",
    "PlatformClient",
    "PlatformStatus",
    "QueryResult",
    "SubmitAnswer",
]


class PlatformStatus(enum.Enum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Fault(enum.Enum):
    """One-shot faults; each is consumed by the next call it applies to."""

    LOST_RESPONSE = "lost_response"  # submit or cancel is processed, the answer is lost
    UNDELIVERED = "undelivered"  # submit never arrives: nothing stored, nothing counted
    REJECT = "reject"  # a submit that would store a new submission is refused instead
    LOOKUP_TIMEOUT = "lookup_timeout"  # lookup: nothing learnt, no poll counted
    CANCEL_TIMEOUT = "cancel_timeout"  # cancel never arrives: nothing changed
    EXEC_FAIL = "exec_fail"  # the next completion fails with a runtime error
    # Every other failure that proves nothing (Q14, Q15, Q21), for every call alike:
    RESET_BEFORE = "reset_before"  # the connection resets before the request arrives
    RESET_AFTER = "reset_after"  # the request is processed, then the connection resets
    MALFORMED = "malformed"  # the request is processed, the answer cannot be decoded
    ERROR = "error"  # the platform answers an internal error before processing anything
    BUSY = "busy"  # the platform's own database is locked: nothing is processed


# What the caller meets for each fault: one kind (and one text) for a failure before and
# after processing, so the caller can never tell whether the platform acted.
FAULT_KIND: Final = {Fault.LOST_RESPONSE: "timeout", Fault.UNDELIVERED: "timeout",
                     Fault.LOOKUP_TIMEOUT: "timeout", Fault.CANCEL_TIMEOUT: "timeout",
                     Fault.RESET_BEFORE: "reset",
                     Fault.RESET_AFTER: "reset", Fault.MALFORMED: "malformed",
                     Fault.ERROR: "error", Fault.BUSY: "busy"}
# Submit faults that strike before the platform stores anything, and after it did.
SUBMIT_BEFORE: Final = (Fault.UNDELIVERED, Fault.RESET_BEFORE, Fault.ERROR, Fault.BUSY)
SUBMIT_AFTER: Final = (Fault.LOST_RESPONSE, Fault.RESET_AFTER, Fault.MALFORMED)
# Lookup faults: a lookup changes nothing on the platform, so before and after are one.
LOOKUP_FAULTS: Final = (Fault.LOOKUP_TIMEOUT, Fault.RESET_BEFORE, Fault.RESET_AFTER,
                        Fault.MALFORMED, Fault.ERROR, Fault.BUSY)
# Cancel faults, like submit's: before the platform saw the request, and after it acted on it
# (a running submission cancelled, a finished one left as it was).
CANCEL_BEFORE: Final = (Fault.CANCEL_TIMEOUT, Fault.RESET_BEFORE, Fault.ERROR, Fault.BUSY)
CANCEL_AFTER: Final = (Fault.LOST_RESPONSE, Fault.RESET_AFTER, Fault.MALFORMED)


@dataclass(frozen=True, slots=True)
class CheckAnswer:
    ok: bool
    reason: str | None
    columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.ok != (self.reason is None) or (not self.ok and self.columns):
            raise InvalidInput(f"CheckAnswer(ok={self.ok}, reason={self.reason!r}) is "
                               "contradictory: a passed check has no reason, a failed one no columns")


@dataclass(frozen=True, slots=True)
class SubmitAnswer:
    accepted: bool
    deduplicated: bool = False
    status: PlatformStatus | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        refused = not (self.accepted or self.deduplicated or self.status) and bool(self.reason)
        taken = self.accepted and self.reason is None and self.status is not None
        if not (refused or taken):
            raise InvalidInput(f"SubmitAnswer(accepted={self.accepted}, status={self.status}, "
                               f"reason={self.reason!r}) is contradictory")


@dataclass(frozen=True, slots=True)
class LookupAnswer:
    found: bool
    status: PlatformStatus | None
    submissions_received: int
    error: str | None = None  # the platform's failure text when status is FAILED

    def __post_init__(self) -> None:
        if self.found != (self.status is not None) or self.submissions_received < 0:
            raise InvalidInput(f"LookupAnswer(found={self.found}, status={self.status}, "
                               f"submissions_received={self.submissions_received}) is contradictory")


@dataclass(frozen=True, slots=True)
class CancelAnswer:
    found: bool
    status: PlatformStatus | None

    def __post_init__(self) -> None:
        if self.found != (self.status is not None):
            raise InvalidInput(f"CancelAnswer(found={self.found}, status={self.status}) is contradictory")


@dataclass(frozen=True, slots=True)
class QueryResult:
    query_id: str
    columns: tuple[str, ...]
    rows: tuple[tuple[SqlValue, ...], ...]

    def __post_init__(self) -> None:
        if any(len(row) != len(self.columns) for row in self.rows):
            raise InvalidInput(f"result of {self.query_id!r} has rows that do not match "
                               f"its {len(self.columns)} columns")


class PlatformClient(Protocol):
    """The platform's remote calls, as the query store and the worker make them.

    Two transports implement it: :class:`SyntheticPlatform` itself (in-process:
    a failed call raises :class:`PlatformUnavailable` naming its kind) and
    :class:`~._http_client.HttpPlatform` (over HTTP on the loopback interface: a failed
    call raises what its HTTP client raises, a timeout, a reset, an undecodable
    body, a 5xx status). The worker classifies either (``_worker.unanswered``).
    """

    @property
    def TARGET(self) -> str: ...

    @property
    def TARGET_VERSION(self) -> int: ...

    def check(self, sql: object) -> CheckAnswer: ...

    def submit(self, query_id: str, sql: str, fingerprint_extra: str = "") -> SubmitAnswer: ...

    def lookup(self, query_id: str) -> LookupAnswer: ...

    def cancel(self, query_id: str) -> CancelAnswer: ...

    def result(self, query_id: str) -> QueryResult: ...

