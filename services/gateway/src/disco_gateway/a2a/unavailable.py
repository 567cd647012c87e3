"""A2A calls refused for now: the database or the bus is away (stalled, restarting).

Waiting fixes it, so the caller is told to send its call again, on every binding:
HTTP+JSON answers ``503`` with ``Retry-After`` and the binding's error shape
(``status: UNAVAILABLE``, an ``ErrorInfo`` with reason ``UNAVAILABLE``); JSON-RPC
answers the internal error (``-32603``, as the specification has no code of its
own for it) with the same ``ErrorInfo``, whose metadata carries
``retryAfterSeconds``; gRPC ends the call with ``UNAVAILABLE`` and a ``RetryInfo``.
A message refused so left nothing that blocks it: sent again, it goes out
(:mod:`disco_gateway.a2a.prepare`).

The a2a-sdk maps its errors to each binding by their type, from its tables: the
error joins them here, once, at import.
"""

from __future__ import annotations

from a2a.utils import errors as a2a_errors
from a2a.utils.errors import A2AError, ErrorMapping

__all__ = ["RETRY_AFTER_SECONDS", "UNAVAILABLE_REASON", "Unavailable"]

RETRY_AFTER_SECONDS = 2
"""What ``Retry-After`` says: a stall is waited out in seconds (the database's bounds
are seconds, a broker's restart a few)."""
UNAVAILABLE_REASON = "UNAVAILABLE"


class Unavailable(A2AError):
    """The call could not be taken up for now (see the module docs)."""

    message = "The gateway's database or bus is unavailable for now; send the call again."

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, data={"retryAfterSeconds": str(RETRY_AFTER_SECONDS)})


a2a_errors.A2A_ERROR_MAPPING[Unavailable] = ErrorMapping(503, "UNAVAILABLE", UNAVAILABLE_REASON)
a2a_errors.A2A_ERROR_REASONS[Unavailable] = UNAVAILABLE_REASON
