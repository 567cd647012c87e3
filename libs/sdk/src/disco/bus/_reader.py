"""Reading topics without a consumer group.

For whatever must see envelopes go by without taking anyone's work or moving
anyone's offsets: the reply listener, ``disco tail``, tests, operators' tools.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError, for_code
from aiokafka.protocol.fetch import FetchRequest

from disco._lifecycle import StartStop
from disco.bus._errors import BusError, BusUnavailableError
from disco.bus._polling import FetchPacer, fetch_options
from disco.bus._restarts import LOOK_TIMEOUT, beyond_end, describe_partitions
from disco.settings import BusSettings
from disco_common.envelope import Envelope, EnvelopeError
from disco_common.topics import strip_prefix, topic_name

__all__ = ["ReadRecord", "TopicReader"]

_log = structlog.get_logger("disco.bus")


@dataclass(frozen=True, slots=True)
class ReadRecord:
    """One record read: its logical topic, position, and the envelope (or why not)."""

    topic: str
    """The logical topic (without the environment prefix)."""
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]

    def envelope(self) -> Envelope:
        """The record's envelope; :class:`EnvelopeError` when it is not one."""
        return Envelope.from_kafka_record(self.value, self.headers)

    def envelope_or_none(self) -> Envelope | None:
        """The record's envelope, or ``None`` when the value is not one."""
        try:
            return self.envelope()
        except EnvelopeError:
            return None


_CLIENT = "_client"
"""The consumer's ``AIOKafkaClient`` (aiokafka has no public accessor): the fetch that
finds the partitions' ends goes through its connections."""

_SUBSCRIPTION = "_subscription"
"""The consumer's subscription state (aiokafka has no public setter for a partition's
high watermark, which only its own fetches update)."""


