"""POST /v1/publish: the HTTP bridge to the bus, checked like the SDK checks, with wait=."""

from __future__ import annotations

import asyncio
import uuid

import httpx

from tests.e2e.gateway.conftest import OTHER_TENANT, TENANT, GatewayProcess, GatewayStack, bearer
from tests.e2e.gateway.support import bus_side


async def test_a_request_published_over_http_is_answered_when_waited_for(
    gateway: GatewayProcess,
) -> None:
    async with httpx.AsyncClient(base_url=gateway.url, headers=bearer(), timeout=30) as http:
        response = await http.post(
            "/v1/publish",
            params={"wait": 20},
            json={
                "topic": "action-requests",
                "event_type": "hello.requested",
                "data": {"name": "Ada", "language": "fr"},
                "response_event": "hello.done",
            },
        )

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["response"]["type"] == "hello.done"
    assert body["response"]["data"] == {"success": True, "result": {"message": "Bonjour, Ada!"}}
    assert body["response"]["correlation_id"] == body["correlation_id"]


async def test_a_fact_is_published_in_the_tokens_tenant_and_its_id_returned(
    gateway: GatewayProcess, gateway_stack: GatewayStack
) -> None:
    fact = uuid.uuid4().hex
    async with (
        bus_side(gateway_stack) as bus,
        httpx.AsyncClient(base_url=gateway.url, headers=bearer(OTHER_TENANT, "bob")) as http,
    ):
        response = await http.post(
            "/v1/publish",
            json={
                "topic": "business-facts",
                "event_type": "order.placed",
                "data": {"order": fact},
                "session_id": "s-1",
            },
        )
        seen = await bus.first(
            lambda topic, e: topic == "business-facts" and (e.data or {}).get("order") == fact  # type: ignore[union-attr]
        )

    assert response.status_code == 202, response.text
    assert seen.id == response.json()["id"]
    assert (seen.tenant_id, seen.user_id, seen.session_id) == (OTHER_TENANT, "bob", "s-1")


async def test_bad_requests_get_clear_errors(gateway: GatewayProcess) -> None:
    async with httpx.AsyncClient(base_url=gateway.url, headers=bearer(TENANT)) as http:
        schema = await http.post(
            "/v1/publish",
            json={
                "topic": "action-requests",
                "event_type": "hello.requested",
                "data": {"language": 3},
                "response_event": "hello.done",
            },
        )
        no_response_event = await http.post(
            "/v1/publish",
            json={"topic": "action-requests", "event_type": "hello.requested", "data": {}},
        )
        unknown_topic = await http.post(
            "/v1/publish", json={"topic": "elsewhere", "event_type": "x.y", "data": {}}
        )
        wait_on_fact = await http.post(
            "/v1/publish",
            params={"wait": 1},
            json={"topic": "business-facts", "event_type": "x.y", "data": {}},
        )
        too_large = await http.post(
            "/v1/publish",
            content=b'{"topic": "business-facts", "event_type": "x.y", "data": "'
            + b"x" * 2_000_000
            + b'"}',
            headers={"content-type": "application/json"},
        )

    assert schema.status_code == 422
    assert schema.json()["error"]["code"] == "payload_invalid"
    assert {v["path"] for v in schema.json()["error"]["details"]} == {"", "/language"}
    assert {tuple(sorted(v)) for v in schema.json()["error"]["details"]} == {
        ("message", "path", "schema_path", "validator")  # as README's publish bridge says
    }
    assert no_response_event.status_code == 422
    assert no_response_event.json()["error"]["code"] == "validation_failed"
    # validation_failed lists {location, message, type}, as README's conventions say
    assert no_response_event.json()["error"]["details"] == [
        {
            "location": ["body", "response_event"],
            "message": "Field required on action-requests",
            "type": "missing",
        }
    ]
    assert unknown_topic.json()["error"]["details"][0]["location"] == ["body", "topic"]
    assert unknown_topic.status_code == 422
    assert wait_on_fact.status_code == 400
    assert too_large.status_code == 413


async def test_a_correlation_id_waited_on_twice_is_a_409_for_its_tenant_only(
    gateway: GatewayProcess, gateway_stack: GatewayStack
) -> None:
    """A caller picks its correlation ids: another tenant's pick of the same one must not
    fail its request, and the same tenant's second wait on one is a clear 409 (both were
    a 500, found by schemathesis)."""
    correlation = f"c-{uuid.uuid4().hex[:8]}"
    request = {
        "topic": "action-requests",
        "event_type": "nobody.requested",  # nobody answers: each wait runs out
        "data": {},
        "response_event": "nobody.done",
        "correlation_id": correlation,
    }
    async with (
        bus_side(gateway_stack) as bus,
        httpx.AsyncClient(base_url=gateway.url, timeout=30) as http,
    ):

        async def publish(tenant: str, wait: float) -> httpx.Response:
            return await http.post(
                "/v1/publish", params={"wait": wait}, json=request, headers=bearer(tenant)
            )

        first = asyncio.create_task(publish(TENANT, 4))
        # The first request's envelope is on the bus: it waits for its answer now.
        await bus.first(
            lambda topic, e: (
                topic == "action-requests"
                and e.correlation_id == correlation
                and e.tenant_id == TENANT
            )
        )
        again, elsewhere = await asyncio.gather(publish(TENANT, 1), publish(OTHER_TENANT, 1))
        first_answer = await first

    assert again.status_code == 409, again.text
    assert again.json()["error"]["code"] == "conflict"
    assert correlation in again.json()["error"]["message"]
    assert elsewhere.status_code == 504, elsewhere.text  # waited its own second
    assert first_answer.status_code == 504, first_answer.text


async def test_an_answer_without_a_causation_id_is_returned_with_the_requests_id(
    gateway: GatewayProcess, gateway_stack: GatewayStack
) -> None:
    """A responder that is not the SDK (any Kafka client) may leave ``causation_id`` out:
    the bridge still knows the id of the request it published (this was a 500)."""
    correlation = f"c-{uuid.uuid4().hex[:8]}"
    async with (
        bus_side(gateway_stack) as bus,
        httpx.AsyncClient(base_url=gateway.url, headers=bearer(), timeout=30) as http,
    ):
        waited = asyncio.create_task(
            http.post(
                "/v1/publish",
                params={"wait": 20},
                json={
                    "topic": "action-requests",
                    "event_type": "plain.requested",
                    "data": {"n": 1},
                    "response_event": "plain.done",
                    "correlation_id": correlation,
                },
            )
        )
        request = await bus.first(
            lambda topic, e: topic == "action-requests" and e.correlation_id == correlation
        )
        answer = await bus.bus.respond(  # outside a handler: no causation_id
            "plain.done", {"ok": True}, correlation_id=correlation, tenant_id=TENANT
        )
        response = await waited

    assert answer.causation_id is None
    assert response.status_code == 200, response.text
    assert response.json()["id"] == request.id
    assert response.json()["response"]["data"] == {"ok": True}
