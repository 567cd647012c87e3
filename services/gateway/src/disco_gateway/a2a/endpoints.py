"""The A2A endpoints: the a2a-sdk's JSON-RPC and HTTP+JSON dispatchers, behind disco's door.

Routes (each agent's interface URL is ``{DISCO_GATEWAY_PUBLIC_URL}/a2a/{agent}``)::

    POST /a2a/{agent}                                  JSON-RPC (SendMessage, GetTask, ...)
    POST /a2a/{agent}/message:send | message:stream    HTTP+JSON (and the rest of the binding)
    GET  /a2a/{agent}/tasks/{id} | tasks | ...
    POST /a2a/{agent}/{tenant}/message:send ...        the v1.0 /{tenant}/ path binding
    POST /a2a, /a2a/message:send, ...                  the gateway's own (metadata names the agent)

Before the a2a-sdk sees a request, the door (:mod:`disco_gateway.a2a.door`):

- authenticates it: a bearer token (401 without one), except for the public
  agents (``DISCO_GATEWAY_PUBLIC_AGENTS``), whose token-less calls run in
  ``DISCO_GATEWAY_PUBLIC_TENANT``;
- counts it against the rate limits (429);
- refuses a tenant other than the token's (the ``/{tenant}/`` path, the JSON-RPC
  ``tenant`` field): 403;
- finds the agent (404 for an unknown one);
- refuses ``ListTasks`` to a caller without a token (401, as any missing credential);
- puts the caller's :class:`~disco_gateway.scope.CallScope` in the call context.

Errors at the door take each binding's shape: a ``google.rpc.Status``-style
body on HTTP+JSON, a JSON-RPC error object on JSON-RPC.

Where the a2a-sdk's own dispatchers answer other than the A2A specification
says, the door corrects them: a JSON-RPC request whose ``Content-Type`` is not
JSON is ``ContentTypeNotSupportedError`` (-32005, not a parse error); HTTP+JSON
answers carry ``Content-Type: application/json`` (the binding's, not the SDK's
``application/a2a+json``); the extended card comes with ``ETag`` and
``Cache-Control`` as the other cards do (``304`` to a matching ``If-None-Match``);
and the JSON-RPC endpoint answers at its URL with a trailing slash too
(``POST /a2a/{agent}/``), as clients that join paths send it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes import DefaultServerCallContextBuilder, create_rest_routes
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.utils.constants import A2A_JSON_MEDIA_TYPE
from a2a.utils.errors import ContentTypeNotSupportedError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from disco_common.canonical import canonical_json
from disco_gateway.a2a.door import admit, authenticate, grpc_status_name, require_token
from disco_gateway.a2a.handler import TARGET_KEY
from disco_gateway.a2a.service import LiveHandler
from disco_gateway.a2a.unavailable import RETRY_AFTER_SECONDS
from disco_gateway.scope import CallScope, enter
from disco_gateway.state import GatewayState
from disco_service import DiscoHTTPError, Forbidden, cacheable_body

__all__ = ["a2a_routes"]

Binding = Literal["jsonrpc", "rest"]
Endpoint = Callable[[Request], Awaitable[Response]]

_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_SCOPE_ATTRIBUTE = "disco_scope"
_TARGET_ATTRIBUTE = "disco_target"
_JSON = "application/json"
# The A2A method of each HTTP+JSON route the door looks at (by path after the prefix).
_REST_METHODS = {
    ("/tasks", "GET"): "ListTasks",
    ("/extendedAgentCard", "GET"): "GetExtendedAgentCard",
}


def _error(binding: Binding, exc: DiscoHTTPError, request_id: Any = None) -> Response:
    reason = exc.code.upper()
    info = {"@type": _ERROR_INFO, "reason": reason, "domain": "disco", "metadata": {}}
    if binding == "rest":
        body: dict[str, Any] = {
            "error": {
                "code": exc.status_code,
                "status": grpc_status_name(exc.status_code),
                "message": exc.message,
                "details": [info],
            }
        }
    else:
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": -32600, "message": exc.message, "data": [info]},
        }
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


class _JsonRpcCall:
    """What the door reads of a JSON-RPC request: its id, method and ``params.tenant``
    (the dispatcher reads the body again)."""

    def __init__(self, body: Any) -> None:
        if not isinstance(body, dict):
            body = {}
        params = body.get("params")
        tenant = params.get("tenant", "") if isinstance(params, dict) else ""
        method = body.get("method")
        self.id: Any = body.get("id")
        self.method = method if isinstance(method, str) else ""
        self.tenant = tenant if isinstance(tenant, str) else ""

    @classmethod
    async def read(cls, request: Request) -> _JsonRpcCall:
        try:
            return cls(await request.json())
        except ValueError:
            return cls(None)


def _is_json(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` is JSON (``application/json`` or a ``+json`` type)."""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type == _JSON:
        return True
    return media_type.startswith("application/") and media_type.endswith("+json")


def _content_type_refused(request: Request, call: _JsonRpcCall) -> Response:
    """A JSON-RPC request that is not JSON: ``ContentTypeNotSupportedError`` (as the dispatcher
    answers every A2A error: HTTP 200 with the error object)."""
    sent = request.headers.get("content-type") or "none"
    error = ContentTypeNotSupportedError(
        message=f"a JSON-RPC request is sent as Content-Type: application/json, not {sent}"
    )
    return JSONResponse(build_error_response(call.id, error))


