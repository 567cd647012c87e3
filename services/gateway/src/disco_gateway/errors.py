"""The gateway's domain errors: kit error classes with stable, specific codes."""

from __future__ import annotations

from disco_common.errors import ErrorCode
from disco_service import DiscoHTTPError, NotFound, UnprocessableEntity

__all__ = ["AgentNotFound", "InvalidPayload", "NoResponse", "RateLimited", "no_agent_message"]


class AgentNotFound(NotFound):
    """No agent of that name is visible to the caller."""

    code = "agent_not_found"


def no_agent_message(agent: str, tenant_id: str | None) -> str:
    """Why ``agent`` is not found, with what a caller most often has wrong.

    A valid token of another tenant than the agent's finds nothing, and a caller
    without a token sees only the public agents: the message says which case it is.
    """
    if tenant_id is None:
        return (
            f"there is no public agent {agent!r}: without a token only the agents named in "
            "DISCO_GATEWAY_PUBLIC_AGENTS can be reached, while they run; for any other, send "
            "`Authorization: Bearer <jwt>`"
        )
    return (
        f"there is no agent {agent!r} in tenant {tenant_id!r}, your token's tenant: is it "
        "running? Agents are registered per tenant, so an agent of another tenant needs a "
        "token of that tenant"
    )


class InvalidPayload(UnprocessableEntity):
    """A payload breaks the schema registered for its event type."""

    code = "payload_invalid"


class NoResponse(DiscoHTTPError):
    """504: the response a caller waited for did not come in time."""

    status_code = 504
    code = "response_timeout"


class RateLimited(DiscoHTTPError):
    """429: the caller's rate limit is spent for now; ``Retry-After`` says for how long."""

    status_code = 429
    code = ErrorCode.RATE_LIMITED.value
