"""Concurrent registrations of one agent end with one consistent record."""

from __future__ import annotations

import asyncio

import httpx

from tests.fixtures.infra import DatabaseUrls
from tests.integration.registry.support import (
    bearer,
    capability,
    new_tenant,
    registration,
    sql,
    unique,
)


async def test_racing_registrations_of_one_agent_leave_one_whole_definition(
    http: httpx.AsyncClient, database: DatabaseUrls
) -> None:
    tenant = new_tenant()
    agent_id, name = unique("agent"), unique("calc")
    bodies = [
        registration(
            agent_id=agent_id,
            name=name,
            version=f"1.0.{n}",
            instance_id=f"host:{n}",
            capabilities=[capability(f"task{n}"), capability(f"extra{n}")],
        )
        for n in range(12)
    ]

    responses = await asyncio.gather(
        *(http.post("/v1/agents", json=body, headers=bearer(tenant)) for body in bodies)
    )

    assert sorted(r.status_code for r in responses) == [200] * 11 + [201]
    final = (await http.get(f"/v1/agents/{agent_id}", headers=bearer(tenant))).json()
    n = final["version"].rsplit(".", 1)[1]
    assert [c["task_name"] for c in final["capabilities"]] == [f"task{n}", f"extra{n}"]
    assert final["live_instances"] == 12
    agents = await sql(
        database.admin, "SELECT count(*) AS n FROM registry.agents WHERE tenant_id = $1", tenant
    )
    events = await sql(
        database.admin,
        "SELECT event_type FROM registry.events WHERE tenant_id = $1 ORDER BY event_type",
        tenant,
    )
    assert agents[0]["n"] == 1
    assert [row["event_type"] for row in events] == sorted(
        [f"extra{n}.completed", f"extra{n}.requested", f"task{n}.completed", f"task{n}.requested"]
    )


async def test_racing_identical_registrations_all_succeed(http: httpx.AsyncClient) -> None:
    tenant = new_tenant()
    body = registration()

    responses = await asyncio.gather(
        *(http.post("/v1/agents", json=body, headers=bearer(tenant)) for _ in range(8))
    )

    assert sorted(r.status_code for r in responses) == [200] * 7 + [201]
    listed = (await http.get("/v1/agents", headers=bearer(tenant))).json()["items"]
    assert [a["agent_id"] for a in listed] == [body["agent_id"]]
