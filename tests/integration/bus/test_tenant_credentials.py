"""An envelope's tenant must be vouched for: forged tenants are dead-lettered, signed ones flow.

A plain aiokafka producer (no disco, no credential of its own) writes envelopes
claiming tenant ``globex``; the consumer requires credentials, so each goes to
the DLQ with the reason ``unauthenticated_tenant`` and its handler never sees
it, while an SDK producer signing with its identity is handled. With the
requirement off (dev), unsigned envelopes still flow.
"""

from __future__ import annotations

import time

import jwt
from aiokafka import AIOKafkaProducer

from disco.auth import DevTokenMinter, mint_dev_token
from disco.bus import BusClient, BusConsumer, DlqHeader
from disco.settings import BusSettings
from disco_common.auth import TENANT_CREDENTIAL_HEADER, UNAUTHENTICATED_TENANT, Role
from disco_common.envelope import (
    ActionRequest,
    ActionResult,
    BusinessFact,
    Envelope,
    headers_dict,
)
from disco_common.topics import Topic
from tests.integration.bus.conftest import Recorder, read_topic

SECRET = "the-issuers-secret-0123456789abcdef0123456789"
VICTIM = "globex"


def _forged(n: int) -> BusinessFact:
    return BusinessFact(
        source="urn:attacker",
        type="order.placed",
        tenant_id=VICTIM,
        user_id="mallory",
        plan_id="p-1",
        data={"forged": n},
    )


async def _produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[BusinessFact, str | None]] | list[tuple[ActionResult, str | None]],
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for envelope, credential in records:
            headers = envelope.kafka_headers()
            if credential is not None:
                headers.append((TENANT_CREDENTIAL_HEADER, credential.encode()))
            await producer.send_and_wait(
                topic, envelope.to_kafka_value(), key=envelope.kafka_key(), headers=headers
            )
    finally:
        await producer.stop()


def _expired(tenant: str) -> str:
    now = int(time.time())
    claims = {
        "sub": "old",
        "tenant_id": tenant,
        "user_id": "old",
        "iat": now - 120,
        "exp": now - 60,
    }
    return jwt.encode(claims, SECRET, algorithm="HS256")


async def test_forged_tenants_are_dead_lettered_and_a_signed_producer_is_handled(
    bus_settings: BusSettings, recorder: Recorder, kafka_bootstrap: str
) -> None:
    settings = BusSettings(
        **{
            **bus_settings.model_dump(),
            "auth_secret": SECRET,
            "bus_require_tenant_credential": True,
            "auth_leeway_seconds": 0,
        }
    )
    forged = [
        (_forged(0), None),
        (_forged(1), mint_dev_token(SECRET, "acme", "mallory", [Role.USER])),
        (_forged(2), _expired(VICTIM)),
        (_forged(3), mint_dev_token("not-the-issuers-secret-0123456789abcdef", VICTIM, "x")),
    ]
    signer = DevTokenMinter(SECRET, tenant_id=VICTIM, user_id="shop", roles=(Role.USER,))
    async with BusClient(settings, name="shop", credentials=signer) as bus:
        await bus.ensure_topics()
        topic = bus.topic_name(Topic.BUSINESS_FACTS)
        # Same key as the good one: one partition, handled in order before it.
        await _produce(kafka_bootstrap, topic, forged)
        good = await bus.announce(
            "order.placed", {"genuine": True}, tenant_id=VICTIM, plan_id="p-1"
        )
        consumer = BusConsumer(bus, "orders")
        consumer.add_handler(Topic.BUSINESS_FACTS, "order.placed", recorder)
        async with consumer:
            await recorder.wait_for(1)
            dead = await read_topic(kafka_bootstrap, f"{topic}.dlq", len(forged))

    assert recorder.ids == [good.id]
    assert [record.value for record in dead] == [e.to_kafka_value() for e, _ in forged]
    reasons = [headers_dict(record.headers) for record in dead]
    assert {h[DlqHeader.ERROR_TYPE] for h in reasons} == {UNAUTHENTICATED_TENANT}
    messages = [h[DlqHeader.ERROR_MESSAGE] for h in reasons]
    assert "no disco-tenant-credential header" in messages[0]
    assert "is for tenant 'acme', not 'globex'" in messages[1]
    assert "expired" in messages[2]
    assert "Signature verification failed" in messages[3]
    assert all(h[DlqHeader.ATTEMPTS] == "0" for h in reasons)


