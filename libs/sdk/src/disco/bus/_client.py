"""``BusClient``: publish, request, respond, announce; provisioning and readiness.

The publish path behind these methods (building, signing, writing, acknowledging)
is :class:`~disco.bus._publishing.Publishing`; topic creation is
:func:`~disco.bus._provisioning.create_topics`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, cast, overload

import structlog
from aiokafka import AIOKafkaClient, AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord
from opentelemetry.trace import TracerProvider
from typing_extensions import Unpack

from disco._lifecycle import StartStop, stop_within
from disco.auth import TokenProvider
from disco.bus._credentials import CredentialSigner
from disco.bus._envelopes import ContextAttributes, EnvelopeAttributes, fast_id
from disco.bus._errors import BusUnavailableError, PublishError, RequestTimeout
from disco.bus._gc import tune_gc
from disco.bus._metrics import BusMetrics
from disco.bus._partitioner import partition_for
from disco.bus._producer import RecordWriter
from disco.bus._provisioning import create_topics
from disco.bus._publishing import Publishing, RequestValidator
from disco.bus._replies import ReplyListener
from disco.bus._tracing import BusTracer
from disco.bus._wire import dead_letter_headers
from disco.settings import BusSettings
from disco_common.envelope import ActionRequest, ActionResult, Envelope, KafkaHeaders
from disco_common.topics import DLQ_SUFFIX, Topic, dlq_topic, topic_name

__all__ = ["BusClient"]


_log = structlog.get_logger("disco.bus")


class BusClient(Publishing, StartStop):
    """Publishes envelopes to the bus and waits for responses.

    Every method names its topic (there is no inference); topics are the
    logical names (``"action-requests"`` or ``Topic.ACTION_REQUESTS``) and the
    configured ``topic_prefix`` is applied here. Inside a handler, published
    envelopes are caused by the envelope being handled: ``causation_id`` is its
    id and tenant, user, session and plan are inherited unless given.

    Use ``async with BusClient(...) as bus:`` or call :meth:`start` and
    :meth:`stop` (both idempotent).

    Args:
        settings: how to reach the bus; read from ``DISCO_*`` variables if omitted.
        name: who publishes; the default ``source`` is ``disco://agent/<name>``.
        source: the CloudEvents ``source`` of published envelopes.
        tracer_provider: records the publish and consume spans; default: the
            global OpenTelemetry provider (none until an SDK is installed).
        metrics: counts what is produced here and what consumers built on this
            client handle; default: nothing is counted.
        credentials: the identity (a token provider, or a ready signer) whose
            tokens vouch for the tenant of what is published (the
            ``disco-tenant-credential`` header); default: the configured one
            (``DISCO_AUTH_TOKEN``, else minted with ``DISCO_AUTH_SECRET`` for
            ``DISCO_TENANT_ID``/``DISCO_USER_ID``).
        sign: False publishes without a credential (only a dev bus accepts that).
    """

    def __init__(
        self,
        settings: BusSettings | None = None,
        *,
        name: str = "disco",
        source: str | None = None,
        tracer_provider: TracerProvider | None = None,
        metrics: BusMetrics | None = None,
        credentials: TokenProvider | CredentialSigner | None = None,
        sign: bool = True,
    ) -> None:
        self.settings = settings if settings is not None else BusSettings()
        self.name = name
        self.source = source or f"disco://agent/{name}"
        self.tracer = BusTracer(tracer_provider)
        self.metrics = metrics
        self._signer: CredentialSigner | None = None
        if sign:
            if isinstance(credentials, CredentialSigner):
                self._signer = credentials
            elif credentials is not None:
                self._signer = CredentialSigner(credentials)
            else:
                self._signer = CredentialSigner.from_settings(self.settings)
            if self._signer is None:
                _log.warning(
                    "no identity to sign envelopes with (set DISCO_AUTH_TOKEN or "
                    "DISCO_AUTH_SECRET): consumers that require tenant credentials will "
                    "dead-letter what this client publishes",
                    client=name,
                )
        self._writer: RecordWriter | None = None
        self._probe: AIOKafkaClient | None = None
        self._listeners: dict[str, ReplyListener] = {}
        self._provisioned: set[str] = set()
        self._names: dict[str, str] = {}
        self._lock = asyncio.Lock()
        self._request_validator: RequestValidator | None = None
        # Labelled counters by (broker topic, event type, acknowledged): looked up
        # once, not per message.
        self._counted: dict[tuple[str, str, bool], Any] = {}

    def set_request_validator(self, validator: RequestValidator | None) -> None:
        """Check every ``action-requests`` payload with ``validator`` before it is published.

        ``validator(event_type, data)`` raises (e.g. ``PayloadValidationError``) to
        refuse the request; nothing is published then. Agents install the
        registry's schema check here, so ``request``, ``publish`` and
        ``publish_envelope`` to ``action-requests`` all fail fast on a payload
        that breaks the registered schema. ``None`` removes it.
        """
        self._request_validator = validator

    # -- lifecycle -------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether the producer is running."""
        return self._writer is not None

    async def start(self) -> None:
        """Connect the producer (idempotent).

        Raises:
            BusUnavailableError: the broker could not be reached.
        """
        async with self._lock:
            if self._writer is not None:
                return
            settings = self.settings
            if settings.bus_gc_tuning:
                tune_gc()
            producer = AIOKafkaProducer(
                acks="all",
                # Tansu rejects aiokafka's idempotent producer; delivery is
                # at-least-once and consumers deduplicate on the envelope id.
                enable_idempotence=False,
                linger_ms=settings.kafka_linger_ms,
                partitioner=partition_for,
                max_batch_size=settings.kafka_max_batch_bytes,
                # Our own size check (bus_max_message_bytes) runs first with a
                # clear message; leave aiokafka room for its record framing.
                max_request_size=settings.bus_max_message_bytes + 4096,
                **settings.kafka_connection_options(),
            )
            try:
                await producer.start()
            except KafkaError as exc:
                await producer.stop()
                raise BusUnavailableError(
                    f"cannot reach the Kafka broker at {settings.kafka_bootstrap} "
                    f"(DISCO_KAFKA_BOOTSTRAP): {exc}. Is it running? `disco dev up` starts "
                    "a local one."
                ) from exc
            self._writer = RecordWriter(producer)

    async def stop(self) -> None:
        """Flush and close the producer, reply listeners and probes (idempotent)."""
        async with self._lock:
            listeners, self._listeners = list(self._listeners.values()), {}
            for listener in listeners:
                await listener.stop()
            writer, self._writer = self._writer, None
            if writer is not None:
                # Records the broker never acknowledged fail their publishers.
                await stop_within(writer.stop(), "the producer")
            probe, self._probe = self._probe, None
            if probe is not None:
                await probe.close()

    # -- topics and readiness ------------------------------------------------

    def topic_name(self, topic: str | Topic) -> str:
        """The broker's name for the logical ``topic`` (with the prefix)."""
        return topic_name(topic, self.settings.topic_prefix)

    def group_name(self, group: str) -> str:
        """The broker's name for consumer group ``group``: the topic prefix isolates
        groups too, so environments sharing a cluster never share a group."""
        return f"{self.settings.topic_prefix}{group}"

    async def ensure_topics(self, topics: Iterable[str | Topic] | None = None) -> list[str]:
        """Create the topics (default: the five disco topics) and their ``.dlq`` topics.

        Uses the configured partitions and replication factor; topics that
        already exist are left as they are.

        Returns:
            The broker names of the topics ensured.

        Raises:
            TopicProvisioningError: the broker refused to create one.
            BusUnavailableError: the broker could not be reached.
        """
        logical = list(topics) if topics is not None else list(Topic)
        names: list[str] = []
        for topic in logical:
            name = self.topic_name(topic)
            names.append(name)
            if not name.endswith(DLQ_SUFFIX):
                names.append(dlq_topic(name))
        missing = [name for name in dict.fromkeys(names) if name not in self._provisioned]
        if not missing:
            return names
        await create_topics(self.settings, missing)
        self._provisioned.update(missing)
        return names

    async def ping(self, timeout: float = 2.0) -> bool:  # noqa: ASYNC109 - a probe's budget
        """Whether the broker answers a metadata request within ``timeout`` seconds.

        Works whether or not the client is started, and recovers by itself when
        a broker that was down comes back (what a ``/readyz`` needs).
        """
        try:
            async with asyncio.timeout(timeout):
                probe = self._probe
                if probe is None:
                    probe = AIOKafkaClient(**self.settings.kafka_connection_options())
                    try:
                        await probe.bootstrap()
                    except BaseException:
                        await probe.close()
                        raise
                    self._probe = probe
                await probe.fetch_all_metadata()
        except (KafkaError, OSError, TimeoutError):
            return False
        return True

    # -- publishing ------------------------------------------------------------

    async def send(
        self,
        topic: str | Topic,
        event_type: str,
        data: Any = None,
        **attributes: Unpack[EnvelopeAttributes],
    ) -> asyncio.Future[Envelope]:
        """Queue an event for ``topic`` and return a future of its acknowledgement.

        The pipelining form of :meth:`publish` (as aiokafka's ``send`` is of
        ``send_and_wait``): it returns once the record is in the producer's
        buffer, and the future resolves to the envelope when the broker
        acknowledged it, or fails with :class:`PublishError`. Use it to publish
        many events without a task per event::

            acks = [await bus.send("business-facts", "row.imported", row) for row in rows]
            await asyncio.gather(*acks)

        Arguments, inheritance and errors are those of :meth:`publish`.
        """
        envelope, span = self._build(topic, event_type, data, attributes)
        return await self._enqueue(self._broker_name(topic), envelope, span)

    async def publish(
        self,
        topic: str | Topic,
        event_type: str,
        data: Any = None,
        **attributes: Unpack[EnvelopeAttributes],
    ) -> Envelope:
        """Publish an event to ``topic`` and wait until the broker acknowledged it.

        Args:
            topic: the logical topic; the prefix is applied here.
            event_type: the envelope's ``type``, e.g. ``"order.placed"``.
            data: JSON-able data, or a pydantic model (dumped in JSON mode).
            **attributes: envelope attributes (:class:`EnvelopeAttributes`, each
                documented there); omitted ones are left out, or inherited from
                the envelope being handled (see the class doc).

        Returns:
            The envelope as sent (the specialisation of ``topic``, e.g.
            :class:`~disco_common.envelope.ActionRequest` on ``action-requests``).

        Raises:
            EnvelopeError: the attributes do not make a valid envelope for ``topic``.
            MessageTooLargeError: the record is over ``bus_max_message_bytes``.
            PublishError: the broker did not accept it.
            BusNotStartedError: the client is not started.
        """
        envelope, span = self._build(topic, event_type, data, attributes)
        return await self._deliver(self._broker_name(topic), envelope, span)

    async def publish_envelope(self, topic: str | Topic, envelope: Envelope) -> Envelope:
        """Publish a ready-made envelope to ``topic`` unchanged.

        Only its ``traceparent`` is replaced when a span is current. The
        envelope is checked against the rules of ``topic`` (e.g. a request
        must name its ``response_event``).

        Returns:
            The envelope as sent.
        """
        name = self._broker_name(topic)
        return await self._deliver(name, *self._ready(name, topic, envelope))

    async def send_envelope(
        self, topic: str | Topic, envelope: Envelope
    ) -> asyncio.Future[Envelope]:
        """Queue a ready-made envelope for ``topic``; a future of its acknowledgement.

        The pipelining form of :meth:`publish_envelope`, as :meth:`send` is of
        :meth:`publish`: records queued one after another keep their order.
        """
        name = self._broker_name(topic)
        return await self._enqueue(name, *self._ready(name, topic, envelope))

    @overload
    async def request(
        self,
        event_type: str,
        data: Any = ...,
        *,
        response_event: str,
        correlation_id: str | None = ...,
        response_topic: str = ...,
        wait: None = ...,
        **attributes: Unpack[ContextAttributes],
    ) -> ActionRequest: ...

    @overload
    async def request(
        self,
        event_type: str,
        data: Any = ...,
        *,
        response_event: str,
        correlation_id: str | None = ...,
        response_topic: str = ...,
        wait: float,
        **attributes: Unpack[ContextAttributes],
    ) -> ActionResult: ...

    async def request(
        self,
        event_type: str,
        data: Any = None,
        *,
        response_event: str,
        correlation_id: str | None = None,
        response_topic: str = Topic.ACTION_RESULTS.value,
        wait: float | None = None,
        **attributes: Unpack[ContextAttributes],
    ) -> ActionRequest | ActionResult:
        """Ask for work on ``action-requests``; optionally wait for the answer.

        Args:
            event_type: the request's type, e.g. ``"calculate.requested"``.
            data: the request's data.
            response_event: the event type the responder must answer with.
            correlation_id: ties the answer to this request (a new id if omitted).
            response_topic: where the responder publishes (``action-results``).
            wait: seconds to wait for the correlated response; ``None`` returns
                right after publishing.
            **attributes: the other envelope attributes (:class:`ContextAttributes`,
                the part of :class:`EnvelopeAttributes` that :meth:`publish` and
                :meth:`send` take besides those named here).

        Returns:
            The published request, or (with ``wait``) the response.

        Raises:
            RequestTimeout: ``wait`` passed without a correlated response.
        """
        correlation_id = correlation_id or fast_id()
        fields: dict[str, Any] = {
            **attributes,
            "response_event": response_event,
            "response_topic": response_topic,
            "correlation_id": correlation_id,
        }
        request, span = self._build(Topic.ACTION_REQUESTS, event_type, data, fields)
        name = self._broker_name(Topic.ACTION_REQUESTS)
        if wait is None:
            return cast(ActionRequest, await self._deliver(name, request, span))
        # Listener positioned and waiter registered before the request leaves:
        # the answer cannot arrive unseen.
        listener = await self._reply_listener(response_topic)
        async with listener.expect(correlation_id, tenant_id=request.tenant_id) as response:
            await self._deliver(name, request, span)
            try:
                async with asyncio.timeout(wait):
                    answer = await response
            except TimeoutError:
                raise RequestTimeout(
                    event_type, correlation_id, response_event, response_topic, wait
                ) from None
        if self.tracer.enabled:
            self.tracer.received(self._broker_name(response_topic), answer, self.name)
        return answer if isinstance(answer, ActionResult) else answer.as_(ActionResult)

    async def respond(
        self,
        event_type: str,
        data: Any = None,
        *,
        correlation_id: str,
        topic: str | Topic = Topic.ACTION_RESULTS,
        **attributes: Unpack[ContextAttributes],
    ) -> Envelope:
        """Answer a request: publish ``event_type`` with its ``correlation_id``.

        Use the request's ``response_event`` as ``event_type`` and its
        ``response_topic`` as ``topic``.
        """
        fields: dict[str, Any] = {**attributes, "correlation_id": correlation_id}
        envelope, span = self._build(topic, event_type, data, fields)
        return await self._deliver(self._broker_name(topic), envelope, span)

    async def announce(
        self, event_type: str, data: Any = None, **attributes: Unpack[EnvelopeAttributes]
    ) -> Envelope:
        """Publish a domain fact on ``business-facts`` (nobody answers)."""
        envelope, span = self._build(Topic.BUSINESS_FACTS, event_type, data, attributes)
        return await self._deliver(self._broker_name(Topic.BUSINESS_FACTS), envelope, span)

    async def send_record(
        self, name: str, key: bytes | None, value: bytes | None, headers: KafkaHeaders
    ) -> None:
        """Send one record as is to the broker topic ``name`` and wait for the ack.

        The bus uses it to dead-letter records byte for byte; agents publish
        envelopes with :meth:`publish` instead.

        Raises:
            PublishError: the broker did not accept it.
        """
        delivery = await self._write(name, key, value, headers)
        try:
            await delivery
        except KafkaError as exc:
            raise PublishError(f"the broker did not accept a record for {name!r}: {exc}") from exc
        except Exception as exc:  # e.g. aiokafka's size checks raise plain errors too
            raise PublishError(f"the record for {name!r} was not sent: {exc!r}") from exc

    async def dead_letter(
        self,
        record: ConsumerRecord[bytes, bytes],
        *,
        error_type: str,
        error_message: str,
        attempts: int,
        group: str,
    ) -> str:
        """Copy a consumed ``record`` byte for byte to its topic's ``.dlq``, with the reason.

        The original key, value and headers are kept; :class:`~disco.bus.DlqHeader`
        headers say what failed, where the record was and which group gave up.
        Consumers that handle records themselves (not through
        :class:`~disco.bus.BusConsumer`) use this to dead-letter the same way.

        Returns:
            The broker name of the dead-letter topic.

        Raises:
            PublishError: the broker did not accept it (retry, or keep the
                offset uncommitted).
        """
        target = dlq_topic(record.topic)
        headers = dead_letter_headers(
            list(record.headers),
            error_type=error_type,
            error_message=error_message,
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            attempts=attempts,
            group=group,
        )
        await self.send_record(target, record.key, record.value, headers)
        return target

    # -- internals -------------------------------------------------------------

    async def _reply_listener(self, topic: str) -> ReplyListener:
        listener = self._listeners.get(topic)
        if listener is not None and listener.running:
            return listener
        self._require_writer()
        await self.ensure_topics([topic])
        async with self._lock:
            listener = self._listeners.get(topic)
            if listener is None or not listener.running:
                if listener is not None:
                    await listener.stop()
                listener = ReplyListener(self.settings, topic)
                await listener.start()
                self._listeners[topic] = listener
        return listener
