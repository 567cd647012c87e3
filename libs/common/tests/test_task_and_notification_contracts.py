"""Task results, task contexts, HITL requests, UI events and system-event payloads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from disco_common.envelope import Notification
from disco_common.notifications import (
    UI_EVENT_PAYLOADS,
    AgentUIEvent,
    AgentUIEventType,
    HumanInputRequest,
    ToolApprovalRequestedPayload,
    ToolDeniedPayload,
)
from disco_common.system_events import (
    SYSTEM_EVENT_DATA,
    SystemEventType,
    TaskProgressData,
    TaskTimeoutData,
    parse_system_event_data,
)
from disco_common.tasks import (
    ActionResultData,
    ErrorInfo,
    HumanInputWait,
    SubTaskInfo,
    TaskContextData,
)

# -- action results ---------------------------------------------------------------


def test_a_successful_result_carries_the_answer_and_no_error() -> None:
    result = ActionResultData.ok({"result": 4})

    assert result.model_dump(exclude_none=True) == {"success": True, "result": {"result": 4}}


def test_a_failed_result_from_an_exception_names_its_type_and_message() -> None:
    result = ActionResultData.failed(ZeroDivisionError("division by zero"), task_id="t-1")

    assert result.success is False
    assert result.error == ErrorInfo(type="ZeroDivisionError", message="division by zero")
    assert result.task_id == "t-1"


def test_a_failed_result_must_say_why() -> None:
    with pytest.raises(ValidationError, match="must say why"):
        ActionResultData(success=False)


def test_a_successful_result_with_an_error_is_rejected() -> None:
    with pytest.raises(ValidationError, match="no error"):
        ActionResultData(success=True, error=ErrorInfo(type="X"))


def test_a_huge_exception_message_is_bounded_not_rejected() -> None:
    info = ErrorInfo.from_exception(RuntimeError("x" * 100_000))

    assert len(info.message) == 4000
    assert info.message.endswith("...")


def test_a_result_from_another_language_with_extra_fields_is_still_read() -> None:
    result = ActionResultData.model_validate_json(
        '{"success": true, "result": 1, "request_id": "r-1", "producer": "go"}'
    )

    assert result.result == 1


# -- task context -----------------------------------------------------------------


def _sub_task(sub_task_id: str, group: str | None = None) -> SubTaskInfo:
    return SubTaskInfo(
        sub_task_id=sub_task_id,
        event_type="entity.extract",
        response_event="entity.completed",
        parallel_group_id=group,
    )


def test_a_task_context_lists_its_sub_task_ids_for_lookup() -> None:
    context = TaskContextData(
        task_id="t-1",
        event_type="analyze.requested",
        response_event="analyze.completed",
        sub_tasks={"s-1": _sub_task("s-1", "g"), "s-2": _sub_task("s-2", "g")},
    )

    assert context.sub_task_ids == ["s-1", "s-2"]
    assert context.response_topic == "action-results"


def test_a_task_context_rejects_a_sub_task_filed_under_another_id() -> None:
    with pytest.raises(ValidationError, match="keys must be the sub_task_id"):
        TaskContextData(
            task_id="t-1",
            event_type="analyze.requested",
            response_event="analyze.completed",
            sub_tasks={"s-1": _sub_task("s-2")},
        )


def test_a_task_context_needs_the_response_event_of_its_request() -> None:
    with pytest.raises(ValidationError, match="response_event"):
        TaskContextData.model_validate({"task_id": "t-1", "event_type": "analyze.requested"})


def test_a_human_input_wait_knows_its_deadline() -> None:
    asked = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    wait = HumanInputWait(
        request_id="q-1",
        correlation_id="t-1",
        response_event="answer.given",
        timeout_seconds=90,
        asked_at=asked,
    )

    assert wait.deadline == asked + timedelta(seconds=90)


# -- HITL -------------------------------------------------------------------------


def test_a_task_question_without_timeout_is_rejected() -> None:
    with pytest.raises(ValidationError, match="needs timeout_seconds"):
        HumanInputRequest(question="Approve?", response_event="approval.given", task_id="t-1")


@pytest.mark.parametrize("timeout", [0, -5])
def test_a_non_positive_timeout_is_rejected(timeout: int) -> None:
    with pytest.raises(ValidationError, match="timeout_seconds"):
        HumanInputRequest(
            question="Approve?",
            response_event="approval.given",
            task_id="t-1",
            timeout_seconds=timeout,
        )


def test_a_plan_level_question_may_wait_without_timeout() -> None:
    request = HumanInputRequest(
        question="Approve the budget?", response_event="budget.approved", plan_id="p-1"
    )

    assert request.timeout_seconds is None


def test_a_question_misspelling_timeout_is_rejected_not_ignored() -> None:
    with pytest.raises(ValidationError, match="extra"):
        HumanInputRequest.model_validate(
            {
                "question": "Approve?",
                "response_event": "approval.given",
                "timeout_seconds": 60,
                "timeout": 60,
            }
        )


def test_a_question_with_an_invalid_answer_schema_is_rejected() -> None:
    with pytest.raises(ValidationError, match="JSON Schema"):
        HumanInputRequest(
            question="Pick one",
            response_event="choice.made",
            timeout_seconds=60,
            answer_schema={"enum": "a"},
        )


# -- agent UI events --------------------------------------------------------------


def test_every_ui_event_type_has_a_payload_model() -> None:
    assert set(UI_EVENT_PAYLOADS) == set(AgentUIEventType)


def test_tool_lifecycle_types_are_on_the_wire_exactly_as_seed_003_names_them() -> None:
    design_names = {
        "TOOL_APPROVAL_REQUESTED": "TOOL_APPROVAL_REQUESTED",
        "TOOL_APPROVED": "TOOL_APPROVED",
        "TOOL_DENIED": "TOOL_DENIED",
        "TOOL_EXECUTION_STARTED": "TOOL_EXECUTION_STARTED",
        "TOOL_EXECUTION_SUCCEEDED": "TOOL_EXECUTION_SUCCEEDED",
        "TOOL_EXECUTION_FAILED": "TOOL_EXECUTION_FAILED",
        "TOOL_LOG": "TOOL_LOG",
    }

    assert {name: AgentUIEventType[name].value for name in design_names} == design_names


def test_the_agent_family_keeps_its_dotted_names() -> None:
    dotted = {kind: kind.value for kind in AgentUIEventType if kind.value.startswith("agent.")}

    assert dotted == {
        AgentUIEventType.AGENT_STATUS: "agent.status",
        AgentUIEventType.STEP_STARTED: "agent.step.started",
        AgentUIEventType.STEP_COMPLETED: "agent.step.completed",
        AgentUIEventType.TOOL_STARTED: "agent.tool.started",
        AgentUIEventType.TOOL_COMPLETED: "agent.tool.completed",
        AgentUIEventType.STREAM_CHUNK: "agent.stream.chunk",
        AgentUIEventType.CONTINUATION: "agent.continuation",
    }


def test_every_ui_event_type_is_a_valid_envelope_type() -> None:
    for kind in AgentUIEventType:
        envelope = Notification(source="disco://agent/a", type=kind.value, session_id="s-1")
        assert envelope.type == kind.value


def test_a_ui_event_wraps_a_typed_payload_and_reads_it_back() -> None:
    payload = ToolApprovalRequestedPayload(
        tool_call_id="call-1", tool_name="delete_file", arguments={"path": "/tmp/x"}
    )

    event = AgentUIEvent.of(payload, session_id="s-1", execution_id="e-1", agent_name="Ops")
    restored = AgentUIEvent.model_validate_json(event.model_dump_json())

    assert restored.type is AgentUIEventType.TOOL_APPROVAL_REQUESTED
    assert restored.typed_payload() == payload


def test_a_ui_event_envelope_has_the_stable_shape() -> None:
    event = AgentUIEvent.of(
        ToolDeniedPayload(tool_call_id="call-1"), session_id="s-1", execution_id="e-1"
    )

    assert set(event.model_dump()) == {
        "type",
        "session_id",
        "execution_id",
        "agent_id",
        "agent_name",
        "timestamp",
        "payload",
    }


def test_an_unknown_ui_event_type_is_rejected() -> None:
    with pytest.raises(ValidationError, match="type"):
        AgentUIEvent.model_validate(
            {"type": "tool.auto_executing", "session_id": "s", "execution_id": "e"}
        )


# -- system events ----------------------------------------------------------------


def test_every_system_event_type_has_a_payload_model() -> None:
    assert set(SYSTEM_EVENT_DATA) == set(SystemEventType)


def test_system_event_types_are_domain_dot_past_tense() -> None:
    assert all(
        event.value.split(".")[0] in {"task", "plan", "agent", "erasure"}
        for event in SystemEventType
    )


def test_a_system_event_payload_is_read_by_its_type() -> None:
    data = parse_system_event_data(
        "task.progress", {"task_id": "t-1", "progress": 0.25, "message": "a quarter"}
    )

    assert data == TaskProgressData(task_id="t-1", progress=0.25, message="a quarter")


def test_progress_beyond_one_is_rejected() -> None:
    with pytest.raises(ValidationError, match="progress"):
        TaskProgressData(task_id="t-1", progress=1.5)


def test_an_unknown_system_event_type_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown system event type 'task\.exploded'; known: "):
        parse_system_event_data("task.exploded", {})


def test_a_task_timeout_defaults_to_the_hitl_reason() -> None:
    data = TaskTimeoutData(
        task_id="t-1", timeout_seconds=60, deadline=datetime(2026, 1, 1, tzinfo=UTC)
    )

    assert data.reason == "hitl_timeout"
