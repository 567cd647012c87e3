"""The A2A door: who a call acts for and which agent it may reach, on every binding.

The HTTP bindings (``a2a.endpoints``) and the gRPC binding (``a2a.grpc``) both
admit a call here before the a2a-sdk sees it:

- a bearer token (``authorization`` header or metadata) gives the caller's
  tenant and user; without one, only the public agents
  (``DISCO_GATEWAY_PUBLIC_AGENTS``) may be called, in ``DISCO_GATEWAY_PUBLIC_TENANT``;
- the call is counted against the rate limits (the tenant's, or the address's
  without a token);
- the agent must exist for the caller's tenant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from disco_common.a2a_cards import A2ACardSource
from disco_common.auth import Role
from disco_gateway.a2a.side import A2AService
from disco_gateway.errors import AgentNotFound, no_agent_message
from disco_gateway.ratelimits import CallLimits
from disco_gateway.scope import CallScope
from disco_gateway.settings import GatewaySettings
from disco_service import Identity, ServiceState, Unauthenticated, identify_token

__all__ = [
    "NEEDS_TOKEN",
    "CallGate",
    "admit",
    "anonymous_scope",
    "authenticate",
    "grpc_status_name",
    "require_token",
]

NEEDS_TOKEN = frozenset({"ListTasks"})
"""The A2A methods a caller without a token may not call, even at a public agent: every
such caller acts as the same public user, so a list would show each one the others' tasks."""

# The google.rpc status of each HTTP status the door refuses with: the HTTP+JSON
# binding names it in its error body, the gRPC binding ends the call with it.
_GRPC_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "RESOURCE_EXHAUSTED",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
}


def grpc_status_name(http_status: int) -> str:
    """The google.rpc status name of a refusal with ``http_status``."""
    return _GRPC_STATUS.get(http_status, "FAILED_PRECONDITION")


class CallGate(Protocol):
    """What :func:`admit` uses of the running instance
    (:class:`~disco_gateway.state.GatewayState` satisfies it)."""

    @property
    def call_limits(self) -> CallLimits:
        """The rate limits calls are counted against."""
        ...

    def require_a2a(self) -> A2AService:
        """The A2A side (its agent directory), or a 503 while starting or stopping."""
        ...


async def authenticate(
    state: ServiceState[GatewaySettings], agent: str | None, headers: Mapping[str, str]
) -> CallScope:
    """Who a call of ``agent`` (None: the gateway's own endpoint) with ``headers`` acts for.

    ``headers`` must look names up without regard to case (Starlette's ``Headers``).

    Raises:
        Unauthenticated: no valid bearer token, and the agent is not public.
    """
    header = headers.get("authorization")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("Send the token as `Authorization: Bearer <jwt>`.")
        return CallScope(await identify_token(state, token.strip(), headers), agent=agent)
    if agent is not None and state.settings.is_public_agent(agent):
        return anonymous_scope(state.settings, agent)
    raise Unauthenticated("A bearer token is required (Authorization: Bearer <jwt>).")


def anonymous_scope(settings: GatewaySettings, agent: str | None) -> CallScope:
    """The scope of a call without a token (of ``agent``; None: of no agent yet): the public
    tenant and user, only ever for public agents."""
    identity = Identity(
        settings.public_tenant, settings.public_user, "anonymous", frozenset({Role.USER})
    )
    return CallScope(identity, agent=agent, anonymous=True)


async def admit(state: CallGate, scope: CallScope, address: str | None) -> A2ACardSource | None:
    """Count the call of ``scope`` (from ``address``) and find its agent (None: the gateway's
    own endpoint).

    Raises:
        RateLimited: a limit of the caller is spent.
        AgentNotFound: the caller's tenant has no such agent (the message says
            that agents are per tenant).
    """
    await state.call_limits.count(scope, address)
    if scope.agent is None:
        return None
    target = await state.require_a2a().directory.agent(scope.tenant_id, scope.agent)
    if target is None:
        tenant = None if scope.anonymous else scope.tenant_id
        raise AgentNotFound(no_agent_message(scope.agent, tenant))
    return target


def require_token(scope: CallScope, method: str) -> None:
    """Refuse ``method`` to a caller without a token when it needs one (:data:`NEEDS_TOKEN`).

    Raises:
        Unauthenticated: it does (401 with ``WWW-Authenticate``, gRPC ``UNAUTHENTICATED``).
    """
    if scope.anonymous and method in NEEDS_TOKEN:
        raise Unauthenticated(
            f"{method} needs a bearer token (Authorization: Bearer <jwt>): callers without "
            "one share a user, so a list would show each of them the others' tasks"
        )
