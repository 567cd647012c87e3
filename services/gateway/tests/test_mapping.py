"""The bus → A2A mapping, one envelope at a time (no I/O)."""

from __future__ import annotations

from typing import Any

from a2a.types import a2a_pb2

from disco_common.a2a import A2AAnswer, A2AArtifact, A2APart
from disco_common.envelope import ActionResult, Notification, SystemEvent
from disco_common.tasks import ActionResultData, ErrorInfo
from disco_gateway.a2a.mapping import translate, turn_correlation_id
from disco_gateway.bus.fanout import Delivery
from disco_gateway.tasks.repository import TurnRow

TURN = TurnRow(
    task_id="task-1",
    turn=1,
    correlation_id="task-1",
    context_id="ctx-1",
    user_id="alice",
    agent="echo",
    skill="echo",
    event_type="echo.requested",
    message={"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
    question=None,
)


def answer(
    data: dict[str, Any], correlation_id: str = "task-1", type_: str = "a2a.answered"
) -> Delivery:
    envelope = ActionResult(
        source="x", type=type_, correlation_id=correlation_id, data=data, id="ans-1"
    )
    return Delivery("action-results", envelope)


def states(events: list[Any]) -> list[str]:
    return [
        a2a_pb2.TaskState.Name(e.status.state)
        if isinstance(e, a2a_pb2.TaskStatusUpdateEvent)
        else type(e).__name__
        for e in events
    ]


def test_a_result_completes_the_task_with_a_data_artifact_and_its_text() -> None:
    result = ActionResultData.ok({"text": "hello", "n": 1}).model_dump(mode="json")
    translation = translate(answer(result), TURN)

    assert states(translation.events) == ["TaskArtifactUpdateEvent", "TASK_STATE_COMPLETED"]
    artifact = translation.events[0].artifact
    assert artifact.artifact_id == "task-1-result"
    assert [p.WhichOneof("content") for p in artifact.parts] == ["data", "text"]
    assert artifact.parts[1].text == "hello"
    assert translation.ends_turn
    assert translation.starts_task


def test_an_error_fails_the_task_and_a_cancellation_cancels_it() -> None:
    failed = translate(
        answer(
            ActionResultData.failed(ErrorInfo(type="Boom", message="it broke")).model_dump(
                mode="json"
            )
        ),
        TURN,
    )
    cancelled = translate(
        answer(
            ActionResultData.failed(ErrorInfo(type="cancelled", message="stop")).model_dump(
                mode="json"
            )
        ),
        TURN,
    )

    assert states(failed.events) == ["TASK_STATE_FAILED"]
    assert failed.events[0].status.message.parts[0].text == "it broke"
    assert failed.events[0].status.message.message_id == "ans-1"
    assert states(cancelled.events) == ["TASK_STATE_CANCELED"]


def test_an_agents_own_answer_is_shown_as_it_is() -> None:
    message = ActionResultData.of_answer(A2AAnswer.message("Hi!")).model_dump(mode="json")
    asked = ActionResultData.of_answer(A2AAnswer.input_required("Which city?")).model_dump(
        mode="json"
    )
    artifact = A2AArtifact(artifact_id="a", parts=[A2APart.from_text("x")])
    done = ActionResultData.of_answer(A2AAnswer.completed(artifact)).model_dump(mode="json")

    direct = translate(answer(message), TURN)
    question = translate(answer(asked), TURN)
    completed = translate(answer(done), TURN)

    assert direct.direct_message
    assert isinstance(direct.events[0], a2a_pb2.Message)
    assert direct.events[0].task_id == ""
    assert states(question.events) == ["TASK_STATE_INPUT_REQUIRED"]
    assert question.ends_turn
    assert completed.events[0].artifact.artifact_id == "a"


def test_partial_answers_are_working_updates_and_artifact_chunks() -> None:
    update = translate(
        answer({"sequence": 1, "message": [{"text": "on it"}]}, type_="action.progressed"), TURN
    )
    chunk = translate(
        answer(
            {
                "sequence": 2,
                "artifact": {"artifactId": "s", "parts": [{"text": "b"}]},
                "append": True,
                "lastChunk": True,
            },
            type_="action.progressed",
        ),
        TURN,
    )

    assert states(update.events) == ["TASK_STATE_WORKING"]
    assert not update.ends_turn
    event = chunk.events[0]
    assert (event.append, event.last_chunk, event.artifact.artifact_id) == (True, True, "s")


def test_a_question_to_a_human_is_input_required_with_its_options() -> None:
    envelope = Notification(
        source="x",
        type="notification.human_input",
        task_id="task-1",
        correlation_id="q-1",
        id="question-1",
        data={
            "question": "Approve?",
            "response_event": "approved",
            "timeout_seconds": 60,
            "task_id": "task-1",
            "options": [{"value": "yes", "label": "Yes"}],
        },
    )
    translation = translate(Delivery("notification-events", envelope), TURN)

    assert states(translation.events) == ["TASK_STATE_INPUT_REQUIRED"]
    assert translation.question == {
        "request_id": "question-1",
        "correlation_id": "q-1",
        "response_event": "approved",
        "question": "Approve?",
    }
    assert translation.events[0].status.message.parts[0].text == "Approve?"


def test_worker_progress_is_working_and_what_is_not_the_tasks_is_nothing() -> None:
    started = SystemEvent(
        source="x",
        type="task.started",
        task_id="task-1",
        data={"task_id": "task-1", "event_type": "e"},
    )
    progress = SystemEvent(
        source="x",
        type="task.progress",
        task_id="task-1",
        data={"task_id": "task-1", "message": "half"},
    )
    other = SystemEvent(
        source="x",
        type="task.progress",
        task_id="task-2",
        data={"task_id": "task-2", "message": "x"},
    )

    assert states(translate(Delivery("system-events", started), TURN).events) == [
        "TASK_STATE_WORKING"
    ]
    assert (
        translate(Delivery("system-events", progress), TURN).events[0].status.message.parts[0].text
        == "half"
    )
    assert translate(Delivery("system-events", other), TURN).events == []
    assert translate(answer({"success": True}, correlation_id="else"), TURN).events == []


def test_later_turns_get_their_own_correlation_ids() -> None:
    assert turn_correlation_id("task-1", 1) == "task-1"
    assert turn_correlation_id("task-1", 2) == turn_correlation_id("task-1", 2)
    assert turn_correlation_id("task-1", 2) != turn_correlation_id("task-1", 3)
