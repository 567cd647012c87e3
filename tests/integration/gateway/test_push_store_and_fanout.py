"""Push configurations per task and owner; the instance's bus fan-out hands envelopes out by key."""

from __future__ import annotations

import asyncio
import uuid

from a2a.types import a2a_pb2
from sqlalchemy import text

from disco.bus import BusClient
from disco_common.notifications import NotificationType
from disco_common.topics import Topic, topic_name
from disco_gateway import GatewaySettings
from disco_gateway.bus.fanout import BusFanout, FanoutRoute
from disco_gateway.push.repository import PushDeliveryRepository
from disco_gateway.push.store import PostgresPushConfigStore
from disco_gateway.sessions.hub import SessionHub
from disco_gateway.sessions.repository import stream_positions
from disco_gateway.tasks.store import PostgresTaskStore
from disco_service import Database
from tests.integration.gateway.conftest import caller, new_tenant


async def test_push_configs_are_kept_per_task_and_owner_and_all_dispatched(db: Database) -> None:
    store = PostgresPushConfigStore(db, PostgresTaskStore(db))
    tenant = new_tenant()
    alice, bob = caller(tenant), caller(tenant, "bob")
    task_id = str(uuid.uuid4())
    config = a2a_pb2.TaskPushNotificationConfig(url="https://hooks.example/a", tenant="forged")

    stored = await store.set_info(task_id, config, alice.context())
    await store.set_info(
        task_id, a2a_pb2.TaskPushNotificationConfig(id="b", url="https://x/b"), bob.context()
    )
    mine = await store.get_info(task_id, alice.context())
    async with db.unit_of_work(tenant) as session:
        # A notification of the task waits for delivery to each configuration, whoever set it.
        queued = await PushDeliveryRepository(session, tenant, "gateway-x/0").enqueue(
            task_id, {"task": {"id": task_id}}, lease_seconds=30
        )
        # Not left for the sweeps of the push tests that share this database.
        await session.execute(
            text("DELETE FROM gateway.a2a_push_deliveries WHERE task_id = :t"), {"t": task_id}
        )
    elsewhere = await store.get_info(task_id, caller(new_tenant()).context())
    await store.delete_info(task_id, alice.context(), stored.id)
    after = await store.get_info(task_id, alice.context())

    assert (stored.id, stored.task_id, stored.tenant) == (task_id, task_id, "")
    assert [c.url for c in mine] == ["https://hooks.example/a"]
    assert sorted(config_id for _, config_id, _ in queued) == sorted([task_id, "b"])
    assert all(claimed is not None and claimed.attempts == 1 for _, _, claimed in queued)
    assert elsewhere == []
    assert after == []


async def test_the_fanout_hands_out_only_the_routed_types_carrying_a_subscribed_key(
    settings: GatewaySettings,
) -> None:
    correlation = str(uuid.uuid4())
    fanout = BusFanout(
        settings,
        [FanoutRoute(Topic.ACTION_RESULTS.value, frozenset({"a2a.answered"}), ("correlation_id",))],
    )
    async with BusClient(settings) as bus:
        await bus.ensure_topics()
        await fanout.start()
        try:
            async with fanout.subscribe({("correlation_id", correlation)}) as inbox:
                await bus.respond("other.type", {"n": 0}, correlation_id=correlation)
                await bus.respond("a2a.answered", {"n": 1}, correlation_id=str(uuid.uuid4()))
                await bus.respond("a2a.answered", {"n": 2}, correlation_id=correlation)
                delivery = await asyncio.wait_for(inbox.get(), 10)
        finally:
            await fanout.stop()

    assert delivery.topic == "action-results"
    assert delivery.envelope.data == {"n": 2}


async def test_the_session_hub_feeds_the_fanout_only_what_came_after_it_started(
    settings: GatewaySettings, db: Database
) -> None:
    """notification-events is read once per instance: by the hub, which feeds the fan-out.

    The hub resumes at its stored positions and reads what came while no instance
    ran (it keeps it); the fan-out is handed only what came after the hub started.
    """
    # One partition: the hub resumes every partition it kept a position of (this one).
    settings = settings.model_copy(update={"kafka_partitions": 1})
    topic, question = Topic.NOTIFICATION_EVENTS.value, NotificationType.HUMAN_INPUT.value
    task_id, session = str(uuid.uuid4()), str(uuid.uuid4())
    name = topic_name(topic, settings.topic_prefix)

    async def ask(n: int) -> None:
        await bus.publish(
            topic, question, {"n": n}, task_id=task_id, session_id=session, tenant_id="t1"
        )

    async def positions() -> dict[tuple[str, int], int]:
        async with db.unit_of_work(None) as unit:
            return await stream_positions(unit, [name])

    async with BusClient(settings) as bus:
        await bus.ensure_topics()
        first = SessionHub(settings, db, max_payload_bytes=64 * 1024)
        await first.start()
        try:
            await ask(0)
            deadline = asyncio.get_running_loop().time() + 20
            while not await positions():  # the first instance kept its place
                assert asyncio.get_running_loop().time() < deadline, "no positions kept"
                await asyncio.sleep(0.05)
        finally:
            await first.stop()
        await ask(1)  # while no instance runs
        fanout = BusFanout(
            settings, [FanoutRoute(topic, frozenset({question}), ("task_id",), fed=True)]
        )
        await fanout.start()
        hub = SessionHub(settings, db, max_payload_bytes=64 * 1024, feed=fanout.feed(topic))
        await hub.start()
        try:
            async with fanout.subscribe({("task_id", task_id)}) as inbox:
                assert await hub.settled()  # the hub read (and kept) what came meanwhile
                caught_up = await positions()
                await ask(2)
                delivery = await asyncio.wait_for(inbox.get(), 10)
        finally:
            await hub.stop()
            await fanout.stop()

    assert caught_up == {(name, 0): 2}
    assert delivery.topic == topic
    assert delivery.envelope.data == {"n": 2}
