"""The synthetic platform as an HTTP service on the loopback interface, and its client.

Theory of operation. :class:`PlatformServer` serves one platform folder (the
ledger and orders files of :class:`~._platform.SyntheticPlatform`) on
``127.0.0.1`` at an ephemeral port, with the standard library's threading
HTTP server: one thread per connection, each with its own SQLite
connections, HTTP/1.1 keep-alive. Every call is ``POST /<call>`` with a JSON
body, answered with a JSON body (decoded by msgspec into typed structs):

- 200: the answer (``check``, ``submit``, ``lookup``, ``cancel``, ``result``);
- 400, 404, 409: the caller's mistake (``{"error": "invalid_input" | "not_found"
  | "not_allowed", "message": ...}``), raised by the client as the matching
  :class:`~..shared._errors.CallerError`; nothing was changed;
- 503: the platform's own database was busy; 500: it failed otherwise.

:class:`~._http_client.HttpPlatform` is the client the query store and the worker use: an
``httpx.Client`` with a timeout on every call and no retries of its own (a
retry is the worker's decision, under the same ``query_id``). It raises what
its client raises: ``httpx.TimeoutException``, ``httpx.TransportError`` (a
reset, a refused or closed connection), ``httpx.HTTPStatusError`` (a 5xx), a
``msgspec.DecodeError`` (a body that is not the answer). It never classifies
them: the worker does (``_worker.unanswered``), and what proves nothing must
not be read as evidence (Q14, Q15).

Faults are injected at the transport, in the server, one-shot per call
(:class:`TransportFault`, armed with :meth:`PlatformServer.inject`): a
request swallowed before the platform sees it, an answer held past the
client's timeout after the platform acted, a connection reset before or
after, an undecodable body, a 500 or a 503. The platform's own behaviour
(an explicit rejection, a failing execution) stays in its ledger
(:meth:`SyntheticPlatform.inject`), whichever transport carries the calls.

This module is the server; the client is :mod:`._http_client` and the bodies both
sides speak are :mod:`._http_wire`.
"""

from __future__ import annotations

import collections
import enum
import select
import selectors
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

import msgspec

