"""Tasks: a Worker's persisted TaskContext, delegation, and the result payload convention.

A Worker saves its :class:`TaskContextData` (through the memory service) before
it delegates, so that whichever instance receives a sub-task's result can
restore the task by the sub-task id (the result's ``correlation_id``).

Every answer on ``action-results`` carries :class:`ActionResultData` as its
``data``: ``{"success": true, "result": ...}`` or
``{"success": false, "error": {"type", "message"}}``. A Tool's return value
becomes ``result``; an exception becomes ``error``; a caller never hangs.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from disco_common._base import Body, Metadata
from disco_common.a2a import A2AAnswer, A2AMessageContext, A2ATaskState
from disco_common.ids import (
    AgentName,
    EventType,
    Id,
    TenantId,
    TopicName,
    TraceParent,
    UtcDatetime,
)
from disco_common.topics import Topic

__all__ = [
    "HITL_TIMEOUT_MAX_SECONDS",
    "MAX_SUB_TASKS",
    "ActionResultData",
    "DelegationSpec",
    "ErrorInfo",
    "HumanInputWait",
    "SubTaskInfo",
    "SubTaskStatus",
    "TaskContextData",
    "TaskStatus",
]

MAX_SUB_TASKS = 1000
HITL_TIMEOUT_MAX_SECONDS = 30 * 86_400
_ERROR_MESSAGE_MAX_CHARS = 4000


class _Payload(BaseModel):
    # Payloads travel on the bus between processes of different versions and
    # languages: readers ignore fields they do not know (tolerant reader).
    model_config = ConfigDict(extra="ignore", from_attributes=True)


class TaskStatus(StrEnum):
    """Where a task stands."""

    PENDING = "pending"
    """Received, not started."""
    RUNNING = "running"
    """Its handler is working on it."""
    WAITING = "waiting"
    """Waiting for delegated sub-tasks."""
    AWAITING_INPUT = "awaiting_input"
    """Waiting for a human's answer (HITL, time-bound)."""
    COMPLETED = "completed"
    """Answered with success."""
    FAILED = "failed"
    """Answered with an error (a HITL timeout ends here too, reason ``hitl_timeout``)."""

    @property
    def is_final(self) -> bool:
        """Whether the task is over."""
        return self in (TaskStatus.COMPLETED, TaskStatus.FAILED)


class SubTaskStatus(StrEnum):
    """Where a delegated sub-task stands."""

    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"


class ErrorInfo(_Payload):
    """What went wrong, as carried in results and events."""

    type: str = Field(
        min_length=1,
        max_length=200,
        description="The kind of error: an exception class name or a code such as `hitl_timeout`.",
    )
    message: str = Field(
        default="", max_length=_ERROR_MESSAGE_MAX_CHARS, description="What happened, for people."
    )
    details: JsonValue = Field(default=None, description="Structured detail, if any.")

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorInfo:
        """The error info of ``exc`` (class name and message, the message bounded)."""
        message = str(exc)
        if len(message) > _ERROR_MESSAGE_MAX_CHARS:
            message = message[: _ERROR_MESSAGE_MAX_CHARS - 3] + "..."
        return cls(type=type(exc).__name__, message=message)


