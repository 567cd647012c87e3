"""The mapping between A2A and the bus, in DESIGN's terms (one module: the gateway's only one).

Requests (an A2A message → the bus), by :class:`~disco.a2a.A2AGatewayHelper`:

- a message to agent X becomes an ``action-requests`` envelope of the consumed
  event of the skill its metadata names (``"skill"``), or of X's only
  capability; its payload is the message's data part (a text part becomes
  ``{"text": ...}``, files ``files``), checked against the registered schema
  (A2A ``InvalidParams`` naming the field on failure);
- ``contextId`` ↔ the envelope's ``session_id``; the A2A task id ↔ its
  ``task_id``, and ↔ its ``correlation_id`` on the first turn (a later turn,
  after the agent asked for input, gets a correlation id derived from the task
  id and the turn); tenant and user come from the token; the response event
  is :data:`~disco_common.a2a.A2A_RESPONSE_EVENT` on ``action-results``;
- the caller's message to a task waiting on a question to a human is the
  human's answer: published on ``notification-events`` as the question's
  ``response_event`` with its correlation id.

Answers (the bus → A2A events), by :func:`translate`, for the live executor and
the applier alike:

- ``task.started`` (system-events) → ``working`` (nothing, for a caller that
  waits for the outcome alone);
- ``task.progress`` → ``working`` with the progress message;
- ``action.progressed`` (a partial answer) → a ``working`` status update with
  its message, or an artifact update (``append``, ``lastChunk``);
- ``notification.human_input`` for the task → ``input-required`` with the
  question (and its options as data); the caller's next message answers it;
- the answer (``action-results``) → what :meth:`~disco.a2a.A2AGatewayHelper.answer_of`
  says: the agent's :class:`~disco_common.a2a.A2AAnswer` (a direct message —
  which ends a task the caller sees already as ``completed`` with that message —
  artifacts, ``input-required``, ``rejected``, ``failed``), else ``completed``
  with an artifact (a data part, plus a text part when the result has ``text``),
  or ``failed`` with the error (``canceled`` when the error is ``cancelled``).

Ids are taken from the envelopes (a status message's id is the id of the
envelope it came from), so the live path and the applier produce the same
events and a message is never added twice to a task's history.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from a2a.server.events.event_queue import Event
from a2a.types import a2a_pb2
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.message import Message as ProtoMessage
from pydantic import BaseModel, ValidationError

from disco.a2a import A2AGatewayHelper
from disco_common.a2a import (
    A2A_RESPONSE_EVENT,
    ACTION_PROGRESSED,
    A2AAnswer,
    A2AArtifact,
    A2AMessage,
    A2APart,
    A2ATaskState,
    ActionProgressedData,
)
from disco_common.envelope import Envelope
from disco_common.notifications import HumanInputRequest, NotificationType
from disco_common.system_events import SystemEventType, TaskProgressData
from disco_common.tasks import ActionResultData, TaskStatus
from disco_common.topics import Topic
from disco_gateway.bus.fanout import Delivery
from disco_gateway.tasks.repository import TurnRow

__all__ = [
    "ROUTES",
    "Translation",
    "artifact_proto",
    "completed_with",
    "from_proto",
    "message_of",
    "message_task_id",
    "part_proto",
    "question_of",
    "to_proto",
    "translate",
    "turn_correlation_id",
]

ProtoT = TypeVar("ProtoT", bound=ProtoMessage)
ModelT = TypeVar("ModelT", bound=BaseModel)

_NAMESPACE = uuid.UUID("0b3b6f5e-7f7c-4d8a-9c1e-2d6a0f3c5e11")
_MESSAGE_NAMESPACE = uuid.UUID("5f0e7c1a-2b8d-4e6f-9a3c-7d1b0e4f2a68")

ROUTES: dict[str, frozenset[str]] = {
    Topic.ACTION_RESULTS.value: frozenset({A2A_RESPONSE_EVENT, ACTION_PROGRESSED}),
    Topic.SYSTEM_EVENTS.value: frozenset(
        {SystemEventType.TASK_STARTED.value, SystemEventType.TASK_PROGRESS.value}
    ),
    Topic.NOTIFICATION_EVENTS.value: frozenset({NotificationType.HUMAN_INPUT.value}),
}
"""What an A2A task follows on the bus, per topic (the fan-out reads these)."""


def to_proto(model: BaseModel, kind: type[ProtoT]) -> ProtoT:
    """A disco_common A2A model as the a2a-sdk's protobuf type."""
    document = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return ParseDict(document, kind(), ignore_unknown_fields=True)


def from_proto(message: ProtoMessage, kind: type[ModelT]) -> ModelT:
    """An a2a-sdk protobuf object as the disco_common A2A model."""
    return kind.model_validate(MessageToDict(message))


