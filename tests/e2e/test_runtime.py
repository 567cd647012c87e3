"""The agent runtime hosted on a Worker, end to end: real broker, Postgres, memory and tracker.

Tool approvals over the bus (approved, denied, timed out, decided while the
agent is stopped), a kill -9 in the middle of an execution resumed from the
snapshot, and the snapshots themselves as the memory service keeps them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from disco.bus import BusClient
from disco.clients import MemoryClient, ServiceClientSettings
from disco.runtime import AgentState, FullSerializer
from disco_common.envelope import Envelope
from disco_common.notifications import (
    AgentUIEvent,
    AgentUIEventType,
    HumanInputRequest,
    HumanInputResponse,
    NotificationType,
    ToolApprovedPayload,
    ToolDeniedPayload,
)
from disco_common.topics import Topic
from tests.e2e.conftest import (
    TENANT,
    USER,
    AgentProcess,
    Stack,
    Watcher,
    start_agents,
    stop_agents,
)
from tests.e2e.runtime_agents import HANG_ENV, OPTIONS

pytestmark = pytest.mark.e2e

UI = AgentUIEventType


def new_session() -> str:
    return f"sess-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def runtime_agent(e2e_stack: Stack) -> Iterator[AgentProcess]:
    agent = start_agents(e2e_stack, "runtime")
    try:
        yield agent
    finally:
        stop_agents(agent)


async def ask(caller: BusClient, agent: str, session_id: str, text: str) -> Envelope:
    return await caller.request(
        f"{agent}.requested",
        {"text": text},
        response_event=f"{agent}.answered",
        tenant_id=TENANT,
        user_id=USER,
        session_id=session_id,
    )


async def decide(
    caller: BusClient,
    session_id: str,
    tool_call_id: str,
    *,
    approved: bool,
    reason: str | None = None,
) -> Envelope:
    """What the gateway will publish for a person's decision in a UI."""
    payload = (
        ToolApprovedPayload(tool_call_id=tool_call_id, decided_by=USER, reason=reason)
        if approved
        else ToolDeniedPayload(tool_call_id=tool_call_id, decided_by=USER, reason=reason)
    )
    event = AgentUIEvent.of(payload, session_id=session_id, execution_id="ui")
    return await caller.publish(
        Topic.NOTIFICATION_EVENTS,
        event.type.value,
        event.model_dump(mode="json"),
        tenant_id=TENANT,
        user_id=USER,
        session_id=session_id,
        correlation_id=session_id,
    )


