"""``disco status``'s consumer lag: what a group has not committed yet, per topic."""

from __future__ import annotations

import asyncio

from disco._dev.status import consumer_lag
from disco.bus import BusClient, BusConsumer
from disco.settings import BusSettings
from disco_common.envelope import Envelope
from disco_common.topics import Topic
from tests.fixtures.waiting import eventually


async def test_lag_counts_what_a_stopped_group_has_not_handled(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    settings = BusSettings(
        kafka_bootstrap=kafka_bootstrap,
        topic_prefix=topic_prefix,
        kafka_session_timeout_ms=2000,
        kafka_heartbeat_interval_ms=300,
        bus_commit_interval_ms=0,
    )
    seen: list[str] = []
    handled = asyncio.Event()

    async with BusClient(settings, name="status-test") as bus:
        await bus.ensure_topics()
        consumer = BusConsumer(bus, "lagger")

        @consumer.on(Topic.BUSINESS_FACTS, "status.counted")
        async def count(envelope: Envelope) -> None:
            seen.append(envelope.id)
            if len(seen) == 3:
                handled.set()

        async with consumer:
            await consumer.wait_assigned(30)
            for n in range(3):
                await bus.announce("status.counted", {"n": n}, plan_id="p")
            await asyncio.wait_for(handled.wait(), 30)
        # Stopped (committed and left): what comes now waits for the group.
        for n in range(5):
            await bus.announce("status.counted", {"n": n}, plan_id="p")

        async def lag_of_group() -> int | None:
            groups = {group.group: group for group in await consumer_lag(settings)}
            lagger = groups.get("lagger")
            return lagger.lag_by_topic.get("business-facts") if lagger else None

        lag = await eventually(lag_of_group, timeout=30, what="the lagger's lag")

    assert lag == 5
