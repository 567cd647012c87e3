"""What a consumer routes: handlers per ``(topic, event type)``, checked when registered."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from disco.bus._errors import HandlerRegistrationError
from disco_common.envelope import Envelope

__all__ = ["ANY_EVENT", "Handler", "HandlerT", "check_event_type", "check_handler", "describe"]

Handler = Callable[[Envelope], Awaitable[object]]
"""A handler: an ``async def`` taking the envelope (its topic's specialisation)."""
HandlerT = TypeVar("HandlerT", bound=Handler)

ANY_EVENT = "*"
"""Register for every event type of a topic."""

_EVENT_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/_-]{0,199}$")


def check_event_type(event_type: str) -> None:
    """Raise :class:`HandlerRegistrationError` unless ``event_type`` is valid or ``"*"``."""
    if event_type != ANY_EVENT and not _EVENT_TYPE.fullmatch(event_type):
        raise HandlerRegistrationError(
            f"event type {event_type!r} is not valid: letters, digits and '._:/-_', or "
            f"{ANY_EVENT!r} for every type"
        )


def check_handler(handler: Any) -> None:
    """Raise :class:`HandlerRegistrationError` unless ``handler`` is an ``async def`` of one
    positional parameter."""
    target = (
        handler.__call__
        if not inspect.isfunction(handler) and not inspect.ismethod(handler)
        else handler
    )
    if not (inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(target)):
        raise HandlerRegistrationError(
            f"{describe(handler)} must be an `async def` taking one envelope"
        )
    try:
        inspect.signature(handler).bind(object())
    except TypeError:
        raise HandlerRegistrationError(
            f"{describe(handler)} must accept exactly one positional argument, the envelope "
            f"(its signature is {inspect.signature(handler)})"
        ) from None
    except ValueError:  # a callable without a signature: trust it
        return


def describe(handler: Any) -> str:
    """``handler module.qualname``, for messages."""
    name = getattr(handler, "__qualname__", None) or type(handler).__qualname__
    module = getattr(handler, "__module__", None)
    return f"handler {module}.{name}" if module else f"handler {name}"
