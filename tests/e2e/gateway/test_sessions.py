"""Live UI streams end to end: a real gateway, the runtime agents as processes, the real broker
and Postgres. A session's events reach its websocket in order; approvals and answers go back
over the socket or HTTP, once."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.e2e.gateway.conftest import GatewayProcess, bearer
from tests.e2e.gateway.streams import stream, subsequence
from tests.e2e.gateway.support import until


def _session() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


def _types(messages: list[dict[str, Any]]) -> list[str]:
    return [m["type"] for m in messages]


async def _post(url: str, path: str, body: dict[str, Any], **who: str) -> httpx.Response:
    async with httpx.AsyncClient(headers=bearer(**who), timeout=30) as http:
        return await http.post(f"{url}{path}", json=body)


async def test_an_approved_tool_call_streams_its_whole_lifecycle_in_order(
    gateway: GatewayProcess,
) -> None:
    session = _session()
    async with stream(gateway.url, session) as ui:
        ack = await ui.request(
            {"type": "SEND_MESSAGE", "agent": "gw-assistant", "text": "book Paris on 2026-05-01"}
        )
        assert ack["type"] == "ACK", ack["payload"]
        (asked,) = await ui.wait_for(lambda m: m["type"] == "TOOL_APPROVAL_REQUESTED")
        call = asked["payload"]["tool_call_id"]
        assert asked["payload"]["tool_name"] == "book_trip"
        assert asked["agent_name"] == "gw-assistant"
        assert asked["session_id"] == session

        decided = await ui.request({"type": "APPROVE_TOOL", "tool_call_id": call, "reason": "ok"})
        assert decided["type"] == "ACK", decided["payload"]
        assert decided["payload"]["type"] == "TOOL_APPROVED"
        await ui.wait_for(
            lambda m: m["type"] == "agent.status" and m["payload"]["status"] == "completed"
        )

    types = _types(ui.received)
    assert subsequence(
        types,
        [
            "agent.status",
            "agent.step.started",
            "TOOL_APPROVAL_REQUESTED",
            "TOOL_APPROVED",
            "TOOL_EXECUTION_STARTED",
            "TOOL_EXECUTION_SUCCEEDED",
            "agent.step.completed",
            "agent.stream.chunk",
            "agent.status",
        ],
    ), types
    (approved,) = ui.of_type("TOOL_APPROVED")
    assert approved["payload"]["tool_call_id"] == call
    assert approved["payload"]["decided_by"] == "alice"
    (succeeded,) = ui.of_type("TOOL_EXECUTION_SUCCEEDED")
    assert succeeded["payload"]["result"]["reference"] == "TRIP-PAR-2026-05-01"
    events = [m for m in ui.received if m["id"] is not None]
    assert len({m["id"] for m in events}) == len(events)
    assert all(
        set(m)
        == {
            "id",
            "type",
            "session_id",
            "execution_id",
            "agent_id",
            "agent_name",
            "timestamp",
            "payload",
        }
        for m in ui.received
    )

    again = await _post(
        gateway.url, f"/v1/sessions/{session}/approvals/{call}", {"decision": "deny"}
    )
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "already_decided"


async def test_a_denied_tool_call_never_runs_and_a_second_decision_changes_nothing(
    gateway: GatewayProcess,
) -> None:
    session = _session()
    async with stream(gateway.url, session) as ui:
        sent = await _post(
            gateway.url,
            f"/v1/sessions/{session}/messages",
            {"agent": "gw-assistant", "text": "book Oslo on 2026-06-01"},
        )
        assert sent.status_code == 202, sent.text
        (asked,) = await ui.wait_for(lambda m: m["type"] == "TOOL_APPROVAL_REQUESTED")
        call = asked["payload"]["tool_call_id"]

        denied = await _post(
            gateway.url,
            f"/v1/sessions/{session}/approvals/{call}",
            {"decision": "deny", "reason": "too far"},
        )
        assert denied.status_code == 202, denied.text
        assert denied.json()["type"] == "TOOL_DENIED"
        twice = await ui.request({"type": "APPROVE_TOOL", "tool_call_id": call})
        assert twice["type"] == "ERROR"
        assert twice["payload"]["code"] == "already_decided"
        await ui.wait_for(
            lambda m: m["type"] == "agent.status" and m["payload"]["status"] == "completed"
        )

    (denial,) = ui.of_type("TOOL_DENIED")
    assert denial["payload"] | {"tool_call_id": call, "reason": "too far"} == denial["payload"]
    assert ui.of_type("TOOL_APPROVED", "TOOL_EXECUTION_STARTED") == []


async def test_a_question_to_a_human_is_answered_over_http_once(gateway: GatewayProcess) -> None:
    session = _session()
    async with stream(gateway.url, session) as ui:
        ack = await ui.request({"type": "SEND_MESSAGE", "agent": "gw-asker", "text": "hi"})
        assert ack["type"] == "ACK", ack["payload"]
        (asked,) = await ui.wait_for(lambda m: m["type"] == "HUMAN_INPUT_REQUESTED")
        question = asked["payload"]
        assert question["question"] == "What is your name?"
        assert [o["value"] for o in question["options"]] == ["Ada", "Grace"]
        path = f"/v1/sessions/{session}/answers/{question['question_id']}"

        wrong = await _post(gateway.url, path, {"answer": "Bob"})
        assert wrong.status_code == 422
        assert wrong.json()["error"]["code"] == "invalid_answer"
        answered = await _post(gateway.url, path, {"answer": "Ada"})
        assert answered.status_code == 202, answered.text
        assert answered.json()["type"] == "gw.ask.answered"
        (outcome,) = await ui.wait_for(lambda m: m["type"] == "HUMAN_INPUT_ANSWERED")
        again = await _post(gateway.url, path, {"answer": "Grace"})

    assert outcome["payload"]["question_id"] == question["question_id"]
    assert outcome["payload"]["answer"] == "Ada"
    assert outcome["payload"]["answered_by"] == "alice"
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "already_answered"


async def test_an_approval_after_its_deadline_is_refused(gateway: GatewayProcess) -> None:
    session = _session()
    async with stream(gateway.url, session) as ui:
        await ui.request({"type": "SEND_MESSAGE", "agent": "gw-hasty", "text": "book Rome"})
        (asked,) = await ui.wait_for(lambda m: m["type"] == "TOOL_APPROVAL_REQUESTED")
    call = asked["payload"]["tool_call_id"]
    from datetime import UTC, datetime

    deadline = datetime.fromisoformat(asked["payload"]["deadline"])

    async def passed() -> bool | None:
        return True if datetime.now(UTC) > deadline else None

    await until(passed, timeout=30, what="the approval deadline")
    late = await _post(
        gateway.url, f"/v1/sessions/{session}/approvals/{call}", {"decision": "approve"}
    )

    assert late.status_code == 409
    assert late.json()["error"]["code"] == "timed_out"


async def test_bad_client_messages_get_an_error_naming_the_field(gateway: GatewayProcess) -> None:
    async with stream(gateway.url, _session(), how="subprotocol") as ui:
        assert ui.connection.subprotocol == "disco.v1"
        missing = await ui.request({"type": "APPROVE_TOOL"})
        unknown = await ui.request({"type": "LAUNCH"})
        nothing = await ui.request({"type": "APPROVE_TOOL", "tool_call_id": "call_nope"})
        both = await ui.request({"type": "SEND_MESSAGE", "agent": "x"})
        pong = await ui.request({"type": "PING"})
        await ui.send({"not": "json"[:2]})
        await ui.connection.send("{not json")
        (garbled,) = await ui.wait_for(
            lambda m: m["type"] == "ERROR" and "JSON object" in m["payload"]["message"]
        )

    assert missing["type"] == "ERROR"
    assert missing["payload"]["field"] == "APPROVE_TOOL.tool_call_id"
    assert unknown["type"] == "ERROR"
    assert unknown["payload"]["code"] == "invalid_message"
    assert nothing["payload"]["code"] == "not_found"
    assert both["type"] == "ERROR"
    assert pong["type"] == "PONG"
    assert garbled["payload"]["code"] == "invalid_message"
