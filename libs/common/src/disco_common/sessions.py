"""Live UI streams of a session: what the gateway sends a browser and what a browser sends back.

A UI watches one session at ``ws(s)://<gateway>/v1/sessions/{session_id}/stream``
(or reads ``GET /v1/sessions/{session_id}/events?after=``). Every server
message is a :class:`SessionEvent`, the agent UI envelope of
:mod:`disco_common.notifications` with the event's ``id`` added:
``{id, type, session_id, execution_id, agent_id, agent_name, timestamp, payload}``.

Server message types:

- the agent UI types (``agent.status``, ``agent.step.started``, …) and the tool
  lifecycle family (``TOOL_APPROVAL_REQUESTED`` … ``TOOL_LOG``), as the agents
  published them (:class:`~disco_common.notifications.AgentUIEventType`);
- ``HUMAN_INPUT_REQUESTED`` (a question to a human, :class:`HumanInputRequestedPayload`;
  answer it with ``ANSWER`` and its ``question_id``) and ``HUMAN_INPUT_ANSWERED``
  (its outcome: answered, or ``timed_out``; :class:`HumanInputAnsweredPayload`);
- ``ERROR``: an event the gateway cannot show (an unknown type: ``payload.code`` =
  ``unknown_event_type``, ``payload.event_type``), or a client message refused
  (``payload.code``, ``payload.field``, ``payload.request_id``);
- ``ACK``: a client message was accepted (``payload.request_id``, ``payload.event_id``
  of what it published); ``PONG`` answers ``PING``;
- ``STREAM_GAP``: the socket fell behind and events were dropped for it;
  reconcile with ``GET …/events?after=<payload.after>``.

Event ids (``id``) are the bus envelopes' ids; control messages (``ACK``,
``PONG``, a refused client message's ``ERROR``, ``STREAM_GAP``) have ``id`` null.

Client messages (websocket) are flat JSON objects: :class:`ApproveTool`,
:class:`DenyTool`, :class:`Answer`, :class:`SendMessage`, :class:`Ping`, each
with an optional ``request_id`` echoed in the ``ACK``/``ERROR`` reply.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, model_validator

from disco_common.ids import EventType, Id, UtcDatetime, utcnow

__all__ = [
    "CLIENT_MESSAGE",
    "SESSION_RESPONSE_EVENT",
    "Accepted",
    "Answer",
    "AnswerRequest",
    "ApprovalDecision",
    "ApprovalRequest",
    "ApproveTool",
    "ClientMessage",
    "DenyTool",
    "HumanInputAnsweredPayload",
    "HumanInputRequestedPayload",
    "MessageRequest",
    "Ping",
    "SendMessage",
    "SessionEvent",
    "SessionEventPage",
    "SessionEventType",
    "StreamErrorCode",
]

SESSION_RESPONSE_EVENT = "session.message.answered"
"""The ``response_event`` of the requests a UI's ``SEND_MESSAGE`` starts (the agent's answer
also reaches the UI as its UI events)."""


class SessionEventType(StrEnum):
    """Server message types of a session stream besides the agent UI types."""

    HUMAN_INPUT_REQUESTED = "HUMAN_INPUT_REQUESTED"
    HUMAN_INPUT_ANSWERED = "HUMAN_INPUT_ANSWERED"
    ERROR = "ERROR"
    ACK = "ACK"
    PONG = "PONG"
    STREAM_GAP = "STREAM_GAP"


class StreamErrorCode(StrEnum):
    """``payload.code`` of an ``ERROR`` message (HTTP errors use the same codes)."""

    UNKNOWN_EVENT_TYPE = "unknown_event_type"
    INVALID_MESSAGE = "invalid_message"
    NOT_FOUND = "not_found"
    FORBIDDEN = "forbidden"
    ALREADY_DECIDED = "already_decided"
    ALREADY_ANSWERED = "already_answered"
    TIMED_OUT = "timed_out"
    INVALID_ANSWER = "invalid_answer"
    AGENT_NOT_FOUND = "agent_not_found"
    UNAVAILABLE = "unavailable"


class SessionEvent(BaseModel):
    """One server message: the agent UI envelope with the event's id."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = Field(
        default=None,
        description="The event's id (resume with `after=<id>`); null on control messages.",
    )
    type: str = Field(description="An agent UI type, a tool lifecycle type or a stream type.")
    session_id: Id
    execution_id: str | None = None
    agent_id: str | None = None
    agent_name: str | None = None
    timestamp: UtcDatetime = Field(default_factory=utcnow)
    payload: dict[str, JsonValue] = Field(default_factory=dict)


