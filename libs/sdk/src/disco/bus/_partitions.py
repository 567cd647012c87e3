"""A consumer's partitions: one worker per partition, in order, and the rebalance listener."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.structs import ConsumerRecord

if TYPE_CHECKING:
    from disco.bus._consumer import BusConsumer

__all__ = ["Abandoned", "PartitionWorker", "Rebalance", "finish"]


class Abandoned(Exception):
    """The consumer is stopping: leave this record uncommitted for redelivery."""


class PartitionWorker:
    """Handles one partition's records in order, one at a time."""

    def __init__(self, owner: BusConsumer, tp: TopicPartition) -> None:
        self.owner = owner
        self.tp = tp
        self.closed = False
        self._queue: deque[ConsumerRecord[bytes, bytes]] = deque()
        self._ready = asyncio.Event()
        self.task = asyncio.create_task(
            self._run(), name=f"disco-{owner.group}-{tp.topic}-{tp.partition}"
        )

    @property
    def backlog(self) -> int:
        """Records fetched and not yet handled."""
        return len(self._queue)

    def feed(self, records: Iterable[ConsumerRecord[bytes, bytes]]) -> None:
        """Queue fetched records."""
        self._queue.extend(records)
        self._ready.set()

    def close(self) -> None:
        """Finish the record in hand, drop the rest, and end."""
        self.closed = True
        self._queue.clear()
        self._ready.set()

    async def _run(self) -> None:
        owner = self.owner
        try:
            while True:
                if not self._queue:
                    if self.closed:
                        return
                    self._ready.clear()
                    await self._ready.wait()
                    continue
                record = self._queue.popleft()
                await owner._handle(record)
                owner._record_done(self.tp, record.offset)
        except Abandoned:
            return
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # surfaced through run(), never swallowed
            owner._fail(exc)


class Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """Tells the consumer when the group takes partitions away or gives it some."""

    def __init__(self, owner: BusConsumer) -> None:
        self.owner = owner

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self.owner._on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.owner._on_assigned(set(assigned))


async def finish(task: asyncio.Task[None], seconds: float) -> None:
    """Let ``task`` finish for up to ``seconds``, then cancel it; wait for its end."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(task), seconds)
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
