"""Registering, reading, listing, heartbeating and deregistering agents."""

from __future__ import annotations

import asyncio

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


async def test_concurrent_heartbeats_each_get_their_own_answer(http: httpx.AsyncClient) -> None:
    tenant, other = new_tenant(), new_tenant()
    records = [await register(http, tenant) for _ in range(5)]
    beats = [
        *(
            http.post(
                f"/v1/agents/{r['agent_id']}/heartbeat",
                json={"instance_id": r["instance_id"]},
                headers=bearer(tenant),
            )
            for r in records
            for _ in range(3)  # the same instance several times in one batch
        ),
        http.post("/v1/agents/unknown-agent/heartbeat", json={}, headers=bearer(tenant)),
        http.post(f"/v1/agents/{records[0]['agent_id']}/heartbeat", json={}, headers=bearer(other)),
    ]

    responses = await asyncio.gather(*beats)

    assert [r.status_code for r in responses[:-2]] == [200] * 15
    assert [r.json()["agent_id"] for r in responses[:-2]] == [
        r["agent_id"] for r in records for _ in range(3)
    ]
    assert_error(responses[-2], 404, "agent_not_found")
    assert_error(responses[-1], 404, "agent_not_found")


async def test_a_heartbeat_can_change_the_ttl(http: httpx.AsyncClient) -> None:
    tenant = new_tenant()
    record = await register(http, tenant)

    beat = await http.post(
        f"/v1/agents/{record['agent_id']}/heartbeat",
        json={"instance_id": record["instance_id"], "ttl_seconds": 600},
        headers=bearer(tenant),
    )

    assert beat.status_code == 200
    updated = (await http.get(f"/v1/agents/{record['agent_id']}", headers=bearer(tenant))).json()
    assert updated["ttl_seconds"] == 600
    assert updated["expires_at"] == beat.json()["expires_at"]


async def test_several_instances_of_one_registration_count_separately(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    body = registration(instance_id="host-a:1")
    await register(http, tenant, body)
    await register(http, tenant, {**body, "instance_id": "host-b:1"})

    leave = await http.delete(
        f"/v1/agents/{body['agent_id']}", params={"instance_id": "host-a:1"}, headers=bearer(tenant)
    )

    assert leave.status_code == 204
    record = (await http.get(f"/v1/agents/{body['agent_id']}", headers=bearer(tenant))).json()
    assert record["live_instances"] == 1
    last = await http.delete(
        f"/v1/agents/{body['agent_id']}", params={"instance_id": "host-b:1"}, headers=bearer(tenant)
    )
    assert last.status_code == 204
    assert_error(await http.get(f"/v1/agents/{body['agent_id']}", headers=bearer(tenant)), 404)


async def test_agents_are_listed_by_filter_page_by_page(http: httpx.AsyncClient) -> None:
    tenant = new_tenant()
    tagged = [
        await register(
            http, tenant, registration(tags=["blue"], capabilities=[capability("paint")])
        )
        for _ in range(5)
    ]
    await register(http, tenant, registration(tags=["red"]))

    seen: list[str] = []
    cursor: str | None = None
    while True:
        params = {"tag": "blue", "capability": "paint", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = (await http.get("/v1/agents", params=params, headers=bearer(tenant))).json()
        seen += [item["agent_id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert sorted(seen) == sorted(r["agent_id"] for r in tagged)
    assert len(seen) == len(set(seen))
