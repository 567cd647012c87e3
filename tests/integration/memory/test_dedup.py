"""Dedup marks: the durable store behind ``DurableDedupStore`` (per tenant and group)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from disco.bus import BusClient, BusConsumer, DurableDedupStore
from disco.clients import MemoryClient, acting_for
from disco.settings import BusSettings
from disco_common.auth import Role
from disco_common.envelope import Envelope
from disco_common.topics import Topic
from tests.fixtures.bus import committed_offsets, group_caught_up
from tests.integration.memory.conftest import bearer, new_id


def _consumer_settings(bootstrap: str, prefix: str, **more: int) -> BusSettings:
    """A consumer that joins quickly and fetches often (a short session, a short wait)."""
    return BusSettings(
        kafka_bootstrap=bootstrap,
        topic_prefix=prefix,
        kafka_session_timeout_ms=2000,
        kafka_heartbeat_interval_ms=300,
        kafka_fetch_max_wait_ms=20,
        **more,  # type: ignore[arg-type]
    )


async def test_a_mark_is_made_once_and_kept_as_it_was(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    event = new_id("event")

    absent = await client.get(f"/v1/memory/dedup/workers/{event}", headers=alice)
    made = await client.put(f"/v1/memory/dedup/workers/{event}", json={}, headers=alice)
    again = await client.put(
        f"/v1/memory/dedup/workers/{event}", json={"ttl_seconds": 60}, headers=alice
    )
    found = await client.get(f"/v1/memory/dedup/workers/{event}", headers=alice)

    assert absent.status_code == 404
    assert (made.status_code, again.status_code, found.status_code) == (201, 200, 200)
    assert again.json() == made.json() == found.json()
    assert made.json()["group"] == "workers"
    assert made.json()["expires_at"] is None


async def test_marks_belong_to_one_group_and_one_tenant(
    client: httpx.AsyncClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    event = new_id("event")
    await client.put(f"/v1/memory/dedup/workers/{event}", json={}, headers=alice)

    same_tenant = await client.get(f"/v1/memory/dedup/workers/{event}", headers=bob)
    other_group = await client.get(f"/v1/memory/dedup/planners/{event}", headers=alice)
    other_tenant = await client.get(
        f"/v1/memory/dedup/workers/{event}", headers=bearer(new_id("tenant"))
    )

    assert same_tenant.status_code == 200  # marks are the tenant's, not a user's
    assert (other_group.status_code, other_tenant.status_code) == (404, 404)


async def test_a_malformed_group_or_ttl_is_refused_with_the_error_shape(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    bad_group = await client.put("/v1/memory/dedup/%20bad/e1", json={}, headers=alice)
    bad_ttl = await client.put("/v1/memory/dedup/g/e1", json={"ttl_seconds": 0}, headers=alice)

    for response in (bad_group, bad_ttl):
        assert response.status_code == 422
        assert set(response.json()["error"]) == {"code", "message", "details"}


async def test_the_durable_store_remembers_across_instances_for_the_acting_tenant(
    memory_client_for: Callable[..., MemoryClient], tenant: str
) -> None:
    event = new_id("event")
    # An agent's client: a service identity acting for the envelope's tenant.
    async with memory_client_for("platform", "agent", roles=(Role.SERVICE,)) as memory:
        first = DurableDedupStore(memory, "workers")
        second = DurableDedupStore(memory, "workers")  # another process, say
        with acting_for(tenant, "alice"):
            before = await second.seen(event)
            await first.mark(event)
            await first.flush()
            after = await second.seen(event)
        with acting_for(new_id("tenant"), "alice"):
            elsewhere = await second.seen(event)

    assert (before, after, elsewhere) == (False, True, False)


async def test_a_batch_is_asked_about_and_marked_in_one_call_each(
    client: httpx.AsyncClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    events = [new_id("event") for _ in range(4)]
    await client.put(f"/v1/memory/dedup/workers/{events[2]}", json={}, headers=alice)

    made = await client.post(
        "/v1/memory/dedup/workers/marks",
        json={"event_ids": [events[0], events[2], events[0]], "ttl_seconds": 60},
        headers=bob,
    )
    checked = await client.post(
        "/v1/memory/dedup/workers/check", json={"event_ids": list(reversed(events))}, headers=alice
    )
    elsewhere = await client.post(
        "/v1/memory/dedup/workers/check",
        json={"event_ids": events},
        headers=bearer(new_id("tenant")),
    )
    kept = await client.get(f"/v1/memory/dedup/workers/{events[2]}", headers=alice)

    assert (made.status_code, made.json()) == (200, {"created": 1})  # events[2] was live
    assert checked.json() == {"handled": [events[2], events[0]], "stepped": []}  # as asked
    assert elsewhere.json() == {"handled": [], "stepped": []}
    assert kept.json()["expires_at"] is None  # a live mark is kept as it was


async def test_a_batch_of_none_or_too_many_ids_is_refused_with_the_error_shape(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    empty = await client.post(
        "/v1/memory/dedup/workers/check", json={"event_ids": []}, headers=alice
    )
    too_many = await client.post(
        "/v1/memory/dedup/workers/marks",
        json={"event_ids": [f"e{n}" for n in range(501)]},
        headers=alice,
    )
    bad_id = await client.post(
        "/v1/memory/dedup/workers/check", json={"event_ids": [" bad"]}, headers=alice
    )

    for response in (empty, too_many, bad_id):
        assert response.status_code == 422
        assert set(response.json()["error"]) == {"code", "message", "details"}


async def test_a_consumer_skips_what_its_group_handled_before_asking_once_per_batch(
    memory_client_for: Callable[..., MemoryClient],
    tenant: str,
    kafka_bootstrap: str,
    topic_prefix: str,
) -> None:
    settings = _consumer_settings(kafka_bootstrap, topic_prefix)
    group = new_id("orders")
    handled: list[str] = []
    arrived = asyncio.Event()

    async def placed(envelope: Envelope) -> None:
        handled.append(envelope.id)
        arrived.set()

    async def run(bus: BusClient, memory: MemoryClient, until: int) -> None:
        # A new store each run, as a new process of the group would have.
        consumer = BusConsumer(bus, group, dedup_store=DurableDedupStore(memory, group))
        consumer.add_handler(Topic.BUSINESS_FACTS, "order.placed", placed)
        async with consumer, asyncio.timeout(30):
            while len(handled) < until:
                arrived.clear()
                await arrived.wait()
        # Stopped: the marks of what it handled are stored (no flush by the caller).

    async with (
        memory_client_for("platform", "agent", roles=(Role.SERVICE,)) as memory,
        BusClient(settings, name="orders") as bus,
    ):
        await bus.ensure_topics()
        first = [await bus.announce("order.placed", {"n": n}, tenant_id=tenant) for n in range(3)]
        await run(bus, memory, until=3)
        with acting_for(tenant):
            marked = await memory.check_dedup_marks(group, [e.id for e in first])
        # The same envelopes published again (an outbox relay after a crash, say), and a new one.
        for envelope in first:
            await bus.publish_envelope(Topic.BUSINESS_FACTS, envelope)
        fresh = await bus.announce("order.placed", {"n": 3}, tenant_id=tenant)
        await run(bus, memory, until=4)

    assert sorted(marked) == sorted(e.id for e in first)
    # Each once (partitions interleave, so in no particular order): the copies were skipped.
    assert sorted(handled) == sorted([*(e.id for e in first), fresh.id])


async def test_a_consumer_asks_only_about_the_envelopes_its_handlers_take(
    memory_client_for: Callable[..., MemoryClient],
    tenant: str,
    kafka_bootstrap: str,
    topic_prefix: str,
) -> None:
    # Topics are shared: a planner's group reads every request on action-requests,
    # and those of other agents must cost the memory service nothing.
    settings = BusSettings(
        kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix, kafka_fetch_max_wait_ms=20
    )
    group = new_id("orders")
    handled: list[str] = []
    done = asyncio.Event()

    async def placed(envelope: Envelope) -> None:
        handled.append(envelope.id)
        if len(handled) == 3:
            done.set()

    async with (
        memory_client_for("platform", "agent", roles=(Role.SERVICE,)) as memory,
        BusClient(settings, name="orders") as bus,
    ):
        await bus.ensure_topics()
        mixed = [
            await bus.announce(kind, {"n": n}, tenant_id=tenant)
            for n in range(3)
            for kind in ("order.viewed", "order.placed")
        ]
        asked: list[str] = []
        check = memory.check_dedup_marks

        async def counted(of: str, event_ids: Sequence[str], **acting: str | None) -> list[str]:
            asked.extend(event_ids)
            return await check(of, event_ids, **acting)

        memory.check_dedup_marks = counted  # type: ignore[method-assign]
        consumer = BusConsumer(bus, group, dedup_store=DurableDedupStore(memory, group))
        consumer.add_handler(Topic.BUSINESS_FACTS, "order.placed", placed)
        async with consumer, asyncio.timeout(30):
            await done.wait()

    placed_ids = [e.id for e in mixed if e.type == "order.placed"]
    assert sorted(handled) == sorted(placed_ids)
    assert sorted(asked) == sorted(placed_ids)


async def test_an_offset_is_committed_only_once_the_marks_of_its_records_are_stored(
    memory_client_for: Callable[..., MemoryClient],
    tenant: str,
    kafka_bootstrap: str,
    topic_prefix: str,
) -> None:
    settings = _consumer_settings(kafka_bootstrap, topic_prefix, bus_commit_interval_ms=10)
    group = new_id("orders")
    handled: list[str] = []
    all_handled = asyncio.Event()
    writing = asyncio.Event()
    go = asyncio.Event()

    async def placed(envelope: Envelope) -> None:
        handled.append(envelope.id)
        if len(handled) == 5:
            all_handled.set()

    async with (
        memory_client_for("platform", "agent", roles=(Role.SERVICE,)) as memory,
        BusClient(settings, name="orders") as bus,
    ):
        await bus.ensure_topics()
        sent = [await bus.announce("order.placed", {"n": n}, tenant_id=tenant) for n in range(5)]
        put = memory.put_dedup_marks

        async def held(of: str, event_ids: Sequence[str], **options: Any) -> int:
            writing.set()
            await go.wait()  # the memory service is slow to store them
            return await put(of, event_ids, **options)

        memory.put_dedup_marks = held  # type: ignore[method-assign]
        consumer = BusConsumer(bus, group, dedup_store=DurableDedupStore(memory, group))
        consumer.add_handler(Topic.BUSINESS_FACTS, "order.placed", placed)
        topic = bus.topic_name(Topic.BUSINESS_FACTS)
        async with consumer:
            async with asyncio.timeout(30):
                await all_handled.wait()
                await writing.wait()
            # Every handler finished, no mark is stored: no offset may be committed.
            committable = {tp: consumer._committer.handled(tp) for tp in consumer.assignment}
            before = await committed_offsets(kafka_bootstrap, bus.group_name(group), topic)
            go.set()
            await group_caught_up(kafka_bootstrap, bus.group_name(group), topic)
            with acting_for(tenant):
                marked = await memory.check_dedup_marks(group, [e.id for e in sent])

    assert set(committable.values()) == {None}
    assert sum(before.values()) == 0
    assert sorted(marked) == sorted(e.id for e in sent)
