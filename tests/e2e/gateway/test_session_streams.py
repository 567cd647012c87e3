"""Session streams under pressure: tenancy and tokens, reconnects, teams, hostile payloads,
slow clients and several gateway instances (real processes, broker and Postgres)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
import pytest

from disco.auth import DEV_AUTH_SECRET
from disco.bus import BusClient
from disco.runtime import publish_ui_event
from disco_common.envelope import Notification
from disco_common.topics import Topic
from tests.e2e.gateway.conftest import (
    OTHER_TENANT,
    TENANT,
    GatewayProcess,
    GatewayStack,
    bearer,
)
from tests.e2e.gateway.streams import stream


def _session() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def bus(gateway_stack: GatewayStack) -> AsyncIterator[BusClient]:
    async with BusClient(gateway_stack.bus_settings(), name="gw-streams-test") as client:
        yield client


async def _log(bus: BusClient, session: str, n: int, **extra: Any) -> str:
    envelope = await publish_ui_event(
        bus, "TOOL_LOG", {"message": f"line {n}", **extra}, session_id=session, tenant_id=TENANT
    )
    return envelope.id


async def test_another_tenant_sees_nothing_of_a_session_and_cannot_decide_in_it(
    gateway: GatewayProcess, bus: BusClient
) -> None:
    session = _session()
    async with (
        stream(gateway.url, session) as owner,
        stream(gateway.url, session, tenant=OTHER_TENANT) as stranger,
    ):
        ack = await owner.request(
            {"type": "SEND_MESSAGE", "agent": "gw-assistant", "text": "book Lima on 2026-07-01"}
        )
        assert ack["type"] == "ACK"
        (asked,) = await owner.wait_for(lambda m: m["type"] == "TOOL_APPROVAL_REQUESTED")
        call = asked["payload"]["tool_call_id"]
        refused = await stranger.request({"type": "APPROVE_TOOL", "tool_call_id": call})
        async with httpx.AsyncClient(headers=bearer(OTHER_TENANT), timeout=30) as http:
            over_http = await http.post(
                f"{gateway.url}/v1/sessions/{session}/approvals/{call}",
                json={"decision": "approve"},
            )
            replay = await http.get(f"{gateway.url}/v1/sessions/{session}/events")
        await owner.request({"type": "DENY_TOOL", "tool_call_id": call})
        await owner.wait_for(
            lambda m: m["type"] == "agent.status" and m["payload"]["status"] == "completed"
        )
        # Everything the stranger's socket was sent so far came before this PONG.
        await stranger.request({"type": "PING"})

    assert refused["payload"]["code"] == "not_found"
    assert over_http.status_code == 404
    assert replay.json()["items"] == []
    assert [m["type"] for m in stranger.received] == ["ERROR", "PONG"]
    assert owner.of_type("TOOL_DENIED")[0]["payload"]["decided_by"] == "alice"


async def test_another_users_events_reach_only_that_user_or_an_operator(
    gateway: GatewayProcess, bus: BusClient
) -> None:
    session = _session()
    operator = jwt.encode(
        {
            "sub": "ops",
            "tenant_id": TENANT,
            "user_id": "ops",
            "roles": ["operator"],
            "exp": int(time.time()) + 600,
        },
        DEV_AUTH_SECRET,
        algorithm="HS256",
    )
    async with (
        stream(gateway.url, session, user="bob") as bob,
        stream(gateway.url, session, user="carol") as carol,
        stream(gateway.url, session, bearer=operator, how="query") as ops,
    ):
        await publish_ui_event(
            bus,
            "TOOL_LOG",
            {"message": "for bob"},
            session_id=session,
            tenant_id=TENANT,
            user_id="bob",
        )
        await bob.wait_for(lambda m: m["type"] == "TOOL_LOG")
        await ops.wait_for(lambda m: m["type"] == "TOOL_LOG")
        await carol.request({"type": "PING"})

    assert carol.of_type("TOOL_LOG") == []


@pytest.mark.parametrize("problem", ["none", "bad", "expired"])
async def test_a_socket_without_a_valid_token_is_closed_with_4401(
    gateway: GatewayProcess, problem: str
) -> None:
    import websockets

    from tests.e2e.gateway.streams import ws_url

    headers = {}
    if problem == "bad":
        headers["Authorization"] = "Bearer not-a-jwt"
    elif problem == "expired":
        expired = jwt.encode(
            {
                "sub": "alice",
                "tenant_id": TENANT,
                "user_id": "alice",
                "roles": ["user"],
                "exp": int(time.time()) - 60,
            },
            DEV_AUTH_SECRET,
            algorithm="HS256",
        )
        headers["Authorization"] = f"Bearer {expired}"
    async with websockets.connect(
        ws_url(gateway.url, _session()), additional_headers=headers
    ) as ws:
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 30)

    assert ws.close_code == 4401


async def test_a_reconnect_with_after_misses_nothing_and_repeats_nothing(
    gateway: GatewayProcess, bus: BusClient
) -> None:
    session = _session()
    published: list[str] = []
    done = asyncio.Event()

    async def keep_publishing() -> None:
        for n in range(120):
            published.append(await _log(bus, session, n))
        published.append(await _log(bus, session, 999, last=True))
        done.set()

    seen: list[str] = []
    async with stream(gateway.url, session) as first:
        producer = asyncio.create_task(keep_publishing())
        await first.wait_for(lambda m: m["type"] == "TOOL_LOG", count=20)
    seen += [m["id"] for m in first.received if m["type"] == "TOOL_LOG"]
    # Disconnected while events keep flowing; come back with the last id seen.
    async with stream(gateway.url, session, after=seen[-1]) as second:
        await second.wait_for(lambda m: m["payload"].get("last") is True, timeout=60)
    await producer
    seen += [m["id"] for m in second.received if m["type"] == "TOOL_LOG"]

    assert seen == published
    assert second.of_type("STREAM_GAP") == []


async def test_every_member_of_a_team_session_is_named_on_its_events(
    gateway: GatewayProcess,
) -> None:
    session = _session()
    async with (
        stream(gateway.url, session) as everyone,
        stream(gateway.url, session, agent="gw-helper") as helper_only,
    ):
        for agent, city in (("gw-assistant", "Rome"), ("gw-helper", "Kyiv")):
            ack = await everyone.request(
                {"type": "SEND_MESSAGE", "agent": agent, "text": f"weather in {city}"}
            )
            assert ack["type"] == "ACK"
        await everyone.wait_for(
            lambda m: m["type"] == "agent.status" and m["payload"]["status"] == "completed",
            count=2,
        )
        await helper_only.wait_for(
            lambda m: m["type"] == "agent.status" and m["payload"]["status"] == "completed"
        )

    lifecycle = [m for m in everyone.received if m["type"].startswith(("TOOL_", "agent."))]
    members = {m["agent_name"] for m in lifecycle}
    assert members == {"gw-assistant", "gw-helper"}
    by_call: dict[str, set[tuple[str, str]]] = {}
    for m in lifecycle:
        if m["type"].startswith("TOOL_EXECUTION"):
            by_call.setdefault(m["payload"]["tool_call_id"], set()).add(
                (m["agent_name"], m["agent_id"])
            )
    assert len(by_call) == 2
    assert all(len(who) == 1 for who in by_call.values())
    started = {m["agent_name"]: m for m in everyone.of_type("TOOL_EXECUTION_STARTED")}
    assert started["gw-assistant"]["payload"]["arguments"] == {"city": "Rome"}
    assert started["gw-helper"]["payload"]["arguments"] == {"city": "Kyiv"}
    assert {m["agent_name"] for m in helper_only.received if m["agent_name"]} == {"gw-helper"}


async def test_hostile_payloads_arrive_bounded_and_unknown_types_as_errors(
    gateway: GatewayProcess, bus: BusClient
) -> None:
    session = _session()
    cycle: dict[str, Any] = {"name": "loop"}
    cycle["self"] = cycle
    async with stream(gateway.url, session) as ui:
        await publish_ui_event(
            bus,
            "TOOL_LOG",
            {"message": "x" * 10_000_000, "cycle": cycle, "raw": b"\x00\xff" * 1000},
            session_id=session,
            tenant_id=TENANT,
        )
        # Straight onto the bus, past the SDK helper: a big payload and a type no UI knows.
        await bus.publish_envelope(
            Topic.NOTIFICATION_EVENTS,
            Notification(
                source="disco://agent/raw",
                type="TOOL_LOG",
                data={
                    "type": "TOOL_LOG",
                    "session_id": session,
                    "execution_id": "e",
                    "payload": {"message": "y" * 300_000, "nested": [[[[["deep"]]]]]},
                },
                session_id=session,
                tenant_id=TENANT,
            ),
        )
        strange = await bus.publish(
            Topic.NOTIFICATION_EVENTS,
            "agent.mood.changed",
            {"mood": "grumpy"},
            session_id=session,
            tenant_id=TENANT,
        )
        logs = await ui.wait_for(lambda m: m["type"] == "TOOL_LOG", count=2)
        (error,) = await ui.wait_for(lambda m: m["type"] == "ERROR")

    for message in logs:
        assert len(str(message["payload"])) <= 64 * 1024
    assert logs[0]["payload"]["cycle"]["self"].startswith("<cycle")
    assert logs[0]["payload"]["raw"]["type"] == "bytes"
    assert error["id"] == strange.id
    assert error["payload"]["code"] == "unknown_event_type"
    assert error["payload"]["event_type"] == "agent.mood.changed"


@pytest.mark.xfail(
    run=False,
    reason="unfinished: the stalled socket never overflows its queue in this setup (no STREAM_GAP "
    "within 120 s, the fast client does get every event); to investigate",
)
async def test_a_client_that_never_reads_gets_a_stream_gap_and_others_get_everything(
    gateway_stack: GatewayStack, bus: BusClient
) -> None:
    small = GatewayProcess(
        {**gateway_stack.gateway_env, "DISCO_GATEWAY_STREAM_QUEUE_SIZE": "64"}, gateway_stack.logs
    )
    gateway_stack.gateways.append(small)
    small.start()
    session = _session()
    count = 400
    async with (
        stream(small.url, session, max_queue=1, read=False) as sleepy,
        stream(small.url, session) as fast,
    ):
        published = [await _log(bus, session, n, padding="z" * 60_000) for n in range(count)]
        await fast.wait_for(lambda m: m["type"] == "TOOL_LOG", count=count, timeout=120)
        sleepy.start()
        (gap,) = await sleepy.wait_for(lambda m: m["type"] == "STREAM_GAP", timeout=120)

    assert [m["id"] for m in fast.of_type("TOOL_LOG")] == published
    assert fast.of_type("STREAM_GAP") == []
    assert gap["payload"]["dropped"] > 0
    async with httpx.AsyncClient(headers=bearer(), timeout=30) as http:
        replay = await http.get(
            f"{small.url}/v1/sessions/{session}/events",
            params={"after": gap["payload"]["after"], "limit": 1000},
        )
    received = [m["id"] for m in sleepy.of_type("TOOL_LOG")]
    before_gap = received[: received.index(gap["payload"]["after"]) + 1]
    assert before_gap + [m["id"] for m in replay.json()["items"]] == published


async def test_clients_on_two_gateway_instances_both_receive_the_sessions_events(
    gateway: GatewayProcess, gateway_stack: GatewayStack, bus: BusClient
) -> None:
    other = gateway_stack.new_gateway().start()
    session = _session()
    async with stream(gateway.url, session) as one, stream(other.url, session) as two:
        published = [await _log(bus, session, n) for n in range(10)]
        await one.wait_for(lambda m: m["type"] == "TOOL_LOG", count=10)
        await two.wait_for(lambda m: m["type"] == "TOOL_LOG", count=10)

    assert [m["id"] for m in one.received] == published
    assert [m["id"] for m in two.received] == published
