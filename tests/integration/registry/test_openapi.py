"""The OpenAPI document names every route with real schemas and its error responses."""

from __future__ import annotations

import httpx


async def test_every_registry_route_is_documented_with_its_error_responses(
    http: httpx.AsyncClient,
) -> None:
    document = (await http.get("/openapi.json")).json()
    paths = document["paths"]

    expected = {
        ("/v1/agents", "post"): {"413", "422"},
        ("/v1/agents", "get"): {"400"},
        ("/v1/agents/{agent_id}", "get"): {"404"},
        ("/v1/agents/{agent_id}", "delete"): {"404"},
        ("/v1/agents/{agent_id}/heartbeat", "post"): {"404"},
        ("/v1/agents/{agent_id}/card", "get"): {"404"},
        ("/v1/discover", "post"): {"422"},
        ("/v1/events", "get"): {"400"},
        ("/v1/events/{event_type}", "get"): {"404"},
        ("/v1/schemas", "post"): {"409"},
        ("/v1/schemas/{name}", "get"): {"404"},
        ("/v1/schemas/{name}/versions/{version}", "get"): {"404"},
        ("/v1/schemas/{name}/versions/{version}/validate", "post"): {"404"},
    }
    for (path, method), statuses in expected.items():
        responses = paths[path][method]["responses"]
        assert statuses <= set(responses), (path, method, sorted(responses))
    card = paths["/v1/agents/{agent_id}/card"]["get"]["responses"]["200"]
    assert card["content"]["application/json"]["schema"]["$ref"].endswith("A2AAgentCard")
