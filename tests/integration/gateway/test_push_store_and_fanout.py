"""Push configurations per task and owner; the instance's bus fan-out hands envelopes out by key."""

from __future__ import annotations

import asyncio
import uuid

from a2a.types import a2a_pb2

from disco.bus import BusClient
from disco_common.topics import Topic
from disco_gateway import GatewaySettings
from disco_gateway.bus.fanout import BusFanout, FanoutRoute
from disco_gateway.push.store import PostgresPushConfigStore
from disco_gateway.scope import scoped
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
    with scoped(alice):
        everyone = await store.get_info_for_dispatch(task_id)
    elsewhere = await store.get_info(task_id, caller(new_tenant()).context())
    await store.delete_info(task_id, alice.context(), stored.id)
    after = await store.get_info(task_id, alice.context())

    assert (stored.id, stored.task_id, stored.tenant) == (task_id, task_id, "")
    assert [c.url for c in mine] == ["https://hooks.example/a"]
    assert sorted(c.id for c in everyone) == sorted([task_id, "b"])
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
