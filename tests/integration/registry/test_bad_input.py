"""Bad input: a clear 4xx with the stable error shape, and nothing half-written."""

from __future__ import annotations

import httpx

from tests.fixtures.infra import DatabaseUrls
from tests.integration.registry.support import (
    assert_error,
    bearer,
    capability,
    new_tenant,
    registration,
    sql,
    unique,
)


async def nothing_written(database: DatabaseUrls, tenant: str) -> bool:
    rows = await sql(
        database.admin,
        "SELECT (SELECT count(*) FROM registry.agents WHERE tenant_id = $1) "
        "+ (SELECT count(*) FROM registry.agent_instances WHERE tenant_id = $1) "
        "+ (SELECT count(*) FROM registry.events WHERE tenant_id = $1) "
        "+ (SELECT count(*) FROM registry.outbox WHERE tenant_id = $1) AS n",
        tenant,
    )
    return bool(rows[0]["n"] == 0)


async def test_an_invalid_json_schema_in_a_capability_is_refused(
    http: httpx.AsyncClient, database: DatabaseUrls
) -> None:
    tenant = new_tenant()
    body = registration(capabilities=[capability("add", request_schema={"type": 12})])

    response = await http.post("/v1/agents", json=body, headers=bearer(tenant))

    error = assert_error(response, 422, "validation_failed")
    assert "not a valid JSON Schema" in str(error["details"])
    assert await nothing_written(database, tenant)


async def test_an_unknown_schema_reference_is_refused_and_nothing_is_written(
    http: httpx.AsyncClient, database: DatabaseUrls
) -> None:
    tenant = new_tenant()
    missing = {"name": unique("missing"), "version": "1.0.0"}
    body = registration(capabilities=[capability("add", request_ref=missing)])

    response = await http.post("/v1/agents", json=body, headers=bearer(tenant))

    error = assert_error(response, 422, "unknown_schema_ref")
    assert error["details"] == [missing]
    assert await nothing_written(database, tenant)


async def test_an_update_naming_an_unknown_schema_leaves_the_previous_registration_whole(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    body = registration()
    first = await http.post("/v1/agents", json=body, headers=bearer(tenant))
    broken = {
        **body,
        "version": "9.9.9",
        "capabilities": [
            capability("mul", request_ref={"name": unique("missing"), "version": "1.0.0"})
        ],
    }

    response = await http.post("/v1/agents", json=broken, headers=bearer(tenant))

    assert_error(response, 422, "unknown_schema_ref")
    after = await http.get(f"/v1/agents/{body['agent_id']}", headers=bearer(tenant))
    assert after.json()["version"] == first.json()["version"]
    assert [c["task_name"] for c in after.json()["capabilities"]] == ["add"]


async def test_one_event_type_defined_twice_differently_is_refused(
    http: httpx.AsyncClient, database: DatabaseUrls
) -> None:
    tenant = new_tenant()
    body = registration(
        capabilities=[
            capability("add", response_type="math.done"),
            capability("mul", response_type="math.done", request_schema={"type": "object"}),
        ],
        events=[{"event_type": "math.done", "topic": "business-facts"}],
    )

    response = await http.post("/v1/agents", json=body, headers=bearer(tenant))

    error = assert_error(response, 422, "conflicting_event_definition")
    assert error["details"][0]["event_type"] == "math.done"
    assert await nothing_written(database, tenant)


async def test_unknown_fields_are_refused_in_bodies_and_in_query_parameters(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    body = {**registration(), "capabilitys": []}

    response = await http.post("/v1/agents", json=body, headers=bearer(tenant))
    query = await http.get("/v1/agents", params={"nme": "calc"}, headers=bearer(tenant))

    error = assert_error(response, 422, "validation_failed")
    assert any(v["location"][-1] == "capabilitys" for v in error["details"])
    assert_error(query, 422, "validation_failed")


async def test_an_oversized_body_is_refused_before_it_is_read(
    http: httpx.AsyncClient, database: DatabaseUrls
) -> None:
    tenant = new_tenant()
    body = registration(description="x" * 2_000_000)

    response = await http.post("/v1/agents", json=body, headers=bearer(tenant))

    assert_error(response, 413, "payload_too_large")
    assert await nothing_written(database, tenant)


async def test_a_cursor_not_issued_by_the_list_is_a_bad_request(http: httpx.AsyncClient) -> None:
    tenant = new_tenant()
    for _ in range(3):
        await http.post("/v1/agents", json=registration(), headers=bearer(tenant))
    page = (await http.get("/v1/agents", params={"limit": 1}, headers=bearer(tenant))).json()

    garbage = await http.get(
        "/v1/agents", params={"cursor": "not-a-cursor"}, headers=bearer(tenant)
    )
    other_filters = await http.get(
        "/v1/agents", params={"cursor": page["next_cursor"], "tag": "x"}, headers=bearer(tenant)
    )
    other_list = await http.get(
        "/v1/events", params={"cursor": page["next_cursor"]}, headers=bearer(tenant)
    )

    assert_error(garbage, 400, "invalid_cursor")
    assert_error(other_filters, 400, "invalid_cursor")
    assert_error(other_list, 400, "invalid_cursor")


async def test_a_request_without_a_token_is_unauthenticated(http: httpx.AsyncClient) -> None:
    assert_error(await http.get("/v1/agents"), 401, "unauthenticated")
    assert_error(await http.post("/v1/discover", json={"text": "x"}), 401)


async def test_a_ttl_outside_the_allowed_range_is_refused(http: httpx.AsyncClient) -> None:
    tenant = new_tenant()

    response = await http.post(
        "/v1/agents", json=registration(ttl_seconds=1), headers=bearer(tenant)
    )

    assert_error(response, 422, "validation_failed")
