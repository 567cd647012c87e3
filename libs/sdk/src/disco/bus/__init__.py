"""The bus: disco's Kafka transport.

- :class:`BusClient` publishes (``publish``, ``request``, ``respond``,
  ``announce``), provisions topics (``ensure_topics``) and answers readiness
  probes (``ping``).
- :class:`BusConsumer` consumes as one consumer group with handlers per
  ``(topic, event type)``: at-least-once, retries with backoff, a dead-letter
  topic per topic (:class:`DlqHeader` names the headers), deduplication on the
  envelope id through a :class:`DedupStore`, graceful shutdown. A topic may
  have a batch handler instead (``on_batch``: a :class:`Batch` of a partition's
  envelopes per call, one commit after it), with the same dead letters and
  retries (a batch that keeps failing is split to find the envelope at fault).
- :class:`ReplyListener` reads a response topic without a group; ``request(...,
  wait=seconds)`` uses one.
- Tenant credentials: a ``BusClient`` signs what it publishes (the
  ``disco-tenant-credential`` header, :class:`CredentialSigner`, or the
  caller's token inside :func:`signing_with`); consumers refuse envelopes
  whose tenant no valid credential vouches for (:class:`TenantGuard`,
  :class:`CredentialVerifier`) when ``bus_require_tenant_credential`` is on.
- :class:`TopicReader` reads topics without a group, from their start or end
  (tools, tests, listeners that must take nobody's work).
- :class:`BusMetrics` counts what clients produce and consumer groups handle
  (Prometheus); :func:`serve_metrics` serves them. Spans per publish and per
  handler call follow OpenTelemetry's messaging conventions.
- :func:`tune_gc` keeps the garbage collector off what lives as long as the
  process; a ``BusClient`` applies it at its first start (``bus_gc_tuning``).

Settings come from :class:`disco.settings.BusSettings` (``DISCO_*``).
"""

from disco.bus._batches import Batch, BatchHandler, BatchItem
from disco.bus._client import BusClient
from disco.bus._consumer import BusConsumer
from disco.bus._credentials import (
    CredentialError,
    CredentialSigner,
    CredentialVerifier,
    TenantGuard,
    sign_as,
    signing_with,
    tenant_guard,
)
from disco.bus._dedup import DedupMarks, DedupStore, DurableDedupStore, InMemoryDedupStore
from disco.bus._envelopes import ContextAttributes, EnvelopeAttributes
from disco.bus._errors import (
    BusError,
    BusNotStartedError,
    BusUnavailableError,
    CorrelationInUseError,
    DependencyUnavailableError,
    HandlerRegistrationError,
    MessageTooLargeError,
    NonRetryableError,
    PublishError,
    RequestTimeout,
    TopicProvisioningError,
)
from disco.bus._gc import tune_gc
from disco.bus._metrics import BusMetrics, serve_metrics, stop_metrics
from disco.bus._polling import FetchPacer
from disco.bus._reader import ReadRecord, TopicReader
from disco.bus._replies import ReplyListener
from disco.bus._routes import ANY_EVENT, Handler
from disco.bus._wire import DlqHeader

__all__ = [
    "ANY_EVENT",
    "Batch",
    "BatchHandler",
    "BatchItem",
    "BusClient",
    "BusConsumer",
    "BusError",
    "BusMetrics",
    "BusNotStartedError",
    "BusUnavailableError",
    "ContextAttributes",
    "CorrelationInUseError",
    "CredentialError",
    "CredentialSigner",
    "CredentialVerifier",
    "DedupMarks",
    "DedupStore",
    "DependencyUnavailableError",
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
    "TenantGuard",
    "TopicProvisioningError",
    "TopicReader",
    "serve_metrics",
    "sign_as",
    "signing_with",
    "stop_metrics",
    "tenant_guard",
    "tune_gc",
]
