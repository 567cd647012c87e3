"""How many record batches a topic's partitions hold (what the embedded broker's fetch
walks): read every partition from its start with raw fetch requests and count them."""

from __future__ import annotations

from aiokafka import AIOKafkaClient
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
