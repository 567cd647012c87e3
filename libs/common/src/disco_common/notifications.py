"""Human-facing traffic on ``notification-events``: HITL questions and answers, agent UI events.

**Human input (HITL).** An agent asks with an envelope of type
``notification.human_input`` whose data is :class:`HumanInputRequest`. The
answer is published on ``notification-events`` with type = the request's
``response_event``, ``correlation_id`` = the request's ``correlation_id`` (a
Worker uses its task id), and data = :class:`HumanInputResponse`. A Worker's
question is time-bound (``timeout_seconds`` required); the tracker emits
``task.timeout`` when it passes. A plan-level question (no ``task_id``) may wait
indefinitely.

**Agent UI events.** The agent runtime turns its events into one stable
envelope, :class:`AgentUIEvent` ``{type, session_id, execution_id, agent_id,
agent_name, timestamp, payload}``, published on ``notification-events`` with
the envelope type equal to the UI type. Types and payloads:

==============================  ==================================
UI type (envelope ``type``)     payload model
==============================  ==================================
``agent.status``                ``AgentStatusPayload``
``agent.step.started``          ``StepStartedPayload``
``agent.step.completed``        ``StepCompletedPayload``
``agent.tool.started``          ``ToolStartedPayload``
``agent.tool.completed``        ``ToolCompletedPayload``
``agent.stream.chunk``          ``StreamChunkPayload``
``agent.continuation`` (opt-in) ``ContinuationPayload``
``TOOL_APPROVAL_REQUESTED``     ``ToolApprovalRequestedPayload``
``TOOL_APPROVED``               ``ToolApprovedPayload``
``TOOL_DENIED``                 ``ToolDeniedPayload``
``TOOL_EXECUTION_STARTED``      ``ToolExecutionStartedPayload``
``TOOL_EXECUTION_SUCCEEDED``    ``ToolExecutionSucceededPayload``
``TOOL_EXECUTION_FAILED``       ``ToolExecutionFailedPayload``
``TOOL_LOG`` (diagnostics)      ``ToolLogPayload``
==============================  ==================================

The tool lifecycle family keeps seed 003's wire names exactly (upper case, as
UIs of that design already speak them); the ``agent.*`` family is dotted like
every other disco event type. The ``agent.tool.*`` pair is the compact summary
a simple UI shows; the ``TOOL_*`` family is the full lifecycle, including
approval; the runtime emits both for every tool call.

**On the bus.** Each UI event is one envelope on ``notification-events`` whose
CloudEvents ``type`` is the UI type above, ``session_id`` is the session (the
record is keyed by it: ``correlation_id`` = the session), with the session's
tenant and user, and whose ``data`` is the :class:`AgentUIEvent` JSON. The tool
call's id is ``payload.tool_call_id``.

**Approval decisions.** A UI (through the gateway) answers
``TOOL_APPROVAL_REQUESTED`` by publishing ``TOOL_APPROVED`` or ``TOOL_DENIED``
on ``notification-events``: data = :class:`AgentUIEvent` whose payload is
:class:`ToolApprovedPayload` / :class:`ToolDeniedPayload` (``tool_call_id``
required), same tenant, envelope ``session_id`` = the session. The waiting agent
matches it on tenant + session + ``tool_call_id``; the first decision wins. When
nobody decides within the request's ``timeout_seconds`` the agent itself
publishes ``TOOL_DENIED`` with reason ``timeout``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from disco_common._base import Body, Metadata
from disco_common._jsonschema import JsonSchemaDocument
from disco_common.ids import EventType, Id, UtcDatetime, utcnow
from disco_common.tasks import HITL_TIMEOUT_MAX_SECONDS, ErrorInfo

__all__ = [
    "UI_EVENT_PAYLOADS",
    "AgentStatusPayload",
    "AgentUIEvent",
    "AgentUIEventType",
    "ContinuationEvaluation",
    "ContinuationPayload",
    "HumanInputOption",
    "HumanInputRequest",
    "HumanInputResponse",
    "NotificationType",
    "StepCompletedPayload",
    "StepStartedPayload",
    "StreamChunkPayload",
    "TokenUsage",
    "ToolApprovalRequestedPayload",
    "ToolApprovedPayload",
    "ToolCompletedPayload",
    "ToolDeniedPayload",
    "ToolExecutionFailedPayload",
    "ToolExecutionStartedPayload",
    "ToolExecutionSucceededPayload",
    "ToolLogPayload",
    "ToolStartedPayload",
    "UIPayload",
]


class NotificationType(StrEnum):
    """Fixed event types on ``notification-events`` (besides :class:`AgentUIEventType`).

    A HITL *answer* has no fixed type: it uses the request's ``response_event``.
    """

    HUMAN_INPUT = "notification.human_input"
    """A question for a human (data: :class:`HumanInputRequest`)."""


class _Payload(BaseModel):
    # Read by UIs and agents of other versions: unknown fields are ignored.
    model_config = ConfigDict(extra="ignore", from_attributes=True)


# -- human input ------------------------------------------------------------------


class HumanInputOption(Body):
    """One answer a human may pick."""

    value: JsonValue = Field(description="What the answer carries when this option is picked.")
    label: str = Field(min_length=1, max_length=500, description="What the human sees.")


class HumanInputRequest(Body):
    """A question for a human (data of ``notification.human_input``).

    A Worker's question (``task_id`` set) must give ``timeout_seconds``: a task
    never waits for a person forever. A plan-level question may omit it.
    """

    question: str = Field(min_length=1, max_length=4000, description="What to ask.")
    response_event: EventType = Field(description="The event type the answer must be published as.")
    timeout_seconds: int | None = Field(
        default=None,
        gt=0,
        le=HITL_TIMEOUT_MAX_SECONDS,
        description="How long the asker waits (required for a task's question).",
    )
    options: list[HumanInputOption] | None = Field(
        default=None, max_length=50, description="The choices offered, if the answer is a choice."
    )
    answer_schema: JsonSchemaDocument | None = Field(
        default=None, description="JSON Schema the answer must follow, if structured."
    )
    task_id: Id | None = Field(default=None, description="The task waiting for the answer.")
    plan_id: Id | None = Field(default=None, description="The plan waiting for the answer.")
    context: Metadata = Field(
        default_factory=dict, description="What the human needs to answer (links, excerpts...)."
    )

    @model_validator(mode="after")
    def _task_questions_time_out(self) -> Self:
        if self.task_id is not None and self.timeout_seconds is None:
            raise ValueError(
                "a task's question to a human needs timeout_seconds (> 0): worker HITL is "
                "time-bound; use a plan-level pause to wait indefinitely"
            )
        return self


class HumanInputResponse(Body):
    """A human's answer (data of the envelope typed as the request's ``response_event``)."""

    answer: JsonValue = Field(
        default=None, description="The answer (an option's value, text, or structured)."
    )
    timed_out: bool = Field(
        default=False,
        description=(
            "True when nobody answered within timeout_seconds: the tracker then publishes this "
            "response itself (answer null), so the asker always gets exactly one of the two."
        ),
    )
    request_id: Id | None = Field(default=None, description="The question's envelope id.")
    task_id: Id | None = Field(default=None, description="The task that asked.")
    plan_id: Id | None = Field(default=None, description="The plan that asked.")
    answered_by: Id | None = Field(default=None, description="The user who answered.")
    answered_at: UtcDatetime = Field(default_factory=utcnow)


# -- agent UI events --------------------------------------------------------------


class AgentUIEventType(StrEnum):
    """The agent UI envelope's types (see the module docs for the mapping to DESIGN's names)."""

    AGENT_STATUS = "agent.status"
    STEP_STARTED = "agent.step.started"
    STEP_COMPLETED = "agent.step.completed"
    TOOL_STARTED = "agent.tool.started"
    TOOL_COMPLETED = "agent.tool.completed"
    STREAM_CHUNK = "agent.stream.chunk"
    CONTINUATION = "agent.continuation"
    """Opt-in: continuation decisions with per-criterion evaluations (for debugging)."""
    TOOL_APPROVAL_REQUESTED = "TOOL_APPROVAL_REQUESTED"
    TOOL_APPROVED = "TOOL_APPROVED"
    TOOL_DENIED = "TOOL_DENIED"
    TOOL_EXECUTION_STARTED = "TOOL_EXECUTION_STARTED"
    TOOL_EXECUTION_SUCCEEDED = "TOOL_EXECUTION_SUCCEEDED"
    TOOL_EXECUTION_FAILED = "TOOL_EXECUTION_FAILED"
    TOOL_LOG = "TOOL_LOG"
    """Diagnostics only."""


class TokenUsage(_Payload):
    """Token counts of one step or one execution."""

    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    total_tokens: int = Field(default=0, ge=0)


class ContinuationEvaluation(_Payload):
    """One continuation criterion's verdict."""

    criterion: str = Field(max_length=200, description="e.g. `steps_limit`.")
    decision: str = Field(max_length=50, description="e.g. `allow`, `forbid`, `request`.")
    reason: str = Field(default="", max_length=2000)