def ui_events(watcher: Watcher, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The UI events of a session on notification-events: ``(type, payload)`` in order."""
    return [
        (envelope.type, envelope.data["payload"])  # type: ignore[index,call-overload]
        for envelope in watcher.matching(
            lambda topic, e: (
                topic == "notification-events"
                and e.session_id == session_id
                and isinstance(e.data, dict)
                and "payload" in e.data
            )
        )
    ]


async def wait_ui(
    watcher: Watcher, session_id: str, kind: AgentUIEventType, timeout: float = 60
) -> Envelope:
    (envelope, *_) = await watcher.wait_for(
        lambda topic, e: (
            topic == "notification-events" and e.session_id == session_id and e.type == kind.value
        ),
        timeout=timeout,
    )
    return envelope


async def answer_to(watcher: Watcher, request: Envelope, timeout: float = 60) -> dict[str, Any]:
    (answer,) = await watcher.wait_for(
        lambda topic, e: topic == "action-results" and e.correlation_id == request.correlation_id,
        timeout=timeout,
    )
    assert isinstance(answer.data, dict)
    return answer.data


async def saved_state(stack: Stack, session_id: str, agent: str) -> AgentState | None:
    settings = ServiceClientSettings(
        memory_url=stack.urls["memory"], tenant_id=TENANT, user_id=USER
    )
    async with MemoryClient.from_settings(settings) as memory:
        snapshot = await memory.get_snapshot(session_id, agent)
    return FullSerializer().deserialize(snapshot.full) if snapshot is not None else None


def tool_call_id_of(envelope: Envelope) -> str:
    assert isinstance(envelope.data, dict)
    return str(envelope.data["payload"]["tool_call_id"])


# -- a conversation ---------------------------------------------------------------------


async def test_a_hosted_agent_answers_with_its_tools_and_keeps_only_the_turns(
    runtime_agent: AgentProcess, e2e_stack: Stack, caller: BusClient, watcher: Watcher
) -> None:
    session = new_session()

    request = await ask(caller, "e2e-runtime", session, "weather in Lisbon please")
    answer = await answer_to(watcher, request)

    assert answer["success"] is True
    assert answer["result"] == {"text": "done: Lisbon: sunny, 22°C"}
    # The answer (action-results) may be read before the UI events (another topic):
    # wait for the later ones; the session's events share a partition, so in order.
    await wait_ui(watcher, session, UI.CONTINUATION)
    await wait_ui(watcher, session, UI.TOOL_LOG)
    await wait_ui(watcher, session, UI.TOOL_EXECUTION_SUCCEEDED)
    kinds = [kind for kind, _ in ui_events(watcher, session)]
    assert kinds[0] == UI.AGENT_STATUS.value
    assert kinds.index(UI.TOOL_EXECUTION_STARTED.value) < kinds.index(
        UI.TOOL_EXECUTION_SUCCEEDED.value
    )
    assert UI.TOOL_LOG.value in kinds
    assert UI.CONTINUATION.value in kinds
    progress = await watcher.wait_for(
        lambda topic, e: (
            topic == "system-events" and e.type == "task.progress" and e.task_id == request.id
        )
    )
    assert progress, "no task.progress while the agent worked"
    state = await saved_state(e2e_stack, session, "e2e-runtime")
    assert state is not None
    assert [(m.role.value, m.content) for m in state.messages] == [
        ("user", "weather in Lisbon please"),
        ("assistant", "done: Lisbon: sunny, 22°C"),
    ]
    assert state.execution_buffer == ()
    assert state.options == OPTIONS


async def test_a_session_goes_on_from_its_snapshot_with_the_next_message(
    runtime_agent: AgentProcess, e2e_stack: Stack, caller: BusClient, watcher: Watcher
) -> None:
    session = new_session()
    first = await ask(caller, "e2e-runtime", session, "weather in Lisbon")
    await answer_to(watcher, first)

    second = await ask(caller, "e2e-runtime", session, "weather in Porto")
    await answer_to(watcher, second)

    state = await saved_state(e2e_stack, session, "e2e-runtime")
    assert state is not None
    assert [m.content for m in state.messages] == [
        "weather in Lisbon",
        "done: Lisbon: sunny, 22°C",
        "weather in Porto",
        "done: Porto: sunny, 22°C",
    ]


# -- approvals -------------------------------------------------------------------------


async def test_an_approved_call_runs_after_its_approval(
    runtime_agent: AgentProcess, caller: BusClient, watcher: Watcher
) -> None:
    session = new_session()
    request = await ask(caller, "e2e-runtime", session, "book Lisbon on 2026-05-01")

    requested = await wait_ui(watcher, session, UI.TOOL_APPROVAL_REQUESTED)
    call_id = tool_call_id_of(requested)
    await decide(caller, session, call_id, approved=True)
    answer = await answer_to(watcher, request)

    assert answer["success"] is True
    assert "TRIP-LIS-2026-05-01" in answer["result"]["text"]
    await wait_ui(watcher, session, UI.TOOL_EXECUTION_SUCCEEDED)  # another topic than the answer
    lifecycle = [
        kind
        for kind, payload in ui_events(watcher, session)
        if kind.startswith("TOOL_") and payload.get("tool_call_id") == call_id
    ]
    assert lifecycle == [
        UI.TOOL_APPROVAL_REQUESTED.value,
        UI.TOOL_APPROVED.value,
        UI.TOOL_EXECUTION_STARTED.value,
        UI.TOOL_EXECUTION_SUCCEEDED.value,
    ]
    payload = requested.data["payload"]  # type: ignore[index,call-overload]
    assert payload["arguments"] == {
        "city": "Lisbon",
        "date": "2026-05-01",
        "card": "[redacted]",
    }
    assert (requested.tenant_id, requested.user_id) == (TENANT, USER)


async def test_a_denied_call_never_runs_and_the_model_is_told(
    runtime_agent: AgentProcess, caller: BusClient, watcher: Watcher
) -> None:
    session = new_session()
    request = await ask(caller, "e2e-runtime", session, "book Paris on 2026-07-14")

    call_id = tool_call_id_of(await wait_ui(watcher, session, UI.TOOL_APPROVAL_REQUESTED))
    await decide(caller, session, call_id, approved=False, reason="too expensive")
    answer = await answer_to(watcher, request)

    assert answer["success"] is True
    assert "denied by alice: too expensive" in answer["result"]["text"]
    await wait_ui(watcher, session, UI.TOOL_COMPLETED)  # another topic than the answer
    kinds = [kind for kind, _ in ui_events(watcher, session)]
    assert UI.TOOL_EXECUTION_STARTED.value not in kinds
    completed = [p for k, p in ui_events(watcher, session) if k == UI.TOOL_COMPLETED.value]
    assert completed[-1]["success"] is False


async def test_the_first_decision_wins(
    runtime_agent: AgentProcess, caller: BusClient, watcher: Watcher
) -> None:
    session = new_session()
    request = await ask(caller, "e2e-runtime", session, "book Oslo on 2026-02-02")
    call_id = tool_call_id_of(await wait_ui(watcher, session, UI.TOOL_APPROVAL_REQUESTED))

    await decide(caller, session, call_id, approved=True)
    await decide(caller, session, call_id, approved=False, reason="changed my mind")
    answer = await answer_to(watcher, request)

    assert "TRIP-OSL-2026-02-02" in answer["result"]["text"]
    await wait_ui(watcher, session, UI.TOOL_EXECUTION_SUCCEEDED)  # another topic than the answer
    executions = [
        kind for kind, _ in ui_events(watcher, session) if kind == UI.TOOL_EXECUTION_SUCCEEDED.value
    ]
    assert executions == [UI.TOOL_EXECUTION_SUCCEEDED.value]


async def test_an_answer_to_the_tasks_question_decides_too_and_the_agent_announces_it(
    runtime_agent: AgentProcess, caller: BusClient, watcher: Watcher
) -> None:
    session = new_session()
    request = await ask(caller, "e2e-runtime", session, "book Madrid on 2026-04-04")
    call_id = tool_call_id_of(await wait_ui(watcher, session, UI.TOOL_APPROVAL_REQUESTED))
    (question,) = await watcher.wait_for(
        lambda topic, e: (
            topic == "notification-events"
            and e.type == NotificationType.HUMAN_INPUT.value
            and e.task_id == request.id
        )
    )
    body = HumanInputRequest.model_validate(question.data)

    await caller.publish(  # what `disco answer yes` sends
        Topic.NOTIFICATION_EVENTS,
        body.response_event,
        HumanInputResponse(answer="yes", request_id=question.id, task_id=request.id),
        correlation_id=question.correlation_id,
        tenant_id=TENANT,
        user_id=USER,
        session_id=session,
    )
    answer = await answer_to(watcher, request)

    assert "TRIP-MAD-2026-04-04" in answer["result"]["text"]
    assert body.context["tool_call_id"] == call_id
    approved = await wait_ui(watcher, session, UI.TOOL_APPROVED)
    assert approved.source == "disco://agent/e2e-runtime"  # nobody else told the UIs


async def test_an_undecided_call_is_denied_by_the_agent_when_its_timeout_passes(
    e2e_stack: Stack, caller: BusClient, watcher: Watcher
) -> None:
    stack = dataclasses.replace(
        e2e_stack, env={**e2e_stack.env, "DISCO_TEST_APPROVAL_TIMEOUT": "2"}
    )
    agent = await asyncio.to_thread(start_agents, stack, "runtime-timeout")
    try:
        session = new_session()
        request = await ask(caller, "e2e-runtime-timeout", session, "book Rome on 2026-03-03")

        denied = await wait_ui(watcher, session, UI.TOOL_DENIED, timeout=60)
        answer = await answer_to(watcher, request)
    finally:
        await asyncio.to_thread(stop_agents, agent)

    assert denied.data["payload"]["reason"] == "timeout"  # type: ignore[index,call-overload]
    assert denied.source == "disco://agent/e2e-runtime-timeout"
    assert "denied: timeout" in answer["result"]["text"]
    kinds = [kind for kind, _ in ui_events(watcher, session)]
    assert UI.TOOL_EXECUTION_STARTED.value not in kinds


async def test_an_approval_sent_while_the_agent_is_stopped_is_honoured_after_its_restart(
    e2e_stack: Stack, caller: BusClient, watcher: Watcher
) -> None:
    agent = await asyncio.to_thread(start_agents, e2e_stack, "runtime-restart")
    session = new_session()
    try:
        request = await ask(caller, "e2e-runtime-restart", session, "book Vienna on 2026-09-09")
        call_id = tool_call_id_of(await wait_ui(watcher, session, UI.TOOL_APPROVAL_REQUESTED))
    finally:
        await asyncio.to_thread(stop_agents, agent)

    await decide(caller, session, call_id, approved=True)
    agent = await asyncio.to_thread(start_agents, e2e_stack, "runtime-restart")
    try:
        answer = await answer_to(watcher, request)
    finally:
        await asyncio.to_thread(stop_agents, agent)

    assert "TRIP-VIE-2026-09-09" in answer["result"]["text"]


# -- kill -9 ----------------------------------------------------------------------------


async def _wait_for_snapshot(
    stack: Stack, session_id: str, agent: str, steps: int, timeout: float = 30
) -> AgentState:
    async with asyncio.timeout(timeout):
        while True:
            state = await saved_state(stack, session_id, agent)
            if state is not None and len(state.steps) >= steps:
                return state
            await asyncio.sleep(0.1)


async def test_a_session_killed_mid_execution_resumes_from_its_snapshot(
    e2e_stack: Stack, caller: BusClient, watcher: Watcher
) -> None:
    hanging = dataclasses.replace(e2e_stack, env={**e2e_stack.env, HANG_ENV: "1"})
    doomed = await asyncio.to_thread(start_agents, hanging, "runtime-kill")
    survivor: AgentProcess | None = None
    session = new_session()
    try:
        request = await ask(caller, "e2e-runtime-kill", session, "slow trip in Lisbon")
        started = await watcher.wait_for(
            lambda topic, e: (
                topic == "notification-events"
                and e.session_id == session
                and e.type == UI.TOOL_EXECUTION_STARTED.value
                and e.data["payload"]["tool_name"] == "slow_step"  # type: ignore[index,call-overload]
            )
        )
        assert started
        before = await _wait_for_snapshot(e2e_stack, session, "e2e-runtime-kill", steps=1)
        doomed.process.kill()  # SIGKILL: no commit, no goodbye
        await asyncio.to_thread(doomed.process.wait, 30)

        survivor = await asyncio.to_thread(start_agents, e2e_stack, "runtime-kill")
        answer = await answer_to(watcher, request, timeout=90)
    finally:
        stop_agents(doomed)
        if survivor is not None:
            await asyncio.to_thread(stop_agents, survivor)
    after = await saved_state(e2e_stack, session, "e2e-runtime-kill")

    assert answer["success"] is True
    assert answer["result"] == {"text": "done: prepared Lisbon"}
    assert after is not None
    assert [m.content for m in before.messages] == ["slow trip in Lisbon"]
    assert [m.content for m in after.messages] == ["slow trip in Lisbon", "done: prepared Lisbon"]
    assert before.options == after.options == OPTIONS
    assert after.execution_id == before.execution_id
    assert after.steps[0] == before.steps[0]  # the step done before the kill is not done again
    assert after.execution.cumulative_seconds >= before.execution.cumulative_seconds
    # Only the step in flight at the kill is lost: what is added is what ran after it.
    ran_after = sum(step.duration_ms for step in after.steps[1:]) / 1000
    assert after.execution.cumulative_seconds == pytest.approx(
        before.execution.cumulative_seconds + ran_after, abs=0.05
    )
