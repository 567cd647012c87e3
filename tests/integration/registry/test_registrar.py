"""AgentRegistrar: registers on start, heartbeats, re-registers when forgotten or after an
outage, deregisters on a clean stop."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import httpx
from starlette.types import ASGIApp

from disco._dev.ports import free_port
from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.clients import RegistryClient, StaticToken
from disco.registry import AgentRegistrar
from disco_common.auth import Role
from disco_common.registry import AgentCapability, AgentRegistration, EventDefinition
from tests.fixtures.infra import DatabaseUrls
from tests.fixtures.waiting import eventually
from tests.integration.registry.support import new_tenant, sql, unique, uvicorn_server


def a_registration(**overrides: object) -> AgentRegistration:
    values: dict[str, object] = {
        "agent_id": unique("agent"),
        "name": unique("echo"),
        "instance_id": unique("host"),
        "capabilities": [
            AgentCapability(
                task_name="echo",
                consumed_event=EventDefinition(
                    event_type="echo.requested", topic="action-requests"
                ),
            )
        ],
    }
    values.update(overrides)
    return AgentRegistration.model_validate(values)


async def test_starting_registers_and_stopping_deregisters_the_instance(
    make_client: Callable[..., RegistryClient], http: httpx.AsyncClient
) -> None:
    tenant = new_tenant()
    registration = a_registration()
    async with make_client(tenant) as client:
        registrar = AgentRegistrar(client, registration, heartbeat_interval_seconds=0.2)

        await registrar.start()
        await registrar.start()  # idempotent
        registered = registrar.registered
        record = await client.get_agent(registration.agent_id)
        await registrar.stop()
        await registrar.stop()  # idempotent
        after = await client.get_agent(registration.agent_id)

    assert registered
    assert record is not None
    assert record.live_instances == 1
    assert after is None
    assert not registrar.registered


async def test_heartbeats_keep_moving_the_expiry_forward(
    make_client: Callable[..., RegistryClient],
) -> None:
    tenant = new_tenant()
    registration = a_registration()
    async with make_client(tenant) as client:
        registrar = AgentRegistrar(client, registration, heartbeat_interval_seconds=0.1)
        await registrar.start()
        first = await client.get_agent(registration.agent_id)
        assert first is not None
        seen: list[datetime] = []

        async def heartbeated() -> bool:
            record = await client.get_agent(registration.agent_id)
            assert record is not None
            seen.append(record.last_heartbeat_at)
            return record.last_heartbeat_at > first.last_heartbeat_at

        try:
            await eventually(heartbeated)
        finally:
            await registrar.stop()

    assert seen[-1] > first.last_heartbeat_at


async def test_the_registrar_registers_again_when_the_registry_forgot_the_agent(
    make_client: Callable[..., RegistryClient], database: DatabaseUrls
) -> None:
    tenant = new_tenant()
    registration = a_registration()
    async with make_client(tenant) as client:
        registrar = AgentRegistrar(client, registration, heartbeat_interval_seconds=0.1)
        await registrar.start()
        try:
            # As after a purge or a reset: the registry no longer knows the agent.
            await sql(
                database.admin,
                "DELETE FROM registry.agents WHERE tenant_id = $1 AND agent_id = $2",
                tenant,
                registration.agent_id,
            )

            async def back() -> bool:
                return await client.get_agent(registration.agent_id) is not None

            await eventually(back)
            record = await client.get_agent(registration.agent_id)
        finally:
            await registrar.stop(deregister=False)

    assert record is not None
    assert [cap.task_name for cap in record.capabilities] == ["echo"]
    assert record.status == "live"


async def test_the_registrar_survives_an_unreachable_registry_and_registers_once_it_is_up(
    registry_app: ASGIApp,
) -> None:
    tenant = new_tenant()
    registration = a_registration()
    port = free_port()
    token = mint_dev_token(DEV_AUTH_SECRET, tenant, "agent", (Role.SERVICE,), 600)
    client = RegistryClient(
        f"http://127.0.0.1:{port}", token=StaticToken(token), timeout_seconds=2, retries=0
    )
    async with client:
        registrar = AgentRegistrar(client, registration, heartbeat_interval_seconds=0.5)
        await registrar.start()  # nothing listens yet: no exception, not registered
        assert not registrar.registered
        try:
            async with uvicorn_server(registry_app, port):
                assert await registrar.wait_registered(timeout=15)
                record = await client.get_agent(registration.agent_id)
        finally:
            await registrar.stop(deregister=False)

    assert record is not None
    assert record.live_instances == 1
