"""Rate limits at the door: a tenant over its limit, and an address calling a public agent
without a token over its own, get 429 in the shape of the binding, with Retry-After (on gRPC:
RESOURCE_EXHAUSTED with a RetryInfo); two instances hold a limit together."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import grpc
import grpc.aio
import httpx
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc
from google.rpc import error_details_pb2, status_pb2

from tests.e2e.gateway.conftest import (
    PUBLIC_AGENT,
    TENANT,
    GatewayProcess,
    GatewayStack,
    bearer,
    token,
)
from tests.e2e.gateway.streams import stream
from tests.e2e.gateway.support import metric_value, until


def message(*parts: dict[str, object]) -> dict[str, object]:
    return {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": list(parts)}}


def rpc(params: dict[str, object]) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": "r1", "method": "SendMessage", "params": params}


@pytest.fixture(scope="module")
def limited(gateway_stack: GatewayStack) -> Iterator[GatewayProcess]:
    """A gateway of its own with small limits.

    Hourly: the sliding window weighs the last window's hits down as the next one
    begins, so a run that straddled a minute's end could be let through once more.
    """
    gateway = GatewayProcess(
        {
            **gateway_stack.gateway_env,
            "DISCO_GATEWAY_RATE_LIMIT_TENANT": "4/hour",
            "DISCO_GATEWAY_RATE_LIMIT_ANONYMOUS": "2/hour",
        },
        gateway_stack.logs,
    )
    gateway_stack.gateways.append(gateway)
    yield gateway.start()
    gateway.stop()


@pytest.fixture(scope="module")
def limited_twin(gateway_stack: GatewayStack, limited: GatewayProcess) -> Iterator[GatewayProcess]:
    """A second instance with the limits of ``limited``: the two share their counts."""
    gateway = GatewayProcess(limited.env, gateway_stack.logs)
    gateway_stack.gateways.append(gateway)
    yield gateway.start()
    gateway.stop()


async def shares(http: httpx.AsyncClient, gateway: GatewayProcess) -> float:
    """How many times ``gateway`` has exchanged its rate-limit counts with the others."""
    page = (await http.get(f"{gateway.url}/metrics")).text
    return metric_value(page, 'disco_gateway_rate_limit_shares_total{outcome="ok"}', default=0.0)


async def shared_since_now(http: httpx.AsyncClient, gateway: GatewayProcess) -> None:
    """Wait for an exchange of ``gateway`` that began after this call (two more than it
    has made now: one may be under way, with the counts as they were before)."""
    before = await shares(http, gateway)

    async def twice_more() -> float | None:
        now = await shares(http, gateway)
        return now if now >= before + 2 else None

    await until(twice_more, timeout=30, what=f"two exchanges of counts by {gateway.url}")


async def test_two_instances_hold_a_tenants_limit_together(
    limited: GatewayProcess, limited_twin: GatewayProcess
) -> None:
    tenant = f"limited-{uuid.uuid4().hex[:6]}"
    headers = {**bearer(tenant), "A2A-Version": "1.0"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        on_first = [await http.get(f"{limited.url}/a2a/tasks") for _ in range(3)]
        await shared_since_now(http, limited)  # its three calls written...
        await shared_since_now(http, limited_twin)  # ... and read by the other
        on_twin = [await http.get(f"{limited_twin.url}/a2a/tasks") for _ in range(2)]

    assert [response.status_code for response in on_first] == [200, 200, 200]
    assert [response.status_code for response in on_twin] == [200, 429]
    assert on_twin[1].json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert "4 per 1 hour" in on_twin[1].json()["error"]["message"]
    assert 1 <= int(on_twin[1].headers["retry-after"]) <= 3600


async def test_a_tenant_over_its_limit_gets_429_on_both_bindings_publishes_and_messages(
    limited: GatewayProcess,
) -> None:
    tenant = f"limited-{uuid.uuid4().hex[:6]}"
    headers = {**bearer(tenant), "A2A-Version": "1.0"}
    async with httpx.AsyncClient(base_url=limited.url, headers=headers, timeout=30) as http:
        first = [
            await http.post("/a2a", json=rpc({**message({"text": "x"})})) for _ in range(2)
        ] + [await http.get("/a2a/tasks") for _ in range(2)]
        over_rpc = await http.post("/a2a", json=rpc(message({"text": "x"})))
        over_rest = await http.get("/a2a/tasks")
        over_publish = await http.post(
            "/v1/publish",
            json={"topic": "business-facts", "event_type": "limits.tested", "data": {}},
        )
        over_session = await http.post(
            "/v1/sessions/s-limited/messages", json={"agent": "gw-echo", "text": "x"}
        )
    async with httpx.AsyncClient(base_url=limited.url, headers=bearer(TENANT)) as other:
        elsewhere = await other.get("/a2a/tasks", headers={"A2A-Version": "1.0"})

    assert all(response.status_code != 429 for response in first), [r.text for r in first]
    assert over_rpc.status_code == 429
    assert over_rpc.json()["error"]["data"][0]["reason"] == "RATE_LIMITED"
    assert "4 per 1 hour" in over_rpc.json()["error"]["message"]
    assert over_rest.status_code == 429
    assert over_rest.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert over_publish.status_code == 429
    assert over_publish.json()["error"]["code"] == "rate_limited"
    assert over_session.status_code == 429
    for response in (over_rpc, over_rest, over_publish, over_session):
        assert 1 <= int(response.headers["retry-after"]) <= 3600
    assert elsewhere.status_code == 200  # another tenant's calls count on their own


async def test_calls_without_a_token_are_limited_per_address(limited: GatewayProcess) -> None:
    path = f"/a2a/{PUBLIC_AGENT}/message:send"
    async with httpx.AsyncClient(
        base_url=limited.url, headers={"A2A-Version": "1.0"}, timeout=30
    ) as http:
        allowed = [await http.post(path, json=message({"data": {"name": "Ada"}})) for _ in range(2)]
        over = await http.post(path, json=message({"data": {"name": "Ada"}}))
        # Through a proxy the gateway believes (DISCO_FORWARDED_ALLOW_IPS: loopback by
        # default), the caller's own address counts.
        proxied = await http.post(
            path, json=message({"data": {"name": "Bo"}}), headers={"X-Forwarded-For": "203.0.113.9"}
        )

    assert [response.status_code for response in allowed] == [200, 200]
    assert over.status_code == 429
    assert "without a token" in over.json()["error"]["message"]
    assert proxied.status_code == 200


async def test_session_messages_over_a_websocket_count_against_the_tenant_too(
    limited: GatewayProcess,
) -> None:
    tenant = f"limited-{uuid.uuid4().hex[:6]}"
    async with stream(limited.url, f"s-{uuid.uuid4().hex[:8]}", tenant=tenant) as ui:
        answers = [
            await ui.request(
                {"type": "SEND_MESSAGE", "agent": "gw-echo", "text": "x", "request_id": f"r{n}"}
            )
            for n in range(5)
        ]

    # The first four count (no such agent for this tenant), the fifth is over the limit.
    assert [a["payload"].get("code") for a in answers[:4]] == ["agent_not_found"] * 4
    assert answers[4]["type"] == "ERROR"
    assert (answers[4]["payload"]["code"], answers[4]["payload"]["status"]) == ("rate_limited", 429)
    assert answers[4]["payload"]["details"]["retry_after_seconds"] >= 1


async def test_a_tenant_over_its_limit_gets_resource_exhausted_over_grpc_with_retry_info(
    limited: GatewayProcess,
) -> None:
    tenant = f"limited-{uuid.uuid4().hex[:6]}"
    metadata = (("authorization", f"Bearer {token(tenant)}"), ("a2a-version", "1.0"))
    request = a2a_pb2.ListTasksRequest()  # at the gateway's own endpoint (no agent)
    async with grpc.aio.insecure_channel(limited.grpc_address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        for _ in range(4):
            await stub.ListTasks(request, metadata=metadata)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.ListTasks(request, metadata=metadata)

    error = raised.value
    status = status_pb2.Status()
    status.ParseFromString(dict(error.trailing_metadata())["grpc-status-details-bin"])
    info, retry = error_details_pb2.ErrorInfo(), error_details_pb2.RetryInfo()
    assert status.details[0].Unpack(info)
    assert status.details[1].Unpack(retry)
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "4 per 1 hour" in (error.details() or "")
    assert (info.domain, info.reason) == ("disco", "RATE_LIMITED")
    assert 1 <= retry.retry_delay.seconds <= 3600
