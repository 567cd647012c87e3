"""What a consumer routes: handlers per ``(topic, event type)``, checked when registered."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from disco.bus._batches import BatchRoute
from disco.bus._errors import HandlerRegistrationError
from disco_common.envelope import Envelope

__all__ = [
    "ANY_EVENT",
    "Handler",
    "HandlerT",
    "TopicRoute",
    "check_event_type",
    "check_handler",
    "describe",
]

Handler = Callable[[Envelope], Awaitable[object]]
"""A handler: an ``async def`` taking the envelope (its topic's specialisation)."""
HandlerT = TypeVar("HandlerT", bound=Handler)

ANY_EVENT = "*"
"""Register for every event type of a topic."""


@dataclass(frozen=True, slots=True)
class TopicRoute:
    """Where a consumer sends one topic's records: handlers by event type, or one
    batch handler for every event type."""

    topic: str
    """The logical topic (without the environment prefix)."""
    kind: type[Envelope]
    """The envelope class of the topic (its specialisation)."""
    handlers: Mapping[str, Handler]
    """By event type (or :data:`ANY_EVENT`); empty when ``batch`` takes the topic."""
    batch: BatchRoute | None = None

    def takes(self, event_type: str) -> bool:
        """Whether a handler here takes envelopes of ``event_type``."""
        handlers = self.handlers
        return self.batch is not None or event_type in handlers or ANY_EVENT in handlers


_EVENT_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/_-]{0,199}$")


def check_event_type(event_type: str) -> None:
    """Raise :class:`HandlerRegistrationError` unless ``event_type`` is valid or ``"*"``."""
    if event_type != ANY_EVENT and not _EVENT_TYPE.fullmatch(event_type):
        raise HandlerRegistrationError(
            f"event type {event_type!r} is not valid: letters, digits and '._:/-_', or "
            f"{ANY_EVENT!r} for every type"
        )


def check_handler(handler: Any, takes: str = "envelope") -> None:
    """Raise :class:`HandlerRegistrationError` unless ``handler`` is an ``async def`` of one
    positional parameter (``takes`` names it in the message)."""
    target = (
        handler.__call__
        if not inspect.isfunction(handler) and not inspect.ismethod(handler)
        else handler
    )
    if not (inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(target)):
        raise HandlerRegistrationError(
            f"{describe(handler)} must be an `async def` taking one {takes}"
        )
    try:
        inspect.signature(handler).bind(object())
    except TypeError:
        raise HandlerRegistrationError(
            f"{describe(handler)} must accept exactly one positional argument, the {takes} "
            f"(its signature is {inspect.signature(handler)})"
        ) from None
    except ValueError:  # a callable without a signature: trust it
        return


def describe(handler: Any) -> str:
    """``handler module.qualname``, for messages."""
    name = getattr(handler, "__qualname__", None) or type(handler).__qualname__
    module = getattr(handler, "__module__", None)
    return f"handler {module}.{name}" if module else f"handler {name}"
