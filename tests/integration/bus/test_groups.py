"""Instances of one agent form one consumer group and share its partitions."""

from __future__ import annotations

from disco.bus import BusClient, BusConsumer
from disco_common.topics import Topic
from tests.fixtures.waiting import eventually
from tests.integration.bus.conftest import Recorder


async def test_two_instances_of_one_agent_split_the_work_and_each_envelope_is_handled_once(
    bus: BusClient,
) -> None:
    first, second = Recorder(), Recorder()
    one = BusConsumer(bus, "worker")
    one.add_handler(Topic.BUSINESS_FACTS, "job.queued", first)
    two = BusConsumer(bus, "worker")
    two.add_handler(Topic.BUSINESS_FACTS, "job.queued", second)

    async with one, two:
        await eventually(
            lambda: (
                bool(one.assignment)
                and bool(two.assignment)
                and len(one.assignment | two.assignment) == bus.settings.kafka_partitions
            ),
            timeout=30,
        )
        # Distinct plan ids spread the jobs over every partition.
        sent = [
            (await bus.announce("job.queued", {"n": n}, plan_id=f"plan-{n}")).id for n in range(30)
        ]
        await eventually(lambda: len(first.ids) + len(second.ids) >= len(sent), timeout=30)

    assert first.ids
    assert second.ids
    assert sorted(first.ids + second.ids) == sorted(sent)


async def test_two_agents_each_get_every_envelope(bus: BusClient) -> None:
    billing, audit = Recorder(), Recorder()
    one = BusConsumer(bus, "billing")
    one.add_handler(Topic.BUSINESS_FACTS, "*", billing)
    two = BusConsumer(bus, "audit")
    two.add_handler(Topic.BUSINESS_FACTS, "*", audit)
    sent = [(await bus.announce("order.placed", {"n": n})).id for n in range(5)]

    async with one, two:
        await billing.wait_for(5)
        await audit.wait_for(5)

    assert sorted(billing.ids) == sorted(audit.ids) == sorted(sent)
