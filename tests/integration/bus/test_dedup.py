"""A duplicate envelope (same id) is handled once; the store is pluggable."""

from __future__ import annotations

from disco.bus import BusClient, BusConsumer
from disco_common.envelope import BusinessFact
from disco_common.topics import Topic
from tests.integration.bus.conftest import Recorder


async def test_a_duplicate_reaching_a_running_consumer_is_handled_once(
    bus: BusClient, recorder: Recorder
) -> None:
    consumer = BusConsumer(bus, "once")
    consumer.add_handler(Topic.BUSINESS_FACTS, "*", recorder)
    original = BusinessFact(source="urn:test", type="order.placed", data={"n": 1}, plan_id="plan-1")
    marker = BusinessFact(source="urn:test", type="order.shipped", data={}, plan_id="plan-1")

    async with consumer:
        await consumer.wait_assigned(20)
        await bus.publish_envelope(Topic.BUSINESS_FACTS, original)
        await recorder.wait_for(1)
        # The producer retried, or an upstream agent published twice.
        await bus.publish_envelope(Topic.BUSINESS_FACTS, original)
        await bus.publish_envelope(Topic.BUSINESS_FACTS, marker)
        await recorder.wait_for(2)

    assert recorder.ids == [original.id, marker.id]


class PreloadedStore:
    """A store that knows some ids from elsewhere (as a durable one would)."""

    def __init__(self, known: set[str]) -> None:
        self.known = set(known)
        self.asked: list[str] = []
        self.marked: list[str] = []

    async def seen(self, event_id: str) -> bool:
        self.asked.append(event_id)
        return event_id in self.known

    async def mark(self, event_id: str) -> None:
        self.marked.append(event_id)
        self.known.add(event_id)


async def test_a_custom_dedup_store_decides_what_was_already_handled(
    bus: BusClient, recorder: Recorder
) -> None:
    handled_elsewhere = await bus.announce("invoice.sent", {"n": 1}, plan_id="p")
    fresh = await bus.announce("invoice.sent", {"n": 2}, plan_id="p")
    store = PreloadedStore({handled_elsewhere.id})
    consumer = BusConsumer(bus, "billing", dedup_store=store)
    consumer.add_handler(Topic.BUSINESS_FACTS, "invoice.sent", recorder)

    async with consumer:
        await recorder.wait_for(1)

    assert recorder.ids == [fresh.id]
    assert store.asked == [handled_elsewhere.id, fresh.id]
    assert store.marked == [fresh.id]


async def test_an_envelope_whose_handler_failed_is_not_remembered_as_handled(
    bus: BusClient, recorder: Recorder
) -> None:
    store = PreloadedStore(set())

    async def fail(envelope: object) -> None:
        raise RuntimeError("down")

    await bus.announce("x.happened", {}, plan_id="p")
    marker = await bus.announce("y.happened", {}, plan_id="p")
    consumer = BusConsumer(bus, "forgetful", dedup_store=store)
    consumer.add_handler(Topic.BUSINESS_FACTS, "x.happened", fail)
    consumer.add_handler(Topic.BUSINESS_FACTS, "y.happened", recorder)

    async with consumer:
        await recorder.wait_for(1)

    assert store.marked == [marker.id]