async def _high_watermarks(
    consumer: AIOKafkaConsumer, positions: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """Each partition's high watermark, from one fetch at ``positions`` per leader (at
    most a batch of each partition comes back, and is dropped)."""
    client: Any = getattr(consumer, _CLIENT)
    by_leader: dict[int, dict[str, list[tuple[int, int, int]]]] = {}
    for tp, offset in positions.items():
        leader = client.cluster.leader_for_partition(tp)
        if leader is None or leader < 0:
            raise KafkaError(f"no leader for {tp.topic}[{tp.partition}]")
        by_leader.setdefault(leader, {}).setdefault(tp.topic, []).append((tp.partition, offset, 1))
    ends: dict[TopicPartition, int] = {}
    for leader, topics in by_leader.items():
        request = FetchRequest(1, 1, 1, 0, list(topics.items()))
        response = await client.send(leader, request)
        for topic, answered in response.topics:
            for partition, error_code, highwater, *_ in answered:
                if error_code:
                    raise for_code(error_code)()
                ends[TopicPartition(topic, partition)] = highwater
    missing = set(positions) - set(ends)
    if missing:
        raise KafkaError(f"no high watermark for {describe_partitions(missing)}")
    return ends


class TopicReader(StartStop):
    """Reads every partition of some topics, group-less, from their start or end.

    ``last=N`` starts each partition N records before its end (what is newest,
    bounded: a dead-letter browser, ``tail -n``). ``start_at`` starts the
    partitions it names at the offsets it gives (``{(topic, partition): offset}``,
    logical topics; a reader that resumes where it kept its place), no lower
    than each partition's beginning; the others start as they would without it.

    Topics are logical names: the settings' prefix is put in front. Positioning
    uses explicit end offsets (the embedded broker's "latest" reset is not
    reliable), and start waits until the broker's metadata knows every topic,
    so a topic created a moment ago is not silently read as empty.

    A broker that restarted without its data (the embedded one keeps it in
    memory) starts every partition again at offset 0, while this reader's
    positions are still the old, higher ones; Tansu answers a fetch beyond the
    end with nothing rather than "offset out of range", so such a reader would
    wait until the new log grew past its old position (a requester's answers
    all time out meanwhile). So every ``realign_interval`` seconds ``read``
    compares the positions with the end offsets; when any partition's position
    lies beyond its end, the broker lost its data, and every partition is read
    again from its (new) beginning: all of it was written after the restart,
    so nothing is read twice, and a partition that grew past the old position
    before the check is not skipped.
    """

    def __init__(
        self,
        settings: BusSettings,
        topics: Sequence[str],
        *,
        from_beginning: bool = False,
        last: int | None = None,
        metadata_timeout: float = 10.0,
        realign_interval: float = 1.0,
        start_at: Mapping[tuple[str, int], int] | None = None,
    ) -> None:
        if not topics:
            raise ValueError("TopicReader needs at least one topic")
        if last is not None and (last < 0 or from_beginning):
            raise ValueError("`last` must be >= 0 and cannot be combined with from_beginning")
        self._last = last
        self._start_at = dict(start_at or {})
        self.settings = settings
        self._names = {topic_name(topic, settings.topic_prefix): str(topic) for topic in topics}
        self._from_beginning = from_beginning
        self._metadata_timeout = metadata_timeout
        self._consumer: AIOKafkaConsumer | None = None
        self._pacer: FetchPacer | None = None
        self._realign_interval = realign_interval
        self._next_realign = 0.0

    @property
    def started(self) -> bool:
        """Whether the reader is positioned and can read."""
        return self._consumer is not None

    async def start(self) -> None:
        """Assign every partition of the topics and position the reader (idempotent).

        Raises:
            BusError: a topic does not exist (after waiting ``metadata_timeout``).
            BusUnavailableError: the broker cannot be reached.
        """
        if self._consumer is not None:
            return
        options = await fetch_options(self.settings)
        consumer = AIOKafkaConsumer(group_id=None, enable_auto_commit=False, **options.consumer)
        try:
            await consumer.start()
            partitions = await self._partitions(consumer)
            consumer.assign(partitions)
            if self._from_beginning:
                await consumer.seek_to_beginning(*partitions)
            else:
                ends = await consumer.end_offsets(partitions)
                starts = (
                    await consumer.beginning_offsets(partitions)
                    if self._last or self._start_at
                    else {}
                )
                for partition, offset in ends.items():
                    if self._last:
                        offset = max(starts[partition], offset - self._last)
                    at = self._start_at.get((self._names[partition.topic], partition.partition))
                    if at is not None:
                        offset = max(starts[partition], at)
                    consumer.seek(partition, offset)
        except KafkaError as exc:
            await consumer.stop()
            raise BusUnavailableError(
                f"cannot read {sorted(self._names.values())} at {self.settings.kafka_bootstrap}: "
                f"{exc}"
            ) from exc
        except BaseException:
            await consumer.stop()
            raise
        pacer = options.pacer()
        pacer.attach(consumer)
        self._pacer = pacer
        self._consumer = consumer

    @property
    def pacer(self) -> FetchPacer:
        """What sets this reader's fetch waits (hold ``pacer.urgent()`` while a record
        is awaited)."""
        if self._pacer is None:
            raise BusError("TopicReader is not started: call start() or use `async with`")
        return self._pacer

    async def _partitions(self, consumer: AIOKafkaConsumer) -> list[TopicPartition]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._metadata_timeout
        while True:
            await consumer.topics()  # a fresh metadata request
            found = {name: consumer.partitions_for_topic(name) for name in self._names}
            missing = sorted(self._names[name] for name, parts in found.items() if not parts)
            if not missing:
                return [
                    TopicPartition(name, partition)
                    for name, parts in found.items()
                    for partition in sorted(parts or ())
                ]
            if loop.time() >= deadline:
                raise BusError(
                    f"topic(s) {missing} do not exist at {self.settings.kafka_bootstrap} "
                    f"(prefix {self.settings.topic_prefix!r}); provision them with "
                    "BusClient.ensure_topics() or `disco dev up`"
                )
            await asyncio.sleep(0.1)

    def pause(self) -> None:
        """Stop fetching: no fetch is sent until :meth:`resume_at_end` (one already at the
        broker still comes back, and its records are dropped)."""
        consumer = self._require()
        consumer.pause(*consumer.assignment())

    async def resume_at_end(self) -> None:
        """Fetch again, from the end of every partition as it is now: what was written
        while paused is skipped.

        The ends are the high watermarks of one fetch from the paused positions (a
        batch at most per partition, at the shortest wait), not ``ListOffsets``: the
        embedded broker answers that with the start of a partition's last batch plus
        one, so a batch of several records written while paused would be read.

        Raises:
            BusUnavailableError: the broker did not say where the ends are.
        """
        consumer = self._require()
        partitions = list(consumer.assignment())
        try:
            ends = await _high_watermarks(
                consumer, {tp: await consumer.position(tp) for tp in partitions}
            )
        except (KafkaError, OSError) as exc:
            raise BusUnavailableError(
                f"cannot read {sorted(self._names.values())} at {self.settings.kafka_bootstrap}: "
                f"{exc}"
            ) from exc
        assignment = getattr(consumer, _SUBSCRIPTION).subscription.assignment
        for partition, offset in ends.items():
            consumer.seek(partition, offset)
            # What this fetch saw is the partition's last known end: the broker-restart
            # check compares positions with it, and the one the consumer kept from before
            # the pause lies below the new position (a live log, read as a restart).
            assignment.state_value(partition).highwater = offset
        consumer.resume(*partitions)

    async def end_offsets(self) -> dict[tuple[str, int], int]:
        """Each assigned partition's end offset now (``{(topic, partition): offset}``)."""
        consumer = self._require()
        ends = await consumer.end_offsets(list(consumer.assignment()))
        return {(self._names[tp.topic], tp.partition): offset for tp, offset in ends.items()}

    async def positions(self) -> dict[tuple[str, int], int]:
        """Each assigned partition's next offset to read (``{(topic, partition): offset}``)."""
        consumer = self._require()
        return {
            (self._names[tp.topic], tp.partition): await consumer.position(tp)
            for tp in consumer.assignment()
        }

    def _require(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise BusError("TopicReader is not started: call start() or use `async with`")
        return self._consumer

    async def stop(self) -> None:
        """Stop reading (idempotent)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.stop()

    async def read(self, timeout: float = 0.2) -> list[ReadRecord]:  # noqa: ASYNC109
        """The records that arrive within ``timeout`` seconds (maybe none)."""
        consumer = self._require()
        pacer = self.pacer
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if loop.time() >= self._next_realign:
            self._next_realign = loop.time() + self._realign_interval
            await self._realign(consumer)
        while True:
            # Looks again now and then while idle, so the fetch wait keeps up.
            step = min(pacer.apply(), max(0.0, deadline - loop.time()))
            batches = await consumer.getmany(timeout_ms=int(step * 1000))
            if batches:
                pacer.saw_records()
                break
            if loop.time() >= deadline:
                return []
        prefix = self.settings.topic_prefix
        return [
            ReadRecord(
                topic=strip_prefix(partition.topic, prefix),
                partition=record.partition,
                offset=record.offset,
                key=record.key,
                value=record.value,
                headers=tuple(record.headers),
            )
            for partition, records in batches.items()
            for record in records
        ]

    async def _realign(self, consumer: AIOKafkaConsumer) -> None:
        """Follow a broker that restarted: new partitions, and logs that began again.

        Partitions that appeared since the last look (a broker that lost its
        data re-creates a topic with its own default count) are read from their
        beginning; when any partition's position lies beyond its end, every
        partition is read again from its (new) beginning.
        """
        assigned = set(consumer.assignment())
        try:
            async with asyncio.timeout(LOOK_TIMEOUT):
                await consumer.topics()  # a fresh metadata request
        except (KafkaError, TimeoutError) as exc:
            _log.debug("metadata unavailable; realigning later", error=repr(exc))
            return
        current = {
            TopicPartition(name, partition)
            for name in self._names
            for partition in consumer.partitions_for_topic(name) or ()
        }
        restarted = await beyond_end(consumer, assigned & current)
        if restarted is None:
            return
        added = current - assigned
        if not restarted and not added:
            return
        if added:
            _log.warning(
                "new partitions appeared (the broker re-created a topic?): reading them",
                partitions=describe_partitions(added),
            )
            positions = {tp: await consumer.position(tp) for tp in assigned}
            consumer.assign(sorted(assigned | current))
            for tp, position in positions.items():
                consumer.seek(tp, position)
        if restarted:
            _log.warning(
                "partitions restarted below this reader's position (the broker lost its "
                "data): reading every partition from its new beginning",
                partitions=describe_partitions(restarted),
            )
        await consumer.seek_to_beginning(*(sorted(assigned | current) if restarted else added))

    async def read_to_end(self) -> list[ReadRecord]:
        """Everything up to the end of every partition as it is now.

        Partitions are read independently: after one shows what you waited
        for, this also takes what is already on the others.
        """
        consumer = self._require()
        ends = await consumer.end_offsets(list(consumer.assignment()))
        records: list[ReadRecord] = []
        while True:
            behind = [tp for tp, end in ends.items() if await consumer.position(tp) < end]
            if not behind:
                return records
            records += await self.read()

    async def records(self) -> AsyncIterator[ReadRecord]:
        """Every record from the position on, as it arrives (until the reader stops)."""
        while self._consumer is not None:
            for record in await self.read():
                yield record
