"""Noticing a broker that restarted without its data (the embedded one keeps it in memory).

Such a broker starts every partition again at offset 0 while a client's
positions are still the old, higher ones; Tansu answers a fetch beyond the end
with nothing rather than "offset out of range", so the client would wait until
the new log grew past its old position, skipping everything written before.
Group members and group-less readers both look now and then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

__all__ = ["LOOK_TIMEOUT", "beyond_end", "describe_partitions"]

_log = structlog.get_logger("disco.bus")

LOOK_TIMEOUT = 2.0
"""Seconds one look may wait for the broker (it is skipped while the broker is away)."""


async def beyond_end(
    consumer: AIOKafkaConsumer, partitions: Collection[TopicPartition]
) -> list[TopicPartition] | None:
    """The partitions whose position lies beyond their end (their log began again);
    ``None`` when the broker does not answer now.

    The end is the high watermark of the partition's last fetch response, not
    a ListOffsets answer: Tansu answers "latest" with the base offset of the
    last batch plus one, short of the end whenever that batch holds several
    records, which would look like a restart on a live broker. A partition
    not fetched since it was assigned is skipped until it is.
    """
    if not partitions:
        return []
    try:
        async with asyncio.timeout(LOOK_TIMEOUT):
            positions = {tp: await consumer.position(tp) for tp in partitions}
    except (KafkaError, TimeoutError) as exc:
        _log.debug("positions unavailable; looking again later", error=repr(exc))
        return None
    restarted = []
    for tp, position in positions.items():
        end = consumer.highwater(tp)
        if end is not None and position > end:
            restarted.append(tp)
    return sorted(restarted)


def describe_partitions(partitions: Collection[TopicPartition]) -> list[str]:
    """``topic[partition]`` names, for logs."""
    return sorted(f"{tp.topic}[{tp.partition}]" for tp in partitions)
