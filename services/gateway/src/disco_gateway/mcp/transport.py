"""``/mcp`` over Streamable HTTP: the door, then the SDK, on any instance for any request.

Every request first passes the door: a bearer token gives the caller's tenant
and user; without one, a gateway with public agents lets the caller see and
call those (``DISCO_GATEWAY_PUBLIC_AGENTS``, in ``DISCO_GATEWAY_PUBLIC_TENANT``),
any other answers 401 with ``WWW-Authenticate: Bearer`` and the
``resource_metadata`` of RFC 9728. Calls count against the rate limits (429).
Host and Origin headers are checked (DNS rebinding).

Then by protocol era (the ``MCP-Protocol-Version`` header):

- **2026-07-28**: the SDK's own handler serves the request; it stands alone. A
  ``tools/call`` without a progress token is answered with one JSON body, still
  cancelled when its client goes away (:mod:`disco_gateway.mcp.plain`).
- **2025 and older** (or no header: an ``initialize``): the SDK keeps such a
  session in one process's memory. Here it lives in Postgres instead
  (:mod:`disco_gateway.mcp.sessions`), and each request is served by a
  transport made for it alone (like the SDK's stateless mode) that knows its
  session's id, version and client capabilities, and can send the client
  requests on the call's stream (``elicitation/create``); a request that needs
  no stream (no progress asked for, no form possible) is answered with one JSON
  body, which costs less (a tool call or listing without any transport made for
  it: :mod:`disco_gateway.mcp.plain`). What a client posts
  back that an instance of its own cannot take, the door takes on any instance:
  the response to an elicitation (its id is the sealed question: it becomes
  the human's answer on the bus) and ``notifications/cancelled`` (the call's
  task is derived from the session and request id: the agent is asked to
  stop). ``GET /mcp`` with a session streams ``notifications/tools/list_changed``;
  ``DELETE /mcp`` ends the session.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import anyio
import mcp_types as types
import structlog
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.models import InitializationOptions
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS, InboundModernRoute
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from disco_gateway.a2a.door import anonymous_scope, authenticate
from disco_gateway.a2a.runtime import A2ARuntime
from disco_gateway.mcp.calls import call_task_id
from disco_gateway.mcp.changes import ToolChanges
from disco_gateway.mcp.context import McpCaller, McpSession, calling
from disco_gateway.mcp.events import AskSeal, announce_cancel, publish_answer
from disco_gateway.mcp.mapping import form_answer
from disco_gateway.mcp.metrics import McpMetrics
from disco_gateway.mcp.plain import PlainCall, modern_call, serve_alone, session_request
from disco_gateway.mcp.sessions import McpSessions
from disco_gateway.ratelimits import CallLimits
from disco_gateway.scope import CallScope
from disco_gateway.settings import GatewaySettings
from disco_service import DiscoHTTPError, ServiceState, Unauthenticated, error_response

__all__ = ["METADATA_PATH", "McpTransport", "resource_metadata_url", "transport_security"]

_log = structlog.get_logger("disco_gateway.mcp")

METADATA_PATH = "/.well-known/oauth-protected-resource"
_SESSION = "mcp-session-id"
_VERSION = "mcp-protocol-version"
_KEEPALIVE_SECONDS = 15.0
_LIST_CHANGED = types.JSONRPCNotification(
    jsonrpc="2.0", method="notifications/tools/list_changed"
).model_dump_json(by_alias=True, exclude_none=True)


def resource_metadata_url(public_url: str) -> str:
    """Where the RFC 9728 metadata of ``/mcp`` is (its path-suffixed form)."""
    return f"{public_url}{METADATA_PATH}/mcp"


def transport_security(
    public_url: str, hosts: tuple[str, ...], origins: tuple[str, ...]
) -> TransportSecuritySettings:
    """The Host and Origin headers ``/mcp`` accepts (DNS rebinding protection)."""
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    scheme, _, rest = public_url.partition("://")
    netloc = rest.split("/", 1)[0]
    host = netloc.rsplit(":", 1)[0] if not netloc.endswith("]") else netloc
    return TransportSecuritySettings(
        allowed_hosts=[netloc, host, f"{host}:*", "127.0.0.1:*", "localhost:*", "[::1]:*", *hosts],
        allowed_origins=[
            f"{scheme}://{netloc}",
            "http://127.0.0.1:*",
            "http://localhost:*",
            "http://[::1]:*",
            *origins,
        ],
    )


def _replaying(body: bytes, receive: Receive) -> Receive:
    """``receive`` with the body, already read by the door, handed out again first."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _not_found() -> Response:
    body = types.JSONRPCError(
        jsonrpc="2.0",
        id=None,
        error=types.ErrorData(code=types.INVALID_REQUEST, message="Session not found"),
    )
    return Response(
        body.model_dump_json(by_alias=True, exclude_none=True),
        status_code=404,
        media_type="application/json",
    )


