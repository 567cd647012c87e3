"""The FastStream peer of bench/table.py's tool rows (a bench-only dependency).

FastStream (``faststream[kafka]``, over aiokafka like disco) is what a Python
developer would pick instead of disco for agents that talk over Kafka. It has
no Kafka request/reply of its own (its ``KafkaBroker.request`` needs the test
client), so a request is published with ``reply_to`` and a ``correlation_id``,
the tool's handler returns its answer (FastStream publishes a handler's return
value to the message's ``reply_to`` topic with the same correlation id), and
the requester resolves a future per correlation id from a reply subscriber:
what its documentation shows for RPC over a broker without request/reply.

Both subscribers fetch at ``wait_ms``: aiokafka's (and FastStream's) default of
500 ms holds each request about 250 ms on the embedded Tansu broker, which
does not long-poll (an empty fetch sleeps half its wait before looking
again), so the table runs FastStream at the raw baseline's fetch wait and
says so (and prints a short sample at its default).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from agents import Done, Work  # the disco Tool's request and answer models
from aiokafka import AIOKafkaConsumer
from faststream.kafka import KafkaBroker, KafkaMessage, TopicPartition

from disco_common.topics import Topic

DEFAULT_FETCH_WAIT_MS = 500
"""aiokafka's ``fetch_max_wait_ms``, which FastStream's subscribers keep by default."""


async def serve_tool(bootstrap: str, prefix: str, wait_ms: int) -> None:
    """A FastStream tool: validates a ``Work``, returns a ``Done`` to ``reply_to``."""
    broker = KafkaBroker(bootstrap, logger=None)

    @broker.subscriber(
        f"{prefix}{Topic.ACTION_REQUESTS}",
        group_id=f"{prefix}faststream-tool",
        auto_offset_reset="earliest",
        fetch_max_wait_ms=wait_ms,
        # The session timing disco's bench tool has (bench/agents.py settings_for).
        session_timeout_ms=2000,
        heartbeat_interval_ms=500,
    )
    async def work(request: Work) -> Done:
        return Done(n=request.n + 1, size=len(request.blob))

    await broker.start()
    print("ready", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await broker.stop()


class Requester:
    """Publishes ``Work`` with ``reply_to`` and waits for the correlated ``Done``."""

    def __init__(self, bootstrap: str, prefix: str, wait_ms: int) -> None:
        self.requests = f"{prefix}{Topic.ACTION_REQUESTS}"
        self.replies = f"{prefix}{Topic.ACTION_RESULTS}"
        self._broker = KafkaBroker(bootstrap, logger=None)
        self._waiting: dict[str, asyncio.Future[Done]] = {}
        self._wait_ms = wait_ms
        self._bootstrap = bootstrap

    async def _partitions(self) -> list[TopicPartition]:
        probe = AIOKafkaConsumer(bootstrap_servers=self._bootstrap)
        await probe.start()
        try:
            await probe.topics()
            return [
                TopicPartition(self.replies, p, declare=False)
                for p in sorted(probe.partitions_for_topic(self.replies) or ())
            ]
        finally:
            await probe.stop()

    async def start(self) -> None:
        # Group-less, every partition of the reply topic, from its end ("latest").
        subscriber = self._broker.subscriber(
            partitions=await self._partitions(),
            auto_offset_reset="latest",
            fetch_max_wait_ms=self._wait_ms,
        )

        @subscriber
        async def reply(body: Done, message: KafkaMessage) -> None:
            future = self._waiting.pop(message.correlation_id, None)
            if future is not None and not future.done():
                future.set_result(body)

        await self._broker.start()
        # The embedded broker answers "latest" wrongly on a topic that holds records:
        # position at the end offsets it reports (what disco's reply listener does).
        consumer = subscriber.consumer
        assert consumer is not None
        for partition, offset in (await consumer.end_offsets(list(consumer.assignment()))).items():
            consumer.seek(partition, offset)

    async def stop(self) -> None:
        await self._broker.stop()

    async def request(self, payload: dict[str, Any], timeout: float) -> Done:  # noqa: ASYNC109
        correlation_id = uuid.uuid4().hex
        future: asyncio.Future[Done] = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = future
        try:
            await self._broker.publish(
                Work(**payload),
                topic=self.requests,
                reply_to=self.replies,
                correlation_id=correlation_id,
            )
            return await asyncio.wait_for(future, timeout)
        finally:
            self._waiting.pop(correlation_id, None)

    async def send(self, payload: dict[str, Any]) -> None:
        """Publish one request without waiting for its acknowledgement (pipelined)."""
        await self._broker.publish(
            Work(**payload),
            topic=self.requests,
            reply_to=self.replies,
            correlation_id=uuid.uuid4().hex,
            no_confirm=True,
        )
