"""The gateway's MCP server: the SDK's low-level ``Server`` with the door's handlers.

- ``tools/list`` and ``tools/call``: :class:`~disco_gateway.mcp.calls.ToolCalls`;
- ``subscriptions/listen`` (2026-07-28): the SDK's ``ListenHandler`` on a bus
  scoped to the caller's view (:class:`~disco_gateway.mcp.changes.ViewBus`);
- the SDK's ``RequestStateBoundary`` seals what a 2026-07-28 client carries
  between the legs of a call, under the keys every instance shares
  (``DISCO_GATEWAY_MCP_STATE_KEYS``), bound to the caller and to the call's tool
  and arguments; one audience (the server's name) for every instance.

Protocol versions: what the SDK negotiates. ``initialize`` (handshake era)
answers with the version the client asked for when it is one of 2024-11-05,
2025-03-26, 2025-06-18 and 2025-11-25, else 2025-11-25; a request naming
2026-07-28 in ``MCP-Protocol-Version`` is served on its own (no handshake, no
session), and ``server/discover`` says so.
"""

from __future__ import annotations

import os
from typing import Any

import structlog
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.subscriptions import ListenHandler

from disco_common.tasks import HITL_TIMEOUT_MAX_SECONDS
from disco_gateway.mcp.calls import ToolCalls
from disco_gateway.mcp.changes import ToolChanges, ViewBus
from disco_gateway.mcp.context import current_caller
from disco_gateway.settings import GatewaySettings

__all__ = ["SERVER_NAME", "build_server", "initialization_options", "state_security"]

_log = structlog.get_logger("disco_gateway.mcp")

SERVER_NAME = "disco-gateway"
"""The MCP server's name, the same on every instance (the audience of sealed state)."""

INSTRUCTIONS = (
    "Each tool is one skill of a disco agent, named <agent>__<skill>. A call is a task of "
    "that agent: its result is the agent's answer; a call that outlasts the gateway's wait "
    "names its task, which goes on (follow it over A2A). When the agent needs a person, the "
    "gateway asks with a form when the client can show one."
)


def _principal(ctx: ServerRequestContext[Any, Any]) -> str:
    return current_caller().principal


def state_security(settings: GatewaySettings) -> RequestStateSecurity:
    """How state carried by MCP clients is sealed: the shared keys, or one per process."""
    keys = settings.mcp_state_secrets()
    if keys is None:
        _log.warning(
            "mcp state keys are this process's own: a question asked by this instance can "
            "only be answered through it; set DISCO_GATEWAY_MCP_STATE_KEYS on every instance"
        )
        keys = [os.urandom(32).hex()]
    return RequestStateSecurity(
        keys=keys,
        ttl=float(HITL_TIMEOUT_MAX_SECONDS),
        bind_principal=_principal,
        audience=SERVER_NAME,
    )


def build_server(
    calls: ToolCalls, changes: ToolChanges, security: RequestStateSecurity, *, version: str
) -> Server[Any]:
    """The server: tools, listen streams and the state seal."""
    server: Server[Any] = Server(
        SERVER_NAME,
        version=version,
        title="disco",
        description="Every agent skill you may call, as a tool.",
        instructions=INSTRUCTIONS,
        on_list_tools=calls.list_tools,
        on_call_tool=calls.call_tool,
        on_subscriptions_listen=ListenHandler(ViewBus(changes)),
        # disco's tools declare no header parameters (Mcp-Param-*): nothing to check, and
        # without this the SDK would walk tools/list for every 2026-07-28 call to find out.
        get_tool_input_schema=lambda name: None,
    )
    server.middleware.append(RequestStateBoundary(security, default_audience=SERVER_NAME))
    return server


def initialization_options(server: Server[Any]) -> InitializationOptions:
    """What ``initialize`` answers: the tools, and their ``listChanged`` notifications."""
    return server.create_initialization_options(NotificationOptions(tools_changed=True))
