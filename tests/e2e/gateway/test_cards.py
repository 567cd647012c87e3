"""Cards: the gateway's and each public agent's without a token; the extended card with one."""

from __future__ import annotations

from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.types import a2a_pb2
from a2a.utils.signing import create_signature_verifier
from jwt import PyJWK

from disco_common.a2a_cards import A2A_EVENT_CONTRACTS_EXTENSION
from tests.e2e.gateway.conftest import (
    BINDINGS,
    PUBLIC_AGENT,
    TENANT,
    GatewayProcess,
    GatewayStack,
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


CARD_ROUTES = [
    # (path, token, cached by the caller alone)
    ("/.well-known/agent-card.json", False, False),
    (f"/a2a/{PUBLIC_AGENT}/.well-known/agent-card.json", False, False),
    ("/a2a/gw-math/.well-known/agent-card.json", True, True),
    ("/a2a/gw-math/extendedAgentCard", True, True),  # the extended card over HTTP+JSON
    ("/a2a/extendedAgentCard", True, True),  # the gateway's extended card
]


@pytest.mark.parametrize(("path", "with_token", "private"), CARD_ROUTES)
async def test_a_card_comes_with_its_etag_and_a_matching_if_none_match_gets_304(
    gateway: GatewayProcess,
    twin_gateway: GatewayProcess,
    path: str,
    with_token: bool,
    private: bool,
) -> None:
    headers = {**bearer(), "A2A-Version": "1.0"} if with_token else {}
    async with httpx.AsyncClient(headers=headers) as http:
        first = await http.get(f"{gateway.url}{path}")
        again = await http.get(f"{gateway.url}{path}")
        # Another instance behind the same balancer: the same card, byte for byte.
        elsewhere = await http.get(f"{twin_gateway.url}{path}")
        tag = first.headers["etag"]
        unchanged = await http.get(f"{gateway.url}{path}", headers={"If-None-Match": tag})
        weakly = await http.get(f"{twin_gateway.url}{path}", headers={"If-None-Match": f"W/{tag}"})
        other = await http.get(f"{gateway.url}{path}", headers={"If-None-Match": '"stale"'})

    assert first.status_code == 200, first.text
    assert first.headers["content-type"] == "application/json"
    assert tag[0] == tag[-1] == '"'  # a strong tag: these very bytes
    scope = "private" if private else "public"
    assert first.headers["cache-control"] == f"{scope}, max-age=60"
    if path.endswith("agent-card.json"):
        # The latest change of the registrations it shows, as an HTTP date.
        assert parsedate_to_datetime(first.headers["last-modified"]).tzinfo is not None
    # A signed card keeps its signature from one fetch (and instance) to the next.
    assert first.json()["signatures"] == again.json()["signatures"]
    assert (again.content, elsewhere.content) == (first.content, first.content)
    assert again.headers["etag"] == elsewhere.headers["etag"] == tag
    for revalidated in (unchanged, weakly):
        assert (revalidated.status_code, revalidated.content) == (304, b"")
        assert revalidated.headers["etag"] == tag
        assert revalidated.headers["cache-control"] == first.headers["cache-control"]
    assert other.status_code == 200
    assert other.content == first.content


async def test_the_registrys_card_route_is_revalidated_by_its_etag(
    gateway_stack: GatewayStack,
) -> None:
    registry = gateway_stack.urls["registry"]
    async with httpx.AsyncClient(base_url=registry, headers=bearer()) as http:
        (agent,) = (await http.get("/v1/agents", params={"name": "gw-math"})).json()["items"]
        path = f"/v1/agents/{agent['agent_id']}/card"
        first = await http.get(path)
        unchanged = await http.get(path, headers={"If-None-Match": first.headers["etag"]})

    assert first.status_code == 200
    assert first.json()["name"] == "gw-math"
    assert first.headers["cache-control"] == "private, max-age=60"
    assert first.headers["vary"] == "Authorization"
    assert parsedate_to_datetime(first.headers["last-modified"]) == datetime.fromisoformat(
        agent["updated_at"]
    ).replace(microsecond=0)
    assert (unchanged.status_code, unchanged.content) == (304, b"")