def message_of(message: a2a_pb2.Message | dict[str, Any]) -> A2AMessage:
    """The caller's message (or its A2A JSON, made already) as the disco_common model.

    Raises:
        ValueError: it is not a valid A2A message (no parts, a part with two kinds).
    """
    try:
        if isinstance(message, dict):
            return A2AMessage.model_validate(message)
        return from_proto(message, A2AMessage)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'message'}: {error['msg']}"
            for error in exc.errors(include_url=False)
        )
        raise ValueError(f"the message is not a valid A2A message: {problems}") from None


def message_task_id(tenant_id: str, user_id: str, agent: str, message_id: str) -> str:
    """The id of the task a caller's first message to ``agent`` starts: the same for the
    same ``messageId`` sent again, so that it finds the task the first one made."""
    return str(uuid.uuid5(_MESSAGE_NAMESPACE, "\x1f".join((tenant_id, user_id, agent, message_id))))


def turn_correlation_id(task_id: str, turn: int) -> str:
    """The correlation id of a task's request on ``turn`` (the task id on the first)."""
    if turn == 1:
        return task_id
    return str(uuid.uuid5(_NAMESPACE, f"{task_id}/turn/{turn}"))


def _now() -> Any:
    stamp = a2a_pb2.TaskStatus().timestamp
    stamp.FromDatetime(datetime.now(UTC))
    return stamp


def part_proto(part: A2APart) -> a2a_pb2.Part:
    """An A2A part as the a2a-sdk's type (built directly: the hot path of every answer)."""
    proto = a2a_pb2.Part()
    if part.text is not None:
        proto.text = part.text
    elif part.raw is not None:
        proto.raw = part.raw_bytes() or b""
    elif part.url is not None:
        proto.url = part.url
    else:
        _set_value(proto.data, part.data)
    if part.filename is not None:
        proto.filename = part.filename
    if part.media_type is not None:
        proto.media_type = part.media_type
    if part.metadata:
        proto.metadata.update(part.metadata)
    return proto


def _set_value(target: struct_pb2.Value, value: Any) -> None:
    if isinstance(value, dict):
        target.struct_value.update(value)
    elif isinstance(value, list):
        target.list_value.extend(value)
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int | float):
        target.number_value = value
    elif isinstance(value, str):
        target.string_value = value
    else:
        target.null_value = struct_pb2.NULL_VALUE


def artifact_proto(artifact: A2AArtifact) -> a2a_pb2.Artifact:
    """An A2A artifact as the a2a-sdk's type."""
    proto = a2a_pb2.Artifact(
        artifact_id=artifact.artifact_id,
        name=artifact.name or "",
        description=artifact.description or "",
        parts=[part_proto(part) for part in artifact.parts],
        extensions=artifact.extensions or [],
    )
    if artifact.metadata:
        proto.metadata.update(artifact.metadata)
    return proto


def _agent_message(
    parts: Sequence[A2APart], *, message_id: str, task_id: str, context_id: str
) -> a2a_pb2.Message:
    return a2a_pb2.Message(
        message_id=message_id,
        role=a2a_pb2.Role.ROLE_AGENT,
        parts=[part_proto(part) for part in parts],
        task_id=task_id,
        context_id=context_id,
    )


def _status(
    state: A2ATaskState,
    turn: TurnRow,
    *,
    parts: Sequence[A2APart] = (),
    message_id: str | None = None,
) -> a2a_pb2.TaskStatusUpdateEvent:
    status = a2a_pb2.TaskStatus(state=state.value)
    status.timestamp.CopyFrom(_now())
    if parts:
        status.message.CopyFrom(
            _agent_message(
                parts,
                message_id=message_id or str(uuid.uuid4()),
                task_id=turn.task_id,
                context_id=turn.context_id,
            )
        )
    return a2a_pb2.TaskStatusUpdateEvent(
        task_id=turn.task_id, context_id=turn.context_id, status=status
    )


def working(
    turn: TurnRow, parts: Sequence[A2APart] = (), *, message_id: str | None = None
) -> Event:
    """A ``working`` status update (with a message, when given)."""
    return _status(A2ATaskState.WORKING, turn, parts=parts, message_id=message_id)


@dataclass
class Translation:
    """What one envelope means for an A2A task.

    Attributes:
        events: the A2A events, in order.
        ends_turn: the agent is done for now (the task is over, waits for input,
            or the agent answered with a direct message).
        direct_message: the agent answered with a message, not a task.
        question: the question to a human the task now waits on (to remember).
        started: it is the agent's ``task.started`` (news only while the caller sees no
            task yet: it comes on its own topic, possibly after the agent's updates).
        starts_task: the envelope shows a task (not a direct message) is under way.
    """

    events: list[Event] = field(default_factory=list)
    ends_turn: bool = False
    direct_message: bool = False
    question: dict[str, Any] | None = None
    started: bool = False

    @property
    def starts_task(self) -> bool:
        return bool(self.events) and not self.direct_message