from ..shared._errors import (
    Busy,
    CallerError,
    InvalidInput,
    NotAllowed,
    NotFound,
    PlatformUnavailable,
)
from ._http_wire import (
    _CALLER_ERRORS,
    ROUTES,
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
from ._platform import SyntheticPlatform

__all__ = ["PlatformServer", "TransportFault", "serve_platform"]

# How long the server holds a swallowed request or a late answer when the client never
# gives up (a client without a timeout): then it closes the connection.
HOLD_LIMIT: Final = 60.0


class TransportFault(enum.Enum):
    """One-shot faults of the wire, armed per call on the server."""

    NEVER_ARRIVES = "never_arrives"  # swallowed before the platform: no answer until the client gives up
    SLOW_ANSWER = "slow_answer"  # the platform acts; the answer is held past the client's timeout
    RESET_BEFORE = "reset_before"  # the connection is reset before the platform sees the request
    RESET_AFTER = "reset_after"  # the platform acts, then the connection is reset
    MALFORMED = "malformed"  # the platform acts, the answer is a 200 whose body is not JSON
    ERROR = "error"  # 500 before the platform sees the request
    BUSY = "busy"  # 503 (Retry-After) before the platform sees the request

    @property
    def after(self) -> bool:
        """True when the platform acts on the request before the fault strikes."""
        return self in (TransportFault.SLOW_ANSWER, TransportFault.RESET_AFTER,
                        TransportFault.MALFORMED)


# --------------------------------------------------------------------------- the calls
def _answer(platform: SyntheticPlatform, route: str, body: bytes) -> msgspec.Struct:
    """Run one call on ``platform``; its answer as a wire struct."""
    if route == "check":
        checked = platform.check(msgspec.json.decode(body, type=_Sql).sql)
        return _Check(checked.ok, checked.reason, list(checked.columns))
    if route == "submit":
        sub = msgspec.json.decode(body, type=_Submit)
        taken = platform.submit(sub.query_id, sub.sql, sub.fingerprint_extra)
        return _Submitted(taken.accepted, taken.deduplicated, taken.status, taken.reason)
    qid = msgspec.json.decode(body, type=_Id).query_id
    if route == "lookup":
        looked = platform.lookup(qid)
        return _Looked(looked.found, looked.status, looked.submissions_received, looked.error)
    if route == "cancel":
        cancelled = platform.cancel(qid)
        return _Cancelled(cancelled.found, cancelled.status)
    found = platform.result(qid)
    return _Result(found.query_id, list(found.columns), [list(r) for r in found.rows])


# --------------------------------------------------------------------------- the server
class _Faults:
    """Armed transport faults, per call, taken in the order they were armed.

    A fault is *striking* from the moment a request takes it until the platform's
    side of it is final (nothing done, or the request processed): :meth:`wait`
    lets the kit observe the platform only after that, whatever the client saw.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._armed: dict[str, collections.deque[TransportFault]] = {}
        self._striking: collections.Counter[str] = collections.Counter()

    def arm(self, route: str, fault: TransportFault, count: int) -> None:
        with self._changed:
            self._armed.setdefault(route, collections.deque()).extend([fault] * count)

    def take(self, route: str) -> TransportFault | None:
        with self._changed:
            armed = self._armed.get(route)
            if not armed:
                return None
            self._striking[route] += 1
            return armed.popleft()

    def struck(self, route: str) -> None:
        with self._changed:
            self._striking[route] -= 1
            self._changed.notify_all()

    def wait(self, route: str, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(
                lambda: not self._armed.get(route) and not self._striking[route], timeout)

    def pending(self) -> dict[str, list[TransportFault]]:
        with self._changed:
            return {route: list(armed) for route, armed in self._armed.items() if armed}

    def clear(self, route: str | None) -> None:
        with self._changed:
            if route is None:
                self._armed.clear()
            else:
                self._armed.pop(route, None)
            self._changed.notify_all()


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True  # server_close() joins every connection's thread

    def __init__(self, directory: Path, polls: int | None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.directory, self.polls = directory, polls
        self.faults = _Faults()
        self.open: set[socket.socket] = set()
        self.open_lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a worker's calls share one connection
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.open_lock:
            self.server.open.add(self.connection)
        # This thread's own SQLite connections (they cannot move between threads).
        self.platform = SyntheticPlatform(self.server.directory,
                                          auto_complete_after_polls=self.server.polls)

    def finish(self) -> None:
        self.platform.close()
        with self.server.open_lock:
            self.server.open.discard(self.connection)
        with suppress(OSError):  # reset by us (a fault) or by the client
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a test service: no access log on stderr

    def do_POST(self) -> None:
        route = self.path.lstrip("/")
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if route not in ROUTES:
            self._send(404, _Error("no_route", f"no call {route!r}; the calls are {list(ROUTES)}"))
            return
        fault = self.server.faults.take(route)
        if fault is None:
            self._send(*self._run(route, body))
            return
        answer = None
        if fault.after:
            answer = _encode(self._run(route, body)[1])
        self.server.faults.struck(route)  # the platform's side is final from here on
        self._strike(fault, answer)

    def _run(self, route: str, body: bytes) -> tuple[int, msgspec.Struct]:
        try:
            return 200, _answer(self.platform, route, body)
        except msgspec.DecodeError as exc:
            return 400, _Error("invalid_input", f"the {route} request body is not valid: {exc}")
        except CallerError as exc:
            name = ("not_found" if isinstance(exc, NotFound) else
                    "not_allowed" if isinstance(exc, NotAllowed) else "invalid_input")
            return _CALLER_ERRORS[name][0], _Error(name, str(exc))
        except (Busy, PlatformUnavailable) as exc:
            busy = isinstance(exc, Busy) or getattr(exc, "kind", "") == "busy"
            return (503 if busy else 500), _Error("unavailable", str(exc))

    def _send(self, status: int, answer: msgspec.Struct | bytes) -> None:
        data = answer if isinstance(answer, bytes) else _encode(answer)
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        if status == 503:
            self.send_header("retry-after", "1")
        self.end_headers()
        self.wfile.write(data)

    def _strike(self, fault: TransportFault, answer: bytes | None) -> None:
        if fault is TransportFault.ERROR:
            self._send(500, _Error("internal", "the platform failed before reading the request"))
        elif fault is TransportFault.BUSY:
            self._send(503, _Error("busy", "the platform is busy; nothing was read"))
        elif fault is TransportFault.MALFORMED:
            self._send(200, b'{"accepted": tru')  # cut short: not JSON
        elif fault in (TransportFault.RESET_BEFORE, TransportFault.RESET_AFTER):
            self._reset()
        else:  # NEVER_ARRIVES, SLOW_ANSWER: nothing until the client gives up and closes
            select.select([self.connection], [], [], HOLD_LIMIT)
            if answer is not None:  # the slow answer, too late for anyone to read it
                with suppress(OSError):
                    self._send(200, answer)
            self.close_connection = True

    def _reset(self) -> None:
        """Close with SO_LINGER 0: the client meets a TCP reset, not an orderly close."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.rfile.close()  # the last reference but the socket's own
        self.connection.close()


class PlatformServer:
    """The platform of ``directory`` served over HTTP on 127.0.0.1 (an ephemeral port).

    ``with PlatformServer(directory) as server:`` starts it, ``server.url`` is
    its address, and leaving the block stops it: every open connection is shut,
    every connection thread joined, so no SQLite connection outlives it.
    """

    def __init__(self, directory: str | Path, *, auto_complete_after_polls: int | None = None) -> None:
        directory = Path(directory)
        SyntheticPlatform(directory, auto_complete_after_polls=auto_complete_after_polls).close()
        self._server = _Server(directory, auto_complete_after_polls)
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread = threading.Thread(target=self._serve, name=f"platform {self.url}", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with selectors.DefaultSelector() as ready:
            ready.register(self._server, selectors.EVENT_READ)
            ready.register(self._wake_r, selectors.EVENT_READ)
            while True:
                events = ready.select()
                if any(key.fileobj is self._wake_r for key, _ in events):
                    return
                self._server.handle_request()  # accepts the waiting connection

    def inject(self, route: str, fault: TransportFault, count: int = 1) -> None:
        """Arm ``fault`` for the next ``count`` calls of ``route`` (``submit``, ``lookup``, …)."""
        if route not in ROUTES:
            raise InvalidInput(f"route must be one of {list(ROUTES)}, got {route!r:.80}")
        if not isinstance(fault, TransportFault):
            raise InvalidInput(f"fault must be a TransportFault, got {fault!r:.80}")
        if type(count) is not int or count < 1:
            raise InvalidInput(f"count must be an int >= 1, got {count!r:.80}")
        self._server.faults.arm(route, fault, count)

    def wait_struck(self, route: str, timeout: float = HOLD_LIMIT) -> bool:
        """Wait until no fault of ``route`` is armed or striking: True, or False on ``timeout``.

        A client that gave up (a timeout) may return before the server even read
        its request; after this the platform has acted on it, or never will.
        """
        return self._server.faults.wait(route, timeout)

    def pending_faults(self) -> dict[str, list[TransportFault]]:
        return self._server.faults.pending()

    def clear_faults(self, route: str | None = None) -> None:
        self._server.faults.clear(route)

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        self._wake_w.send(b"x")
        self._thread.join()
        with self._server.open_lock:
            for conn in list(self._server.open):
                with suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)  # wakes a thread reading or holding it
        self._server.server_close()  # joins the connection threads
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> PlatformServer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


@contextmanager
def serve_platform(directory: str | Path, *,
                   auto_complete_after_polls: int | None = None) -> Iterator[PlatformServer]:
    """A started :class:`PlatformServer` for the block; stopped when it ends."""
    server = PlatformServer(directory, auto_complete_after_polls=auto_complete_after_polls)
    try:
        yield server
    finally:
        server.close()