async def test_a_service_identity_vouches_for_the_tenant_of_what_it_handles(
    bus_settings: BusSettings, recorder: Recorder
) -> None:
    settings = BusSettings(
        **{
            **bus_settings.model_dump(),
            "auth_secret": SECRET,
            "bus_require_tenant_credential": True,
        }
    )
    platform = DevTokenMinter(SECRET, tenant_id="platform", user_id="router")  # service role
    async with BusClient(settings, name="router", credentials=platform) as bus:
        await bus.ensure_topics()
        sent = [
            await bus.announce("order.placed", {"n": n}, tenant_id=tenant)
            for n, tenant in enumerate(["acme", VICTIM])
        ]
        consumer = BusConsumer(bus, "orders-any")
        consumer.add_handler(Topic.BUSINESS_FACTS, "order.placed", recorder)
        async with consumer:
            await recorder.wait_for(2)

    assert sorted(recorder.ids) == sorted(e.id for e in sent)


async def test_in_dev_unsigned_envelopes_still_flow(
    bus_settings: BusSettings, recorder: Recorder, kafka_bootstrap: str
) -> None:
    assert bus_settings.env == "dev"
    assert not bus_settings.tenant_credential_required
    unsigned = _forged(9)
    async with BusClient(bus_settings, name="dev", sign=False) as bus:
        await bus.ensure_topics()
        topic = bus.topic_name(Topic.BUSINESS_FACTS)
        await _produce(kafka_bootstrap, topic, [(unsigned, None)])
        consumer = BusConsumer(bus, "dev-orders")
        consumer.add_handler(Topic.BUSINESS_FACTS, "order.placed", recorder)
        async with consumer:
            await recorder.wait_for(1)
        dead = await read_topic(kafka_bootstrap, f"{topic}.dlq", 1, timeout=1.0)

    assert recorder.ids == [unsigned.id]
    assert dead == []


async def test_a_response_no_credential_vouches_for_is_passed_over_for_the_signed_one(
    bus_settings: BusSettings, kafka_bootstrap: str
) -> None:
    settings = BusSettings(
        **{
            **bus_settings.model_dump(),
            "auth_secret": SECRET,
            "bus_require_tenant_credential": True,
        }
    )
    shop = DevTokenMinter(SECRET, tenant_id=VICTIM, user_id="shop", roles=(Role.USER,))
    async with BusClient(settings, name="shop", credentials=shop) as bus:
        await bus.ensure_topics()
        consumer = BusConsumer(bus, "pricing")

        @consumer.on(Topic.ACTION_REQUESTS, "price.requested")
        async def price(envelope: Envelope) -> None:
            request = envelope.as_(ActionRequest)
            forged = ActionResult(
                source="urn:attacker",
                type=request.response_event,
                tenant_id=VICTIM,
                correlation_id=request.correlation_id,
                data={"price": 0},
            )
            # Unsigned, then signed for another tenant: both claim the victim.
            await _produce(
                kafka_bootstrap,
                bus.topic_name(Topic.ACTION_RESULTS),
                [(forged, None), (forged, mint_dev_token(SECRET, "acme", "mallory"))],
            )
            await bus.respond(
                request.response_event,
                {"price": 42},
                correlation_id=request.correlation_id or request.id,
                tenant_id=VICTIM,
            )

        async with consumer:
            answer = await bus.request(
                "price.requested",
                {"sku": "x"},
                response_event="price.completed",
                tenant_id=VICTIM,
                wait=20,
            )

    assert answer.data == {"price": 42}
