"""Discovery: each live agent once, with its instance count and fully resolved schemas."""

from __future__ import annotations

import httpx
from pydantic import TypeAdapter

from disco_common.registry import DiscoveredAgent
from tests.integration.registry.support import (
    OBJECT_SCHEMA,
    RESULT_SCHEMA,
    assert_error,
    bearer,
    capability,
    new_tenant,
    register,
    registration,
    unique,
)

ANSWER = TypeAdapter(list[DiscoveredAgent])


async def test_instances_of_one_agent_name_are_discovered_once_with_their_count(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    name = unique("calc")
    first = registration(name=name, instance_id="host-a:1")
    await register(http, tenant, first)
    await register(http, tenant, {**first, "instance_id": "host-a:2"})
    second = await register(http, tenant, registration(name=name))
    third = await register(http, tenant, registration(name=name))

    response = await http.get("/v1/discover", params={"capability": "add"}, headers=bearer(tenant))

    assert response.status_code == 200
    [agent] = response.json()
    assert agent["name"] == name
    assert agent["instance_count"] == 4
    assert sorted(agent["agent_ids"]) == sorted(
        [first["agent_id"], second["agent_id"], third["agent_id"]]
    )


async def test_a_discovered_capability_carries_the_full_request_and_response_schemas(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    schema_name = unique("sum.request")
    created = await http.post(
        "/v1/schemas",
        json={"name": schema_name, "version": "1.0.0", "json_schema": OBJECT_SCHEMA},
        headers=bearer(tenant),
    )
    assert created.status_code == 201
    ref = {"name": schema_name, "version": "1.0.0"}
    await register(http, tenant, registration(capabilities=[capability("sum", request_ref=ref)]))

    response = await http.post("/v1/discover", json={"capability": "sum"}, headers=bearer(tenant))

    [agent] = response.json()
    found = next(cap for cap in agent["capabilities"] if cap["task_name"] == "sum")
    assert found["consumed_event"]["event_type"] == "sum.requested"
    assert found["consumed_event"]["topic"] == "action-requests"
    assert found["consumed_event"]["json_schema"] == OBJECT_SCHEMA
    assert found["consumed_event"]["schema_ref"] == ref
    assert found["produced_events"][0]["json_schema"] == RESULT_SCHEMA


async def test_agents_are_found_by_consumed_and_by_produced_event(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    record = await register(
        http,
        tenant,
        registration(
            capabilities=[
                capability("translate", request_type="text.translate", response_type="text.done")
            ]
        ),
    )
    await register(http, tenant)

    consumed = await http.get(
        "/v1/discover", params={"consumed_event": "text.translate"}, headers=bearer(tenant)
    )
    produced = await http.get(
        "/v1/discover", params={"produced_event": "text.done"}, headers=bearer(tenant)
    )

    assert [a["agent_ids"] for a in consumed.json()] == [[record["agent_id"]]]
    assert [a["agent_ids"] for a in produced.json()] == [[record["agent_id"]]]


async def test_free_text_finds_agents_by_words_in_descriptions_and_by_part_of_a_name(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    weather = await register(
        http,
        tenant,
        registration(
            name=unique("forecaster"),
            description="Forecasts the weather for any city",
            capabilities=[capability("forecast")],
        ),
    )
    await register(http, tenant, registration(description="adds numbers"))

    by_words = await http.get(
        "/v1/discover", params={"text": "weather forecasts"}, headers=bearer(tenant)
    )
    by_part = await http.get("/v1/discover", params={"text": "forecast"}, headers=bearer(tenant))

    assert [a["name"] for a in by_words.json()] == [weather["name"]]
    assert by_words.json()[0]["score"] > 0
    assert [a["name"] for a in by_part.json()] == [weather["name"]]


async def test_requirements_match_only_agents_that_have_every_capability(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    both = await register(
        http, tenant, registration(capabilities=[capability("add"), capability("mul")])
    )
    await register(http, tenant, registration(capabilities=[capability("add")]))

    response = await http.post(
        "/v1/discover", json={"capabilities": ["add", "mul"]}, headers=bearer(tenant)
    )

    assert [a["name"] for a in response.json()] == [both["name"]]


async def test_a_discovery_without_any_criterion_is_refused(http: httpx.AsyncClient) -> None:
    response = await http.post("/v1/discover", json={}, headers=bearer(new_tenant()))

    error = assert_error(response, 422, "validation_failed")
    assert "at least one" in str(error["details"])


async def test_discovery_describes_an_agent_by_its_most_recent_registration(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    name = unique("calc")
    await register(http, tenant, registration(name=name, version="1.0.0"))
    await register(http, tenant, registration(name=name, version="2.0.0"))

    [agent] = (
        await http.get("/v1/discover", params={"capability": "add"}, headers=bearer(tenant))
    ).json()

    assert agent["version"] == "2.0.0"
    assert agent["instance_count"] == 2


async def test_the_discovery_answer_is_exactly_a_list_of_discovered_agents(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    await register(http, tenant, registration(capabilities=[capability("add"), capability("mul")]))

    for response in (
        await http.get("/v1/discover", params={"capability": "add"}, headers=bearer(tenant)),
        await http.post("/v1/discover", json={"text": "adds"}, headers=bearer(tenant)),
    ):
        assert response.headers["content-type"] == "application/json"
        parsed = ANSWER.validate_python(response.json())
        assert ANSWER.dump_python(parsed, mode="json") == response.json()
        assert len(parsed) == 1