class ActionResultData(_Payload):
    """The ``data`` of every envelope on ``action-results``.

    ``success`` true: ``result`` holds the answer (shaped by the responder's
    registered response schema) and ``error`` is absent. ``success`` false:
    ``error`` says why and ``result`` is usually absent.
    """

    success: bool = Field(description="Whether the action succeeded.")
    result: JsonValue = Field(default=None, description="The answer when it succeeded.")
    error: ErrorInfo | None = Field(default=None, description="Why it failed.")
    task_id: Id | None = Field(default=None, description="The task answered, for Workers.")
    a2a: A2AAnswer | None = Field(
        default=None,
        description=(
            "How an A2A caller should see the answer (a direct message, artifacts, "
            "input-required, rejected...); absent, the gateway shows `result` as a completed "
            "task with a data artifact, or `error` as a failed one."
        ),
    )

    @model_validator(mode="after")
    def _error_iff_failed(self) -> Self:
        if self.success and self.error is not None:
            raise ValueError("a successful result carries no error")
        if not self.success and self.error is None:
            raise ValueError("a failed result must say why in `error`")
        return self

    @classmethod
    def ok(cls, result: JsonValue = None, *, task_id: str | None = None) -> ActionResultData:
        """A success carrying ``result``."""
        return cls(success=True, result=result, task_id=task_id)

    @classmethod
    def failed(
        cls,
        error: ErrorInfo | BaseException,
        *,
        task_id: str | None = None,
    ) -> ActionResultData:
        """A failure with ``error`` (an :class:`ErrorInfo` or an exception)."""
        info = error if isinstance(error, ErrorInfo) else ErrorInfo.from_exception(error)
        return cls(success=False, error=info, task_id=task_id)

    @classmethod
    def of_answer(cls, answer: A2AAnswer, *, task_id: str | None = None) -> ActionResultData:
        """The result carrying an A2A-shaped ``answer``, readable by disco callers too.

        A completed answer (or a direct message) is a success whose ``result`` is
        the answer's ``result``, else its only data part's data, else its text.
        Any other state is a failure whose error type names the state
        (``input_required``, ``rejected``, ``failed``, ``auth_required``,
        ``cancelled``) and whose
        message is the answer's text.
        """
        if answer.succeeded:
            return cls(success=True, result=_plain_result(answer), task_id=task_id, a2a=answer)
        kind = _ERROR_TYPE_OF_STATE[answer.state]
        error = ErrorInfo(
            type=kind,
            message=answer.text()[:_ERROR_MESSAGE_MAX_CHARS] or kind.replace("_", " "),
            details=answer.result,
        )
        return cls(success=False, error=error, task_id=task_id, a2a=answer)


_ERROR_TYPE_OF_STATE: dict[A2ATaskState, str] = {
    A2ATaskState.INPUT_REQUIRED: "input_required",
    A2ATaskState.AUTH_REQUIRED: "auth_required",
    A2ATaskState.REJECTED: "rejected",
    A2ATaskState.FAILED: "failed",
    A2ATaskState.CANCELED: "cancelled",
}


def _plain_result(answer: A2AAnswer) -> JsonValue:
    if answer.result is not None:
        return answer.result
    parts = [*answer.parts, *(part for artifact in answer.artifacts for part in artifact.parts)]
    data = [part.data for part in parts if part.data is not None]
    if len(data) == 1:
        return data[0]
    text = "\n".join(part.text for part in parts if part.text is not None)
    return {"text": text} if text else None


class DelegationSpec(Body):
    """One sub-task to delegate (an item of ``TaskContext.delegate_parallel``)."""

    event_type: EventType = Field(description="The request event type of the sub-task.")
    data: JsonValue = Field(default=None, description="The request payload.")
    response_event: EventType = Field(description="The event type the sub-task must answer with.")


class SubTaskInfo(Body):
    """Tracking of one delegated sub-task inside a task context."""

    sub_task_id: Id = Field(description="Also the sub-task request's correlation_id.")
    event_type: EventType = Field(description="The sub-task's request event type.")
    response_event: EventType = Field(description="The event type its answer comes back as.")
    status: SubTaskStatus = Field(default=SubTaskStatus.PENDING)
    parallel_group_id: Id | None = Field(
        default=None, description="The fan-out group it belongs to, if delegated in parallel."
    )
    result: JsonValue = Field(default=None, description="Its result once completed.")
    error: ErrorInfo | None = Field(default=None, description="Its error once failed.")
    delegated_at: UtcDatetime | None = None
    finished_at: UtcDatetime | None = None
    caused_by: Id | None = Field(
        default=None,
        description=(
            "The id of the envelope whose handling delegated it. When that envelope comes "
            "again (redelivered after a crash between saving and publishing), the request "
            "is sent again."
        ),
    )
    request_data: JsonValue = Field(
        default=None,
        description=(
            "The request payload, kept while the sub-task is pending (when `request_kept`) so "
            "that a request lost in a crash can be sent again; dropped once it is answered."
        ),
    )
    request_kept: bool = Field(
        default=False,
        description="Whether `request_data` holds the payload (one too large to keep is not).",
    )