class AgentStatusPayload(_Payload):
    """``agent.status``: the agent's overall status changed."""

    status: str = Field(max_length=50, description="e.g. `in_progress`, `completed`, `failed`.")
    step_count: int = Field(default=0, ge=0)
    error_message: str | None = None
    last_response: str | None = None


class StepStartedPayload(_Payload):
    """``agent.step.started``."""

    step_number: int = Field(ge=1)
    message_count: int = Field(default=0, ge=0)
    available_tools: list[str] = Field(default_factory=list)


class ContinuationPayload(_Payload):
    """``agent.continuation`` (and the optional continuation of a completed step)."""

    step_number: int | None = Field(default=None, ge=1)
    should_continue: bool
    stop_reason: str | None = Field(default=None, max_length=200)
    resolved_by: str | None = Field(default=None, max_length=200)
    evaluations: list[ContinuationEvaluation] = Field(default_factory=list)


class StepCompletedPayload(_Payload):
    """``agent.step.completed``."""

    step_number: int = Field(ge=1)
    has_tool_calls: bool = False
    errors: int = Field(default=0, ge=0)
    finish_reason: str | None = Field(default=None, max_length=50)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    duration_ms: float = Field(default=0.0, ge=0.0)
    continuation: ContinuationPayload | None = None


class ToolStartedPayload(_Payload):
    """``agent.tool.started``: compact summary of a tool call beginning."""

    tool_name: str = Field(max_length=200)
    tool_call_id: str | None = Field(default=None, max_length=200)
    args_summary: str = Field(default="", max_length=2000)


