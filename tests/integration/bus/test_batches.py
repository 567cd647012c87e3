"""Batch handlers: a partition's envelopes handed over together, committed after the batch,
with the single handlers' dead letters, retries, redelivery and rebalancing."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path

from aiokafka import TopicPartition

from disco.bus import Batch, BusClient, BusConsumer, DlqHeader
from disco.clients import ServiceUnavailableError
from disco.settings import BusSettings
from disco_common.envelope import Envelope, headers_dict
from disco_common.topics import Topic
from tests.fixtures.bus import read_records
from tests.fixtures.waiting import eventually
from tests.integration.bus.conftest import (
    Recorder,
    committed_total,
    read_topic,
    start_killable_consumer,
)


class Batches:
    """A batch handler that remembers each batch it was called with."""

    def __init__(self) -> None:
        self.calls: list[Batch] = []
        self.applied: list[Batch] = []
        self.release = asyncio.Event()
        self.release.set()
        self._changed = asyncio.Event()

    async def __call__(self, batch: Batch) -> None:
        self.calls.append(batch)
        self._changed.set()
        await self.release.wait()
        poisoned = [e.id for e in batch.envelopes if e.data.get("poison")]
        if poisoned:
            raise ValueError(f"cannot apply {poisoned}")
        self.applied.append(batch)
        self._changed.set()

    @property
    def ids(self) -> list[str]:
        """The envelopes of the batches that were applied, in the order applied."""
        return [envelope.id for batch in self.applied for envelope in batch.envelopes]

    async def wait_for(self, check: Callable[[], object], timeout: float = 30.0) -> None:
        async with asyncio.timeout(timeout):
            while not check():
                self._changed.clear()
                await self._changed.wait()


def _one_partition(bus_settings: BusSettings) -> BusSettings:
    return bus_settings.model_copy(update={"kafka_partitions": 1})


async def test_a_batch_is_committed_only_after_all_of_it_was_handled(
    bus_settings: BusSettings, recorder: Recorder
) -> None:
    settings = _one_partition(bus_settings)
    batches = Batches()
    batches.release.clear()
    async with BusClient(settings) as bus:
        await bus.ensure_topics([Topic.BUSINESS_FACTS, Topic.SYSTEM_EVENTS])
        sent = [(await bus.announce("job.queued", {"n": n})).id for n in range(10)]
        topic = bus.topic_name(Topic.BUSINESS_FACTS)
        group = bus.group_name("batcher")
        consumer = BusConsumer(bus, "batcher")
        consumer.add_batch_handler(Topic.BUSINESS_FACTS, batches, max_records=100, linger_ms=300)
        consumer.add_handler(Topic.SYSTEM_EVENTS, "*", recorder)

        async with consumer:
            await batches.wait_for(lambda: batches.calls)
            in_hand = batches.calls[0]
            # While the handler holds the batch, the group commits what else it
            # handled (one system event), and not one offset of the batch.
            await bus.publish(Topic.SYSTEM_EVENTS, "job.noted", {})
            await recorder.wait_for(1)
            system = bus.topic_name(Topic.SYSTEM_EVENTS)
            await eventually(lambda: _committed_at_least(settings, group, system, 1))
            assert await committed_total(settings.kafka_bootstrap, group, topic) == 0
            batches.release.set()
            committed = await eventually(
                lambda: _committed_at_least(settings, group, topic, len(sent))
            )

    assert [e.id for e in in_hand.envelopes] == sent  # in offset order, lingered for all
    assert (in_hand.topic, in_hand.partition, in_hand.attempt) == ("business-facts", 0, 1)
    assert [item.offset for item in in_hand] == list(range(10))
    assert all(item.size > 0 for item in in_hand)
    assert committed == len(sent)
    assert batches.ids == sent


async def _committed_at_least(settings: BusSettings, group: str, topic: str, count: int) -> int:
    total = await committed_total(settings.kafka_bootstrap, group, topic)
    return total if total >= count else 0


async def test_a_bad_record_in_a_batch_is_dead_lettered_and_the_rest_applied_in_order(
    bus: BusClient, kafka_bootstrap: str
) -> None:
    topic = bus.topic_name(Topic.BUSINESS_FACTS)
    key = "one-plan"  # one partition's order
    good = [(await bus.announce("job.queued", {"n": 0}, plan_id=key)).id]
    await bus.send_record(topic, key.encode(), b"{not json", [])
    good.append((await bus.announce("job.queued", {"n": 1}, plan_id=key)).id)
    poison = await bus.announce("job.queued", {"n": 2, "poison": True}, plan_id=key)
    for n in range(3, 6):
        good.append((await bus.announce("job.queued", {"n": n}, plan_id=key)).id)
    batches = Batches()
    consumer = BusConsumer(bus, "strict")
    consumer.add_batch_handler(Topic.BUSINESS_FACTS, batches, max_records=100, linger_ms=300)

    async with consumer:
        await batches.wait_for(lambda: set(good) <= set(batches.ids))
        dead = await read_topic(kafka_bootstrap, f"{topic}.dlq", 2)

    # The malformed record never reached the handler; the poisoned envelope failed
    # every attempt of the whole batch, then the halves were tried until it failed
    # alone; everything else was applied once, in offset order.
    first = batches.calls[0]
    assert [e.id for e in first.envelopes] == [good[0], good[1], poison.id, *good[2:]]
    assert [c.attempt for c in batches.calls[:3]] == [1, 2, 3]
    assert batches.ids == good
    by_value = {record.value: headers_dict(record.headers) for record in dead}
    malformed = by_value[b"{not json"]
    assert malformed[DlqHeader.ERROR_TYPE] == "EnvelopeError"
    assert malformed[DlqHeader.ERROR_MESSAGE].startswith("value is not JSON")
    assert malformed[DlqHeader.ATTEMPTS] == "0"
    [poisoned] = [h for value, h in by_value.items() if value != b"{not json"]
    assert poisoned["ce_id"] == poison.id
    assert poisoned[DlqHeader.ERROR_TYPE] == "ValueError"
    assert poisoned[DlqHeader.ATTEMPTS] == str(bus.settings.bus_retry_attempts)
    assert poisoned[DlqHeader.CONSUMER_GROUP] == "strict"


async def test_a_consumer_killed_mid_batch_gets_that_whole_batch_again(
    bus_settings: BusSettings, recorder: Recorder, tmp_path: Path
) -> None:
    settings = _one_partition(bus_settings)
    log = tmp_path / "batches.log"
    group = "mortal-batches"
    async with BusClient(settings) as bus:
        await bus.ensure_topics([Topic.BUSINESS_FACTS])
        sent = [(await bus.announce("job.queued", {"n": n})).id for n in range(10)]
        topic = bus.topic_name(Topic.BUSINESS_FACTS)
        # It blocks inside its second batch of up to 4.
        process = start_killable_consumer(settings, group, log, block_at=2, batch_size=4)
        try:
            await eventually(lambda: log.exists() and len(log.read_text().splitlines()) >= 2)
            first = log.read_text().splitlines()[0].split()
            # The first batch is done: its offsets are committed, and nothing of the
            # second one (it is in hand) is.
            await eventually(
                lambda: _committed_at_least(settings, bus.group_name(group), topic, len(first))
            )
        finally:
            process.send_signal(signal.SIGKILL)
            await asyncio.to_thread(process.wait, 10)
        second = log.read_text().splitlines()[1].split()
        committed = await committed_total(settings.kafka_bootstrap, bus.group_name(group), topic)

        consumer = BusConsumer(bus, group)
        consumer.add_handler(Topic.BUSINESS_FACTS, "*", recorder)
        async with consumer:
            await recorder.wait_for(len(sent) - committed, timeout=30)

    assert 1 <= len(first) <= 4
    assert first + second == sent[: len(first) + len(second)]
    assert committed == len(first)
    # The batch in hand when the process died comes again, whole, and so does
    # everything after it; nothing of the committed batch does.
    assert recorder.ids == sent[len(first) :]


async def test_a_batch_in_flight_finishes_and_commits_before_its_partition_moves(
    bus: BusClient,
) -> None:
    first, second = Batches(), Batches()
    first.release.clear()
    one = BusConsumer(bus, "batch-group", rebalance_grace=60)
    one.add_batch_handler(Topic.BUSINESS_FACTS, first, max_records=50)
    two = BusConsumer(bus, "batch-group", rebalance_grace=60)
    two.add_batch_handler(Topic.BUSINESS_FACTS, second, max_records=50)
    partitions = bus.settings.kafka_partitions

    async with one:
        await eventually(lambda: len(one.assignment) == partitions, timeout=30)
        held = (await bus.announce("job.queued", {"n": -1}, plan_id="held")).id
        await first.wait_for(lambda: first.calls)
        [in_hand] = first.calls
        tp = TopicPartition(bus.topic_name(Topic.BUSINESS_FACTS), in_hand.partition)
        joining = asyncio.create_task(two.start())
        try:
            # The group takes partitions from the first member to give the second
            # some: it waits for the batch in hand before it lets go of them. (The
            # member drops its worker of a partition when the revocation begins.)
            await eventually(lambda: tp not in one._workers, timeout=30)
            assert not joining.done()
            first.release.set()
            await joining
            await eventually(
                lambda: (
                    bool(one.assignment)
                    and bool(two.assignment)
                    and len(one.assignment | two.assignment) == partitions
                ),
                timeout=30,
            )
            sent = [
                (await bus.announce("job.queued", {"n": n}, plan_id=f"plan-{n}")).id
                for n in range(30)
            ]
            await eventually(
                lambda: len(set(sent) & set(first.ids + second.ids)) == len(sent), timeout=30
            )
        finally:
            first.release.set()
            if not joining.done():
                joining.cancel()
            await two.stop()

    assert [e.id for e in in_hand.envelopes] == [held]
    # The held batch was applied where it was handed over, and committed before its
    # partition moved: the second member never got it, and nothing came twice.
    assert held in first.ids
    assert held not in second.ids
    assert sorted(first.ids + second.ids) == sorted([held, *sent])
    assert first.ids
    assert second.ids


async def test_a_batch_handler_takes_every_event_type_of_its_topic(
    bus: BusClient,
) -> None:
    batches = Batches()
    consumer = BusConsumer(bus, "all-types")
    consumer.add_batch_handler(Topic.BUSINESS_FACTS, batches)
    sent = [
        (await bus.announce(event_type, {}, plan_id="p")).id
        for event_type in ("order.placed", "order.paid", "order.shipped")
    ]

    async with consumer:
        await batches.wait_for(lambda: len(batches.ids) >= 3)

    assert batches.ids == sent
    envelopes: list[Envelope] = [e for b in batches.applied for e in b.envelopes]
    assert [e.type for e in envelopes] == ["order.placed", "order.paid", "order.shipped"]


async def test_a_batch_whose_dependency_is_unavailable_is_tried_again_whole_without_a_dlq(
    bus: BusClient, kafka_bootstrap: str
) -> None:
    key = "one-plan"
    sent = [(await bus.announce("job.queued", {"n": n}, plan_id=key)).id for n in range(4)]
    attempts = bus.settings.bus_retry_attempts
    calls: list[Batch] = []
    applied: list[str] = []

    async def patient(batch: Batch) -> None:
        calls.append(batch)
        if len(calls) <= attempts + 2:  # more failures than the retries allow
            raise ServiceUnavailableError(503, "unavailable", "the database is unavailable")
        applied.extend(e.id for e in batch.envelopes)

    consumer = BusConsumer(bus, "patient-batches")
    consumer.add_batch_handler(Topic.BUSINESS_FACTS, patient, max_records=100, linger_ms=300)

    async with consumer:
        await eventually(lambda: set(sent) <= set(applied), timeout=30.0)

    # Never split: every call had the whole batch, and nothing was dead-lettered.
    assert [c.attempt for c in calls] == list(range(1, attempts + 4))
    assert all([e.id for e in c.envelopes] == sent for c in calls)
    assert await read_records(kafka_bootstrap, bus.topic_name("business-facts.dlq")) == []
