"""Tenant isolation: row-level security under the application role, and public agents."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
import pytest

from tests.fixtures.infra import DatabaseUrls
from tests.integration.registry.support import (
    assert_error,
    bearer,
    capability,
    new_tenant,
    register,
    registration,
    unique,
)


async def app_role(database: DatabaseUrls, tenant: str) -> asyncpg.Connection:
    """A raw connection as the application role, in a transaction acting for ``tenant``."""
    conn = await asyncpg.connect(database.app)
    await conn.execute("BEGIN")
    await conn.execute("SELECT set_config('disco.tenant_id', $1, true)", tenant)
    return conn


async def test_the_application_role_cannot_read_another_tenants_agent(
    http: httpx.AsyncClient, database: DatabaseUrls
) -> None:
    owner, other = new_tenant(), new_tenant()
    record = await register(http, owner)

    conn = await app_role(database, other)
    try:
        agents = await conn.fetch(
            "SELECT agent_id FROM registry.agents WHERE agent_id = $1", record["agent_id"]
        )
        events = await conn.fetch(
            "SELECT event_type FROM registry.events WHERE owner_agent_id = $1", record["agent_id"]
        )
    finally:
        await conn.close()

    assert agents == []
    assert events == []


async def test_the_application_role_cannot_write_another_tenants_agent(
    http: httpx.AsyncClient, database: DatabaseUrls
) -> None:
    owner, other = new_tenant(), new_tenant()
    record = await register(http, owner)

    conn = await app_role(database, other)
    try:
        updated = await conn.execute(
            "UPDATE registry.agents SET description = 'hijacked' WHERE agent_id = $1",
            record["agent_id"],
        )
        deleted = await conn.execute(
            "DELETE FROM registry.agents WHERE agent_id = $1", record["agent_id"]
        )
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            await conn.execute(
                "INSERT INTO registry.payload_schemas (tenant_id, name, version, sort_key, "
                "json_schema, content_hash) VALUES ($1, 'x', '1.0.0', 'k', '{}', 'h')",
                owner,
            )
    finally:
        await conn.close()

    assert (updated, deleted) == ("UPDATE 0", "DELETE 0")
    still = await http.get(f"/v1/agents/{record['agent_id']}", headers=bearer(owner))
    assert still.json()["description"] == record["description"]


async def test_a_tenant_cannot_see_heartbeat_or_deregister_another_tenants_agent(
    http: httpx.AsyncClient,
) -> None:
    owner, other = new_tenant(), new_tenant()
    record = await register(http, owner)
    agent_id = record["agent_id"]

    assert_error(await http.get(f"/v1/agents/{agent_id}", headers=bearer(other)), 404)
    assert_error(
        await http.post(f"/v1/agents/{agent_id}/heartbeat", json={}, headers=bearer(other)), 404
    )
    assert_error(await http.delete(f"/v1/agents/{agent_id}", headers=bearer(other)), 404)
    assert (await http.get("/v1/agents", headers=bearer(other))).json()["items"] == []
    assert (
        await http.get("/v1/discover", params={"capability": "add"}, headers=bearer(other))
    ).json() == []
    assert (await http.get(f"/v1/agents/{agent_id}", headers=bearer(owner))).status_code == 200


@asynccontextmanager
async def public_agent(
    http: httpx.AsyncClient, owner: str, body: dict[str, Any]
) -> AsyncIterator[dict[str, Any]]:
    """A public agent registered for ``owner``, deregistered when the block ends.

    A public agent shows in every tenant's lists and discoveries while it lives:
    left behind, it would show in the other tests' answers on this database.
    """
    record = await register(http, owner, {**body, "visibility": "public"})
    try:
        yield record
    finally:
        await http.delete(f"/v1/agents/{record['agent_id']}", headers=bearer(owner))


async def test_a_public_agent_is_visible_to_every_tenant_but_writable_only_by_its_own(
    http: httpx.AsyncClient,
) -> None:
    owner, other = new_tenant(), new_tenant()
    task = unique("public-task")
    async with public_agent(http, owner, registration(capabilities=[capability(task)])) as record:
        agent_id = record["agent_id"]

        seen = await http.get(f"/v1/agents/{agent_id}", headers=bearer(other))
        discovered = await http.get(
            "/v1/discover", params={"capability": task}, headers=bearer(other)
        )
        event = await http.get(f"/v1/events/{task}.requested", headers=bearer(other))
        beat = await http.post(f"/v1/agents/{agent_id}/heartbeat", json={}, headers=bearer(other))
        gone = await http.delete(f"/v1/agents/{agent_id}", headers=bearer(other))

    assert seen.status_code == 200
    assert seen.json()["tenant_id"] == owner
    assert [a["name"] for a in discovered.json()] == [record["name"]]
    assert discovered.json()[0]["visibility"] == "public"
    assert discovered.json()[0]["instance_count"] == 1
    assert event.status_code == 200
    assert event.json()["tenant_id"] == owner
    assert_error(beat, 404)
    assert_error(gone, 404)


async def test_a_tenants_own_agent_comes_before_a_public_one_with_the_same_id(
    http: httpx.AsyncClient,
) -> None:
    owner, other = new_tenant(), new_tenant()
    body = registration(capabilities=[capability(unique("public-task"))])
    async with public_agent(http, owner, body):
        mine = await register(http, other, {**body, "visibility": "tenant", "description": "mine"})

        seen = await http.get(f"/v1/agents/{body['agent_id']}", headers=bearer(other))

    assert seen.json()["tenant_id"] == other
    assert seen.json()["description"] == mine["description"] == "mine"


async def test_the_discovery_function_answers_only_for_the_tenant_of_the_transaction(
    http: httpx.AsyncClient, database: DatabaseUrls
) -> None:
    owner, other = new_tenant(), new_tenant()
    task = unique("secret-task")
    await register(http, owner, registration(capabilities=[capability(task)]))
    call = "SELECT answer FROM registry.discover_agents(ARRAY[$1]::text[], NULL, NULL, NULL, 20)"

    as_other = await app_role(database, other)
    as_owner = await app_role(database, owner)
    no_tenant = await asyncpg.connect(database.app)
    try:
        seen_by_other = await as_other.fetchval(call, task)
        seen_by_owner = await as_owner.fetchval(call, task)
        seen_by_nobody = await no_tenant.fetchval(call, task)
    finally:
        for conn in (as_other, as_owner, no_tenant):
            await conn.close()

    assert seen_by_other == "[]"
    assert seen_by_nobody == "[]"
    assert task in seen_by_owner


async def test_one_statement_discovery_scopes_only_its_own_statement(
    http: httpx.AsyncClient, database: DatabaseUrls
) -> None:
    owner, other = new_tenant(), new_tenant()
    task = unique("scoped-task")
    await register(http, owner, registration(capabilities=[capability(task)]))
    call = (
        "SELECT answer FROM registry.discover_agents_as($1, 'u', ARRAY[$2]::text[], NULL, NULL, "
        "NULL, 20)"
    )
    plain = "SELECT answer FROM registry.discover_agents(ARRAY[$1]::text[], NULL, NULL, NULL, 20)"

    conn = await asyncpg.connect(database.app)
    try:
        seen_by_owner = await conn.fetchval(call, owner, task)
        # The next statement on the same connection (a pooled one, in the service)
        # acts for no tenant: the scope ended with the statement's transaction.
        scope_after = await conn.fetchval("SELECT current_setting('disco.tenant_id', true)")
        seen_after = await conn.fetchval(plain, task)
        seen_by_other = await conn.fetchval(call, other, task)
    finally:
        await conn.close()

    assert task in seen_by_owner
    assert scope_after in (None, "")
    assert seen_after == "[]"
    assert seen_by_other == "[]"


async def test_a_registration_is_discovered_by_the_next_query_and_its_change_too(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    first, second = unique("first-task"), unique("second-task")
    body = registration(capabilities=[capability(first)])
    await register(http, tenant, body)
    found_first = await http.get(
        "/v1/discover", params={"consumed_event": f"{first}.requested"}, headers=bearer(tenant)
    )
    await register(http, tenant, {**body, "capabilities": [capability(second)]})
    gone = await http.get(
        "/v1/discover", params={"consumed_event": f"{first}.requested"}, headers=bearer(tenant)
    )
    found_second = await http.get(
        "/v1/discover", params={"consumed_event": f"{second}.requested"}, headers=bearer(tenant)
    )
    events = await http.get("/v1/events", params={"owner_agent_id": body["agent_id"]},
                            headers=bearer(tenant))  # fmt: skip

    assert [agent["name"] for agent in found_first.json()] == [body["name"]]
    assert gone.json() == []
    assert [agent["name"] for agent in found_second.json()] == [body["name"]]
    assert sorted(event["event_type"] for event in events.json()["items"]) == sorted(
        [f"{second}.requested", f"{second}.completed"]
    )
