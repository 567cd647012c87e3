"""Requests answered with one JSON body, without the SDK's per-request machinery.

The SDK's entries make things per request that a request needing no stream
does not use: for a 2025 session's request, a transport, a dispatcher and a
task group (``McpTransport._serve``); for a 2026-07-28 request, the handler in
a task of its own, a stream for what it might notify and a second task
watching for the client's disconnect. Together about half a millisecond to one
millisecond a call that the A2A door does not pay (issue 38's benchmark). So
the ``tools/call`` and ``tools/list`` that need no stream are served here by
the SDK's single-request entry (``serve_one``: the same handlers, middleware
and results) in :func:`serve_alone`; whatever these checks do not take (a
malformed request, a header to refuse, a progress token) goes to the SDK's
entry, which says what is wrong with it.

A 2026-07-28 call (:func:`modern_call`) runs in a :class:`PlainCall`, which
keeps what the SDK's stream mode gave:

- a client that closes its connection cancels the call (how the 2026-07-28
  protocol cancels): the handler is cancelled and tells the agent to stop;
- a call still running after 15 s commits the response to
  ``text/event-stream`` and pings every 15 s, so that a proxy's idle timeout
  cannot close it; the answer is then the stream's one event.

That is one watcher task and one timer a call; a stream is only made for a
call that needs one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import structlog
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import modern_error_data, serve_one
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import (
    MCP_PARAM_HEADER_PREFIX,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.message import MessageMetadata, ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "PING_SECONDS",
    "OneExchange",
    "PlainCall",
    "is_plain_call",
    "modern_call",
    "serve_alone",
    "session_request",
]

_log = structlog.get_logger("disco_gateway.mcp")

PING_SECONDS = 15.0
"""How long a call is answered plainly before its response becomes an event stream."""

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]
_PING: Message = {"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True}


_SESSION_METHODS = frozenset({"tools/call", "tools/list"})
_PARAM_HEADER = MCP_PARAM_HEADER_PREFIX.lower()


def session_request(
    request: Request, message: dict[str, Any] | None
) -> types.JSONRPCRequest | None:
    """A 2025 session's request :func:`serve_alone` may answer: a well-formed ``tools/call``
    or ``tools/list`` with the headers the SDK's transport asks for (the caller knows it
    needs no stream)."""
    if message is None or message.get("method") not in _SESSION_METHODS:
        return None
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip()
    if content_type != "application/json" or not check_accept_headers(request)[0]:
        return None
    try:
        return types.JSONRPCRequest.model_validate(message, by_name=False)
    except ValidationError:
        return None


def modern_call(
    request: Request, message: dict[str, Any] | None
) -> tuple[types.JSONRPCRequest, InboundModernRoute] | None:
    """A 2026-07-28 ``tools/call`` without progress that passes every check of the SDK's
    entry (accepted types, envelope, routing headers), with its route; else None."""
    if not is_plain_call(message) or message is None:
        return None
    has_json, has_sse = check_accept_headers(request)
    if not (has_json and has_sse):
        return None
    if any(name.startswith(_PARAM_HEADER) for name in request.headers):
        return None  # header parameters: the SDK checks them against the tool's schema
    try:
        call = types.JSONRPCRequest.model_validate(message)
    except ValidationError:
        return None
    if find_duplicated_routing_header(request.headers.items()) is not None:
        return None
    route = classify_inbound_request(message, headers=dict(request.headers))
    if not isinstance(route, InboundModernRoute):
        return None
    return call, route


async def serve_alone(
    server: Server[Any],
    request: Request,
    call: types.JSONRPCRequest,
    connection: Connection,
    *,
    modern: bool,
) -> types.JSONRPCResponse | types.JSONRPCError:
    """Serve ``call`` by the SDK's single-request entry; its answer, or its error mapped as
    the SDK's entry for the era maps it."""
    exchange = OneExchange(
        transport=TransportContext(
            kind="streamable-http", can_send_request=False, headers=request.headers
        ),
        request_id=call.id,
        message_metadata=ServerMessageMetadata(request_context=request),
    )
    try:
        result = await serve_one(
            server, exchange, call.method, call.params, connection=connection, lifespan_state={}
        )
    except Exception as exc:
        if modern:
            error = modern_error_data(exc)
        elif (mapped := handler_exception_to_error_data(exc)) is not None:
            error = mapped
        else:
            _log.exception("mcp request failed")
            # What the SDK's dispatcher answers a handler's unmapped error with.
            error = types.ErrorData(code=0, message=str(exc))
        return types.JSONRPCError(jsonrpc="2.0", id=call.id, error=error)
    return types.JSONRPCResponse(jsonrpc="2.0", id=call.id, result=result)


