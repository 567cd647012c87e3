"""``/mcp`` (Streamable HTTP, every protocol version) and its RFC 9728 metadata.

``/mcp`` is an ASGI route (not in the OpenAPI document: it speaks JSON-RPC, see
:mod:`disco_gateway.mcp.transport`). The metadata is served without a token at
``/.well-known/oauth-protected-resource`` and, as RFC 9728 derives it from the
resource's URL, ``/.well-known/oauth-protected-resource/mcp``.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import AnyHttpUrl
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from disco_gateway.mcp.schemas import ProtectedResource
from disco_gateway.mcp.transport import METADATA_PATH
from disco_gateway.state import GatewayState
from disco_service import error_response

__all__ = ["mcp_route", "router"]

router = APIRouter(tags=["MCP"])


class _McpEndpoint:
    """The ASGI app of ``/mcp``: the running instance's transport."""

    def __init__(self, state: GatewayState) -> None:
        self._state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        mcp = self._state.mcp
        if mcp is None:
            response = error_response(
                503, "unavailable", "The gateway is starting or stopping; try again."
            )
            await response(scope, receive, send)
            return
        await mcp.transport(scope, receive, send)


def mcp_route(state: GatewayState) -> Route:
    """The ``/mcp`` route."""
    return Route("/mcp", _McpEndpoint(state), methods=["GET", "POST", "DELETE"])


def _metadata(request: Request) -> ProtectedResource:
    settings = GatewayState.of(request).settings
    server = settings.mcp_authorization_server or settings.auth_issuer
    return ProtectedResource(
        resource=AnyHttpUrl(f"{settings.gateway_public_url}/mcp"),
        authorization_servers=[AnyHttpUrl(server)] if server else None,
        bearer_methods_supported=["header"],
        resource_name="disco gateway: every agent skill as an MCP tool",
    )


@router.get(
    METADATA_PATH,
    summary="The OAuth protected resource metadata of /mcp (RFC 9728)",
    response_model=ProtectedResource,
    response_model_exclude_none=True,
)
async def get_protected_resource(request: Request) -> ProtectedResource:
    """What ``/mcp`` is and where its tokens come from: ``resource`` (the ``/mcp`` URL),
    ``authorization_servers`` (``DISCO_GATEWAY_MCP_AUTHORIZATION_SERVER``, else
    ``DISCO_AUTH_ISSUER``; none when tokens are issued out of band) and
    ``bearer_methods_supported``. A 401 from ``/mcp`` names it in ``resource_metadata``."""
    return _metadata(request)


@router.get(
    f"{METADATA_PATH}/mcp",
    summary="The OAuth protected resource metadata of /mcp (RFC 9728, path form)",
    response_model=ProtectedResource,
    response_model_exclude_none=True,
)
async def get_protected_resource_of_mcp(request: Request) -> ProtectedResource:
    """The same document, at the URL RFC 9728 derives from ``/mcp``'s."""
    return _metadata(request)
