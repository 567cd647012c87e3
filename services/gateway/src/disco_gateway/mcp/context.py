"""Who an MCP request acts for, and on which protocol era: set by the door, read by the handlers.

The door (:mod:`disco_gateway.mcp.transport`) authenticates a request and puts
an :class:`McpCaller` in a context variable before the SDK sees the request;
every task the SDK starts for it (the dispatcher, the handlers) inherits it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from disco_gateway.scope import CallScope

__all__ = ["McpCaller", "McpSession", "View", "calling", "current_caller"]

Era = Literal["handshake", "modern"]
"""``handshake``: a 2025 (or older) protocol version, ``initialize`` first, sessions;
``modern``: 2026-07-28, every request stands alone."""

_CALLER: ContextVar[McpCaller | None] = ContextVar("disco_gateway_mcp_caller", default=None)


@dataclass(frozen=True)
class View:
    """Which tools a caller sees: a tenant's (its own agents and public registrations), or,
    without a token, the public agents of the public tenant."""

    tenant_id: str
    anonymous: bool


@dataclass(frozen=True)
class McpSession:
    """A session of a client on a handshake protocol version, as every instance reads it."""

    session_id: str
    tenant_id: str
    user_id: str
    subject: str
    anonymous: bool
    protocol_version: str
    client_info: dict[str, Any] | None = None
    capabilities: dict[str, Any] | None = field(default=None)


@dataclass(frozen=True)
class McpCaller:
    """The caller of one MCP request.

    Attributes:
        scope: who it acts for (the token's tenant and user, or the public ones).
        era: the protocol era of the request.
        session: its session (handshake era, after ``initialize``), if any.
    """

    scope: CallScope
    era: Era
    session: McpSession | None = None

    @property
    def view(self) -> View:
        return View(self.scope.tenant_id, self.scope.anonymous)

    @property
    def principal(self) -> str:
        """Who the caller is, to bind what it carries between two legs of a call."""
        kind = "anonymous" if self.scope.anonymous else "user"
        return f"{kind}:{self.scope.tenant_id}:{self.scope.user_id}"


def current_caller() -> McpCaller:
    """The caller of the MCP request being handled.

    Raises:
        RuntimeError: outside a request the door admitted.
    """
    caller = _CALLER.get()
    if caller is None:
        raise RuntimeError("an MCP request without a caller: the door did not admit it")
    return caller


@contextmanager
def calling(caller: McpCaller) -> Iterator[McpCaller]:
    """Handle the block (and every task it starts) as ``caller``'s request."""
    token = _CALLER.set(caller)
    try:
        yield caller
    finally:
        _CALLER.reset(token)