class HumanInputRequestedPayload(BaseModel):
    """``HUMAN_INPUT_REQUESTED``: an agent asks a person (answer with ``question_id``)."""

    question_id: Id = Field(description="The question's id: answer with it.")
    question: str
    correlation_id: str | None = None
    response_event: str | None = Field(
        default=None, description="The type the answer is published as (the gateway does it)."
    )
    options: list[dict[str, JsonValue]] | None = None
    answer_schema: dict[str, JsonValue] | None = None
    timeout_seconds: int | None = None
    deadline: UtcDatetime | None = Field(
        default=None, description="When the question times out (null: it waits)."
    )
    kind: str | None = Field(
        default=None,
        description="`tool_approval` for the question behind a TOOL_APPROVAL_REQUESTED: "
        "decide it with APPROVE_TOOL/DENY_TOOL, not ANSWER.",
    )
    task_id: str | None = None
    plan_id: str | None = None
    context: dict[str, JsonValue] = Field(default_factory=dict)


class HumanInputAnsweredPayload(BaseModel):
    """``HUMAN_INPUT_ANSWERED``: a question got its answer, or timed out."""

    question_id: str | None = None
    correlation_id: str | None = None
    answer: JsonValue = None
    timed_out: bool = False
    answered_by: str | None = None


# -- client messages (websocket) ------------------------------------------------------


class _ClientMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request_id: str | None = Field(
        default=None, max_length=200, description="Echoed in the ACK/ERROR reply."
    )


class ApproveTool(_ClientMessage):
    """``{"type": "APPROVE_TOOL", "tool_call_id": "call_1", "reason": "ok"}``."""

    type: Literal["APPROVE_TOOL"]
    tool_call_id: str = Field(min_length=1, max_length=200)
    reason: str | None = Field(default=None, max_length=2000)


class DenyTool(_ClientMessage):
    """``{"type": "DENY_TOOL", "tool_call_id": "call_1", "reason": "no"}``."""

    type: Literal["DENY_TOOL"]
    tool_call_id: str = Field(min_length=1, max_length=200)
    reason: str | None = Field(default=None, max_length=2000)


class Answer(_ClientMessage):
    """``{"type": "ANSWER", "question_id": "…", "answer": …}``."""

    type: Literal["ANSWER"]
    question_id: Id
    answer: JsonValue


class SendMessage(_ClientMessage):
    """``{"type": "SEND_MESSAGE", "agent": "assistant", "text": "hi"}`` (or ``data``): a new
    turn, an ``action-requests`` envelope to ``agent`` in this session."""

    type: Literal["SEND_MESSAGE"]
    agent: str = Field(min_length=1, max_length=200)
    text: str | None = Field(default=None, min_length=1, max_length=200_000)
    data: dict[str, JsonValue] | None = None
    skill: str | None = Field(
        default=None,
        max_length=200,
        description="Which of the agent's capabilities (task name); needed when it has several.",
    )

    @model_validator(mode="after")
    def _one_body(self) -> Self:
        if (self.text is None) == (self.data is None):
            raise ValueError("give exactly one of text and data")
        return self


class Ping(_ClientMessage):
    """``{"type": "PING"}``: answered with ``PONG``."""

    type: Literal["PING"]


ClientMessage = Annotated[
    ApproveTool | DenyTool | Answer | SendMessage | Ping, Field(discriminator="type")
]
CLIENT_MESSAGE: TypeAdapter[ApproveTool | DenyTool | Answer | SendMessage | Ping] = TypeAdapter(
    ClientMessage
)
"""Validates one client message (raises ``pydantic.ValidationError``)."""


# -- HTTP bodies ----------------------------------------------------------------------


class ApprovalDecision(StrEnum):
    APPROVE = "approve"
    DENY = "deny"


class ApprovalRequest(BaseModel):
    """``POST /v1/sessions/{id}/approvals/{tool_call_id}``."""

    model_config = ConfigDict(extra="forbid")

    decision: ApprovalDecision
    reason: str | None = Field(default=None, max_length=2000)


class AnswerRequest(BaseModel):
    """``POST /v1/sessions/{id}/answers/{question_id}``."""

    model_config = ConfigDict(extra="forbid")

    answer: JsonValue


class MessageRequest(BaseModel):
    """``POST /v1/sessions/{id}/messages``: a new turn for ``agent``."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field(min_length=1, max_length=200)
    text: str | None = Field(default=None, min_length=1, max_length=200_000)
    data: dict[str, JsonValue] | None = None
    skill: str | None = Field(default=None, max_length=200)

    @model_validator(mode="after")
    def _one_body(self) -> Self:
        if (self.text is None) == (self.data is None):
            raise ValueError("give exactly one of text and data")
        return self


class Accepted(BaseModel):
    """What a decision, an answer or a message published."""

    event_id: Id = Field(description="The published envelope's id.")
    type: EventType = Field(description="Its type (`TOOL_APPROVED`, the answer's type, …).")
    correlation_id: str | None = None


class SessionEventPage(BaseModel):
    """``GET /v1/sessions/{id}/events``: events after ``after``, oldest first."""

    items: list[SessionEvent]
    gap: bool = Field(
        default=False,
        description="`after` is no longer kept (retention): events may have been missed "
        "before the first item.",
    )
    last_id: str | None = Field(
        default=None, description="The id to pass as `after` next (the last item's)."
    )
