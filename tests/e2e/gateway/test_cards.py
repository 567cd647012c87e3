"""Cards: the gateway's and each public agent's without a token; the extended card with one."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.types import a2a_pb2
from a2a.utils.signing import create_signature_verifier
from jwt import PyJWK

from disco_common.a2a import A2A_EVENT_CONTRACTS_EXTENSION
from tests.e2e.gateway.conftest import (
    BINDINGS,
    PUBLIC_AGENT,
    TENANT,
    GatewayProcess,
    a2a_client,
    bearer,
)


async def test_the_gateway_card_needs_no_token_and_lists_the_public_agents(
    gateway: GatewayProcess,
) -> None:
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, gateway.url).get_agent_card()  # the SDK parses it

    assert {
        (i.url, i.protocol_binding, i.protocol_version, i.tenant) for i in card.supported_interfaces
    } == {
        (f"{gateway.url}/a2a", "JSONRPC", "1.0", ""),
        (f"{gateway.url}/a2a", "HTTP+JSON", "1.0", ""),
        # One gRPC service for all: no tenant field names an agent at the gateway's own.
        (gateway.grpc_address, "GRPC", "1.0", ""),
    }
    skills = {skill.id for skill in card.skills}
    assert f"{PUBLIC_AGENT}/hello" in skills  # a public agent (DISCO_GATEWAY_PUBLIC_AGENTS)
    assert "gw-slow/gw.slow" in skills  # registered with visibility public
    assert "gw-echo/gw.echo" not in skills  # its tenant's only
    assert card.capabilities.streaming
    assert card.capabilities.push_notifications
    assert card.capabilities.extended_agent_card
    assert "bearer" in card.security_schemes


async def test_a_public_agents_card_declares_its_schemas_and_no_security_requirement(
    gateway: GatewayProcess,
) -> None:
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, f"{gateway.url}/a2a/{PUBLIC_AGENT}").get_agent_card()

    assert card.name == PUBLIC_AGENT
    assert [(i.url, i.protocol_binding, i.tenant) for i in card.supported_interfaces] == [
        (f"{gateway.url}/a2a/{PUBLIC_AGENT}", "JSONRPC", ""),
        (f"{gateway.url}/a2a/{PUBLIC_AGENT}", "HTTP+JSON", ""),
        # The gRPC service's calls name their agent in the request's tenant field.
        (gateway.grpc_address, "GRPC", PUBLIC_AGENT),
    ]
    assert list(card.security_requirements) == []
    (skill,) = card.skills
    assert skill.id == "hello"
    assert "hello.requested" in skill.tags
    (contracts,) = [
        e for e in card.capabilities.extensions if e.uri == A2A_EVENT_CONTRACTS_EXTENSION
    ]
    request_schema = contracts.params["skills"]["hello"]["request"]["json_schema"]
    assert list(request_schema["required"]) == ["name"]


async def test_a_private_agents_card_is_hidden_without_a_token_and_shown_with_one(
    gateway: GatewayProcess,
) -> None:
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        hidden = await http.get("/a2a/gw-echo/.well-known/agent-card.json")
        shown = await http.get("/a2a/gw-echo/.well-known/agent-card.json", headers=bearer())
        unknown = await http.get("/a2a/nobody/.well-known/agent-card.json", headers=bearer())

    assert hidden.status_code == 404
    assert hidden.json()["error"]["code"] == "agent_not_found"
    assert shown.status_code == 200
    card = shown.json()
    assert card["securityRequirements"] == [{"schemes": {"bearer": {"list": []}}}]
    assert {(i["protocolBinding"], i["tenant"]) for i in card["supportedInterfaces"]} == {
        ("JSONRPC", TENANT),
        ("HTTP+JSON", TENANT),
        ("GRPC", "gw-echo"),
    }
    assert unknown.status_code == 404


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_extended_card_shows_the_callers_agents(
    gateway: GatewayProcess, binding: str
) -> None:
    async with a2a_client(gateway.url, binding) as client:
        extended = await client.get_extended_agent_card(a2a_pb2.GetExtendedAgentCardRequest())
    async with a2a_client(gateway.url, binding, agent="gw-math") as client:
        agent = await client.get_extended_agent_card(a2a_pb2.GetExtendedAgentCardRequest())

    skills = {skill.id for skill in extended.skills}
    assert {"gw-echo/gw.echo", "gw-math/gw.add", "gw-math/gw.mul", "hello/hello"} <= skills
    assert agent.name == "gw-math"
    assert [skill.id for skill in agent.skills] == ["gw.add", "gw.mul"]
    assert {(i.protocol_binding, i.tenant) for i in agent.supported_interfaces} == {
        ("JSONRPC", TENANT),
        ("HTTP+JSON", TENANT),
        ("GRPC", "gw-math"),
    }


async def test_every_card_is_signed_with_the_key_the_gateway_publishes(
    gateway: GatewayProcess,
) -> None:
    jwks_url = f"{gateway.url}/.well-known/jwks.json"
    asked: list[tuple[str | None, str | None]] = []
    async with httpx.AsyncClient() as http:
        jwks = (await http.get(jwks_url)).json()

        def key_provider(kid: str | None, jku: str | None) -> Any:
            asked.append((kid, jku))
            return PyJWK(next(key for key in jwks["keys"] if key["kid"] == kid))

        verify = create_signature_verifier(key_provider, ["ES256"])
        # Each raises unless a signature over the card as served holds.
        await A2ACardResolver(http, gateway.url).get_agent_card(signature_verifier=verify)
        await A2ACardResolver(http, f"{gateway.url}/a2a/{PUBLIC_AGENT}").get_agent_card(
            signature_verifier=verify
        )
        own = await http.get(
            f"{gateway.url}/a2a/gw-math/.well-known/agent-card.json", headers=bearer()
        )
    for binding in BINDINGS:
        async with a2a_client(gateway.url, binding) as client:
            await client.get_extended_agent_card(
                a2a_pb2.GetExtendedAgentCardRequest(), signature_verifier=verify
            )

    (key,) = jwks["keys"]
    assert (key["kty"], key["crv"], key["alg"], key["use"]) == ("EC", "P-256", "ES256", "sig")
    assert "d" not in key
    assert set(asked) == {(key["kid"], jwks_url)}
    assert len(asked) == 2 + len(BINDINGS)
    assert len(own.json()["signatures"]) == 1
