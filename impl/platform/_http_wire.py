"""The wire between :class:`~._http.PlatformServer` and :class:`~._http_client.HttpPlatform`.

The calls (``POST /<call>``), the JSON bodies each one carries, as msgspec structs, and
the caller's mistakes an error body names with the status it travels under. Server and
client both speak it and neither owns it, so it is its own room: a change of the wire is
one module, read by both sides.
"""

from __future__ import annotations

from typing import Final

import msgspec

from ..shared._errors import CallerError, InvalidInput, NotAllowed, NotFound
from ._platform_answers import PlatformStatus

__all__ = ["ROUTES"]

ROUTES: Final = ("check", "submit", "lookup", "cancel", "result")


class _Sql(msgspec.Struct, forbid_unknown_fields=True):
    sql: str


class _Submit(msgspec.Struct, forbid_unknown_fields=True):
    query_id: str
    sql: str
    fingerprint_extra: str = ""


class _Id(msgspec.Struct, forbid_unknown_fields=True):
    query_id: str


class _Check(msgspec.Struct):
    ok: bool
    reason: str | None
    columns: list[str]


class _Submitted(msgspec.Struct):
    accepted: bool
    deduplicated: bool
    status: PlatformStatus | None
    reason: str | None


class _Looked(msgspec.Struct):
    found: bool
    status: PlatformStatus | None
    submissions_received: int
    error: str | None


class _Cancelled(msgspec.Struct):
    found: bool
    status: PlatformStatus | None


class _Result(msgspec.Struct):
    query_id: str
    columns: list[str]
    rows: list[list[int | float | str | None]]


class _Error(msgspec.Struct):
    error: str
    message: str


_CALLER_ERRORS: Final[dict[str, tuple[int, type[CallerError]]]] = {
    "invalid_input": (400, InvalidInput), "not_found": (404, NotFound),
    "not_allowed": (409, NotAllowed)}
_JSON: Final = {"content-type": "application/json"}
_encode = msgspec.json.Encoder().encode
