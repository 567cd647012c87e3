"""The SDK's ServiceClient base speaks the kit's contract: tokens, errors, on-behalf-of."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from asgi_lifespan import LifespanManager
from pydantic import BaseModel

from disco._context import handler_context
from disco._dev.ports import free_port
from disco.auth import DEV_AUTH_SECRET
from disco.clients import (
    DevTokenMinter,
    ServiceAuthError,
    ServiceClient,
    ServiceNotFoundError,
    ServiceUnavailableError,
    ServiceValidationError,
    StaticToken,
)
from disco_common.auth import Role
from disco_common.envelope import ActionRequest
from disco_service import ServiceSettings
from tests.integration.kit.conftest import build_app


class NoteBody(BaseModel):
    body: str = "draft"
    priority: int = 0


class WhoAmI(BaseModel):
    tenant_id: str
    user_id: str
    roles: list[str]
    on_behalf_of: bool


@pytest.fixture
async def transport(
    make_settings: Callable[..., ServiceSettings], kit_schema: str
) -> AsyncIterator[httpx.AsyncBaseTransport]:
    app = build_app(make_settings(), kit_schema)
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30) as manager:
        yield httpx.ASGITransport(app=manager.app)


def _client(transport: httpx.AsyncBaseTransport, *, roles: tuple[Role, ...]) -> ServiceClient:
    token = DevTokenMinter(DEV_AUTH_SECRET, tenant_id="acme", user_id="agent-1", roles=roles)
    return ServiceClient("http://kit.test", token=token, transport=transport)


async def test_a_call_returns_the_answer_as_the_model(transport: httpx.AsyncBaseTransport) -> None:
    async with _client(transport, roles=(Role.USER,)) as client:
        me = await client.call("GET", "/whoami", WhoAmI)

    assert (me.tenant_id, me.user_id, me.on_behalf_of) == ("acme", "agent-1", False)


async def test_inside_a_handler_a_service_agent_acts_for_the_envelopes_tenant(
    transport: httpx.AsyncBaseTransport,
) -> None:
    envelope = ActionRequest(
        source="test",
        type="x.requested",
        response_event="x.done",
        tenant_id="globex",
        user_id="bob",
    )
    async with _client(transport, roles=(Role.SERVICE,)) as client:
        with handler_context(envelope):
            inside = await client.call("GET", "/whoami", WhoAmI)
        outside = await client.call("GET", "/whoami", WhoAmI)

    assert (inside.tenant_id, inside.user_id, inside.on_behalf_of) == ("globex", "bob", True)
    assert (outside.tenant_id, outside.on_behalf_of) == ("acme", False)


async def test_a_user_agent_inside_a_handler_stays_in_its_own_tenant(
    transport: httpx.AsyncBaseTransport,
) -> None:
    envelope = ActionRequest(
        source="test", type="x.requested", response_event="x.done", tenant_id="globex"
    )
    async with _client(transport, roles=(Role.USER,)) as client:
        with handler_context(envelope):
            me = await client.call("GET", "/whoami", WhoAmI)

    assert (me.tenant_id, me.on_behalf_of) == ("acme", False)


async def test_a_404_is_a_not_found_error_with_the_services_code(
    transport: httpx.AsyncBaseTransport,
) -> None:
    async with _client(transport, roles=(Role.USER,)) as client:
        with pytest.raises(ServiceNotFoundError) as raised:
            await client.call("GET", "/notes/does-not-exist", WhoAmI)
        missing = await client.call_or_none("GET", "/notes/does-not-exist", WhoAmI)

    assert raised.value.status == 404
    assert raised.value.code == "not_found"
    assert missing is None


async def test_a_422_carries_every_violation_in_details(
    transport: httpx.AsyncBaseTransport,
) -> None:
    async with _client(transport, roles=(Role.USER,)) as client:
        with pytest.raises(ServiceValidationError) as raised:
            await client.call("POST", "/notes", json={"body": "", "priority": 9})

    assert raised.value.status == 422
    assert raised.value.code == "validation_failed"
    assert isinstance(raised.value.details, list)
    assert len(raised.value.details) == 2


async def test_a_bad_token_is_an_auth_error(transport: httpx.AsyncBaseTransport) -> None:
    client = ServiceClient("http://kit.test", token=StaticToken("not-a-jwt"), transport=transport)
    async with client:
        with pytest.raises(ServiceAuthError) as raised:
            await client.call("GET", "/whoami", WhoAmI)

    assert raised.value.status == 401


async def test_an_unreachable_service_is_unavailable_after_retries() -> None:
    client = ServiceClient(f"http://127.0.0.1:{free_port()}", retries=1, timeout_seconds=1.0)
    async with client:
        with pytest.raises(ServiceUnavailableError) as raised:
            await client.call("GET", "/whoami", WhoAmI)

    assert "could not be reached" in raised.value.message


async def test_a_client_that_was_not_started_says_how_to_start_it() -> None:
    client = ServiceClient("http://127.0.0.1:1")

    with pytest.raises(RuntimeError, match="async with"):
        await client.call("GET", "/whoami", WhoAmI)


async def test_a_model_is_sent_whole_even_when_changed_after_it_was_built(
    transport: httpx.AsyncBaseTransport,
) -> None:
    note = NoteBody()
    note.body = "filled in later"  # not "set" as far as pydantic's fields_set goes

    async with _client(transport, roles=(Role.USER,)) as client:
        echoed = await client.call("POST", "/echo", NoteBody, json=note)

    assert echoed == NoteBody(body="filled in later", priority=0)
