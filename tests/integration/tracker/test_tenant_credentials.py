"""The tracker's ingest refuses envelopes whose tenant nobody vouches for.

With credentials required, a plain aiokafka producer that writes a whole plan
for another tenant (no credential, or a credential of its own tenant) gets
every envelope dead-lettered with ``unauthenticated_tenant``, and nothing of
it reaches that tenant's read model; the same tenant's signed envelopes are
applied as usual.
"""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaProducer

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import DlqHeader
from disco_common.auth import TENANT_CREDENTIAL_HEADER, UNAUTHENTICATED_TENANT, Role
from disco_common.envelope import headers_dict
from disco_common.topics import dlq_topic, topic_name
from tests.fixtures.bus import read_records
from tests.integration.tracker.read_model_support import TrackerApp, tracker_fixture
from tests.integration.tracker.scenario import Scenario, plan_scenario

pytestmark = pytest.mark.asyncio(loop_scope="module")

tracker = tracker_fixture(bus_require_tenant_credential=True)


async def _forge(tracker: TrackerApp, scenario: Scenario, credential: str | None) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=tracker.bootstrap)
    await producer.start()
    try:
        for topic, envelope in scenario.envelopes:
            headers = envelope.kafka_headers()
            if credential is not None:
                headers.append((TENANT_CREDENTIAL_HEADER, credential.encode()))
            await producer.send_and_wait(
                topic_name(topic, tracker.prefix),
                envelope.to_kafka_value(),
                key=envelope.kafka_key(),
                headers=headers,
            )
    finally:
        await producer.stop()


async def test_a_forged_plan_is_dead_lettered_and_never_reaches_the_tenants_read_model(
    tracker: TrackerApp,
) -> None:
    victim = tracker.new_tenant("victim")
    unsigned = plan_scenario(victim)
    other_tenants = plan_scenario(victim)
    genuine = plan_scenario(victim)
    intruder = mint_dev_token(DEV_AUTH_SECRET, "intruder", "mallory", [Role.USER])

    await _forge(tracker, unsigned, None)
    await _forge(tracker, other_tenants, intruder)
    await tracker.publish(genuine.envelopes)  # the fixture's bus signs as a service

    await tracker.wait_for_plan(
        victim, genuine.plan_id, lambda v: v["plan"]["status"] == "completed"
    )
    forged_ids = {e.id for s in (unsigned, other_tenants) for _, e in s.envelopes}
    topics = sorted({topic_name(t, tracker.prefix) for t, _ in unsigned.envelopes})
    dead = await read_records(
        tracker.bootstrap,
        [dlq_topic(t) for t in topics],
        lambda seen: forged_ids <= {headers_dict(r.headers).get("ce_id") for r in seen},
    )

    refused = [
        headers_dict(r.headers) for r in dead if headers_dict(r.headers).get("ce_id") in forged_ids
    ]
    assert len(refused) == len(forged_ids)
    assert {h[DlqHeader.ERROR_TYPE] for h in refused} == {UNAUTHENTICATED_TENANT}
    for forged in (unsigned, other_tenants):
        response = await tracker.get(f"/v1/tracker/plans/{forged.plan_id}", victim)
        assert response.status_code == 404, response.text
    plans = await tracker.json("/v1/tracker/plans", victim)
    assert sorted(plan["plan_id"] for plan in plans["items"]) == sorted(
        [genuine.plan_id, genuine.sub_plan_id]
    )
    timeline = await tracker.json(f"/v1/tracker/plans/{genuine.plan_id}/timeline", victim)
    assert not forged_ids & {entry["event_id"] for entry in timeline["items"]}
