"""The platform's client over HTTP: :class:`HttpPlatform`, what the query store and the
worker hold in place of the in-process :class:`~._platform.SyntheticPlatform`.

One ``httpx.Client`` with a timeout on every call and no retries of its own; it raises
what its HTTP client raises and never classifies it (the worker does). It is its own room
because a caller needs only this and the wire (:mod:`._http_wire`), never the server of
:mod:`._http`.
"""

from __future__ import annotations

import collections
import functools
import socket
import ssl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import httpx
import msgspec

from ..shared._errors import InvalidInput
from ._http_wire import (
    _CALLER_ERRORS,
    _JSON,
    _Cancelled,
    _Check,
    _encode,
    _Error,
    _Id,
    _Looked,
    _Result,
    _Sql,
    _Submit,
    _Submitted,
)
from ._orders_data import SqlValue, shape_problem
from ._platform import SyntheticPlatform
from ._platform_answers import CancelAnswer, CheckAnswer, LookupAnswer, QueryResult, SubmitAnswer

__all__ = ["DEFAULT_TIMEOUT", "HttpPlatform"]

DEFAULT_TIMEOUT: Final = 10.0  # seconds, per call (connect, write, read, pool)


_Answer = TypeVar("_Answer", bound=msgspec.Struct)
_Made = TypeVar("_Made")


@functools.cache
def _tls() -> ssl.SSLContext:
    # Made once per process: loading the CA bundle costs a tenth of a second, and
    # every worker makes a client. Only an https:// platform would ever use it.
    return ssl.create_default_context()


class HttpPlatform:
    """The platform's remote calls over HTTP, each with ``timeout`` seconds to complete."""

    TARGET: Final = SyntheticPlatform.TARGET
    TARGET_VERSION: Final = SyntheticPlatform.TARGET_VERSION

    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidInput(f"url must be an http:// or https:// address, got {url!r:.80}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise InvalidInput(f"timeout must be a number of seconds > 0, got {timeout!r:.80}")
        self.url, self.timeout = url, float(timeout)
        # TCP_NODELAY: the client writes a request's headers and body apart, and Nagle's
        # algorithm would hold the body for the server's delayed ACK (40 ms a call).
        wire = httpx.HTTPTransport(verify=_tls(), retries=0, socket_options=[
            (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        self._client = httpx.Client(base_url=url, timeout=httpx.Timeout(self.timeout),
                                    transport=wire, headers=_JSON, trust_env=False)
        self.sent: collections.Counter[str] = collections.Counter()  # requests sent, per call

    @contextmanager
    def read_deadline(self, seconds: float) -> Iterator[None]:
        """Calls in the block give up waiting for an answer after ``seconds``: a test's way
        to meet a platform that never answers without waiting out the normal timeout."""
        self._client.timeout = httpx.Timeout(self.timeout, read=seconds)
        try:
            yield
        finally:
            self._client.timeout = httpx.Timeout(self.timeout)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HttpPlatform:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _call(self, route: str, request: msgspec.Struct, answer: type[_Answer]) -> _Answer:
        self.sent[route] += 1
        response = self._client.post(f"/{route}", content=_encode(request))
        if response.status_code >= 500:
            response.raise_for_status()  # httpx.HTTPStatusError: the caller classifies it
        if response.status_code != 200:
            refused = msgspec.json.decode(response.content, type=_Error)
            if refused.error not in _CALLER_ERRORS:
                response.raise_for_status()
            raise _CALLER_ERRORS[refused.error][1](refused.message)
        return msgspec.json.decode(response.content, type=answer)

    @staticmethod
    def _consistent(make: Callable[..., _Made], *args: Any) -> _Made:
        try:
            return make(*args)
        except InvalidInput as exc:  # well-typed, but no answer the platform gives
            raise msgspec.ValidationError(f"the platform's answer is contradictory: {exc}") from exc

    def check(self, sql: object) -> CheckAnswer:
        if not isinstance(sql, str):  # cannot travel as SQL; the same verdict the platform gives
            return CheckAnswer(ok=False, reason=shape_problem(sql))
        got = self._call("check", _Sql(sql), _Check)
        return self._consistent(CheckAnswer, got.ok, got.reason, tuple(got.columns))

    def submit(self, query_id: str, sql: str, fingerprint_extra: str = "") -> SubmitAnswer:
        got = self._call("submit", _Submit(query_id, sql, fingerprint_extra), _Submitted)
        return self._consistent(SubmitAnswer, got.accepted, got.deduplicated,
                                got.status, got.reason)

    def lookup(self, query_id: str) -> LookupAnswer:
        got = self._call("lookup", _Id(query_id), _Looked)
        return self._consistent(LookupAnswer, got.found, got.status,
                                got.submissions_received, got.error)

    def cancel(self, query_id: str) -> CancelAnswer:
        got = self._call("cancel", _Id(query_id), _Cancelled)
        return self._consistent(CancelAnswer, got.found, got.status)

    def result(self, query_id: str) -> QueryResult:
        got = self._call("result", _Id(query_id), _Result)
        rows: tuple[tuple[SqlValue, ...], ...] = tuple(tuple(r) for r in got.rows)
        return self._consistent(QueryResult, got.query_id, tuple(got.columns), rows)
