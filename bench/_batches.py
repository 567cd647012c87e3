"""How many record batches a topic's partitions hold (what the embedded broker's fetch
walks): read every partition from its start with raw fetch requests and count them."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence

from aiokafka import AIOKafkaClient, AIOKafkaProducer
from aiokafka.protocol.fetch import FetchRequest
from aiokafka.record.memory_records import MemoryRecords


async def batch_counts(bootstrap: str, topics: list[str]) -> dict[str, tuple[int, int]]:
    """``{topic: (batches, records)}`` over every partition of each topic."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap)
    await client.bootstrap()
    try:
        await client.force_metadata_update()
        node = min(b.nodeId for b in client.cluster.brokers())
        found: dict[str, tuple[int, int]] = {}
        for topic in topics:
            batches = records = 0
            for partition in sorted(client.cluster.partitions_for_topic(topic) or ()):
                offset = 0
                while True:
                    request = FetchRequest(
                        1, 1, 4 << 20, 0, [(topic, [(partition, offset, 4 << 20)])]
                    )
                    response = await client.send(node, request)
                    data = response.topics[0][1][0][-1]
                    if not data:
                        break
                    memory = MemoryRecords(data)
                    last = offset
                    while memory.has_next():
                        batch = memory.next_batch()
                        if batch is None:
                            break
                        batches += 1
                        for record in batch:
                            records += 1
                            last = record.offset
                    if last < offset:
                        break
                    offset = last + 1
            found[topic] = (batches, records)
        return found
    finally:
        await client.close()


Record = tuple[bytes | None, bytes, list[tuple[str, bytes]] | None]
"""A record to write: (key, value, headers)."""


async def write_batches(
    producer: AIOKafkaProducer,
    topic: str,
    batches: int,
    per_batch: int,
    partitions: Sequence[int],
    record: Callable[[], Record],
    window: int = 64,
) -> Counter[int]:
    """Write ``batches`` record batches of ``per_batch`` records each (``record()`` makes
    each) to ``topic``, one partition after another, at most ``window`` sends
    unanswered: the records written per partition."""
    written: Counter[int] = Counter()
    pending = []
    for index in range(batches):
        batch = producer.create_batch()
        for _ in range(per_batch):
            key, value, headers = record()
            batch.append(key=key, value=value, timestamp=None, headers=headers)
        batch.close()
        partition = partitions[index % len(partitions)]
        pending.append(await producer.send_batch(batch, topic, partition=partition))
        written[partition] += per_batch
        if len(pending) >= window:
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)
    return written
