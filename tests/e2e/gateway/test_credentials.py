"""The gateway vouches for what it publishes with its caller's token, not its own.

The stack requires tenant credentials (see the conftest): what the publish
bridge and A2A put on the bus carries the caller's verified bearer token in
``disco-tenant-credential`` (tenant, user and role ``user``), so a consumer
knows the caller's tenant is genuine; a record that claims the tenant without
a credential is refused by the agents.
"""

from __future__ import annotations

import uuid

import httpx
import jwt
from aiokafka import AIOKafkaProducer

from disco.auth import DEV_AUTH_SECRET
from disco.bus import BusClient, DlqHeader, ReadRecord
from disco_common.auth import TENANT_CREDENTIAL_HEADER, UNAUTHENTICATED_TENANT
from disco_common.envelope import ActionRequest, Notification, headers_dict
from disco_common.topics import Topic, dlq_topic, topic_name
from tests.e2e.gateway.conftest import (
    OTHER_TENANT,
    PUBLIC_AGENT,
    TENANT,
    GatewayProcess,
    GatewayStack,
    a2a_client,
    bearer,
)
from tests.e2e.gateway.support import events_of, send_request, user_message
from tests.fixtures.bus import read_records
from tests.fixtures.waiting import eventually


def _credential(record: ReadRecord) -> dict[str, object]:
    token = headers_dict(record.headers)[TENANT_CREDENTIAL_HEADER]
    claims: dict[str, object] = jwt.decode(token, DEV_AUTH_SECRET, algorithms=["HS256"])
    return claims


async def test_the_publish_bridge_signs_with_the_callers_token(
    gateway: GatewayProcess, gateway_stack: GatewayStack
) -> None:
    marker = uuid.uuid4().hex
    headers = bearer(OTHER_TENANT, "bob")
    async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=30) as http:
        response = await http.post(
            "/v1/publish",
            json={"topic": "business-facts", "event_type": "order.placed", "data": {"m": marker}},
        )
    assert response.status_code == 202, response.text
    event_id = response.json()["id"]

    records = await read_records(
        gateway_stack.bootstrap,
        topic_name(Topic.BUSINESS_FACTS, gateway_stack.prefix),
        lambda seen: any(headers_dict(r.headers).get("ce_id") == event_id for r in seen),
    )
    [record] = [r for r in records if headers_dict(r.headers).get("ce_id") == event_id]
    assert headers_dict(record.headers)[TENANT_CREDENTIAL_HEADER] == headers["Authorization"][7:]
    claims = _credential(record)
    assert (claims["tenant_id"], claims["user_id"], claims["roles"]) == (
        OTHER_TENANT,
        "bob",
        ["user"],
    )


async def test_an_a2a_request_is_signed_with_the_callers_tenant_and_answered(
    gateway: GatewayProcess, gateway_stack: GatewayStack
) -> None:
    name = f"Ada-{uuid.uuid4().hex[:6]}"
    async with a2a_client(gateway.url, "JSONRPC", agent=PUBLIC_AGENT) as client:
        client._config.streaming = False
        (event,) = await events_of(client, send_request(user_message({"name": name})))
    # Answered through agents and gateway readers that all require credentials.
    assert event.task.status.state == 3  # TASK_STATE_COMPLETED

    def mine(record: ReadRecord) -> bool:
        return name.encode() in (record.value or b"")

    records = await read_records(
        gateway_stack.bootstrap,
        topic_name(Topic.ACTION_REQUESTS, gateway_stack.prefix),
        lambda seen: any(mine(r) for r in seen),
    )
    [request] = [r for r in records if mine(r)]
    claims = _credential(request)
    assert (claims["tenant_id"], claims["user_id"], claims["roles"]) == (TENANT, "alice", ["user"])


async def test_a_request_forged_for_a_tenant_is_refused_by_the_agent(
    gateway_stack: GatewayStack,
) -> None:
    forged = ActionRequest(
        source="urn:attacker",
        type="hello.requested",
        tenant_id=TENANT,
        response_event="hello.done",
        correlation_id=uuid.uuid4().hex,
        data={"name": "Mallory"},
    )
    name = topic_name(Topic.ACTION_REQUESTS, gateway_stack.prefix)
    producer = AIOKafkaProducer(bootstrap_servers=gateway_stack.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            name, forged.to_kafka_value(), key=forged.kafka_key(), headers=forged.kafka_headers()
        )
    finally:
        await producer.stop()

    dead = await read_records(
        gateway_stack.bootstrap,
        dlq_topic(name),
        lambda seen: any(headers_dict(r.headers).get("ce_id") == forged.id for r in seen),
    )
    [record] = [r for r in dead if headers_dict(r.headers).get("ce_id") == forged.id]
    assert headers_dict(record.headers)[DlqHeader.ERROR_TYPE] == UNAUTHENTICATED_TENANT
    answers = await read_records(
        gateway_stack.bootstrap, topic_name(Topic.ACTION_RESULTS, gateway_stack.prefix)
    )
    assert not [r for r in answers if forged.correlation_id.encode() in (r.value or b"")]


async def test_a_forged_session_event_is_neither_stored_nor_streamed(
    gateway: GatewayProcess, gateway_stack: GatewayStack
) -> None:
    session = f"s-{uuid.uuid4().hex[:10]}"

    def ui_event(n: int) -> Notification:
        return Notification(
            source="urn:test",
            type="agent.status",
            tenant_id=TENANT,
            user_id="alice",
            session_id=session,
            # One key: the hub reads the forged event before the signed one after it.
            correlation_id=session,
            data={"agent_name": "gw-test", "payload": {"status": "running", "n": n}},
        )

    forged, signed = ui_event(0), ui_event(1)
    producer = AIOKafkaProducer(bootstrap_servers=gateway_stack.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            topic_name(Topic.NOTIFICATION_EVENTS, gateway_stack.prefix),
            forged.to_kafka_value(),
            key=forged.kafka_key(),
            headers=forged.kafka_headers(),
        )
    finally:
        await producer.stop()
    # The test's own identity: the dev secret, the service role (as an agent's).
    async with BusClient(gateway_stack.bus_settings(), name="gw-test") as bus:
        await bus.publish_envelope(Topic.NOTIFICATION_EVENTS, signed)

    async with httpx.AsyncClient(base_url=gateway.url, headers=bearer(), timeout=30) as http:

        async def stored() -> list[str]:
            response = await http.get(f"/v1/sessions/{session}/events")
            assert response.status_code == 200, response.text
            return [item["id"] for item in response.json()["items"]]

        ids = await eventually(stored, timeout=30, what="the signed event stored")

    assert ids == [signed.id]
