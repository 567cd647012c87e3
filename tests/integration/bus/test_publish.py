"""What ``publish`` puts on the wire, where, and what it refuses."""

from __future__ import annotations

import asyncio
import inspect
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from opentelemetry.sdk.trace import TracerProvider

from disco.bus import BusClient, BusNotStartedError, MessageTooLargeError
from disco.settings import BusSettings
from disco_common.envelope import (
    CLOUDEVENTS_CONTENT_TYPE,
    ActionRequest,
    BusinessFact,
    Envelope,
    EnvelopeError,
)
from disco_common.topics import Topic
from tests.fixtures.bus import read_records
from tests.integration.bus.conftest import read_topic


async def test_the_record_carries_key_headers_and_value_as_the_design_says(
    bus: BusClient, kafka_bootstrap: str
) -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("caller") as span:
        sent = await bus.announce(
            "order.placed", {"order": 7}, tenant_id="acme", correlation_id="corr-9"
        )
        trace_id = format(span.get_span_context().trace_id, "032x")

    [record] = await read_topic(kafka_bootstrap, bus.topic_name(Topic.BUSINESS_FACTS), 1)

    assert record.key == b"corr-9"
    headers = dict(record.headers)
    assert headers["ce_type"] == b"order.placed"
    assert headers["ce_id"] == sent.id.encode()
    assert headers["ce_tenantid"] == b"acme"
    assert headers["content-type"] == CLOUDEVENTS_CONTENT_TYPE.encode()
    assert headers["traceparent"].decode().split("-")[1] == trace_id
    assert BusinessFact.from_kafka_value(record.value) == sent
    assert sent.source == "disco://agent/tester"


@pytest.mark.parametrize(
    ("attributes", "expected_key"),
    [
        ({"plan_id": "plan-1", "correlation_id": "corr-1"}, "plan-1"),
        ({"correlation_id": "corr-1"}, "corr-1"),
        ({}, None),
    ],
)
async def test_the_key_is_plan_then_correlation_then_id(
    bus: BusClient, kafka_bootstrap: str, attributes: dict[str, str], expected_key: str | None
) -> None:
    sent = await bus.publish(Topic.SYSTEM_EVENTS, "plan.started", {}, **attributes)

    [record] = await read_topic(kafka_bootstrap, bus.topic_name(Topic.SYSTEM_EVENTS), 1)

    assert record.key == (expected_key or sent.id).encode()


async def test_an_event_published_after_the_fact_carries_the_time_it_happened(
    bus: BusClient, kafka_bootstrap: str
) -> None:
    happened = datetime.now(UTC) - timedelta(seconds=3)
    sent = await bus.publish(Topic.SYSTEM_EVENTS, "plan.started", {}, time=happened)
    now = await bus.publish(Topic.SYSTEM_EVENTS, "plan.started", {})

    records = await read_topic(kafka_bootstrap, bus.topic_name(Topic.SYSTEM_EVENTS), 2)

    assert sent.time == happened
    # Keyed by their ids, they may lie on different partitions: matched by id.
    read = (Envelope.from_kafka_value(r.value) for r in records)
    assert {e.id: e.time for e in read} == {sent.id: happened, now.id: now.time}
    assert now.time > happened
    naive = await bus.publish(Topic.SYSTEM_EVENTS, "plan.started", {}, time=datetime(2026, 1, 1))
    assert naive.time == datetime(2026, 1, 1, tzinfo=UTC)  # taken as UTC, as every envelope time


async def test_the_topic_prefix_is_applied_to_every_topic(
    bus: BusClient, kafka_bootstrap: str, topic_prefix: str
) -> None:
    await bus.publish("custom-topic", "thing.happened", {"n": 1})

    records = await read_topic(kafka_bootstrap, f"{topic_prefix}custom-topic", 1)

    assert len(records) == 1
    assert bus.topic_name(Topic.ACTION_RESULTS) == f"{topic_prefix}action-results"


async def test_ensure_topics_provisions_the_five_topics_and_their_dead_letter_topics(
    bus_settings: BusSettings, topic_prefix: str
) -> None:
    settings = bus_settings.model_copy(update={"kafka_partitions": 2})
    async with BusClient(settings) as bus:
        names = await bus.ensure_topics()
        assert await bus.ensure_topics() == names  # again: already there is fine

    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        described = await admin.describe_topics(names)
    finally:
        await admin.close()
    partitions = {topic["topic"]: len(topic["partitions"]) for topic in described}
    expected = [f"{topic_prefix}{t}" for t in Topic] + [f"{topic_prefix}{t}.dlq" for t in Topic]
    assert sorted(names) == sorted(expected)
    assert partitions == dict.fromkeys(expected, 2)


