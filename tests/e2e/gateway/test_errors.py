"""Errors in the shape of each binding; the A2A-Version header honoured; nothing leaked."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.gateway.conftest import GatewayProcess, bearer

MESSAGE = {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}


@pytest.fixture
async def http(gateway: GatewayProcess) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=gateway.url, headers={**bearer(), "A2A-Version": "1.0"})


async def rpc(
    http: httpx.AsyncClient, method: str, params: object, **headers: str
) -> dict[str, object]:
    response = await http.post(
        "/a2a/gw-echo",
        json={"jsonrpc": "2.0", "id": "r1", "method": method, "params": params},
        headers=headers,
    )
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


async def test_json_rpc_errors_carry_the_specs_codes(http: httpx.AsyncClient) -> None:
    async with http:
        unknown = await rpc(http, "NoSuchMethod", {})
        no_task = await rpc(http, "GetTask", {"id": "missing"})
        bad_message = await rpc(
            http, "SendMessage", {"message": {"messageId": "m", "role": "ROLE_USER"}}
        )
        old_version = await rpc(http, "SendMessage", MESSAGE, **{"A2A-Version": "0.3"})
        malformed = await http.post(
            "/a2a/gw-echo", content=b"{not json", headers={"content-type": "application/json"}
        )

    assert unknown["error"]["code"] == -32601  # type: ignore[index]
    assert no_task["error"]["code"] == -32001  # type: ignore[index]
    assert bad_message["error"]["code"] == -32602  # type: ignore[index]
    assert old_version["error"]["code"] == -32009  # type: ignore[index]
    assert malformed.json()["error"]["code"] == -32700


async def test_http_json_errors_are_google_rpc_status_bodies(http: httpx.AsyncClient) -> None:
    async with http:
        no_task = await http.get("/a2a/gw-echo/tasks/missing")
        old_version = await http.post(
            "/a2a/gw-echo/message:send", json=MESSAGE, headers={"A2A-Version": "0.3"}
        )
        unknown_agent = await http.post("/a2a/nobody/message:send", json=MESSAGE)
        too_large = await http.post(
            "/a2a/gw-echo/message:send",
            content=b'{"message": {"parts": [{"text": "' + b"x" * 2_000_000 + b'"}]}}',
            headers={"content-type": "application/json"},
        )

    assert no_task.status_code == 404
    error = no_task.json()["error"]
    assert (error["code"], error["status"]) == (404, "NOT_FOUND")
    assert error["details"][0]["reason"] == "TASK_NOT_FOUND"
    assert old_version.status_code == 400
    assert old_version.json()["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    assert unknown_agent.status_code == 404
    assert unknown_agent.json()["error"]["details"][0]["reason"] == "AGENT_NOT_FOUND"
    assert too_large.status_code == 413
    for response in (no_task, old_version, unknown_agent, too_large):
        assert "Traceback" not in response.text
