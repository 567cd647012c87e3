"""What a consumer cannot handle goes to ``<topic>.dlq``, and consuming goes on."""

from __future__ import annotations

from datetime import datetime

from aiokafka import AIOKafkaProducer

from disco.bus import BusClient, BusConsumer, DlqHeader, NonRetryableError
from disco.clients import ServiceUnavailableError
from disco_common.envelope import Envelope, headers_dict
from disco_common.topics import Topic
from tests.fixtures.bus import read_records
from tests.integration.bus.conftest import Recorder, read_topic


async def _send_raw(
    bootstrap: str, topic: str, value: bytes, key: bytes, headers: list[tuple[str, bytes]]
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=key, headers=headers)
    finally:
        await producer.stop()


async def test_a_value_that_is_not_json_is_dead_lettered_with_the_reason_and_consuming_goes_on(
    bus: BusClient, recorder: Recorder, kafka_bootstrap: str
) -> None:
    topic = bus.topic_name(Topic.BUSINESS_FACTS)
    # One partition's worth of order: the bad record is keyed like the good one.
    await _send_raw(kafka_bootstrap, topic, b"{not json", b"k1", [("origin", b"legacy")])
    good = await bus.announce("order.placed", {"n": 1}, plan_id="k1")
    consumer = BusConsumer(bus, "tolerant")
    consumer.add_handler(Topic.BUSINESS_FACTS, "*", recorder)

    async with consumer:
        await recorder.wait_for(1)
        [dead] = await read_topic(kafka_bootstrap, f"{topic}.dlq", 1)

    assert recorder.ids == [good.id]
    assert dead.value == b"{not json"
    assert dead.key == b"k1"
    headers = headers_dict(dead.headers)
    assert headers["origin"] == "legacy"
    assert headers[DlqHeader.ERROR_TYPE] == "EnvelopeError"
    assert headers[DlqHeader.ERROR_MESSAGE].startswith("value is not JSON")
    assert headers[DlqHeader.ORIGINAL_TOPIC] == topic
    assert headers[DlqHeader.ORIGINAL_OFFSET] == "0"
    assert headers[DlqHeader.ATTEMPTS] == "0"
    assert headers[DlqHeader.CONSUMER_GROUP] == "tolerant"
    assert datetime.fromisoformat(headers[DlqHeader.FAILED_AT]).tzinfo is not None


async def test_json_that_is_not_an_envelope_is_dead_lettered_with_what_is_missing(
    bus: BusClient, recorder: Recorder, kafka_bootstrap: str
) -> None:
    topic = bus.topic_name(Topic.ACTION_REQUESTS)
    # A request without response_event breaks the action-requests contract.
    value = b'{"specversion": "1.0", "id": "r-1", "source": "urn:x", "type": "calculate.requested"}'
    await _send_raw(kafka_bootstrap, topic, value, b"r-1", [("ce_type", b"calculate.requested")])
    later = await bus.request("calculate.requested", {"a": 1}, response_event="calculate.completed")
    consumer = BusConsumer(bus, "strict")
    consumer.add_handler(Topic.ACTION_REQUESTS, "calculate.requested", recorder)

    async with consumer:
        await recorder.wait_for(1)
        [dead] = await read_topic(kafka_bootstrap, f"{topic}.dlq", 1)

    assert recorder.ids == [later.id]
    assert dead.value == value
    message = headers_dict(dead.headers)[DlqHeader.ERROR_MESSAGE]
    assert "not a disco envelope" in message
    assert "response_event" in message


async def test_a_failing_handler_is_retried_then_dead_lettered_and_later_envelopes_flow(
    bus: BusClient, kafka_bootstrap: str
) -> None:
    attempts: list[int] = []
    survivors = Recorder()

    async def handler(envelope: Envelope) -> None:
        if envelope.type == "poison.arrived":
            attempts.append(1)
            raise RuntimeError("cannot digest this")
        await survivors(envelope)

    poison = await bus.announce("poison.arrived", {"x": 1}, plan_id="p")
    after = await bus.announce("food.arrived", {"x": 2}, plan_id="p")
    consumer = BusConsumer(bus, "eater")
    consumer.add_handler(Topic.BUSINESS_FACTS, "*", handler)

    async with consumer:
        await survivors.wait_for(1)
        [dead] = await read_topic(kafka_bootstrap, bus.topic_name("business-facts.dlq"), 1)

    assert len(attempts) == bus.settings.bus_retry_attempts == 3
    assert survivors.ids == [after.id]
    assert dead.value == poison.to_kafka_value()
    assert dead.key == b"p"
    headers = headers_dict(dead.headers)
    assert headers[DlqHeader.ERROR_TYPE] == "RuntimeError"
    assert headers[DlqHeader.ERROR_MESSAGE] == "cannot digest this"
    assert headers[DlqHeader.ATTEMPTS] == "3"
    assert headers["ce_id"] == poison.id


async def test_a_handler_that_fails_once_succeeds_on_retry_and_nothing_is_dead_lettered(
    bus: BusClient, recorder: Recorder, kafka_bootstrap: str
) -> None:
    calls: list[str] = []

    async def flaky(envelope: Envelope) -> None:
        calls.append(envelope.id)
        if len(calls) == 1:
            raise ConnectionError("transient")
        await recorder(envelope)

    sent = await bus.announce("thing.happened", {})
    consumer = BusConsumer(bus, "flaky")
    consumer.add_handler(Topic.BUSINESS_FACTS, "thing.happened", flaky)

    async with consumer:
        await recorder.wait_for(1)

    assert calls == [sent.id, sent.id]
    # Stopped and committed: anything dead-lettered is on the topic by now.
    assert await read_records(kafka_bootstrap, bus.topic_name("business-facts.dlq")) == []


async def test_a_non_retryable_error_is_dead_lettered_after_one_attempt(
    bus: BusClient, kafka_bootstrap: str
) -> None:
    calls: list[str] = []

    async def refuse(envelope: Envelope) -> None:
        calls.append(envelope.id)
        raise NonRetryableError("amount must be positive")

    await bus.announce("payment.received", {"amount": -1})
    consumer = BusConsumer(bus, "refuser")
    consumer.add_handler(Topic.BUSINESS_FACTS, "payment.received", refuse)

    async with consumer:
        [dead] = await read_topic(kafka_bootstrap, bus.topic_name("business-facts.dlq"), 1)

    assert len(calls) == 1
    headers = headers_dict(dead.headers)
    assert headers[DlqHeader.ATTEMPTS] == "1"
    assert headers[DlqHeader.ERROR_TYPE] == "NonRetryableError"


async def test_a_dependency_unavailable_for_longer_than_the_retries_delays_the_work_without_a_dlq(
    bus: BusClient, recorder: Recorder, kafka_bootstrap: str
) -> None:
    calls: list[str] = []
    attempts = bus.settings.bus_retry_attempts

    async def patient(envelope: Envelope) -> None:
        calls.append(envelope.id)
        if len(calls) <= attempts + 2:  # more failures than the retries allow
            raise ServiceUnavailableError(503, "unavailable", "the database is unavailable")
        await recorder(envelope)

    sent = await bus.announce("thing.waited", {})
    consumer = BusConsumer(bus, "patient")
    consumer.add_handler(Topic.BUSINESS_FACTS, "thing.waited", patient)

    async with consumer:
        await recorder.wait_for(1)

    assert calls == [sent.id] * (attempts + 3)
    assert await read_records(kafka_bootstrap, bus.topic_name("business-facts.dlq")) == []
