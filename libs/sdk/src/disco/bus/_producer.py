"""Records into aiokafka in whole batches: :class:`RecordWriter`.

``AIOKafkaProducer.send`` costs about 14 µs of CPU per record (checks,
partitioning, a queue slot and a future per record, and a RecordMetadata per
record on the ack); appending to a batch builder and handing the batch over
with ``send_batch`` costs about 8 (measured on this bus's records). So the
writer keeps one open batch per partition: a record is appended to its
partition's batch at once, and a flusher task hands every open batch to the
producer as soon as the event loop gets to it — records written in one burst
(before the writer yields) leave together, a lone record leaves on the next
turn of the loop, as it would through ``send``. The producer's linger, batch
size and acks apply to these batches as to its own.

Order holds per partition: batches are handed over in the order they were
opened, by one task, and the producer sends a partition's batches in order.
Back-pressure: while :data:`_MAX_QUEUED_BATCHES` full batches wait for the
producer, writers wait before adding their records.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Protocol

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.producer.message_accumulator import BatchBuilder

from disco.bus._errors import PublishError
from disco.bus._partitioner import partition_for
from disco_common.envelope import KafkaHeaders

__all__ = ["DeliveryReceiver", "RecordWriter"]

_MAX_QUEUED_BATCHES = 64
"""Full batches waiting for the producer before writers wait (64 x the batch size)."""


class DeliveryReceiver(Protocol):
    """Told of its record's outcome by the batch itself, in the turn of the loop the
    broker answered (a done callback on a delivery future would wait for the next)."""

    def received(self, error: BaseException | None, cancelled: bool) -> None: ...


class _Batch:
    """One partition's open or queued batch, and who waits for each of its records:
    a delivery future or a :class:`DeliveryReceiver`."""

    __slots__ = ("builder", "deliveries", "name", "partition", "receivers")

    def __init__(self, name: str, partition: int, builder: BatchBuilder) -> None:
        self.name = name
        self.partition = partition
        self.builder = builder
        self.deliveries: list[asyncio.Future[Any]] = []
        self.receivers: list[DeliveryReceiver] = []

    def settle(self, sent: asyncio.Future[Any]) -> None:
        """Resolve each record's delivery as the batch's: acknowledged, failed or cancelled."""
        if sent.cancelled():
            self.cancel()
            return
        error = sent.exception()
        if error is not None:
            self.fail(error)
            return
        for delivery in self.deliveries:
            if not delivery.done():
                delivery.set_result(None)
        for receiver in self.receivers:
            receiver.received(None, False)

    def fail(self, error: BaseException) -> None:
        for delivery in self.deliveries:
            if not delivery.done():
                delivery.set_exception(error)
        for receiver in self.receivers:
            receiver.received(error, False)

    def cancel(self) -> None:
        for delivery in self.deliveries:
            delivery.cancel()
        for receiver in self.receivers:
            receiver.received(None, True)


class RecordWriter:
    """Hands records to one :class:`AIOKafkaProducer` in per-partition batches, in order."""

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self.producer = producer
        self._loop = asyncio.get_running_loop()
        # Each topic's partitions, as the producer's metadata knows them: read once,
        # forgotten at every metadata update (partitions added, leaders moved).
        self._partitions: dict[str, list[int]] = {}
        producer.client.cluster.add_listener(self._metadata_updated)
        self._open: dict[tuple[str, int], _Batch] = {}
        self._queued: deque[_Batch] = deque()
        self._flusher: asyncio.Task[None] | None = None
        self._room: asyncio.Future[None] | None = None
        self._stopping = False

    async def write(
        self,
        name: str,
        key: bytes | None,
        value: bytes | None,
        headers: KafkaHeaders,
        receiver: DeliveryReceiver | None = None,
    ) -> asyncio.Future[Any] | None:
        """Add a record to its partition's batch; return its delivery future (None
        once the broker acknowledged it; the producer's error if it did not), or
        tell ``receiver`` instead when one is given (and return None).

        Raises:
            PublishError: the topic is unknown to the broker, or the writer is stopped.
        """
        # Every wait comes before the record is added: a caller cancelled while waiting
        # has written nothing, and one that returns has written its record.
        if len(self._queued) >= _MAX_QUEUED_BATCHES and not self._stopping:
            await self._wait_for_room()
        if self._stopping:
            raise PublishError(f"the producer is stopped; a record for {name!r} was not sent")
        partitions = self._partitions.get(name)
        if partitions is None:
            try:
                partitions = list(await self.producer.partitions_for(name))
            except KafkaError as exc:
                raise PublishError(f"the producer refused a record for {name!r}: {exc}") from exc
            self._partitions[name] = partitions
        partition = partition_for(key, partitions, partitions)
        slot = (name, partition)
        batch = self._open.get(slot)
        if batch is None:
            batch = self._open[slot] = _Batch(name, partition, self.producer.create_batch())
        if batch.builder.append(key=key, value=value, timestamp=None, headers=headers) is None:
            # Full: it goes to the queue, and the record starts the next one (an
            # empty batch takes any record; the size was checked before).
            self._queued.append(batch)
            batch = self._open[slot] = _Batch(name, partition, self.producer.create_batch())
            batch.builder.append(key=key, value=value, timestamp=None, headers=headers)
        delivery: asyncio.Future[Any] | None = None
        if receiver is None:
            delivery = self._loop.create_future()
            batch.deliveries.append(delivery)
        else:
            batch.receivers.append(receiver)
        self._wake()
        return delivery

    async def stop(self) -> None:
        """Hand over every batch written so far, then stop (and flush) the producer."""
        self._stopping = True
        self._wake()
        flusher = self._flusher
        if flusher is not None:
            await asyncio.gather(flusher, return_exceptions=True)
        await self.producer.stop()

    def _metadata_updated(self, cluster: Any) -> None:
        self._partitions.clear()

    def _wake(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="disco-publish")

    async def _wait_for_room(self) -> None:
        if self._room is None or self._room.done():
            self._room = self._loop.create_future()
        await asyncio.shield(self._room)

    async def _flush(self) -> None:
        # Runs when the loop gets to it: everything written until then is in the
        # open batches, which close now (records written meanwhile open new ones).
        queued = self._queued
        try:
            while queued or self._open:
                if self._open:
                    queued.extend(self._open.values())
                    self._open.clear()
                batch = queued.popleft()
                try:
                    sent = await self.producer.send_batch(
                        batch.builder, batch.name, partition=batch.partition
                    )
                except asyncio.CancelledError:
                    queued.appendleft(batch)
                    raise
                except BaseException as exc:
                    batch.fail(exc)
                else:
                    sent.add_done_callback(batch.settle)
                if len(queued) <= _MAX_QUEUED_BATCHES // 2:
                    self._make_room()
        except asyncio.CancelledError:
            # The loop is going away: nothing written and not handed over will be.
            queued.extend(self._open.values())
            self._open.clear()
            for batch in queued:
                batch.cancel()
            queued.clear()
            raise
        finally:
            self._make_room()

    def _make_room(self) -> None:
        room = self._room
        if room is not None and not room.done():
            room.set_result(None)
