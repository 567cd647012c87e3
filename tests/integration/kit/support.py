"""Helpers for the service kit's integration tests: the test app, tokens, reading topics."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, TopicPartition
from asgi_lifespan import LifespanManager
from fastapi import FastAPI

from disco._auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco.settings import BusSettings
from disco_common.auth import Role
from disco_common.envelope import Envelope
from disco_service import ServiceSettings, create_service_app
from tests.integration.kit.app import router


def build_app(settings: ServiceSettings, schema: str, **options: Any) -> FastAPI:
    return create_service_app(
        settings, title="kit test", routers=[router], schema=schema, **options
    )


@asynccontextmanager
async def serve(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """Run ``app``'s lifespan and hand out a client talking to it in-process."""
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30) as manager:
        transport = httpx.ASGITransport(app=manager.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://kit.test") as client:
            yield client


def bearer(
    tenant: str = "acme",
    user: str = "alice",
    roles: Iterable[Role] = (Role.USER,),
    *,
    secret: str = DEV_AUTH_SECRET,
    ttl_seconds: int = 300,
) -> dict[str, str]:
    """An Authorization header with a dev token."""
    token = mint_dev_token(secret, tenant, user, roles, ttl_seconds)
    return {"Authorization": f"Bearer {token}"}


def new_tenant() -> str:
    """A tenant id no other test uses."""
    return f"tenant-{uuid.uuid4().hex[:10]}"


async def read_envelopes(
    bootstrap: str,
    topic: str,
    until: Callable[[list[Envelope]], bool],
    timeout: float = 20.0,
) -> list[Envelope]:
    """Read broker topic ``topic`` from the start (no group) until ``until(envelopes)``,
    then on to the end of every partition as it was at that moment.

    Fails the test (TimeoutError) when the condition is not met within ``timeout``.
    """
    # Provisioned first (idempotent), as `disco dev up` does: a consumer only
    # sees topics that existed when it started.
    async with BusClient(BusSettings(kafka_bootstrap=bootstrap)) as bus:
        await bus.ensure_topics([topic])
    envelopes: list[Envelope] = []
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=20
    )
    await consumer.start()
    try:
        async with asyncio.timeout(timeout):
            partitions = consumer.partitions_for_topic(topic) or set()
            assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
            consumer.assign(assigned)
            await consumer.seek_to_beginning()

            async def fetch() -> None:
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    envelopes.extend(Envelope.from_kafka_value(r.value) for r in records)

            while not until(envelopes):
                await fetch()
            # Partitions are read independently: also read everything that was
            # on the topic once the condition held, so that an event published
            # before it on another partition is not missed.
            ends = await consumer.end_offsets(assigned)

            async def behind() -> bool:
                for partition, end in ends.items():
                    if await consumer.position(partition) < end:
                        return True
                return False

            while await behind():
                await fetch()
    finally:
        await consumer.stop()
    return envelopes
