"""The HTTP server's own guards (slow clients get a bounded time) and its writes.

uvicorn bounds an idle keep-alive connection (``timeout_keep_alive``) but not
a client that opens a connection and sends its request head a byte at a
time: it holds the connection, and enough of them hold every file descriptor
the process has. :func:`guarded_http_protocol` is uvicorn's own protocol
with one addition: a request's head (request line and headers) must arrive
within ``head_timeout`` seconds of the connection opening (or of the previous
response, on a kept-alive connection), else the server answers ``408`` and
closes. A slow *body* is bounded in the ASGI middleware instead
(:class:`disco_service._middleware.RequestContextMiddleware`), where the app
is reading it. Written here because uvicorn has no such setting, and swapping
the server for one that has (hypercorn's ``read_timeout``) would change more
than this.

Writes: uvicorn writes a response's head and its body with a write each, so a
small response left the process as two sends (two segments, with TCP_NODELAY)
and woke its client twice. :class:`_TurnWriter` holds a write until the next
one or the end of the loop turn: the head and a body sent right after it (every
non-streamed response) leave together, the moment the body is written; a
streamed response's head still leaves at the end of the turn it was written
in, never later.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    _HTTPTOOLS = True
except ImportError:  # uvicorn without its [standard] extra: h11 only
    HttpToolsProtocol = H11Protocol  # type: ignore[misc,assignment]
    _HTTPTOOLS = False

from disco_common.errors import ErrorBody, ErrorCode, ErrorResponse

__all__ = ["guarded_http_protocol"]


def _timeout_response() -> bytes:
    body = (
        ErrorResponse(
            error=ErrorBody(
                code=ErrorCode.REQUEST_TIMEOUT.value,
                message="The request head was not received in time.",
            )
        )
        .model_dump_json()
        .encode()
    )
    head = (
        "HTTP/1.1 408 Request Timeout\r\n"
        "Content-Type: application/json\r\n"
        "Connection: close\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


_TIMEOUT_RESPONSE = _timeout_response()


class _TurnWriter:
    """The transport a response writes to: a write is held until the next write (both
    leave in one send, at once) or the end of the loop turn (``call_soon``).

    Not until the end of the turn for both: what runs after the body is written
    (the request's metrics, spans and logs) would delay the answer. Closing sends
    what is held first. One per connection, so responses keep their order.
    """

    __slots__ = ("_flush_scheduled", "_held", "_loop", "transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._flush_scheduled = False

    def write(self, data: bytes) -> None:
        if not data:
            return
        held = self._held
        if held is not None:
            self._held = None
            self.transport.writelines((held, data))
            return
        self._held = data
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        held, self._held = self._held, None
        if held is not None and not self.transport.is_closing():
            self.transport.write(held)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def is_closing(self) -> bool:
        return self.transport.is_closing()


def _coalesced(cycle: object, writer: _TurnWriter) -> None:
    """Point a request's response cycle at the connection's :class:`_TurnWriter`."""
    if cycle is not None and getattr(cycle, "transport", None) is writer.transport:
        cycle.transport = writer  # type: ignore[attr-defined]


class _HeadTimer:
    """The head bound, mixed into a uvicorn protocol class (see the module docs)."""

    head_timeout: float = 10.0
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    _head_timer: asyncio.TimerHandle | None = None
    _awaiting_head = False
    _writer: _TurnWriter | None = None

    def _make_writer(self) -> None:
        self._writer = _TurnWriter(self.transport, self.loop)

    def _coalesce(self, cycle: object) -> None:
        if self._writer is not None:
            _coalesced(cycle, self._writer)

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._awaiting_head = True
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        self._awaiting_head = False
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._awaiting_head or self.transport.is_closing():
            return
        self.transport.write(_TIMEOUT_RESPONSE)
        self.transport.close()


class _GuardedH11(_HeadTimer, H11Protocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._make_writer()
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        self._coalesce(self.cycle)
        if self.conn.their_state is not h11.IDLE:
            self._disarm_head_timer()  # the head is in: the app takes it from here

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm_head_timer()  # the next request on this connection gets the same bound


class _GuardedHttpTools(_HeadTimer, HttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._make_writer()
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        self._disarm_head_timer()
        super().on_headers_complete()
        # The cycle's task has not run yet: its writes all go through the writer.
        self._coalesce(self.cycle)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self.pipeline:
            self._arm_head_timer()


def guarded_http_protocol(head_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol (httptools when installed, as uvicorn's ``auto``
    picks, else h11), refusing a request head slower than ``head_timeout`` seconds."""
    base: type[asyncio.Protocol] = _GuardedHttpTools if _HTTPTOOLS else _GuardedH11
    return type(f"Guarded{base.__name__}", (base,), {"head_timeout": head_timeout})
