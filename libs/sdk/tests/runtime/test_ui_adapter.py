"""The UI adapter: runtime events → the stable UI envelope (seed 000), JSON-safe payloads."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from disco._context import handler_context
from disco.bus import BusClient
from disco.runtime import (
    AgentStatus,
    AgentStep,
    ApprovalDecided,
    ApprovalRequested,
    BusEventSink,
    CollectingSink,
    ContinuationEvaluated,
    ContinuationEvaluation,
    ContinuationOutcome,
    Decision,
    StatusChanged,
    StepCompleted,
    StepStarted,
    StepType,
    StreamChunk,
    ToolCall,
    ToolFinished,
    ToolLogged,
    ToolStarted,
    UIEventAdapter,
    Usage,
)
from disco.settings import BusSettings
from disco_common.envelope import Envelope, Notification
from disco_common.notifications import UI_EVENT_PAYLOADS, AgentUIEvent, AgentUIEventType
from libs.sdk.tests.runtime._helpers import call, runner

IDS = {"session_id": "s-1", "execution_id": "e-1", "agent_id": "assistant"}
CALL = ToolCall(id="call_1", name="book_trip", arguments='{"city": "Lisbon"}')
OUTCOME = ContinuationOutcome(
    step_number=2,
    should_continue=False,
    stop_reason="steps_limit",
    resolved_by="StepsLimit",
    evaluations=(
        ContinuationEvaluation(
            criterion="StepsLimit", decision=Decision.FORBID, reason="step 2 reached 2"
        ),
        ContinuationEvaluation(criterion="ToolCallPresence", decision=Decision.REQUEST),
    ),
)
STEP = AgentStep(
    number=2,
    type=StepType.TOOL_EXECUTION,
    finish_reason="tool_calls",
    tool_calls=(CALL,),
    usage=Usage.of(500, 150),
    started_at=datetime(2026, 1, 1, tzinfo=UTC),
    duration_ms=1250.5,
)


def only(adapter: UIEventAdapter, event: Any) -> AgentUIEvent:
    (ui,) = adapter.events(event)
    return ui


def test_every_ui_envelope_has_the_stable_shape_and_a_typed_payload() -> None:
    adapter = UIEventAdapter(agent_name="Assistant", include_continuation=True)
    events: list[Any] = [
        StatusChanged(**IDS, status=AgentStatus.COMPLETED, step_count=2, last_response="Done."),
        StepStarted(**IDS, step_number=1, message_count=3, available_tools=("book_trip",)),
        StepCompleted(**IDS, step=STEP, continuation=OUTCOME),
        StreamChunk(**IDS, chunk="Hel", tokens_delta=1),
        ContinuationEvaluated(**IDS, outcome=OUTCOME),
        ApprovalRequested(**IDS, call=CALL, arguments={"city": "Lisbon"}, timeout_seconds=60),
        ApprovalDecided(**IDS, tool_call_id="call_1", tool_name="book_trip", approved=False),
        ApprovalDecided(**IDS, tool_call_id="call_1", tool_name="book_trip", approved=True),
        ToolStarted(**IDS, call=CALL, arguments={"city": "Lisbon"}),
        ToolFinished(**IDS, call=CALL, success=True, result={"ref": "X"}, duration_ms=3.0),
        ToolFinished(**IDS, call=CALL, success=False, error=TimeoutError("slow"), duration_ms=9.0),
        ToolLogged(
            **IDS, tool_call_id="call_1", tool_name="book_trip", level="debug", message="hi"
        ),
    ]

    envelopes = [ui for event in events for ui in adapter.events(event)]

    assert {ui.type for ui in envelopes} == set(AgentUIEventType)
    for ui in envelopes:
        dumped = json.loads(ui.model_dump_json())
        assert set(dumped) == {
            "type",
            "session_id",
            "execution_id",
            "agent_id",
            "agent_name",
            "timestamp",
            "payload",
        }
        assert (dumped["session_id"], dumped["execution_id"], dumped["agent_name"]) == (
            "s-1",
            "e-1",
            "Assistant",
        )
        AgentUIEvent.model_validate(dumped).typed_payload()  # fits its payload model
        assert isinstance(ui.typed_payload(), UI_EVENT_PAYLOADS[ui.type])


def test_step_completed_carries_seed_000s_fields() -> None:
    plain = only(UIEventAdapter(), StepCompleted(**IDS, step=STEP, continuation=OUTCOME))
    traced = only(
        UIEventAdapter(include_continuation=True),
        StepCompleted(**IDS, step=STEP, continuation=OUTCOME),
    )

    assert plain.payload == {
        "step_number": 2,
        "has_tool_calls": True,
        "errors": 0,
        "finish_reason": "tool_calls",
        "usage": {"prompt_tokens": 500, "completion_tokens": 150, "total_tokens": 650},
        "duration_ms": 1250.5,
    }
    assert traced.payload["continuation"] == {
        "step_number": 2,
        "should_continue": False,
        "stop_reason": "steps_limit",
        "resolved_by": "StepsLimit",
    }


def test_the_continuation_trace_is_opt_in() -> None:
    event = ContinuationEvaluated(**IDS, outcome=OUTCOME)

    assert UIEventAdapter().events(event) == []
    traced = only(UIEventAdapter(include_continuation=True), event)
    assert traced.payload["evaluations"] == [
        {"criterion": "StepsLimit", "decision": "forbid", "reason": "step 2 reached 2"},
        {"criterion": "ToolCallPresence", "decision": "request", "reason": ""},
    ]


def test_a_tool_call_gives_the_compact_summary_and_the_full_lifecycle() -> None:
    adapter = UIEventAdapter()
    arguments = {"city": "Lisbon", "date": "2026-05-01", "notes": "x" * 100, "extra": 1}

    started = adapter.events(ToolStarted(**IDS, call=CALL, arguments=arguments))
    failed = adapter.events(
        ToolFinished(**IDS, call=CALL, success=False, error=TimeoutError("slow"), duration_ms=9.0)
    )

    assert [ui.type for ui in started] == [
        AgentUIEventType.TOOL_STARTED,
        AgentUIEventType.TOOL_EXECUTION_STARTED,
    ]
    assert started[0].payload["args_summary"] == (
        "city: 'Lisbon', date: '2026-05-01', notes: 'xxxxxxxxxxxxxxxxxxxxxxxxxx..., ..."
    )
    assert started[1].payload["arguments"] == arguments
    assert [ui.type for ui in failed] == [
        AgentUIEventType.TOOL_COMPLETED,
        AgentUIEventType.TOOL_EXECUTION_FAILED,
    ]
    assert failed[0].payload["error"] == "TimeoutError: slow"
    assert failed[1].payload["error"] == {"type": "TimeoutError", "message": "slow"}


def test_a_call_that_never_ran_has_only_the_compact_summary() -> None:
    denied = UIEventAdapter().events(
        ToolFinished(**IDS, call=CALL, success=False, error="denied: no", executed=False)
    )

    assert [ui.type for ui in denied] == [AgentUIEventType.TOOL_COMPLETED]


def test_hostile_results_become_safe_payloads() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    result = {"cycle": cycle, "blob": b"\x00\x01", "nan": float("nan"), "huge": "z" * 10**6}

    (compact, lifecycle) = UIEventAdapter().events(
        ToolFinished(**IDS, call=CALL, success=True, result=result)
    )

    text = json.dumps(lifecycle.payload, allow_nan=False)
    assert len(text) < 70_000
    assert lifecycle.payload["result"]["cycle"] == ["<cycle: list>"]
    assert compact.payload["result_summary"].endswith("...")


def test_stream_chunks_can_be_left_out() -> None:
    assert UIEventAdapter(stream_chunks=False).events(StreamChunk(**IDS, chunk="a")) == []


def test_an_envelope_on_the_bus_is_keyed_by_the_session_with_its_tenant_and_user() -> None:
    bus = BusClient(BusSettings(), name="assistant")
    sink = BusEventSink(
        bus, UIEventAdapter(agent_name="assistant"), tenant_id="acme", user_id="alice"
    )
    ui = only(UIEventAdapter(agent_name="assistant"), StreamChunk(**IDS, chunk="Hi"))
    cause = Notification(source="disco://test", type="x.y", plan_id="plan-9")

    with handler_context(cause):
        envelope = sink.envelope(ui)

    assert isinstance(envelope, Envelope)
    assert envelope.type == "agent.stream.chunk"
    assert (envelope.session_id, envelope.tenant_id, envelope.user_id) == ("s-1", "acme", "alice")
    assert envelope.kafka_key() == b"s-1"  # the session's events share a partition, in order
    assert envelope.plan_id is None
    assert envelope.causation_id == cause.id
    assert envelope.data == json.loads(ui.model_dump_json())


async def test_the_loop_emits_a_status_steps_and_tools_in_order() -> None:
    agent, _ = runner([call("lookup_weather", city="Oslo"), "Snow."])
    events = CollectingSink()

    await agent.send(agent.new_state("s"), "Weather?", events=events)

    adapter = UIEventAdapter(include_continuation=True)
    kinds = [ui.type.value for event in events.events for ui in adapter.events(event)]
    assert kinds == [
        "agent.status",
        "agent.step.started",
        "agent.tool.started",
        "TOOL_EXECUTION_STARTED",
        "agent.tool.completed",
        "TOOL_EXECUTION_SUCCEEDED",
        "agent.step.completed",
        "agent.continuation",
        "agent.step.started",
        "agent.stream.chunk",
        "agent.stream.chunk",
        "agent.step.completed",
        "agent.continuation",
        "agent.status",
    ]


@pytest.mark.parametrize("broken", ["emit", "flush"])
async def test_a_failing_sink_never_breaks_the_loop(broken: str) -> None:
    class Broken(CollectingSink):
        async def emit(self, event: Any) -> None:
            if broken == "emit":
                raise RuntimeError("sink down")
            await super().emit(event)

        async def flush(self) -> None:
            if broken == "flush":
                raise RuntimeError("sink down")

    agent, _ = runner(["Hi."])

    state = await agent.send(agent.new_state("s"), "Hello", events=Broken())

    assert state.status is AgentStatus.COMPLETED
