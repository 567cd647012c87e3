"""Prometheus metrics of the MCP door (on the gateway's ``/metrics``)."""

from __future__ import annotations

from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["CallOutcome", "McpMetrics"]

CallOutcome = Literal[
    "answered",
    "failed",
    "invalid_arguments",
    "timed_out",
    "asked",
    "elicited",
    "cancelled",
]


class McpMetrics:
    """What the door's calls came to, and how many sessions it opened."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls = Counter(
            "disco_gateway_mcp_calls",
            "MCP tools/call requests by outcome: answered, failed (an error answer), "
            "invalid_arguments (nothing sent), timed_out, asked (a question the client is "
            "told how to answer), elicited (asked with a form), cancelled.",
            ["outcome"],
            registry=registry,
        )
        self.sessions = Counter(
            "disco_gateway_mcp_sessions_opened",
            "MCP sessions opened (initialize, 2025 protocol versions).",
            registry=registry,
        )
        self.listeners = Gauge(
            "disco_gateway_mcp_listeners",
            "Clients of this instance listening for tools/list_changed (a 2025 session's "
            "GET stream, a 2026-07-28 subscriptions/listen stream).",
            registry=registry,
        )
        self.refused = Counter(
            "disco_gateway_mcp_refused",
            "MCP requests refused at the door, by HTTP status (401, 404, 429...).",
            ["status"],
            registry=registry,
        )

    def call(self, outcome: CallOutcome) -> None:
        self.calls.labels(outcome).inc()
