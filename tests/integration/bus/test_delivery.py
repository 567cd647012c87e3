"""Envelopes reach handlers: from any Kafka client, routed by type, skipped when unwanted."""

from __future__ import annotations

import json
import uuid

from aiokafka import AIOKafkaProducer

from disco.bus import BusClient, BusConsumer
from disco_common.envelope import ActionRequest
from disco_common.topics import Topic
from tests.fixtures.bus import read_records
from tests.integration.bus.conftest import Recorder, committed_total


async def test_a_plain_aiokafka_producer_reaches_an_sdk_handler(
    bus: BusClient, recorder: Recorder, kafka_bootstrap: str, topic_prefix: str
) -> None:
    consumer = BusConsumer(bus, "calculator")
    consumer.add_handler(Topic.ACTION_REQUESTS, "calculate.requested", recorder)
    event_id = str(uuid.uuid4())
    # Written by hand, as a program in another language would: no disco code.
    value = json.dumps(
        {
            "specversion": "1.0",
            "id": event_id,
            "source": "urn:legacy-system",
            "type": "calculate.requested",
            "time": "2025-01-01T12:00:00Z",
            "datacontenttype": "application/json",
            "data": {"a": 2, "b": 3},
            "correlation_id": "corr-1",
            "response_event": "calculate.completed",
        }
    ).encode()
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(f"{topic_prefix}action-requests", value, key=b"corr-1")
    finally:
        await producer.stop()

    async with consumer:
        [received] = await recorder.wait_for(1)

    assert isinstance(received, ActionRequest)
    assert received.id == event_id
    assert received.data == {"a": 2, "b": 3}
    assert received.response_event == "calculate.completed"
    assert received.response_topic == "action-results"


async def test_a_handler_receives_only_its_event_type(bus: BusClient) -> None:
    wanted, others = Recorder(), Recorder()
    consumer = BusConsumer(bus, "picky")
    consumer.add_handler(Topic.BUSINESS_FACTS, "order.placed", wanted)
    consumer.add_handler(Topic.SYSTEM_EVENTS, "*", others)
    await bus.announce("order.cancelled", {"n": 1})
    await bus.announce("order.placed", {"n": 2})
    await bus.publish(Topic.SYSTEM_EVENTS, "agent.started", {"n": 3})

    async with consumer:
        await wanted.wait_for(1)
        await others.wait_for(1)

    assert [e.type for e in wanted.envelopes] == ["order.placed"]
    assert [e.type for e in others.envelopes] == ["agent.started"]


async def test_envelopes_nobody_handles_are_committed_and_not_dead_lettered(
    bus: BusClient, recorder: Recorder, kafka_bootstrap: str
) -> None:
    consumer = BusConsumer(bus, "skipper")
    consumer.add_handler(Topic.BUSINESS_FACTS, "wanted.happened", recorder)
    for n in range(3):
        await bus.announce("unwanted.happened", {"n": n})
    await bus.announce("wanted.happened", {"n": 3})

    async with consumer:
        await recorder.wait_for(1)
        await consumer.stop()

    # Stopped and committed: anything dead-lettered is on the topic by now.
    dead = await read_records(kafka_bootstrap, bus.topic_name("business-facts.dlq"))
    assert dead == []
    committed = await committed_total(
        kafka_bootstrap, bus.group_name("skipper"), bus.topic_name("business-facts")
    )
    assert committed == 4
