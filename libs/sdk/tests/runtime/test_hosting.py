"""Hosting the loop on disco agents: routes a Worker gets, one-shot answers of a Tool.

The Worker host's behaviour over the bus (sessions, approvals, restarts) is in
``tests/e2e/test_runtime.py``; here, what can be seen without a broker.
"""

from __future__ import annotations

import pytest

import disco
from disco import Tool, Worker
from disco.agents import AgentDefinitionError
from disco.runtime import (
    AgentRunner,
    InMemorySnapshotStore,
    LLMError,
    ScriptedDriver,
    ScriptedReply,
    agent_tool,
)
from disco.testing import AgentTestKit
from disco_common.notifications import AgentUIEvent
from disco_common.topics import Topic
from libs.sdk.tests.runtime._helpers import book_trip, call, lookup_weather


def test_a_worker_host_consumes_its_requests_and_the_decisions_on_its_calls() -> None:
    runner = AgentRunner("helper", driver=ScriptedDriver([]), tools=[lookup_weather, book_trip])
    worker = Worker("helper")

    runner.attach_worker(worker, "helper.requested")

    assert set(worker.routes) == {
        ("action-requests", "helper.requested"),
        ("notification-events", "helper.tool_approval.answered"),
        ("notification-events", "TOOL_APPROVED"),
        ("notification-events", "TOOL_DENIED"),
    }
    (capability,) = worker.registration().capabilities
    assert capability.consumed_event.event_type == "helper.requested"
    assert capability.consumed_event.json_schema["required"] == ["text"]


def test_a_tool_host_refuses_tools_that_may_wait_for_a_person() -> None:
    runner = AgentRunner("helper", driver=ScriptedDriver([]), tools=[book_trip])

    with pytest.raises(AgentDefinitionError, match="host the runner on a Worker"):
        runner.attach_tool(Tool("helper"), "helper.asked")


async def test_a_tool_host_answers_one_shot_with_the_final_text_and_publishes_ui_events() -> None:
    runner = AgentRunner(
        "helper",
        driver=ScriptedDriver([call("lookup_weather", city="Oslo"), "Snow in Oslo."]),
        tools=[lookup_weather],
    )
    tool = Tool("helper")
    runner.attach_tool(tool, "helper.asked")

    async with AgentTestKit(tool) as kit:
        request = await kit.request(
            "helper.asked",
            {"text": "Weather in Oslo?"},
            response_event="helper.answered",
            session_id="sess-1",
            tenant_id="acme",
        )

    result = kit.result_of(request)
    assert result.success
    assert result.result == {"text": "Snow in Oslo."}
    ui = [p.envelope for p in kit.published if p.topic == Topic.NOTIFICATION_EVENTS.value]
    assert ui
    assert all(e.session_id == "sess-1" and e.tenant_id == "acme" for e in ui)
    assert all(e.kafka_key() == b"sess-1" for e in ui)
    kinds = [AgentUIEvent.model_validate(e.data).type.value for e in ui]
    assert kinds[0] == "agent.status"
    assert "TOOL_EXECUTION_SUCCEEDED" in kinds


async def test_a_tool_host_answers_a_failed_execution_with_an_error() -> None:
    runner = AgentRunner(
        "helper", driver=ScriptedDriver([ScriptedReply(error=LLMError("model is down"))])
    )
    tool = Tool("helper")
    runner.attach_tool(tool, "helper.asked")

    async with AgentTestKit(tool) as kit:
        request = await kit.request(
            "helper.asked", {"text": "Hi"}, response_event="helper.answered"
        )

    result = kit.result_of(request)
    assert not result.success
    assert result.error is not None
    assert "model is down" in result.error.message


async def test_a_runtime_tool_takes_journaled_steps_one_per_tool_call() -> None:
    charged: list[str] = []

    @agent_tool
    async def charge(amount: int) -> str:
        """Charge an amount."""
        return await disco.step(
            "charge", lambda s: charged.append(s.idempotency_key) or f"charged {amount}"
        )

    runner = AgentRunner(
        "payer",
        driver=ScriptedDriver(
            [ScriptedReply(tool_calls=[("charge", {"amount": 1}), ("charge", {"amount": 2})]), "ok"]
        ),
        tools=[charge],
    )
    tool = Tool("payer")
    runner.attach_tool(tool, "payer.asked")

    async with AgentTestKit(tool) as kit:
        request = await kit.request("payer.asked", {"text": "pay"}, response_event="paid")

    assert kit.result_of(request).success
    journal = await kit.memory.step_journal("payer", request.id, tenant_id="test")
    assert sorted(journal.values()) == ["charged 1", "charged 2"]  # two calls, two steps
    assert len(set(charged)) == 2
    assert all(name.endswith(":charge") for name in journal)  # each under its call's id


async def test_a_session_goes_on_for_its_user_or_a_service_but_not_for_another_user() -> None:
    runner = AgentRunner(
        "helper",
        driver=ScriptedDriver(["one", "two", "three", "four"]),
        snapshots=InMemorySnapshotStore(),
    )
    worker = Worker("helper")
    runner.attach_worker(worker, "helper.requested")

    async with AgentTestKit(worker, user_id="alice") as kit:
        first = await kit.request(
            "helper.requested", {"text": "hi"}, response_event="r", session_id="s-1"
        )
        stranger = await kit.request(
            "helper.requested",
            {"text": "me too"},
            response_event="r",
            session_id="s-1",
            user_id="bob",
        )
        service = await kit.request(
            "helper.requested",
            {"text": "go on"},
            response_event="r",
            session_id="s-1",
            user_id=None,
        )
        hers = await kit.request(
            "helper.requested", {"text": "and?"}, response_event="r", session_id="s-1"
        )

    assert kit.result_of(first).result == {"text": "one"}
    refused = kit.result_of(stranger)
    assert refused.error is not None
    assert refused.error.type == "session_of_another_user"
    assert kit.result_of(service).result == {"text": "two"}
    assert kit.result_of(hers).result == {"text": "three"}
