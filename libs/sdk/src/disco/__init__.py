"""disco: the agent SDK.

The handler context is reachable from anywhere a handler runs:
:func:`current_envelope` and :func:`current_context` (they raise
:class:`NotInHandlerError` elsewhere). The bus lives in :mod:`disco.bus`.
"""

from disco._context import (
    HandlerContext,
    NotInHandlerError,
    current_context,
    current_envelope,
    handler_context,
)

__all__ = [
    "HandlerContext",
    "NotInHandlerError",
    "current_context",
    "current_envelope",
    "handler_context",
]