def test_publish_cannot_be_called_without_a_topic() -> None:
    parameters = inspect.signature(BusClient.publish).parameters
    topic = parameters["topic"]

    assert list(parameters)[1] == "topic"
    assert topic.default is inspect.Parameter.empty
    assert topic.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


async def test_a_request_without_a_response_event_is_refused(bus: BusClient) -> None:
    with pytest.raises(EnvelopeError, match="response_event"):
        await bus.publish(Topic.ACTION_REQUESTS, "calculate.requested", {})


async def test_a_request_published_to_action_requests_is_an_action_request(bus: BusClient) -> None:
    sent = await bus.publish(
        Topic.ACTION_REQUESTS, "calculate.requested", {}, response_event="calculate.completed"
    )

    assert isinstance(sent, ActionRequest)
    assert sent.response_topic == "action-results"


async def test_a_message_over_the_size_limit_is_refused_before_sending(
    bus_settings: BusSettings, kafka_bootstrap: str
) -> None:
    settings = bus_settings.model_copy(update={"bus_max_message_bytes": 2048})
    async with BusClient(settings) as bus:
        with pytest.raises(MessageTooLargeError, match="DISCO_BUS_MAX_MESSAGE_BYTES"):
            await bus.announce("blob.stored", {"blob": "x" * 4096})
        await bus.announce("small.stored", {"blob": "x"})

    records = await read_records(kafka_bootstrap, bus.topic_name(Topic.BUSINESS_FACTS))  # acked
    assert [dict(r.headers)["ce_type"] for r in records] == [b"small.stored"]


async def test_publishing_before_start_says_to_start_the_client(bus_settings: BusSettings) -> None:
    bus = BusClient(bus_settings)

    with pytest.raises(BusNotStartedError, match="start"):
        await bus.announce("too.early", {})


async def test_send_queues_many_events_and_each_future_resolves_once_acknowledged(
    bus: BusClient, kafka_bootstrap: str
) -> None:
    acks = [await bus.send(Topic.BUSINESS_FACTS, "row.imported", {"row": n}) for n in range(50)]

    sent = await asyncio.gather(*acks)

    records = await read_topic(kafka_bootstrap, bus.topic_name(Topic.BUSINESS_FACTS), 50)
    assert sorted(BusinessFact.from_kafka_value(r.value).id for r in records) == sorted(
        e.id for e in sent
    )
    assert [e.data for e in sent] == [{"row": n} for n in range(50)]


async def test_a_burst_larger_than_the_writer_queues_arrives_whole_and_in_order_per_key(
    bus_settings: BusSettings, kafka_bootstrap: str
) -> None:
    # Small batches, so that the burst fills far more than the writer queues before
    # writers wait (back-pressure), across three partitions.
    settings = bus_settings.model_copy(update={"kafka_max_batch_bytes": 2048})
    async with BusClient(settings, name="tester") as bus:
        await bus.ensure_topics([Topic.BUSINESS_FACTS])
        acks = [
            await bus.send(
                Topic.BUSINESS_FACTS, "row.imported", {"n": n}, correlation_id=f"key-{n % 5}"
            )
            for n in range(1500)
        ]
        sent = await asyncio.gather(*acks)

    records = await read_topic(kafka_bootstrap, bus.topic_name(Topic.BUSINESS_FACTS), 1500)
    facts = [BusinessFact.from_kafka_value(record.value) for record in records]
    assert sorted(fact.id for fact in facts) == sorted(envelope.id for envelope in sent)
    by_key = [(fact.correlation_id, cast(dict[str, int], fact.data)["n"]) for fact in facts]
    for key in range(5):
        numbers = [n for correlation_id, n in by_key if correlation_id == f"key-{key}"]
        assert numbers == list(range(key, 1500, 5))


async def test_stopping_the_client_sends_what_was_written_but_not_yet_acknowledged(
    bus_settings: BusSettings, kafka_bootstrap: str
) -> None:
    async with BusClient(bus_settings, name="tester") as bus:
        await bus.ensure_topics([Topic.BUSINESS_FACTS])
        acks = [await bus.send(Topic.BUSINESS_FACTS, "row.imported", {"n": n}) for n in range(20)]
    # The client stopped without anyone awaiting the acknowledgements.

    sent = await asyncio.gather(*acks)
    records = await read_topic(kafka_bootstrap, bus.topic_name(Topic.BUSINESS_FACTS), 20)
    assert sorted(BusinessFact.from_kafka_value(r.value).id for r in records) == sorted(
        e.id for e in sent
    )
