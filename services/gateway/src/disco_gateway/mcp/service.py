"""The MCP side of a gateway instance: made and started in the lifespan, stopped with it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from importlib.metadata import version

import structlog
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from disco_gateway.mcp.calls import ToolCalls
from disco_gateway.mcp.catalog import ToolCatalog
from disco_gateway.mcp.changes import ToolChanges
from disco_gateway.mcp.events import AskSeal
from disco_gateway.mcp.server import build_server, initialization_options, state_security
from disco_gateway.mcp.sessions import McpSessions
from disco_gateway.mcp.side import McpService
from disco_gateway.mcp.transport import McpTransport, transport_security
from disco_gateway.state import GatewayState

__all__ = ["McpService", "mcp_lifespan"]

_log = structlog.get_logger("disco_gateway.mcp")

_PURGE_SECONDS = 600.0


@contextlib.asynccontextmanager
async def mcp_lifespan(state: GatewayState) -> AsyncIterator[None]:
    """Start the tool catalog, the agents' lifecycle reader and the SDK's session manager
    (after the A2A side, whose directory, fan-out and task store calls use)."""
    settings = state.settings
    runtime = state.require_a2a().runtime
    stopping = asyncio.Event()
    catalog = ToolCatalog(runtime.directory, settings)
    changes = ToolChanges(settings, catalog, runtime.directory, state.mcp_metrics)
    security = state_security(settings)
    seal = AskSeal(security.codec)
    calls = ToolCalls(runtime, catalog, seal, state.mcp_metrics, stopping.is_set)
    server = build_server(calls, changes, security, version=version("disco-gateway"))
    # Stateless: the SDK keeps no session; 2025 sessions are the door's (McpTransport).
    manager = StreamableHTTPSessionManager(server, stateless=True, security_settings=None)
    sessions = McpSessions(state.require_database(), idle_seconds=settings.mcp_session_idle_seconds)
    await changes.start()
    try:
        async with manager.run():
            transport = McpTransport(
                state=state,
                call_limits=state.call_limits,
                runtime=runtime,
                server=server,
                manager=manager,
                init_options=initialization_options(server),
                sessions=sessions,
                changes=changes,
                seal=seal,
                metrics=state.mcp_metrics,
                security=transport_security(
                    settings.gateway_public_url,
                    settings.mcp_allowed_hosts,
                    settings.mcp_allowed_origins,
                ),
            )
            state.mcp = McpService(transport, catalog, changes, sessions)
            purger = asyncio.create_task(_purge(sessions), name="disco-gateway-mcp-sessions")
            try:
                yield
            finally:
                stopping.set()
                state.mcp = None
                purger.cancel()
    finally:
        await changes.stop()


async def _purge(sessions: McpSessions) -> None:
    """Delete idle sessions now and then (every tenant's)."""
    while True:
        await asyncio.sleep(_PURGE_SECONDS)
        try:
            purged = await sessions.purge()
            if purged:
                _log.info("mcp_sessions_purged", count=purged)
        except Exception as exc:
            _log.warning("mcp_session_purge_failed", error=repr(exc))
