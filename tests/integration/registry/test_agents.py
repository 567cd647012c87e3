"""Registering, reading, listing, heartbeating and deregistering agents."""

from __future__ import annotations

import httpx

from tests.fixtures.infra import DatabaseUrls
from tests.integration.registry.support import (
    assert_error,
    bearer,
    capability,
    new_tenant,
    register,
    registration,
    sql,
)


async def test_a_new_registration_is_created_live_with_its_capabilities(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    body = registration()

    response = await http.post("/v1/agents", json=body, headers=bearer(tenant))

    assert response.status_code == 201, response.text
    record = response.json()
    assert record["agent_id"] == body["agent_id"]
    assert record["tenant_id"] == tenant
    assert record["status"] == "live"
    assert record["live_instances"] == 1
    assert record["ttl_seconds"] == 30
    assert [cap["task_name"] for cap in record["capabilities"]] == ["add"]
    fetched = await http.get(f"/v1/agents/{body['agent_id']}", headers=bearer(tenant))
    assert fetched.json() == record


async def test_registering_the_same_agent_again_updates_it_in_place(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    body = registration()
    first = await register(http, tenant, body)

    body.update(version="1.1.0", capabilities=[capability("add"), capability("mul")])
    response = await http.post("/v1/agents", json=body, headers=bearer(tenant))

    assert response.status_code == 200
    updated = response.json()
    assert updated["version"] == "1.1.0"
    assert [cap["task_name"] for cap in updated["capabilities"]] == ["add", "mul"]
    assert updated["registered_at"] == first["registered_at"]
    listed = await http.get("/v1/agents", params={"name": body["name"]}, headers=bearer(tenant))
    assert [item["agent_id"] for item in listed.json()["items"]] == [body["agent_id"]]


async def test_a_heartbeat_extends_the_instance_and_answers_404_for_an_unknown_agent(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    record = await register(http, tenant)

    beat = await http.post(
        f"/v1/agents/{record['agent_id']}/heartbeat",
        json={"instance_id": record["instance_id"]},
        headers=bearer(tenant),
    )
    unknown = await http.post("/v1/agents/nobody/heartbeat", json={}, headers=bearer(tenant))

    assert beat.status_code == 200, beat.text
    assert beat.json()["status"] == "live"
    assert beat.json()["expires_at"] >= record["expires_at"]
    assert_error(unknown, 404, "agent_not_found")


async def test_deregistering_removes_the_agent_and_the_events_it_owns(
    http: httpx.AsyncClient, database: DatabaseUrls
) -> None:
    tenant = new_tenant()
    record = await register(http, tenant)

    response = await http.delete(f"/v1/agents/{record['agent_id']}", headers=bearer(tenant))

    assert response.status_code == 204
    assert_error(await http.get(f"/v1/agents/{record['agent_id']}", headers=bearer(tenant)), 404)
    rows = await sql(
        database.admin,
        "SELECT count(*) AS n FROM registry.events WHERE tenant_id = $1",
        tenant,
    )
    assert rows[0]["n"] == 0
