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
- puts the caller's :class:`~disco_gateway.scope.CallScope` in the call context.

Errors at the door take each binding's shape: a ``google.rpc.Status``-style
body on HTTP+JSON, a JSON-RPC error object on JSON-RPC.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.server.routes import DefaultServerCallContextBuilder, create_rest_routes
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from disco_gateway.a2a.door import admit, authenticate, grpc_status_name
from disco_gateway.a2a.handler import TARGET_KEY
from disco_gateway.a2a.service import LiveHandler
from disco_gateway.scope import CallScope, enter
from disco_gateway.state import GatewayState
from disco_service import DiscoHTTPError, Forbidden

__all__ = ["a2a_routes"]

Binding = Literal["jsonrpc", "rest"]
Endpoint = Callable[[Request], Awaitable[Response]]

_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_SCOPE_ATTRIBUTE = "disco_scope"
_TARGET_ATTRIBUTE = "disco_target"


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


async def _jsonrpc_fields(request: Request) -> tuple[Any, str]:
    """The JSON-RPC request's id and ``params.tenant`` (the dispatcher reads the body again)."""
    try:
        body = await request.json()
    except ValueError:
        return None, ""
    if not isinstance(body, dict):
        return None, ""
    params = body.get("params")
    tenant = params.get("tenant", "") if isinstance(params, dict) else ""
    return body.get("id"), tenant if isinstance(tenant, str) else ""


def _guarded(endpoint: Endpoint, binding: Binding, state: GatewayState) -> Endpoint:
    async def door(request: Request) -> Response:
        agent = request.path_params.get("agent")
        request_id: Any = None
        try:
            scope = await authenticate(state, agent, request.headers)
            if binding == "jsonrpc":
                request_id, tenant = await _jsonrpc_fields(request)
            else:
                tenant = request.path_params.get("tenant", "")
            if tenant and tenant != scope.tenant_id:
                raise Forbidden(
                    f"tenant {tenant!r} is not yours: your token is for tenant {scope.tenant_id!r}",
                    code="tenant_mismatch",
                )
            target = await admit(state, scope, request.client.host if request.client else None)
            if target is not None:
                setattr(request.state, _TARGET_ATTRIBUTE, target)
        except DiscoHTTPError as exc:
            return _error(binding, exc, request_id)
        setattr(request.state, _SCOPE_ATTRIBUTE, scope)
        enter(scope)  # inherited by every task the a2a-sdk starts for this call
        return await endpoint(request)

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
            plain.append(
                Route(route.path, _guarded(route.endpoint, "rest", state), methods=methods)
            )
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
        # The gateway's own binding (no /{tenant}/ form: it would shadow the agents').
        *gateway_rest,
        Route("/a2a/{agent}", rpc, methods=["POST"]),
        Mount("/a2a/{agent}", routes=[*agent_rest, *agent_tenant_rest]),
    ]
