"""The MCP side of a running gateway instance: what ``/mcp`` uses
(made in :func:`disco_gateway.mcp.service.mcp_lifespan`)."""

from __future__ import annotations

from dataclasses import dataclass

from disco_gateway.mcp.catalog import ToolCatalog
from disco_gateway.mcp.changes import ToolChanges
from disco_gateway.mcp.sessions import McpSessions
from disco_gateway.mcp.transport import McpTransport

__all__ = ["McpService"]


@dataclass
class McpService:
    """What ``/mcp`` uses while the instance runs."""

    transport: McpTransport
    catalog: ToolCatalog
    changes: ToolChanges
    sessions: McpSessions
