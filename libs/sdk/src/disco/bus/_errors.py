"""Errors the bus raises, each naming the likely mistake and the fix."""

from __future__ import annotations

import logging

__all__ = [
    "Abandoned",
    "BusError",
    "BusNotStartedError",
    "BusUnavailableError",
    "HandlerRegistrationError",
    "MessageTooLargeError",
    "NonRetryableError",
    "PublishError",
    "RequestTimeout",
    "TopicProvisioningError",
]


class BusError(Exception):
    """Base class of the bus's own errors."""


class BusNotStartedError(BusError):
    """A client or consumer was used before ``start()`` (or after ``stop()``)."""


class BusUnavailableError(BusError):
    """The broker cannot be reached."""


class PublishError(BusError):
    """The broker did not accept a record."""


class MessageTooLargeError(PublishError):
    """A record is larger than ``bus_max_message_bytes``; nothing was sent."""

    def __init__(self, topic: str, event_type: str, size: int, limit: int) -> None:
        super().__init__(
            f"the {event_type!r} envelope for topic {topic!r} is {size} bytes on the wire, "
            f"over the limit of {limit} bytes (DISCO_BUS_MAX_MESSAGE_BYTES): put large "
            "content in memory (or an object store) and send a reference, or raise the "
            "limit together with the broker's message.max.bytes"
        )
        self.topic = topic
        self.event_type = event_type
        self.size = size
        self.limit = limit


class RequestTimeout(BusError, TimeoutError):
    """``request(..., wait=...)`` got no correlated response in time."""

    def __init__(
        self,
        event_type: str,
        correlation_id: str,
        response_event: str,
        response_topic: str,
        seconds: float,
    ) -> None:
        super().__init__(
            f"no response to request {event_type!r} (correlation_id={correlation_id}) "
            f"within {seconds:g} s: expected a {response_event!r} envelope on "
            f"{response_topic!r}. Is an agent handling {event_type!r} on 'action-requests' "
            "running, and does it answer with that correlation id?"
        )
        self.event_type = event_type
        self.correlation_id = correlation_id
        self.response_event = response_event
        self.response_topic = response_topic
        self.seconds = seconds


class CorrelationInUseError(BusError):
    """``request(..., wait=...)`` with a ``correlation_id`` another request of the same
    tenant is still waiting on: the answer could not be told apart."""

    def __init__(self, correlation_id: str, tenant_id: str | None) -> None:
        whose = f" of tenant {tenant_id!r}" if tenant_id is not None else ""
        super().__init__(
            f"a request{whose} with correlation_id {correlation_id!r} is already waiting for "
            "its answer: use another correlation id (or none, and one is made)"
        )
        self.correlation_id = correlation_id
        self.tenant_id = tenant_id


class HandlerRegistrationError(BusError, TypeError):
    """A handler was registered wrongly (not async, wrong signature, duplicate, too late)."""


class TopicProvisioningError(BusError):
    """The broker refused to create a topic."""


class DependencyUnavailableError(Exception):
    """Raise it (or a subclass) from a handler when something the work needs cannot answer
    now (a service, the database behind it): the consumer tries the envelope again, with
    backoff up to ``bus_retry_backoff_max_ms``, for as long as it runs, and never
    dead-letters it for that (these tries do not count towards ``bus_retry_attempts``).

    :class:`disco.clients.ServiceUnavailableError` (a 503, or a service that cannot be
    reached) and ``disco.StepNotRecordedError`` are such errors: a stalled database or a
    restarting service delays the work instead of sending it to the DLQ.
    """


class NonRetryableError(Exception):
    """Raise it (or a subclass) from a handler to dead-letter the envelope at once.

    Use it for failures a retry cannot fix, such as a payload the handler can
    never accept; anything else is retried with backoff first.
    """


class Abandoned(Exception):
    """The consumer is stopping: leave this record (or batch) uncommitted for redelivery."""


class _BootstrapFailureAtDebug(logging.Filter):
    """aiokafka logs each address it could not bootstrap from at ERROR, then raises.

    disco raises (or, retrying, logs) its own error for that failure, naming the
    setting and the fix (:class:`BusUnavailableError`); the address's line would only
    come first, with none of that, once per attempt. It is kept at DEBUG.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.DEBUG and record.msg == _BOOTSTRAP_FAILURE:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


_BOOTSTRAP_FAILURE = 'Unable connect to "%s:%s": %s'
_AIOKAFKA_CLIENT = logging.getLogger("aiokafka")  # the logger of aiokafka's client module
if not any(isinstance(f, _BootstrapFailureAtDebug) for f in _AIOKAFKA_CLIENT.filters):
    _AIOKAFKA_CLIENT.addFilter(_BootstrapFailureAtDebug())
