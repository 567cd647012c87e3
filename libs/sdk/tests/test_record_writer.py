"""The bus's record writer over a producer that fails on cue (the broker itself is
exercised in tests/integration/bus/test_publish.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError, UnknownTopicOrPartitionError
from aiokafka.producer.message_accumulator import BatchBuilder

from disco.bus._errors import PublishError
from disco.bus._producer import RecordWriter


class _Producer:
    """What the writer uses of AIOKafkaProducer: batches handed over are kept, and
    acknowledged (or failed) when the test says."""

    def __init__(
        self,
        *,
        batch_bytes: int = 16_384,
        refuse: BaseException | None = None,
        held: bool = False,
    ):
        self.batch_bytes = batch_bytes
        self.refuse = refuse
        # While held, send_batch waits (a producer whose pending batch never drains).
        self.gate = asyncio.Event()
        if not held:
            self.gate.set()
        self.handed: list[tuple[str, int, int, asyncio.Future[Any]]] = []
        self.stopped = False
        self.partition_count = 3
        # Metadata listeners (the producer's cluster metadata calls them on updates).
        self.listeners: list[Callable[[Any], None]] = []
        self.client = SimpleNamespace(cluster=SimpleNamespace(add_listener=self.listeners.append))

    async def partitions_for(self, topic: str) -> set[int]:
        if topic == "missing":
            raise UnknownTopicOrPartitionError()
        return set(range(self.partition_count))

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(self.batch_bytes, 0)

    async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> Any:
        await self.gate.wait()
        if self.refuse is not None:
            raise self.refuse
        sent: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.handed.append((topic, partition, batch.record_count(), sent))
        return sent

    async def stop(self) -> None:
        self.stopped = True


async def _settled(deliveries: list[asyncio.Future[Any]]) -> list[Any]:
    return await asyncio.gather(*deliveries, return_exceptions=True)


async def test_records_written_in_one_burst_leave_as_one_batch_per_partition() -> None:
    producer = _Producer()
    writer = RecordWriter(producer)

    deliveries = [await writer.write("t", b"same-key", b"v", []) for _ in range(10)]
    await asyncio.sleep(0)  # the flusher's turn

    assert [(topic, count) for topic, _, count, _ in producer.handed] == [("t", 10)]
    assert not any(delivery.done() for delivery in deliveries)
    producer.handed[0][3].set_result(None)
    assert await _settled(deliveries) == [None] * 10


async def test_a_failed_batch_fails_every_record_in_it_and_no_other() -> None:
    producer = _Producer()
    writer = RecordWriter(producer)
    first = [await writer.write("t", b"a", b"v", []) for _ in range(3)]
    await asyncio.sleep(0)
    second = [await writer.write("t", b"a", b"v", []) for _ in range(2)]
    await asyncio.sleep(0)

    producer.handed[0][3].set_exception(KafkaTimeoutError())
    producer.handed[1][3].set_result(None)

    assert all(isinstance(r, KafkaTimeoutError) for r in await _settled(first))
    assert await _settled(second) == [None, None]


async def test_a_batch_the_producer_will_not_take_fails_its_records() -> None:
    producer = _Producer(refuse=KafkaTimeoutError())
    writer = RecordWriter(producer)

    deliveries = [await writer.write("t", b"k", b"v", []) for _ in range(4)]

    assert all(isinstance(r, KafkaTimeoutError) for r in await _settled(deliveries))


async def test_an_unknown_topic_is_refused_at_once() -> None:
    writer = RecordWriter(_Producer())

    with pytest.raises(PublishError, match="missing"):
        await writer.write("missing", b"k", b"v", [])


async def test_writers_wait_while_too_many_full_batches_queue_and_go_on_as_they_drain() -> None:
    # Each record fills a batch: every write queues one; the producer takes none
    # until the test lets the flusher run.
    producer = _Producer(batch_bytes=64)
    writer = RecordWriter(producer)
    handed_while_writing: list[int] = []
    deliveries = []
    for _ in range(200):
        deliveries.append(await writer.write("t", b"k", b"x" * 100, []))
        handed_while_writing.append(len(producer.handed))

    # Nothing but the wait for room yields to the flusher in this loop.
    assert handed_while_writing[60] == 0
    assert handed_while_writing[-1] > 0
    await asyncio.sleep(0)
    assert sum(count for _, _, count, _ in producer.handed) == 200
    for *_, sent in producer.handed:
        sent.set_result(None)
    assert await _settled(deliveries) == [None] * 200


async def test_stop_hands_over_what_was_written_then_stops_the_producer() -> None:
    producer = _Producer()
    writer = RecordWriter(producer)
    deliveries = [await writer.write("t", str(n).encode(), b"v", []) for n in range(6)]

    await writer.stop()

    assert sum(count for _, _, count, _ in producer.handed) == 6
    assert producer.stopped
    with pytest.raises(PublishError, match="stopped"):
        await writer.write("t", b"k", b"v", [])
    for *_, sent in producer.handed:
        sent.set_result(None)
    assert await _settled(deliveries) == [None] * 6


async def test_cancelling_the_flusher_cancels_what_it_had_not_handed_over() -> None:
    producer = _Producer(held=True)
    writer = RecordWriter(producer)
    deliveries = [await writer.write("t", str(n).encode(), b"v", []) for n in range(9)]
    await asyncio.sleep(0)  # the flusher waits on its first batch
    assert writer._flusher is not None

    writer._flusher.cancel()
    await asyncio.gather(writer._flusher, return_exceptions=True)

    assert all(delivery.cancelled() for delivery in deliveries)


async def test_partitions_are_read_again_after_a_metadata_update() -> None:
    producer = _Producer()
    writer = RecordWriter(producer)
    keys = [str(n).encode() for n in range(40)]
    for key in keys:
        await writer.write("t", key, b"v", [])
    await asyncio.sleep(0)
    assert {partition for _, partition, _, _ in producer.handed} == {0, 1, 2}

    producer.partition_count = 8  # partitions added; the producer's metadata learns it
    for listener in producer.listeners:
        listener(None)
    producer.handed.clear()
    for key in keys:
        await writer.write("t", key, b"v", [])
    await asyncio.sleep(0)

    assert max(partition for _, partition, _, _ in producer.handed) > 2


class _Receiver:
    def __init__(self) -> None:
        self.outcomes: list[tuple[BaseException | None, bool]] = []

    def received(self, error: BaseException | None, cancelled: bool) -> None:
        self.outcomes.append((error, cancelled))


async def test_a_receiver_is_told_the_outcome_of_its_batch_instead_of_a_future() -> None:
    producer = _Producer()
    writer = RecordWriter(producer)
    acknowledged, failed = _Receiver(), _Receiver()

    assert await writer.write("t", b"a", b"v", [], acknowledged) is None
    await asyncio.sleep(0)
    assert await writer.write("t", b"a", b"v", [], failed) is None
    await asyncio.sleep(0)
    error = KafkaTimeoutError()
    producer.handed[0][3].set_result(None)
    producer.handed[1][3].set_exception(error)
    await asyncio.sleep(0)  # the batches' done callbacks

    assert acknowledged.outcomes == [(None, False)]
    assert failed.outcomes == [(error, False)]


async def test_a_receiver_of_a_record_never_handed_over_is_told_it_was_cancelled() -> None:
    producer = _Producer(held=True)
    writer = RecordWriter(producer)
    receiver = _Receiver()
    await writer.write("t", b"k", b"v", [], receiver)
    await asyncio.sleep(0)
    assert writer._flusher is not None

    writer._flusher.cancel()
    await asyncio.gather(writer._flusher, return_exceptions=True)

    assert receiver.outcomes == [(None, True)]


async def test_a_writer_cancelled_while_waiting_for_room_has_written_nothing() -> None:
    producer = _Producer(batch_bytes=64, held=True)  # every record fills a batch
    writer = RecordWriter(producer)
    written = 0
    while len(writer._queued) < 64:
        await writer.write("t", b"k", b"x" * 100, [])
        written += 1
    waiting = asyncio.create_task(writer.write("t", b"k", b"x" * 100, []))
    await asyncio.sleep(0)
    assert not waiting.done()  # no room: it waits

    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    producer.gate.set()
    await writer.stop()

    assert sum(count for _, _, count, _ in producer.handed) == written
