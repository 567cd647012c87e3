"""The MCP door's HTTP documents (besides MCP's own messages, the SDK's types)."""

from __future__ import annotations

from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl, Field

__all__ = ["ProtectedResource"]


class ProtectedResource(ProtectedResourceMetadata):
    """RFC 9728 OAuth 2.0 protected resource metadata of ``/mcp`` (the SDK's model).

    ``authorization_servers`` is optional in RFC 9728: a gateway whose tokens
    come from no authorization server (dev tokens, HS256 tokens issued by hand)
    names none.
    """

    authorization_servers: list[AnyHttpUrl] | None = Field(  # type: ignore[assignment]
        default=None,
        description="Where clients get tokens for /mcp (none: tokens are issued out of band).",
    )
