"""A2A v1.0 agent cards built from registrations."""

from __future__ import annotations

import httpx

from tests.integration.registry.support import (
    OBJECT_SCHEMA,
    RESULT_SCHEMA,
    assert_error,
    bearer,
    capability,
    new_tenant,
    register,
    registration,
)

EXTENSION = "urn:disco:a2a:extension:event-contracts:v1"


async def test_a_card_has_a_skill_per_capability_and_the_gateway_as_its_interfaces(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    record = await register(
        http, tenant, registration(capabilities=[capability("add"), capability("mul")])
    )

    response = await http.get(f"/v1/agents/{record['agent_id']}/card", headers=bearer(tenant))

    assert response.status_code == 200, response.text
    card = response.json()
    assert card["name"] == record["name"]
    assert card["version"] == "1.0.0"
    assert [skill["id"] for skill in card["skills"]] == ["add", "mul"]
    assert card["skills"][0]["inputModes"] == ["application/json", "text/plain"]
    assert card["securityRequirements"] == [{"schemes": {"bearer": {"list": []}}}]
    assert card["capabilities"]["pushNotifications"] is True
    assert "add.requested" in card["skills"][0]["tags"]
    bindings = {(i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]}
    assert bindings == {("JSONRPC", "1.0"), ("HTTP+JSON", "1.0")}
    assert all(
        i["url"] == f"http://127.0.0.1:8080/a2a/{record['name']}" and i["tenant"] == tenant
        for i in card["supportedInterfaces"]
    )
    assert "url" not in card


async def test_a_card_carries_each_skills_schemas_exactly_in_its_extension(
    http: httpx.AsyncClient,
) -> None:
    tenant = new_tenant()
    record = await register(http, tenant)

    card = (await http.get(f"/v1/agents/{record['agent_id']}/card", headers=bearer(tenant))).json()

    [extension] = card["capabilities"]["extensions"]
    assert extension["uri"] == EXTENSION
    assert extension.get("required", False) is False  # proto3 JSON omits false
    contract = extension["params"]["skills"]["add"]
    assert contract["request"]["event_type"] == "add.requested"
    assert contract["request"]["json_schema"] == OBJECT_SCHEMA
    assert contract["responses"][0]["json_schema"] == RESULT_SCHEMA


async def test_the_card_of_an_unknown_agent_is_not_found(http: httpx.AsyncClient) -> None:
    assert_error(await http.get("/v1/agents/nobody/card", headers=bearer(new_tenant())), 404)