def _as_json(response: Response) -> Response:
    """An HTTP+JSON answer labelled ``application/json`` (the a2a-sdk labels its successes
    ``application/a2a+json``)."""
    content_type = response.headers.get("content-type", "")
    if content_type.startswith(A2A_JSON_MEDIA_TYPE):
        response.headers["content-type"] = _JSON
    return response


def _revalidatable(request: Request, response: Response, state: GatewayState) -> Response:
    """The extended card over HTTP+JSON, as the other cards are served: with its ``ETag``
    and ``Cache-Control`` (private: the caller's tenant's view), ``304`` to an
    ``If-None-Match`` naming its ``ETag``.

    Its members are written in sorted order: the a2a-sdk writes the members of a card's
    free-form objects (an extension's ``params``) in an order that differs from one
    process to the next, and the same card must be the same bytes on every instance.
    """
    card = json.loads(bytes(response.body))
    return cacheable_body(
        request,
        canonical_json(card),
        max_age_seconds=state.settings.card_max_age_seconds,
        private=True,
        vary="Authorization",
    )


def _guarded(
    endpoint: Endpoint, binding: Binding, state: GatewayState, *, method: str = ""
) -> Endpoint:
    """``endpoint`` behind the door; ``method``: the A2A method of an HTTP+JSON route."""

    async def door(request: Request) -> Response:
        agent = request.path_params.get("agent")
        call = _JsonRpcCall(None)
        try:
            scope = await authenticate(state, agent, request.headers)
            if binding == "jsonrpc":
                call = await _JsonRpcCall.read(request)
                tenant, operation = call.tenant, call.method
            else:
                tenant, operation = request.path_params.get("tenant", ""), method
            require_token(scope, operation)
            if tenant and tenant != scope.tenant_id:
                raise Forbidden(
                    f"tenant {tenant!r} is not yours: your token is for tenant {scope.tenant_id!r}",
                    code="tenant_mismatch",
                )
            target = await admit(state, scope, request.client.host if request.client else None)
            if target is not None:
                setattr(request.state, _TARGET_ATTRIBUTE, target)
        except DiscoHTTPError as exc:
            return _error(binding, exc, call.id)
        if binding == "jsonrpc" and not _is_json(request.headers.get("content-type")):
            return _content_type_refused(request, call)
        setattr(request.state, _SCOPE_ATTRIBUTE, scope)
        enter(scope)  # inherited by every task the a2a-sdk starts for this call
        response = await endpoint(request)
        if binding == "jsonrpc":
            return response
        if method == "GetExtendedAgentCard" and response.status_code == 200:
            return _revalidatable(request, response, state)
        if response.status_code == 503:
            # The database or the bus is away for now (disco_gateway.a2a.unavailable).
            response.headers.setdefault("Retry-After", str(RETRY_AFTER_SECONDS))
        return _as_json(response)

    return door


class _ContextBuilder(DefaultServerCallContextBuilder):
    """The a2a-sdk's call context, with the scope the door established."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        scope: CallScope = getattr(request.state, _SCOPE_ATTRIBUTE)
        scope.attach(context)
        target = getattr(request.state, _TARGET_ATTRIBUTE, None)
        if target is not None:
            context.state[TARGET_KEY] = target
        return context


def _rest(
    handler: RequestHandler, state: GatewayState, *, prefix: str
) -> tuple[list[Route], list[Route]]:
    """The HTTP+JSON routes behind the door: the binding's own, and the ``/{tenant}/`` ones."""
    built = create_rest_routes(handler, context_builder=_ContextBuilder(), path_prefix=prefix)
    plain: list[Route] = []
    for route in built:
        if isinstance(route, Route) and route.methods:
            methods = sorted(m for m in route.methods if m != "HEAD")
            method = _REST_METHODS.get((route.path[len(prefix) :], methods[0]), "")
            guarded = _guarded(route.endpoint, "rest", state, method=method)
            plain.append(Route(route.path, guarded, methods=methods))
    tenant_routes = [
        Route(f"/{{tenant}}{route.path[len(prefix) :]}", route.endpoint, methods=route.methods)
        for route in plain
    ]
    return plain, tenant_routes


def a2a_routes(state: GatewayState) -> list[BaseRoute]:
    """Every A2A route of the gateway, in matching order (see the module docs)."""
    handler = LiveHandler(state)
    jsonrpc = JsonRpcDispatcher(request_handler=handler, context_builder=_ContextBuilder())
    rpc = _guarded(jsonrpc.handle_requests, "jsonrpc", state)
    gateway_rest, _ = _rest(handler, state, prefix="/a2a")
    agent_rest, agent_tenant_rest = _rest(handler, state, prefix="")
    return [
        Route("/a2a", rpc, methods=["POST"]),
        Route("/a2a/", rpc, methods=["POST"]),
        # The gateway's own binding (no /{tenant}/ form: it would shadow the agents').
        *gateway_rest,
        Route("/a2a/{agent}", rpc, methods=["POST"]),
        Route("/a2a/{agent}/", rpc, methods=["POST"]),
        Mount("/a2a/{agent}", routes=[*agent_rest, *agent_tenant_rest]),
    ]
