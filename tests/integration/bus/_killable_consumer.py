"""A consumer process for the redelivery test, meant to be SIGKILLed.

Usage: python _killable_consumer.py BOOTSTRAP PREFIX GROUP LOG_FILE BLOCK_AT [BATCH_SIZE]

It appends the id of every envelope it handles to LOG_FILE (flushed at once)
and, on the BLOCK_AT-th envelope, records it and then blocks forever without
returning, so that envelope and those after it are never committed.

With BATCH_SIZE it consumes with a batch handler of batches of up to that many
envelopes instead, writes each batch's ids on one line, and blocks on the
BLOCK_AT-th batch the same way.
"""

from __future__ import annotations

import asyncio
import sys

from disco.bus import Batch, BusClient, BusConsumer
from disco.settings import BusSettings
from disco_common.envelope import Envelope
from disco_common.topics import Topic


async def main(
    bootstrap: str, prefix: str, group: str, log_file: str, block_at: int, batch_size: int | None
) -> None:
    settings = BusSettings(
        kafka_bootstrap=bootstrap,
        topic_prefix=prefix,
        kafka_partitions=1,
        kafka_session_timeout_ms=2000,
        kafka_heartbeat_interval_ms=300,
        kafka_fetch_max_wait_ms=20,
        # One record at a time: the test pins where the committed offset stops.
        bus_partition_concurrency=1,
    )
    handled = 0
    with open(log_file, "a", buffering=1) as log:

        async def record(envelope: Envelope) -> None:
            nonlocal handled
            handled += 1
            log.write(envelope.id + "\n")
            log.flush()
            if handled >= block_at:
                await asyncio.Event().wait()

        async def record_batch(batch: Batch) -> None:
            nonlocal handled
            handled += 1
            log.write(" ".join(envelope.id for envelope in batch.envelopes) + "\n")
            log.flush()
            if handled >= block_at:
                await asyncio.Event().wait()

        async with BusClient(settings, name=group) as bus:
            consumer = BusConsumer(bus, group)
            if batch_size is None:
                consumer.add_handler(Topic.BUSINESS_FACTS, "*", record)
            else:
                consumer.add_batch_handler(
                    Topic.BUSINESS_FACTS, record_batch, max_records=batch_size
                )
            await consumer.run()


if __name__ == "__main__":
    bootstrap, prefix, group, log_file, block_at = sys.argv[1:6]
    batch = int(sys.argv[6]) if len(sys.argv) > 6 else None
    asyncio.run(main(bootstrap, prefix, group, log_file, int(block_at), batch))