class ToolCompletedPayload(_Payload):
    """``agent.tool.completed``: compact summary of a tool call's end."""

    tool_name: str = Field(max_length=200)
    tool_call_id: str | None = Field(default=None, max_length=200)
    success: bool = True
    error: str | None = None
    duration_ms: float = Field(default=0.0, ge=0.0)
    result_summary: str | None = Field(default=None, max_length=2000)


class StreamChunkPayload(_Payload):
    """``agent.stream.chunk``: streamed content."""

    chunk: str = ""
    is_complete: bool = False
    tokens_delta: int = Field(default=0, ge=0)


class _ToolCall(_Payload):
    tool_call_id: str = Field(
        min_length=1, max_length=200, description="Ties the lifecycle together."
    )
    tool_name: str | None = Field(default=None, max_length=200)


class ToolApprovalRequestedPayload(_ToolCall):
    """``TOOL_APPROVAL_REQUESTED``: a tool call waits for a person to approve it."""

    arguments: JsonValue = Field(
        default=None, description="The call's arguments (JSON-safe, redacted by the tool's policy)."
    )
    reason: str | None = Field(default=None, max_length=2000, description="Why approval is needed.")
    timeout_seconds: int | None = Field(
        default=None, gt=0, description="How long the agent waits before denying by itself."
    )
    deadline: UtcDatetime | None = Field(
        default=None, description="When the call is denied with reason `timeout` if undecided."
    )


class ToolApprovedPayload(_ToolCall):
    """``TOOL_APPROVED``: a person approved the call."""

    decided_by: Id | None = None
    reason: str | None = Field(default=None, max_length=2000)


class ToolDeniedPayload(_ToolCall):
    """``TOOL_DENIED``: denied by a person, or with ``reason="timeout"``; the call never runs."""

    decided_by: Id | None = None
    reason: str | None = Field(default=None, max_length=2000)


class ToolExecutionStartedPayload(_ToolCall):
    """``TOOL_EXECUTION_STARTED``: the tool runs now."""

    arguments: JsonValue = None


class ToolExecutionSucceededPayload(_ToolCall):
    """``TOOL_EXECUTION_SUCCEEDED``."""

    result: JsonValue = None
    duration_ms: float = Field(default=0.0, ge=0.0)


