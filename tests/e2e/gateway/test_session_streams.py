"""Session streams under pressure: tenancy and tokens, reconnects, teams, hostile payloads,
slow clients and several gateway instances (real processes, broker and Postgres)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

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
from tests.e2e.gateway.support import metric_value, until
from tests.fixtures.tokens import signed_with_the_dev_secret

# About 55 KB a message: strings are cut at 4,000 characters, lists at 200 items.
_PADDING = ["z" * 3900] * 14


def _jwt(user: str, role: str, expires_in: int, algorithm: str = "HS256") -> str:
    """A dev token of ``TENANT`` expiring ``expires_in`` seconds from now (negative: expired)."""
    return signed_with_the_dev_secret(
        {
            "sub": user,
            "tenant_id": TENANT,
            "user_id": user,
            "roles": [role],
            "exp": int(time.time()) + expires_in,
        },
        algorithm,
    )


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
    operator = _jwt("ops", "operator", 600)
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


@pytest.mark.parametrize("problem", ["none", "bad", "expired", "hs512"])
async def test_a_socket_without_a_valid_token_is_closed_with_4401(
    gateway: GatewayProcess, problem: str
) -> None:
    import websockets

    from tests.e2e.gateway.streams import ws_url

    headers = {}
    if problem == "bad":
        headers["Authorization"] = "Bearer not-a-jwt"
    elif problem == "expired":
        expired = _jwt("alice", "user", -60)
        headers["Authorization"] = f"Bearer {expired}"
    elif problem == "hs512":  # the right secret, an algorithm the gateway is not configured for
        headers["Authorization"] = f"Bearer {_jwt('alice', 'user', 600, 'HS512')}"
    async with websockets.connect(
        ws_url(gateway.url, _session()), additional_headers=headers
    ) as ws:
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 30)

    assert ws.close_code == 4401


async def test_a_socket_is_closed_with_4401_when_its_token_expires(
    gateway: GatewayProcess,
) -> None:
    short = _jwt("alice", "user", 3)
    async with stream(gateway.url, _session(), bearer=short) as ui:
        pong = await ui.request({"type": "PING"})
        code, reason = await ui.wait_closed()

    assert pong["type"] == "PONG"
    assert code == 4401
    assert reason is not None
    assert "expired" in reason


async def test_a_reconnect_with_after_misses_nothing_and_repeats_nothing(
    gateway: GatewayProcess, bus: BusClient
) -> None:
    session = _session()
    published: list[str] = []
    first_gone = asyncio.Event()

    async def keep_publishing() -> None:
        for n in range(120):
            if n == 60:
                # The rest flows while the client is away and as it comes back (the
                # first 60 may all reach it before it goes: the gateway reads in batches).
                await first_gone.wait()
            published.append(await _log(bus, session, n))
        published.append(await _log(bus, session, 999, last=True))

    seen: list[str] = []
    async with stream(gateway.url, session) as first:
        producer = asyncio.create_task(keep_publishing())
        await first.wait_for(lambda m: m["type"] == "TOOL_LOG", count=20)
    first_gone.set()
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
    # The raw envelope has no session key, so it may sit on another partition and
    # come first: find the helper's log by its content.
    (helpers,) = [m for m in logs if "cycle" in m["payload"]]
    assert helpers["payload"]["cycle"]["self"].startswith("<cycle")
    assert helpers["payload"]["raw"]["type"] == "bytes"
    assert error["id"] == strange.id
    assert error["payload"]["code"] == "unknown_event_type"
    assert error["payload"]["event_type"] == "agent.mood.changed"


async def test_a_client_that_never_reads_gets_a_stream_gap_and_others_get_everything(
    gateway_stack: GatewayStack, bus: BusClient
) -> None:
    small = GatewayProcess(
        {
            **gateway_stack.gateway_env,
            "DISCO_GATEWAY_STREAM_QUEUE_SIZE": "64",
            # The stalled client answers no ping while it stalls: not closed meanwhile.
            "DISCO_GATEWAY_STREAM_HEARTBEAT_SECONDS": "600",
        },
        gateway_stack.logs,
    )
    gateway_stack.gateways.append(small)
    small.start()
    session = _session()
    count = 300
    async with (
        stream(small.url, session, max_queue=1, read=False, receive_buffer=4096) as sleepy,
        stream(small.url, session) as fast,
    ):
        published: list[str] = []
        # Publish until the server dropped events for the stalled socket (the kernel's and
        # the transport's buffers fill first), then some more. Each event is published once
        # the reading client has the one before: on a loaded machine that client (in this
        # process, beside the publisher) could otherwise fall 64 behind and get a gap too.
        for n in range(count * 10):
            published.append(await _log(bus, session, n, padding=_PADDING))
            await fast.wait_for(lambda m: m["type"] == "TOOL_LOG", count=len(published) - 1)
            if n >= count and await _dropped(small.url):
                break
        await fast.wait_for(lambda m: m["type"] == "TOOL_LOG", count=len(published), timeout=120)
        sleepy.start()
        (gap,) = await sleepy.wait_for(lambda m: m["type"] == "STREAM_GAP", timeout=120)
        # Live again after the gap: an event published now reaches the stalled client too.
        published.append(await _log(bus, session, len(published), last=True))
        await sleepy.wait_for(lambda m: m["payload"].get("last") is True)
        await fast.wait_for(lambda m: m["payload"].get("last") is True)

    assert [m["id"] for m in fast.of_type("TOOL_LOG")] == published
    assert fast.of_type("STREAM_GAP") == []
    assert gap["payload"]["dropped"] > 0
    async with httpx.AsyncClient(base_url=small.url, headers=bearer(), timeout=30) as http:
        replay = await http.get(f"{gap['payload']['replay']}&limit=1000")
    received = [m["id"] for m in sleepy.received if m["type"] == "TOOL_LOG"]
    gap_at = sleepy.received.index(gap)
    before_gap = [m["id"] for m in sleepy.received[:gap_at] if m["type"] == "TOOL_LOG"]
    assert before_gap[-1] == gap["payload"]["after"]
    assert before_gap + [m["id"] for m in replay.json()["items"]] == published
    # What came live after the gap is the tail of what was published, in order.
    after_gap = received[len(before_gap) :]
    assert after_gap == published[len(published) - len(after_gap) :]


async def _dropped(url: str) -> bool:
    async with httpx.AsyncClient(timeout=30) as http:
        metrics = (await http.get(f"{url}/metrics")).text
    return metric_value(metrics, "disco_gateway_stream_dropped_events_total") > 0


async def test_the_heartbeat_closes_a_dead_socket_and_keeps_a_live_one(
    gateway_stack: GatewayStack, bus: BusClient
) -> None:
    quick = GatewayProcess(
        {**gateway_stack.gateway_env, "DISCO_GATEWAY_STREAM_HEARTBEAT_SECONDS": "2"},
        gateway_stack.logs,
    )
    gateway_stack.gateways.append(quick)
    quick.start()
    session = _session()
    async with (
        stream(quick.url, session, read=False) as dead,
        stream(quick.url, session) as alive,
    ):
        # Gone without a word (a closed laptop lid): nothing read, no pong sent.
        dead.connection.transport.pause_reading()

        async def one_socket_left() -> bool | None:
            async with httpx.AsyncClient(timeout=30) as http:
                metrics = (await http.get(f"{quick.url}/metrics")).text
            return True if metric_value(metrics, "disco_gateway_stream_sockets") == 1 else None

        await until(one_socket_left, timeout=30, what="the dead socket closed by the server")
        dead.connection.transport.resume_reading()
        dead.start()
        closed = await dead.wait_closed()
        sent = await _log(bus, session, 1)
        (log,) = await alive.wait_for(lambda m: m["type"] == "TOOL_LOG")

    assert closed[0] == 1011
    assert log["id"] == sent


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
