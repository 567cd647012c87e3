"""Concurrency within a partition: plans side by side, each plan's events in order,
and the committed offset never passing a record still being handled."""

from __future__ import annotations

import asyncio

from disco.bus import BusClient, BusConsumer
from disco.settings import BusSettings
from disco_common.envelope import Envelope
from disco_common.topics import Topic
from tests.fixtures.waiting import eventually
from tests.integration.bus.conftest import committed_total


def one_partition(settings: BusSettings, concurrency: int) -> BusSettings:
    return settings.model_copy(
        update={"kafka_partitions": 1, "bus_partition_concurrency": concurrency}
    )


async def test_each_plan_keeps_its_order_while_plans_are_handled_side_by_side(
    bus_settings: BusSettings,
) -> None:
    settings = one_partition(bus_settings, 4)
    plans, steps = 4, 12
    seen: dict[str, list[int]] = {f"plan-{p}": [] for p in range(plans)}
    first_step_held = asyncio.Event()
    others_progressed = asyncio.Event()
    handled_while_held: list[str] = []

    async def handle(envelope: Envelope) -> None:
        assert isinstance(envelope.data, dict)
        plan, step = envelope.plan_id or "", int(envelope.data["step"])
        seen[plan].append(step)
        if plan == "plan-0" and step == 0:
            # Hold plan-0's first event until other plans moved on: only possible
            # if they run beside it. Plan-0's later events must wait for it.
            first_step_held.set()
            await others_progressed.wait()
        elif first_step_held.is_set() and not others_progressed.is_set():
            handled_while_held.append(plan)
            if len(handled_while_held) >= 3:
                others_progressed.set()

    async with BusClient(settings, name="plans") as bus:
        await bus.ensure_topics([Topic.BUSINESS_FACTS])
        consumer = BusConsumer(bus, "plan-runner")
        consumer.add_handler(Topic.BUSINESS_FACTS, "step.done", handle)
        acks = [
            await bus.send(
                Topic.BUSINESS_FACTS, "step.done", {"step": step}, plan_id=f"plan-{plan}"
            )
            for step in range(steps)
            for plan in range(plans)
        ]
        await asyncio.gather(*acks)
        async with consumer:
            await eventually(lambda: sum(map(len, seen.values())) == plans * steps, timeout=30)

    assert seen == {f"plan-{p}": list(range(steps)) for p in range(plans)}
    assert "plan-0" not in handled_while_held
    assert len(handled_while_held) >= 3


async def test_the_commit_waits_for_a_record_still_in_hand_while_later_ones_finish(
    bus_settings: BusSettings,
) -> None:
    settings = one_partition(bus_settings, 4)
    release = asyncio.Event()
    finished: list[str] = []

    async def handle(envelope: Envelope) -> None:
        if envelope.plan_id == "slow":
            await release.wait()
        finished.append(envelope.plan_id or "")

    async with BusClient(settings, name="committer") as bus:
        await bus.ensure_topics([Topic.BUSINESS_FACTS])
        topic = bus.topic_name(Topic.BUSINESS_FACTS)
        consumer = BusConsumer(bus, "careful")
        consumer.add_handler(Topic.BUSINESS_FACTS, "work.queued", handle)
        for plan in ["slow", "a", "b", "c", "d"]:
            await bus.publish(Topic.BUSINESS_FACTS, "work.queued", {}, plan_id=plan)
        async with consumer:
            await eventually(lambda: len(finished) == 4, timeout=30)
            group = bus.group_name("careful")
            # The later records are done, but the first is not: nothing is committed
            # past it (a crash now redelivers it and, deduplicated, the others).
            assert await committed_total(settings.kafka_bootstrap, group, topic) == 0
            release.set()

            async def all_committed() -> bool:
                return await committed_total(settings.kafka_bootstrap, group, topic) == 5

            await eventually(all_committed, timeout=30)

    assert sorted(finished[:4]) == ["a", "b", "c", "d"]
    assert finished[4:] == ["slow"]