def completed_with(translation: Translation, turn: TurnRow) -> Translation:
    """A direct message to a caller who sees a task already (A2A allows no message after a
    task): the task completes, with the message as its status message."""
    (message,) = translation.events
    assert isinstance(message, a2a_pb2.Message)
    status = a2a_pb2.TaskStatus(state=a2a_pb2.TaskState.TASK_STATE_COMPLETED)
    status.timestamp.CopyFrom(_now())
    status.message.CopyFrom(message)
    status.message.task_id = turn.task_id
    event = a2a_pb2.TaskStatusUpdateEvent(
        task_id=turn.task_id, context_id=turn.context_id, status=status
    )
    return Translation(events=[event], ends_turn=True)


def question_of(envelope: Envelope) -> dict[str, Any] | None:
    """What the gateway remembers of a question to a human, to answer it later."""
    try:
        request = HumanInputRequest.model_validate(envelope.data)
    except ValidationError:
        return None
    return {
        "request_id": envelope.id,
        "correlation_id": envelope.correlation_id,
        "response_event": request.response_event,
        "question": request.question,
    }


def _answer_events(answer: A2AAnswer, turn: TurnRow, envelope: Envelope) -> Translation:
    if answer.kind == "message":
        message = _agent_message(
            answer.parts,
            message_id=envelope.id,
            task_id=turn.task_id,
            context_id=turn.context_id,
        )
        message.ClearField("task_id")  # a direct message belongs to no task
        return Translation(events=[message], ends_turn=True, direct_message=True)
    events: list[Event] = [
        a2a_pb2.TaskArtifactUpdateEvent(
            task_id=turn.task_id,
            context_id=turn.context_id,
            artifact=artifact_proto(artifact),
            append=False,
            last_chunk=True,
        )
        for artifact in answer.artifacts
    ]
    events.append(_status(answer.state, turn, parts=answer.parts, message_id=envelope.id))
    return Translation(events=events, ends_turn=True)


def translate(delivery: Delivery, turn: TurnRow, *, quiet_start: bool = False) -> Translation:
    """What ``delivery`` means for the task of ``turn`` (nothing when it is not about it).

    ``quiet_start``: the caller waits for the outcome alone (a blocking call), so that
    ``task.started`` means nothing to it: the task shows only with what the agent does
    (and an agent that answers with a direct message gives the caller no task at all).
    """
    envelope = delivery.envelope
    if delivery.topic == Topic.ACTION_RESULTS.value:
        if envelope.correlation_id != turn.correlation_id:
            return Translation()
        if envelope.type == ACTION_PROGRESSED:
            return _progressed(envelope, turn)
        if envelope.type != A2A_RESPONSE_EVENT:
            return Translation()
        try:
            result = ActionResultData.model_validate(envelope.data)
        except ValidationError as exc:
            result = ActionResultData.failed(
                ValueError(f"the agent's answer is not a disco result: {exc.error_count()} errors")
            )
        answer = A2AGatewayHelper.answer_of(result, artifact_id=f"{turn.correlation_id}-result")
        return _answer_events(answer, turn, envelope)
    if envelope.task_id != turn.task_id:
        return Translation()
    if delivery.topic == Topic.NOTIFICATION_EVENTS.value:
        if envelope.type != NotificationType.HUMAN_INPUT.value:
            return Translation()
        question = question_of(envelope)
        if question is None:
            return Translation()
        parts = A2AGatewayHelper.question_parts(HumanInputRequest.model_validate(envelope.data))
        status = _status(A2ATaskState.INPUT_REQUIRED, turn, parts=parts, message_id=envelope.id)
        return Translation(events=[status], ends_turn=True, question=question)
    if envelope.type == SystemEventType.TASK_STARTED.value:
        return Translation() if quiet_start else Translation([working(turn)], started=True)
    if envelope.type == SystemEventType.TASK_PROGRESS.value:
        try:
            progress = TaskProgressData.model_validate(envelope.data)
        except ValidationError:
            return Translation()
        if progress.status is TaskStatus.AWAITING_INPUT or not progress.message:
            return Translation()  # the question itself says it (notification.human_input)
        return Translation(
            events=[working(turn, [A2APart.from_text(progress.message)], message_id=envelope.id)]
        )
    return Translation()


def _progressed(envelope: Envelope, turn: TurnRow) -> Translation:
    try:
        data = ActionProgressedData.model_validate(envelope.data)
    except ValidationError:
        return Translation()
    if data.message is not None:
        return Translation(events=[working(turn, data.message, message_id=envelope.id)])
    assert data.artifact is not None
    return Translation(
        events=[
            a2a_pb2.TaskArtifactUpdateEvent(
                task_id=turn.task_id,
                context_id=turn.context_id,
                artifact=artifact_proto(data.artifact),
                append=data.append,
                last_chunk=data.last_chunk,
            )
        ]
    )