class ToolExecutionFailedPayload(_ToolCall):
    """``TOOL_EXECUTION_FAILED``: the tool raised, or its arguments were invalid."""

    error: ErrorInfo
    duration_ms: float = Field(default=0.0, ge=0.0)


class ToolLogPayload(_Payload):
    """``TOOL_LOG``: a diagnostic line from a tool (not part of the lifecycle)."""

    tool_call_id: str | None = Field(default=None, max_length=200)
    tool_name: str | None = Field(default=None, max_length=200)
    level: str = Field(default="info", max_length=20)
    message: str = Field(max_length=8000)


UIPayload = (
    AgentStatusPayload
    | StepStartedPayload
    | StepCompletedPayload
    | ToolStartedPayload
    | ToolCompletedPayload
    | StreamChunkPayload
    | ContinuationPayload
    | ToolApprovalRequestedPayload
    | ToolApprovedPayload
    | ToolDeniedPayload
    | ToolExecutionStartedPayload
    | ToolExecutionSucceededPayload
    | ToolExecutionFailedPayload
    | ToolLogPayload
)

UI_EVENT_PAYLOADS: dict[AgentUIEventType, type[_Payload]] = {
    AgentUIEventType.AGENT_STATUS: AgentStatusPayload,
    AgentUIEventType.STEP_STARTED: StepStartedPayload,
    AgentUIEventType.STEP_COMPLETED: StepCompletedPayload,
    AgentUIEventType.TOOL_STARTED: ToolStartedPayload,
    AgentUIEventType.TOOL_COMPLETED: ToolCompletedPayload,
    AgentUIEventType.STREAM_CHUNK: StreamChunkPayload,
    AgentUIEventType.CONTINUATION: ContinuationPayload,
    AgentUIEventType.TOOL_APPROVAL_REQUESTED: ToolApprovalRequestedPayload,
    AgentUIEventType.TOOL_APPROVED: ToolApprovedPayload,
    AgentUIEventType.TOOL_DENIED: ToolDeniedPayload,
    AgentUIEventType.TOOL_EXECUTION_STARTED: ToolExecutionStartedPayload,
    AgentUIEventType.TOOL_EXECUTION_SUCCEEDED: ToolExecutionSucceededPayload,
    AgentUIEventType.TOOL_EXECUTION_FAILED: ToolExecutionFailedPayload,
    AgentUIEventType.TOOL_LOG: ToolLogPayload,
}
"""The payload model of each UI event type."""

_UI_TYPE_OF: dict[type[_Payload], AgentUIEventType] = {
    model: kind for kind, model in UI_EVENT_PAYLOADS.items()
}


class AgentUIEvent(_Payload):
    """The one stable envelope UIs receive for agent activity.

    ``payload`` is plain JSON (already made JSON-safe and bounded by the runtime's
    serializer); :meth:`typed_payload` reads it as the model for ``type``.
    """

    type: AgentUIEventType = Field(description="What happened.")
    session_id: Id = Field(description="The session (conversation) the agent works in.")
    execution_id: Id = Field(description="One run of the agent loop within the session.")
    agent_id: Id | None = Field(default=None, description="The agent (member) it came from.")
    agent_name: str | None = Field(default=None, max_length=200)
    timestamp: UtcDatetime = Field(default_factory=utcnow)
    payload: dict[str, JsonValue] = Field(default_factory=dict)

    def typed_payload(self) -> UIPayload:
        """``payload`` as its type's model.

        Raises:
            pydantic.ValidationError: the payload does not fit the model.
        """
        result: UIPayload = UI_EVENT_PAYLOADS[self.type].model_validate(self.payload)  # type: ignore[assignment]
        return result

    @classmethod
    def of(
        cls,
        payload: UIPayload,
        *,
        session_id: str,
        execution_id: str,
        agent_id: str | None = None,
        agent_name: str | None = None,
    ) -> AgentUIEvent:
        """Wrap a typed payload, taking ``type`` from the payload's model."""
        kind = _UI_TYPE_OF[type(payload)]
        return cls(
            type=kind,
            session_id=session_id,
            execution_id=execution_id,
            agent_id=agent_id,
            agent_name=agent_name,
            payload=payload.model_dump(mode="json"),
        )
