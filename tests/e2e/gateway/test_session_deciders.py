"""Whoever decides, the session resumes; who may decide is still checked.

An LLM agent on a Worker (``gw-assistant``) asks for approval of a tool call in a
session started three ways: by a user through the gateway, by a service for a
user (a request on the bus naming the user), and by a service for no user (a
request on the bus with a tenant and no user). Then a caller decides it over the
websocket or over HTTP: the user, another user, an operator, or a service. The
agent's state is found by session and agent within the tenant whoever decided:
an accepted decision resumes the session and the call runs (never
``agent_state_lost``); a refused one changes nothing (404 for another user's
call, 403 for a plain user in a session of no user).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco_common.auth import Role
from tests.e2e.gateway.conftest import TENANT, GatewayProcess, GatewayStack
from tests.e2e.gateway.streams import StreamClient, stream

AGENT = "gw-assistant"
DECIDERS = {
    "alice": (Role.USER,),
    "bob": (Role.USER,),
    "ops": (Role.OPERATOR,),
    "svc": (Role.SERVICE,),
}
# (who started the session, who decides, what the decider gets)
CASES = [
    ("user", "alice", "accepted"),
    ("user", "bob", "not_found"),
    ("user", "ops", "accepted"),
    ("user", "svc", "accepted"),
    ("service-for-alice", "alice", "accepted"),
    ("service-for-alice", "bob", "not_found"),
    ("service-for-alice", "ops", "accepted"),
    ("service-for-alice", "svc", "accepted"),
    ("service", "alice", "forbidden"),
    ("service", "ops", "accepted"),
    ("service", "svc", "accepted"),
]


def _token(user: str) -> str:
    return mint_dev_token(DEV_AUTH_SECRET, TENANT, user, DECIDERS[user])


@pytest.fixture
async def bus(gateway_stack: GatewayStack) -> AsyncIterator[BusClient]:
    async with BusClient(gateway_stack.bus_settings(), name="gw-deciders-test") as client:
        yield client


async def _start(
    gateway: GatewayProcess, bus: BusClient, starter: str, session: str, text: str
) -> None:
    if starter == "user":
        async with httpx.AsyncClient(timeout=30) as http:
            sent = await http.post(
                f"{gateway.url}/v1/sessions/{session}/messages",
                json={"agent": AGENT, "text": text},
                headers={"Authorization": f"Bearer {_token('alice')}"},
            )
        assert sent.status_code == 202, sent.text
        return
    await bus.request(
        f"{AGENT}.requested",
        {"text": text},
        response_event="gw.deciders.done",
        tenant_id=TENANT,
        user_id="alice" if starter == "service-for-alice" else None,
        session_id=session,
    )


async def _decide(
    gateway: GatewayProcess, session: str, decider: str, call: str, route: str
) -> tuple[str, dict[str, Any]]:
    """``("accepted", body)`` or ``(error code, body)``."""
    if route == "http":
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.post(
                f"{gateway.url}/v1/sessions/{session}/approvals/{call}",
                json={"decision": "approve", "reason": f"by {decider}"},
                headers={"Authorization": f"Bearer {_token(decider)}"},
            )
        body = answer.json()
        if answer.status_code == 202:
            return "accepted", body
        expected_status = {"not_found": 404, "forbidden": 403}[body["error"]["code"]]
        assert answer.status_code == expected_status, answer.text
        return str(body["error"]["code"]), body
    async with stream(gateway.url, session, bearer=_token(decider)) as ui:
        reply = await ui.request({"type": "APPROVE_TOOL", "tool_call_id": call})
    if reply["type"] == "ACK":
        return "accepted", reply["payload"]
    return str(reply["payload"]["code"]), reply["payload"]


@pytest.mark.parametrize("route", ["ws", "http"])
@pytest.mark.parametrize(("starter", "decider", "outcome"), CASES)
async def test_a_session_resumes_whoever_may_decide_and_refuses_who_may_not(
    gateway: GatewayProcess,
    bus: BusClient,
    starter: str,
    decider: str,
    outcome: str,
    route: str,
) -> None:
    session = f"s-{uuid.uuid4().hex[:12]}"
    async with stream(gateway.url, session, bearer=_token("ops")) as observer:
        await _start(gateway, bus, starter, session, "book Lima on 2026-07-01")
        (asked,) = await observer.wait_for(lambda m: m["type"] == "TOOL_APPROVAL_REQUESTED")
        call = asked["payload"]["tool_call_id"]

        got, body = await _decide(gateway, session, decider, call, route)

        assert got == outcome, body
        if outcome == "accepted":
            await _resumed(observer, call, decider)
        else:
            # Nothing changed: the call still waits, and an operator may decide it now.
            assert observer.of_type("TOOL_APPROVED", "TOOL_DENIED") == []
            again, _ = await _decide(gateway, session, "ops", call, route)
            assert again == "accepted"
            await _resumed(observer, call, "ops")


async def _resumed(observer: StreamClient, call: str, decider: str) -> None:
    """The decision is on the stream, the call ran and the execution completed."""
    (approved,) = await observer.wait_for(lambda m: m["type"] == "TOOL_APPROVED")
    await observer.wait_for(lambda m: m["type"] == "TOOL_EXECUTION_SUCCEEDED", timeout=60)
    await observer.wait_for(
        lambda m: m["type"] == "agent.status" and m["payload"]["status"] in ("completed", "failed"),
        timeout=60,
    )
    statuses = [m["payload"]["status"] for m in observer.of_type("agent.status")]
    assert statuses[-1] == "completed", statuses  # not agent_state_lost, not failed
    assert approved["payload"]["tool_call_id"] == call
    assert approved["payload"]["decided_by"] == decider


@pytest.mark.parametrize("route", ["ws", "http"])
async def test_a_question_in_a_session_no_user_started_is_an_operators_to_answer(
    gateway: GatewayProcess, bus: BusClient, route: str
) -> None:
    session = f"s-{uuid.uuid4().hex[:12]}"
    async with stream(gateway.url, session, bearer=_token("ops")) as observer:
        await bus.request(
            "gw.ask.requested",
            {"text": "hi"},
            response_event="gw.deciders.asked",
            tenant_id=TENANT,
            session_id=session,
        )
        (asked,) = await observer.wait_for(lambda m: m["type"] == "HUMAN_INPUT_REQUESTED")
        question = asked["payload"]["question_id"]

        refused = await _answer(gateway, session, question, "alice", route)
        accepted = await _answer(gateway, session, question, "ops", route)
        (answered,) = await observer.wait_for(lambda m: m["type"] == "HUMAN_INPUT_ANSWERED")

    assert refused == "forbidden"
    assert accepted == "accepted"
    assert answered["payload"]["answered_by"] == "ops"


async def _answer(
    gateway: GatewayProcess, session: str, question: str, who: str, route: str
) -> str:
    if route == "http":
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.post(
                f"{gateway.url}/v1/sessions/{session}/answers/{question}",
                json={"answer": "Ada"},
                headers={"Authorization": f"Bearer {_token(who)}"},
            )
        if answer.status_code == 202:
            return "accepted"
        assert answer.status_code == 403, answer.text
        return str(answer.json()["error"]["code"])
    async with stream(gateway.url, session, bearer=_token(who)) as ui:
        reply = await ui.request({"type": "ANSWER", "question_id": question, "answer": "Ada"})
    return "accepted" if reply["type"] == "ACK" else str(reply["payload"]["code"])
