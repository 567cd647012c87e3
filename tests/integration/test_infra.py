"""The harness itself: the embedded broker and database are real and usable."""

from __future__ import annotations

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.fixtures.infra import DatabaseUrls


async def test_the_broker_stores_and_returns_a_record(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}probe"
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"hello", key=b"k")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        await consumer.topics()  # fresh metadata: the topic was created a moment ago
        partitions = consumer.partitions_for_topic(topic) or set()
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        await consumer.seek_to_beginning()
        batches = await consumer.getmany(timeout_ms=5000)
        values = [record.value for records in batches.values() for record in records]
    finally:
        await consumer.stop()
    assert values == [b"hello"]


async def test_the_app_role_is_not_a_superuser_and_cannot_bypass_rls(
    database: DatabaseUrls,
) -> None:
    conn = await asyncpg.connect(database.app)
    try:
        row = await conn.fetchrow(
            "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        )
        vector = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    finally:
        await conn.close()
    assert row is not None
    assert (row["rolsuper"], row["rolbypassrls"]) == (False, False)
    assert vector is not None
