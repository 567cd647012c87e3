"""What the gateway holds while it runs: the kit's state, and its A2A side."""

from __future__ import annotations

from typing import TYPE_CHECKING

from disco_gateway.a2a.side import A2AService
from disco_gateway.mcp.metrics import McpMetrics
from disco_gateway.mcp.side import McpService
from disco_gateway.push.metrics import PushMetrics
from disco_gateway.ratelimits import CallLimits, parse_limits
from disco_gateway.sessions.metrics import StreamMetrics
from disco_gateway.settings import GatewaySettings
from disco_service import ServiceState, ServiceUnavailable

if TYPE_CHECKING:
    from disco_gateway.console.clients import ConsoleClients
    from disco_gateway.sessions.hub import SessionHub
    from disco_gateway.sessions.service import SessionService

__all__ = ["GatewayState"]


class GatewayState(ServiceState[GatewaySettings]):
    """The gateway app's state (``app.state.disco``), built by :func:`disco_gateway.create_app`.

    Attributes:
        a2a: the A2A side (request handler, registry directory, bus fan-out,
            consumer group, publish bridge); made in the lifespan.
        console: the clients the console reads the other services with; made
            in the lifespan.
        sessions: the session streams' logic (replay, approvals, answers, messages).
        hub: the instance's session fan-out to its websockets.
        stream_metrics: the session streams' Prometheus metrics (on ``/metrics``).
        push_metrics: the push notifications' Prometheus metrics (the same).
        mcp: the MCP side (``/mcp``); made in the lifespan.
        mcp_metrics: the MCP door's Prometheus metrics (the same).
        call_limits: the rate limits of the A2A calls and publishes.
    """

    def __init__(self, settings: GatewaySettings) -> None:
        super().__init__(settings)
        self.a2a: A2AService | None = None
        self.console: ConsoleClients | None = None
        self.sessions: SessionService | None = None
        self.hub: SessionHub | None = None
        self.stream_metrics = StreamMetrics(self.metrics.registry)
        self.push_metrics = PushMetrics(self.metrics.registry)
        self.mcp: McpService | None = None
        self.mcp_metrics = McpMetrics(self.metrics.registry)
        self.call_limits = CallLimits(
            tenant=parse_limits(settings.rate_limit_tenant),
            anonymous=parse_limits(settings.rate_limit_anonymous),
            registry=self.metrics.registry,
            per_tenant={
                tenant: parse_limits(limits)
                for tenant, limits in settings.rate_limit_per_tenant.items()
            },
        )

    def require_a2a(self) -> A2AService:
        """The A2A side, or a 503 while the instance starts or stops."""
        if self.a2a is None:
            raise ServiceUnavailable("The gateway is starting or stopping; try again.")
        return self.a2a

    def require_console(self) -> ConsoleClients:
        """The console's clients, or a 503 while the instance starts or stops."""
        if self.console is None:
            raise ServiceUnavailable("The gateway is starting or stopping; try again.")
        return self.console

    def require_sessions(self) -> SessionService:
        """The session side, or a 503 while the instance starts or stops."""
        if self.sessions is None:
            raise ServiceUnavailable("The gateway is starting or stopping; try again.")
        return self.sessions
