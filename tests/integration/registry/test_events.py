"""The event registry: definitions owned by the agents that registered them."""

from __future__ import annotations

import httpx

from tests.integration.registry.support import (
    OBJECT_SCHEMA,
    assert_error,
    bearer,
    capability,
    new_tenant,
    register,
    registration,
    unique,
)


async def test_an_agents_events_are_listed_with_it_as_owner(http: httpx.AsyncClient) -> None:
    tenant = new_tenant()
    fact = unique("invoice.paid")
    record = await register(
        http,
        tenant,
        registration(events=[{"event_type": fact, "topic": "business-facts"}]),
    )

    owned = await http.get(
        "/v1/events", params={"owner_agent_id": record["agent_id"]}, headers=bearer(tenant)
    )
    facts = await http.get("/v1/events", params={"topic": "business-facts"}, headers=bearer(tenant))

    assert owned.status_code == 200
    assert sorted(e["event_type"] for e in owned.json()["items"]) == sorted(
        ["add.completed", "add.requested", fact]
    )
    assert {e["owner_agent_id"] for e in owned.json()["items"]} == {record["agent_id"]}
    assert [e["event_type"] for e in facts.json()["items"]] == [fact]


async def test_the_definition_of_an_event_type_comes_with_its_schema_resolved(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    event_type = unique("quote.requested")
    await register(
        http, tenant, registration(capabilities=[capability("quote", request_type=event_type)])
    )

    response = await http.get(f"/v1/events/{event_type}", headers=bearer(tenant))

    assert response.status_code == 200
    assert response.json()["json_schema"] == OBJECT_SCHEMA
    assert response.json()["topic"] == "action-requests"
    assert_error(await http.get("/v1/events/nobody.defines.this", headers=bearer(tenant)), 404)


async def test_an_event_type_with_slashes_is_reachable_by_path(http: httpx.AsyncClient) -> None:
    tenant = new_tenant()
    await register(
        http,
        tenant,
        registration(capabilities=[capability("route", request_type="com.acme/route:v1")]),
    )

    response = await http.get("/v1/events/com.acme/route:v1", headers=bearer(tenant))

    assert response.status_code == 200
    assert response.json()["event_type"] == "com.acme/route:v1"


async def test_deregistering_can_keep_the_events_the_agent_owned(http: httpx.AsyncClient) -> None:
    tenant = new_tenant()
    record = await register(http, tenant)

    await http.delete(
        f"/v1/agents/{record['agent_id']}",
        params={"remove_events": "false"},
        headers=bearer(tenant),
    )

    kept = await http.get(
        "/v1/events", params={"owner_agent_id": record["agent_id"]}, headers=bearer(tenant)
    )
    assert len(kept.json()["items"]) == 2


async def test_re_registering_with_fewer_events_removes_those_no_longer_defined(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    body = registration(capabilities=[capability("add"), capability("mul")])
    await register(http, tenant, body)

    await register(http, tenant, {**body, "capabilities": [capability("mul")]})

    owned = await http.get(
        "/v1/events", params={"owner_agent_id": body["agent_id"]}, headers=bearer(tenant)
    )
    assert sorted(e["event_type"] for e in owned.json()["items"]) == [
        "mul.completed",
        "mul.requested",
    ]