def is_plain_call(message: dict[str, Any] | None) -> bool:
    """Whether a decoded request is a ``tools/call`` whose client asked for no progress."""
    if message is None or message.get("method") != "tools/call" or "id" not in message:
        return False
    params = message.get("params")
    if not isinstance(params, dict):
        return True  # the SDK says what is wrong with it, in JSON either way
    meta = params.get("_meta")
    return not (isinstance(meta, dict) and meta.get("progressToken") is not None)


class PlainCall:
    """One 2026-07-28 call: ``app`` answers it with one JSON body; this watches the client
    and keeps the connection alive (see the module's docstring)."""

    def __init__(self, body: bytes, receive: Receive, send: Send) -> None:
        self._body: bytes | None = body
        self._receive = receive
        self._send = send
        self._task: asyncio.Task[Any] | None = None  # the one answering, set by run()
        self.gone = False
        """The client closed its connection before the answer."""
        self._started = False  # the app began its JSON response
        self._finished = False  # the answer is sent
        self._streaming = False  # committed to text/event-stream
        self._held: list[bytes] = []
        self._sending = asyncio.Lock()
        self._pinger: asyncio.Task[None] | None = None

    async def run(self, app: ASGIApp, scope: Scope) -> None:
        self._task = asyncio.current_task()
        watcher = asyncio.ensure_future(self._watch())
        timer = asyncio.get_running_loop().call_later(PING_SECONDS, self._start_pinging)
        try:
            await app(scope, self.receive, self.send)
        except asyncio.CancelledError:
            if not self.gone or self._task is None:
                raise
            self._task.uncancel()  # our own cancel: the client left, nobody to answer
        finally:
            timer.cancel()
            watcher.cancel()
            if self._pinger is not None:
                self._pinger.cancel()

    async def receive(self) -> Message:
        """The body read by the door, then what the client sends (its disconnect)."""
        if self.gone:
            return {"type": "http.disconnect"}
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        return await self._receive()

    async def send(self, message: Message) -> None:
        if not self._streaming:
            self._started = True
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self._finished = True
            await self._send(message)
            return
        # Committed to a stream: the app's JSON answer becomes its one event.
        if message["type"] != "http.response.body":
            return
        self._held.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        event = b"event: message\r\ndata: " + b"".join(self._held) + b"\r\n\r\n"
        async with self._sending:
            self._finished = True
            await self._send({"type": "http.response.body", "body": event, "more_body": False})

    async def _watch(self) -> None:
        try:
            while (await self._receive())["type"] != "http.disconnect":
                pass
        except Exception:  # the server's receive failing: no disconnect to act on
            return
        if not self._finished and self._task is not None:
            self.gone = True
            self._task.cancel()

    def _start_pinging(self) -> None:
        if not self._started:
            self._streaming = True
            self._pinger = asyncio.ensure_future(self._ping())

    async def _ping(self) -> None:
        with contextlib.suppress(OSError):
            async with self._sending:
                await self._send(
                    {"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS}
                )
            while True:
                async with self._sending:
                    if self._finished:
                        return
                    await self._send(_PING)
                await asyncio.sleep(PING_SECONDS)


@dataclass
class OneExchange:
    """The SDK's dispatch context for one request answered with one JSON body.

    Nothing can be sent to the client before the answer: a request to it is
    refused (``NoBackChannelError``) and a notification dropped, as the SDK's
    JSON response modes do.
    """

    transport: TransportContext
    request_id: types.RequestId | None
    message_metadata: MessageMetadata
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    can_send_request: bool = False

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        return None

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        return None
