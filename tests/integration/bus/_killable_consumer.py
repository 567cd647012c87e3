"""A consumer process for the redelivery test, meant to be SIGKILLed.

Usage: python _killable_consumer.py BOOTSTRAP PREFIX GROUP LOG_FILE BLOCK_AT

It appends the id of every envelope it handles to LOG_FILE (flushed at once)
and, on the BLOCK_AT-th envelope, records it and then blocks forever without
returning, so that envelope and those after it are never committed.
"""

from __future__ import annotations

import asyncio
import sys

from disco.bus import BusClient, BusConsumer
from disco.settings import BusSettings
from disco_common.envelope import Envelope
from disco_common.topics import Topic


async def main(bootstrap: str, prefix: str, group: str, log_file: str, block_at: int) -> None:
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

        async with BusClient(settings, name=group) as bus:
            consumer = BusConsumer(bus, group)
            consumer.add_handler(Topic.BUSINESS_FACTS, "*", record)
            await consumer.run()


if __name__ == "__main__":
    bootstrap, prefix, group, log_file, block_at = sys.argv[1:6]
    asyncio.run(main(bootstrap, prefix, group, log_file, int(block_at)))