class HumanInputWait(Body):
    """A task's outstanding question to a human (worker-level HITL is time-bound)."""

    request_id: Id = Field(description="The envelope id of the `notification.human_input` request.")
    correlation_id: Id = Field(description="The correlation id the answer will carry.")
    response_event: EventType = Field(description="The event type the answer will come as.")
    timeout_seconds: int = Field(
        gt=0, le=HITL_TIMEOUT_MAX_SECONDS, description="How long the task waits."
    )
    asked_at: UtcDatetime = Field(description="When the question was published.")
    caused_by: Id | None = Field(
        default=None,
        description=(
            "The id of the envelope whose handling asked. When that envelope comes again "
            "(redelivered after a crash between saving and publishing), the question is "
            "published again."
        ),
    )
    request_data: dict[str, JsonValue] | None = Field(
        default=None,
        description=(
            "The question as published (a `HumanInputRequest`), kept so that a question "
            "lost in a crash can be published again."
        ),
    )

    @property
    def deadline(self) -> UtcDatetime:
        """When the wait times out."""
        return self.asked_at + timedelta(seconds=self.timeout_seconds)


class TaskContextData(Body):
    """The persisted form of a Worker's TaskContext (what the memory service stores)."""

    task_id: Id = Field(description="The task's id.")
    event_type: EventType = Field(description="The request event type that started the task.")
    plan_id: Id | None = Field(default=None, description="The plan the task belongs to, if any.")
    data: JsonValue = Field(default=None, description="The request payload.")
    response_event: EventType = Field(description="The event type to answer with.")
    response_topic: TopicName = Field(
        default=Topic.ACTION_RESULTS.value, description="Where to answer."
    )
    correlation_id: Id | None = Field(
        default=None, description="The request's correlation id, echoed on the answer."
    )
    request_id: Id | None = Field(
        default=None, description="The request envelope's id (the answer's causation id)."
    )
    sub_tasks: dict[Id, SubTaskInfo] = Field(
        default_factory=dict,
        max_length=MAX_SUB_TASKS,
        description="Delegated sub-tasks by sub_task_id.",
    )
    state: Metadata = Field(default_factory=dict, description="The handler's own state.")
    status: TaskStatus = Field(default=TaskStatus.RUNNING)
    tenant_id: TenantId | None = None
    user_id: Id | None = None
    session_id: Id | None = None
    a2a_message: A2AMessageContext | None = Field(
        default=None,
        description=(
            "The A2A message the task's request came from, when an A2A caller sent it "
            "through the gateway (the request's `a2amessage` attribute)."
        ),
    )
    agent_id: Id | None = Field(default=None, description="The agent instance handling the task.")
    agent_name: AgentName | None = Field(default=None, description="The agent handling the task.")
    human_input: HumanInputWait | None = Field(
        default=None, description="The outstanding question to a human, while awaiting input."
    )
    outcome: ActionResultData | None = Field(
        default=None,
        description=(
            "The answer once the task is final (kept until it is published, so that a "
            "redelivery can publish the very same answer again)."
        ),
    )
    finished_by: Id | None = Field(
        default=None,
        description=(
            "The id of the envelope whose handling ended the task. When that envelope comes "
            "again (redelivered after a crash between saving the end and publishing the "
            "answer), the answer is published again."
        ),
    )
    traceparent: TraceParent | None = None
    created_at: UtcDatetime | None = None
    updated_at: UtcDatetime | None = None

    @model_validator(mode="after")
    def _sub_task_keys_match(self) -> Self:
        for key, info in self.sub_tasks.items():
            if key != info.sub_task_id:
                raise ValueError(
                    f"sub_tasks[{key!r}] holds sub-task {info.sub_task_id!r}: keys must be "
                    "the sub_task_id"
                )
        return self

    @property
    def sub_task_ids(self) -> list[str]:
        """Every delegated sub-task id (what the memory service indexes for by-subtask lookup)."""
        return list(self.sub_tasks)
