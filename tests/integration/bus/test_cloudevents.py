"""CloudEvents conformance on the wire: attribute names, binary mode from any client."""

from __future__ import annotations

import asyncio
import json

from aiokafka import AIOKafkaProducer

from disco.bus import BusClient, BusConsumer
from disco_common.envelope import ActionRequest, ActionResult
from disco_common.topics import Topic
from tests.integration.bus.conftest import Recorder, read_topic


async def test_a_binary_mode_record_from_plain_aiokafka_is_handled_like_a_structured_one(
    bus: BusClient, recorder: Recorder, kafka_bootstrap: str
) -> None:
    consumer = BusConsumer(bus, "binary-reader")
    consumer.add_handler(Topic.ACTION_REQUESTS, "quote.requested", recorder)
    structured = await bus.publish(
        Topic.ACTION_REQUESTS,
        "quote.requested",
        {"n": 1},
        response_event="quote.done",
        tenant_id="acme",
        correlation_id="corr-structured",
    )
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        # What a CloudEvents SDK's Kafka binding writes in binary mode.
        await producer.send_and_wait(
            bus.topic_name(Topic.ACTION_REQUESTS),
            json.dumps({"n": 2}).encode(),
            key=b"corr-binary",
            headers=[
                ("ce_specversion", b"1.0"),
                ("ce_id", b"binary-1"),
                ("ce_source", b"urn:plain-client"),
                ("ce_type", b"quote.requested"),
                ("ce_tenantid", b"acme"),
                ("ce_correlationid", b"corr-binary"),
                ("ce_responseevent", b"quote.done"),
                ("content-type", b"application/json"),
            ],
        )
    finally:
        await producer.stop()

    async with consumer:
        received = {envelope.id: envelope for envelope in await recorder.wait_for(2)}

    # Two keys, maybe two partitions: no order between them.
    second = received["binary-1"]
    assert received[structured.id] == structured
    assert isinstance(second, ActionRequest)
    assert (second.id, second.source, second.data) == ("binary-1", "urn:plain-client", {"n": 2})
    assert (second.tenant_id, second.correlation_id, second.response_event) == (
        "acme",
        "corr-binary",
        "quote.done",
    )
    assert second.response_topic == Topic.ACTION_RESULTS.value
    dead = await read_topic(kafka_bootstrap, bus.topic_name(f"{Topic.ACTION_REQUESTS}.dlq"), 0)
    assert dead == []


async def test_structured_records_use_cloudevents_names_and_a_binary_answer_resolves_a_request(
    bus: BusClient, kafka_bootstrap: str
) -> None:
    sent = await bus.publish(
        Topic.ACTION_REQUESTS,
        "price.requested",
        {},
        response_event="price.given",
        tenant_id="acme",
        session_id="s-1",
    )
    [record] = await read_topic(kafka_bootstrap, bus.topic_name(Topic.ACTION_REQUESTS), 1)
    wire = json.loads(record.value or b"")
    assert wire["tenantid"] == "acme"
    assert wire["sessionid"] == "s-1"
    assert wire["responseevent"] == "price.given"
    assert wire["responsetopic"] == "action-results"
    assert all(name.isalnum() and name.islower() for name in wire)
    assert sent.tenant_id == "acme"

    asking = asyncio.create_task(
        bus.request(
            "cost.requested", {}, response_event="cost.given", correlation_id="c-2", wait=30
        )
    )
    # Answered only once the request is on the topic (so the listener is positioned).
    await read_topic(kafka_bootstrap, bus.topic_name(Topic.ACTION_REQUESTS), 2)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            bus.topic_name(Topic.ACTION_RESULTS),
            b'{"price": 3}',
            headers=[
                ("ce_specversion", b"1.0"),
                ("ce_id", b"answer-1"),
                ("ce_source", b"urn:plain-client"),
                ("ce_type", b"cost.given"),
                ("ce_correlationid", b"c-2"),
                ("content-type", b"application/json; charset=utf-8"),
            ],
        )
    finally:
        await producer.stop()
    reply = await asking

    assert isinstance(reply, ActionResult)
    assert (reply.id, reply.correlation_id, reply.data) == ("answer-1", "c-2", {"price": 3})
