"""The bus: disco's Kafka transport.

- :class:`BusClient` publishes (``publish``, ``request``, ``respond``,
  ``announce``), provisions topics (``ensure_topics``) and answers readiness
  probes (``ping``).
- :class:`BusConsumer` consumes as one consumer group with handlers per
  ``(topic, event type)``: at-least-once, retries with backoff, a dead-letter
  topic per topic (:class:`DlqHeader` names the headers), deduplication on the
  envelope id through a :class:`DedupStore`, graceful shutdown.
- :class:`ReplyListener` reads a response topic without a group; ``request(...,
  wait=seconds)`` uses one.
- :class:`TopicReader` reads topics without a group, from their start or end
  (tools, tests, listeners that must take nobody's work).

Settings come from :class:`disco.settings.BusSettings` (``DISCO_*``).
"""

from disco.bus._client import BusClient
from disco.bus._consumer import BusConsumer
from disco.bus._dedup import DedupMarks, DedupStore, DurableDedupStore, InMemoryDedupStore
from disco.bus._envelopes import ContextAttributes, EnvelopeAttributes
from disco.bus._errors import (
    BusError,
    BusNotStartedError,
    BusUnavailableError,
    HandlerRegistrationError,
    MessageTooLargeError,
    NonRetryableError,
    PublishError,
    RequestTimeout,
    TopicProvisioningError,
)
from disco.bus._polling import FetchPacer, pacer_for
from disco.bus._reader import ReadRecord, TopicReader
from disco.bus._replies import ReplyListener
from disco.bus._routes import ANY_EVENT, Handler
from disco.bus._wire import DlqHeader

__all__ = [
    "ANY_EVENT",
    "BusClient",
    "BusConsumer",
    "BusError",
    "BusNotStartedError",
    "BusUnavailableError",
    "ContextAttributes",
    "DedupMarks",
    "DedupStore",
    "DlqHeader",
    "DurableDedupStore",
    "EnvelopeAttributes",
    "FetchPacer",
    "Handler",
    "HandlerRegistrationError",
    "InMemoryDedupStore",
    "MessageTooLargeError",
    "NonRetryableError",
    "PublishError",
    "ReadRecord",
    "ReplyListener",
    "RequestTimeout",
    "TopicProvisioningError",
    "TopicReader",
    "pacer_for",
]
