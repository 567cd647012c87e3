"""Refusals that say what the caller has wrong: a token of another tenant than the agent's,
and no token for a private agent. (The public card with no public agent on it:
services/gateway/tests/test_public_card.py, and the README tour's stack.)

The codes and shapes stay those of each binding (``agent_not_found``, JSON-RPC's and
HTTP+JSON's ``AGENT_NOT_FOUND`` reason, gRPC's ``NOT_FOUND``); the message carries the hint.
"""

from __future__ import annotations

import grpc
import grpc.aio
import httpx
import pytest
from a2a.types import a2a_pb2_grpc

from tests.e2e.gateway.conftest import (
    OTHER_TENANT,
    GatewayProcess,
    bearer,
    token,
)
from tests.e2e.gateway.support import send_request, user_message

PER_TENANT = "Agents are registered per tenant"
MESSAGE = {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}


async def test_a_valid_token_of_another_tenant_is_told_that_agents_are_per_tenant(
    gateway: GatewayProcess,
) -> None:
    # gw-echo runs for acme; the token is beta's.
    headers = {**bearer(OTHER_TENANT), "A2A-Version": "1.0"}
    async with httpx.AsyncClient(base_url=gateway.url, headers=headers) as http:
        card = await http.get("/a2a/gw-echo/.well-known/agent-card.json")
        rest = await http.post("/a2a/gw-echo/message:send", json=MESSAGE)
        rpc = await http.post(
            "/a2a/gw-echo",
            json={"jsonrpc": "2.0", "id": "r1", "method": "SendMessage", "params": MESSAGE},
        )
    async with grpc.aio.insecure_channel(gateway.grpc_address) as channel:
        request = send_request(user_message({"text": "hi"}))
        request.tenant = "gw-echo"
        metadata = (("authorization", f"Bearer {token(OTHER_TENANT)}"), ("a2a-version", "1.0"))
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(request, metadata=metadata)  # type: ignore[no-untyped-call]

    said = f"there is no agent 'gw-echo' in tenant {OTHER_TENANT!r}, your token's tenant"
    assert card.status_code == 404
    assert card.json()["error"]["code"] == "agent_not_found"
    assert rest.status_code == 404
    assert rest.json()["error"]["details"][0]["reason"] == "AGENT_NOT_FOUND"
    assert rpc.json()["error"]["data"][0]["reason"] == "AGENT_NOT_FOUND"
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    for message in (
        card.json()["error"]["message"],
        rest.json()["error"]["message"],
        rpc.json()["error"]["message"],
        raised.value.details(),
    ):
        assert said in message
        assert PER_TENANT in message


async def test_the_gateways_own_endpoint_names_the_tenant_too(gateway: GatewayProcess) -> None:
    message = {
        "message": {**MESSAGE["message"], "metadata": {"skill": "gw-echo/echo"}},
    }
    headers = {**bearer(OTHER_TENANT), "A2A-Version": "1.0"}
    async with httpx.AsyncClient(base_url=gateway.url, headers=headers) as http:
        rpc = await http.post(
            "/a2a",
            json={"jsonrpc": "2.0", "id": "r1", "method": "SendMessage", "params": message},
        )

    error = rpc.json()["error"]
    assert error["code"] == -32602  # InvalidParams, as before
    assert f"in tenant {OTHER_TENANT!r}" in error["message"]
    assert PER_TENANT in error["message"]


async def test_a_private_agents_card_without_a_token_says_how_agents_become_public(
    gateway: GatewayProcess,
) -> None:
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        hidden = await http.get("/a2a/gw-echo/.well-known/agent-card.json")

    assert hidden.status_code == 404
    assert hidden.json()["error"]["code"] == "agent_not_found"
    assert "DISCO_GATEWAY_PUBLIC_AGENTS" in hidden.json()["error"]["message"]
    assert "Authorization: Bearer" in hidden.json()["error"]["message"]