@dataclass
class McpTransport:
    """Serves ``/mcp`` (see the module docs)."""

    state: ServiceState[GatewaySettings]
    call_limits: CallLimits
    runtime: A2ARuntime
    server: Server[Any]
    manager: StreamableHTTPSessionManager
    init_options: InitializationOptions
    sessions: McpSessions
    changes: ToolChanges
    seal: AskSeal
    metrics: McpMetrics
    security: TransportSecuritySettings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        refused = await TransportSecurityMiddleware(self.security).validate_request(
            request, is_post=request.method == "POST"
        )
        if refused is not None:
            await refused(scope, receive, send)
            return
        try:
            caller = await self._admit(request)
        except DiscoHTTPError as exc:
            self.metrics.refused.labels(str(exc.status_code)).inc()
            await self._refusal(exc)(scope, receive, send)
            return
        version = request.headers.get(_VERSION)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            with calling(McpCaller(caller, "modern")):
                await self._modern(request, scope, receive, send)
            return
        await self._handshake(request, caller, scope, receive, send)

    # -- the door -----------------------------------------------------------------------------

    async def _admit(self, request: Request) -> CallScope:
        state = self.state
        if request.headers.get("authorization"):
            caller = await authenticate(state, None, request.headers)
        elif state.settings.gateway_public_agents:
            caller = anonymous_scope(state.settings, None)
        else:
            raise Unauthenticated("A bearer token is required (Authorization: Bearer <jwt>).")
        await self.call_limits.count(caller, request.client.host if request.client else None)
        return caller

    def _refusal(self, exc: DiscoHTTPError) -> Response:
        headers = dict(exc.headers or {})
        if exc.status_code == 401:
            metadata = resource_metadata_url(self.state.settings.gateway_public_url)
            challenge = headers.get("WWW-Authenticate", "Bearer")
            separator = ", " if challenge != "Bearer" else " "
            headers["WWW-Authenticate"] = f'{challenge}{separator}resource_metadata="{metadata}"'
        return error_response(exc.status_code, exc.code, exc.message, exc.details, headers)

    # -- 2026-07-28 ---------------------------------------------------------------------------

    async def _modern(self, request: Request, scope: Scope, receive: Receive, send: Send) -> None:
        """A call without progress is answered as one JSON body (see mcp.plain); the rest by
        the SDK's entry, which may stream."""
        if request.method == "POST":
            body = await request.body()
            plain = modern_call(request, _decoded(body))
            if plain is not None:
                call, route = plain
                answer = partial(self._answer_modern, call, route)
                await PlainCall(body, receive, send).run(answer, scope)
                return
            receive = _replaying(body, receive)
        await self.manager.handle_request(scope, receive, send)

    async def _answer_modern(
        self,
        call: types.JSONRPCRequest,
        route: InboundModernRoute,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        connection = Connection.from_envelope(
            route.protocol_version, route.client_info, route.client_capabilities
        )
        answer = await serve_alone(
            self.server, Request(scope, receive), call, connection, modern=True
        )
        status = 200
        if isinstance(answer, types.JSONRPCError):
            status = ERROR_CODE_HTTP_STATUS.get(answer.error.code, 200)
        await Response(
            answer.model_dump_json(by_alias=True, exclude_none=True),
            status_code=status,
            media_type="application/json",
        )(scope, receive, send)

    # -- the handshake era --------------------------------------------------------------------

    async def _handshake(
        self, request: Request, caller: CallScope, scope: Scope, receive: Receive, send: Send
    ) -> None:
        session: McpSession | None = None
        session_id = request.headers.get(_SESSION)
        if session_id is not None:
            session = await self.sessions.find(caller, session_id)
            if session is None:
                self.metrics.refused.labels("404").inc()
                await _not_found()(scope, receive, send)
                return
        if request.method == "GET" and session is not None:
            await self._list_changes(request, caller)(scope, receive, send)
        elif request.method == "DELETE" and session is not None:
            await self.sessions.close(caller, session.session_id)
            await Response(status_code=200)(scope, receive, send)
        elif request.method == "POST":
            body = await request.body()
            message = _decoded(body)
            if await self._take(caller, session, message):
                await Response(status_code=202)(scope, receive, send)
                return
            opened = await self._open(caller, session, message)
            stream = _streams(message, session)
            # A session's request that needs no stream (an initialize has no session yet).
            if (
                session is not None
                and not stream
                and (one := session_request(request, message)) is not None
            ):
                with calling(McpCaller(caller, "handshake", session)):
                    await (await self._answer_one(request, session, one))(scope, receive, send)
                return
            with calling(McpCaller(caller, "handshake", opened or session)):
                await self._serve(
                    scope,
                    _replaying(body, receive),
                    send,
                    session=opened or session,
                    opening=opened is not None,
                    version=request.headers.get(_VERSION),
                    stream=stream,
                )
        else:
            allowed = "GET, POST, DELETE" if session is not None else "POST"
            await Response(status_code=405, headers={"Allow": allowed})(scope, receive, send)

    async def _open(
        self, caller: CallScope, session: McpSession | None, message: dict[str, Any] | None
    ) -> McpSession | None:
        """The session an ``initialize`` without one opens (None: not such a request)."""
        if session is not None or message is None or message.get("method") != "initialize":
            return None
        try:
            params = types.InitializeRequestParams.model_validate(
                message.get("params") or {}, by_name=False
            )
        except ValidationError:
            return None  # the SDK answers with what is wrong
        version = params.protocol_version
        opened = await self.sessions.open(
            caller,
            protocol_version=version
            if version in HANDSHAKE_PROTOCOL_VERSIONS
            else LATEST_HANDSHAKE_VERSION,
            client_info=params.client_info.model_dump(
                mode="json", by_alias=True, exclude_none=True
            ),
            capabilities=params.capabilities.model_dump(
                mode="json", by_alias=True, exclude_none=True
            ),
        )
        self.metrics.sessions.inc()
        return opened

    async def _take(
        self, caller: CallScope, session: McpSession | None, message: dict[str, Any] | None
    ) -> bool:
        """Take what the client posts that no instance's SDK could: the answer to an
        elicitation, a cancel. True: taken (nothing for the SDK)."""
        if message is None:
            return False
        if "method" not in message and ("result" in message or "error" in message):
            asked = self.seal.open(message.get("id"))
            if asked is None:
                return False
            turn = asked.turn_row()
            if asked.tenant_id != caller.tenant_id or turn.user_id != caller.user_id:
                _log.warning("an elicitation answered by someone else; dropped")
                return True
            try:
                result = types.ElicitResult.model_validate(message.get("result"))
            except ValidationError:
                result = types.ElicitResult(action="cancel")
            answer = form_answer(asked.form, result)
            scope = replace(caller, agent=turn.agent)
            await publish_answer(self.runtime, scope, asked, answer)
            return True
        if message.get("method") == "notifications/cancelled" and session is not None:
            params = message.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            if request_id is None:
                return True
            task_id = call_task_id(caller.tenant_id, session.session_id, request_id)
            called = await self.runtime.latest_turn(caller.tenant_id, task_id)
            if called is not None and called.user_id == caller.user_id:
                reason = params.get("reason") if isinstance(params, dict) else None
                await announce_cancel(
                    self.runtime.bus,
                    caller,
                    task_id,
                    f"the MCP client cancelled the call: {reason or 'no reason given'}",
                )
                self.metrics.call("cancelled")
            return True
        return False

    async def _answer_one(
        self, request: Request, session: McpSession, call: types.JSONRPCRequest
    ) -> Response:
        """A session's request that needs no stream, without a transport, a dispatcher and a
        task group made for it (see mcp.plain); the answer ``_serve``'s JSON mode gives."""
        connection = Connection.from_envelope(
            session.protocol_version, session.client_info, session.capabilities
        )
        connection.session_id = session.session_id
        answer = await serve_alone(self.server, request, call, connection, modern=False)
        return Response(
            answer.model_dump_json(by_alias=True, exclude_unset=True),
            media_type="application/json",
            headers={_SESSION: session.session_id},
        )

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        *,
        session: McpSession | None,
        opening: bool,
        version: str | None,
        stream: bool,
    ) -> None:
        """One request, on a transport made for it (its session's id, version, capabilities);
        answered on an event stream when ``stream``, else with one JSON body."""
        if session is None or opening:
            # An initialize (the handshake sets the rest), or a client without a session.
            connection = Connection.from_envelope(
                version or types.DEFAULT_NEGOTIATED_VERSION, None, None
            )
        else:
            connection = Connection.from_envelope(
                session.protocol_version, session.client_info, session.capabilities
            )
        connection.session_id = session.session_id if session is not None else None
        transport = StreamableHTTPServerTransport(
            mcp_session_id=connection.session_id,
            is_json_response_enabled=not stream,
            event_store=None,
            security_settings=None,  # checked at the door
        )

        async def run(
            *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
        ) -> None:
            async with transport.connect() as (read, write):
                task_status.started()
                dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(
                    read, write, inline_methods=frozenset({"initialize"})
                )
                try:
                    await serve_connection(
                        self.server,
                        dispatcher,
                        connection=connection,
                        lifespan_state={},
                        init_options=self.init_options,
                    )
                except Exception:
                    _log.exception("mcp request failed")

        async with anyio.create_task_group() as group:
            await group.start(run)
            try:
                await transport.handle_request(scope, receive, send)
            finally:
                with anyio.CancelScope(shield=True):
                    await transport.terminate()

    def _list_changes(self, request: Request, caller: CallScope) -> Response:
        """The session's stream of ``notifications/tools/list_changed``."""
        if "text/event-stream" not in request.headers.get("accept", ""):
            return JSONResponse(
                {"error": "Not Acceptable: the stream is text/event-stream"}, status_code=406
            )
        changed = asyncio.Event()
        stop = self.changes.listen(McpCaller(caller, "handshake").view, changed.set)

        async def events() -> AsyncIterator[str]:
            try:
                yield ": listening\n\n"
                while True:
                    with anyio.move_on_after(_KEEPALIVE_SECONDS):
                        await changed.wait()
                    if changed.is_set():
                        changed.clear()
                        yield f"event: message\ndata: {_LIST_CHANGED}\n\n"
                    else:
                        yield ": keepalive\n\n"
            finally:
                stop()

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"},
        )


def _streams(message: dict[str, Any] | None, session: McpSession | None) -> bool:
    """Whether a request's answer may need an event stream: a call whose client asked for
    progress, or that may be asked for a form (a session that declared elicitation). Any
    other request is answered with one JSON body, which costs less."""
    if message is None or message.get("method") != "tools/call":
        return message is None  # what the SDK answers a body it cannot read with
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and meta.get("progressToken") is not None:
        return True
    capabilities = session.capabilities if session is not None else None
    return bool(capabilities and capabilities.get("elicitation") is not None)


def _decoded(body: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None
