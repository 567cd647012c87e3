"""The gateway's domain errors: kit error classes with stable, specific codes."""

from __future__ import annotations

from disco_common.errors import ErrorCode
from disco_service import DiscoHTTPError, NotFound, UnprocessableEntity

__all__ = ["AgentNotFound", "InvalidPayload", "NoResponse", "RateLimited"]


class AgentNotFound(NotFound):
    """No agent of that name is visible to the caller."""

    code = "agent_not_found"


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
