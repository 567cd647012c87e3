"""``AgentState``: the conversation an agent keeps, and the trace of the execution under way.

Seed 001's split:

- ``messages`` persist: user turns and final assistant answers only;
- ``execution_buffer`` is ephemeral: the assistant's tool-call messages and
  the tool results of the current execution. The model sees it
  (:meth:`AgentState.messages_for_inference`); it is cleared when the
  execution stops, fails or is aborted, and whenever a new execution starts
  (:meth:`AgentState.for_continuation`, :meth:`AgentState.with_user_message`),
  so a tool trace never leaks into the next turn.

States are immutable values: every change returns a new state.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, JsonValue

from disco.runtime._messages import CompletionOptions, Message, ToolCall, Usage, _Frozen
from disco.runtime._outcomes import ContinuationOutcome
from disco_common.ids import UtcDatetime, new_id, utcnow

__all__ = [
    "AgentState",
    "AgentStatus",
    "AgentStep",
    "ApprovalDecision",
    "ApprovalWait",
    "ExecutionTiming",
    "InFlightStep",
    "StepType",
]


class AgentStatus(StrEnum):
    """Where an agent's execution stands."""

    IN_PROGRESS = "in_progress"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    FAILED = "failed"
    PAUSED = "paused"


class StepType(StrEnum):
    """What a step did."""

    TOOL_EXECUTION = "tool_execution"
    FINAL = "final"
    ERROR = "error"


class AgentStep(_Frozen):
    """One inference of the model and the tool calls it made."""

    number: int = Field(ge=1)
    type: StepType
    finish_reason: str | None = None
    content: str = ""
    """The assistant's text in this step (for a tool step it never enters ``messages``)."""
    tool_calls: tuple[ToolCall, ...] = ()
    errors: tuple[str, ...] = ()
    usage: Usage = Field(default_factory=Usage)
    started_at: UtcDatetime
    ended_at: UtcDatetime | None = None
    duration_ms: float = Field(default=0.0, ge=0.0)


class ApprovalDecision(_Frozen):
    """Someone's (or the timeout's) answer to an approval request."""

    approved: bool
    reason: str | None = None
    decided_by: str | None = None
    decided_at: UtcDatetime = Field(default_factory=utcnow)


class ApprovalWait(_Frozen):
    """A tool call waiting for a person to approve it."""

    tool_call_id: str
    tool_name: str
    arguments: JsonValue = None
    """As shown to the approver: redacted by the tool's policy."""
    requested_at: UtcDatetime
    timeout_seconds: int | None = None
    deadline: UtcDatetime | None = None
    host: dict[str, JsonValue] = Field(default_factory=dict)
    """What the host needs to correlate the decision (e.g. the question's id)."""


class InFlightStep(_Frozen):
    """A step whose tool calls are not all done (one waits for approval)."""

    number: int = Field(ge=1)
    started_at: UtcDatetime
    finish_reason: str | None = None
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    remaining: tuple[str, ...] = ()
    """Ids of the calls not yet executed, in order."""
    errors: tuple[str, ...] = ()
    usage: Usage = Field(default_factory=Usage)
    seconds: float = Field(default=0.0, ge=0.0)
    """Running time of the step so far (waiting for approval not counted)."""
    decisions: dict[str, ApprovalDecision] = Field(default_factory=dict)


class ExecutionTiming(_Frozen):
    """When the agent started and how long it has run, across pauses and restarts."""

    started_at: UtcDatetime = Field(default_factory=utcnow)
    updated_at: UtcDatetime = Field(default_factory=utcnow)
    cumulative_seconds: float = Field(default=0.0, ge=0.0)
    """Running time of every execution of the session (waits not counted)."""
    execution_seconds: float = Field(default=0.0, ge=0.0)
    """Running time of the current execution, summed over its runs."""


class AgentState(_Frozen):
    """An LLM agent's state in one session.

    Create one with ``AgentState(agent_id=..., session_id=...)`` and start a
    turn with :meth:`with_user_message`; the runner does the rest.
    """

    agent_id: str = Field(min_length=1, max_length=200)
    parent_agent_id: str | None = None
    session_id: str = Field(min_length=1, max_length=200)
    execution_id: str = Field(default_factory=new_id)
    status: AgentStatus = AgentStatus.IN_PROGRESS
    error: str | None = None
    """Why the execution failed (status ``failed``)."""
    system_prompt: str = ""
    summary: str | None = None
    """A summary of older conversation, given to the model after the system prompt."""
    messages: tuple[Message, ...] = ()
    execution_buffer: tuple[Message, ...] = ()
    steps: tuple[AgentStep, ...] = ()
    """The current execution's steps."""
    in_flight: InFlightStep | None = None
    approval: ApprovalWait | None = None
    usage: Usage = Field(default_factory=Usage)
    """Tokens of every step of the session."""
    execution: ExecutionTiming = Field(default_factory=ExecutionTiming)
    options: CompletionOptions = Field(default_factory=CompletionOptions)
    last_continuation: ContinuationOutcome | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)

    # -- reading --------------------------------------------------------------------

    @property
    def step_count(self) -> int:
        """Steps completed in the current execution."""
        return len(self.steps)

    @property
    def last_response(self) -> str | None:
        """The last final answer in ``messages``, if any."""
        for message in reversed(self.messages):
            if message.role == "assistant":
                return message.content
        return None

    @property
    def finished(self) -> bool:
        """Whether the current execution stopped (completed or failed)."""
        return self.status in (AgentStatus.COMPLETED, AgentStatus.FAILED)

    def messages_for_inference(self) -> tuple[Message, ...]:
        """What the model sees: system prompt, summary, messages, then the execution buffer."""
        head: list[Message] = []
        if self.system_prompt:
            head.append(Message.system(self.system_prompt))
        if self.summary:
            head.append(Message.system(f"Summary of the earlier conversation:\n{self.summary}"))
        return (*head, *self.messages, *self.execution_buffer)

    # -- changing -------------------------------------------------------------------

    def with_(self, **changes: Any) -> AgentState:
        """A copy with ``changes`` (fields of the state), ``updated_at`` set to now."""
        if "execution" not in changes:
            changes["execution"] = self.execution.model_copy(update={"updated_at": utcnow()})
        return self.model_copy(update=changes)

    def for_continuation(self) -> AgentState:
        """A state ready for a new execution: new execution id, buffer and steps cleared.

        Messages, options, metadata, usage and cumulative time are kept.
        """
        return self.with_(
            execution_id=new_id(),
            status=AgentStatus.IN_PROGRESS,
            error=None,
            execution_buffer=(),
            steps=(),
            in_flight=None,
            approval=None,
            last_continuation=None,
            execution=self.execution.model_copy(
                update={"updated_at": utcnow(), "execution_seconds": 0.0}
            ),
        )

    def with_user_message(
        self, content: str, *, reset: bool = True, metadata: dict[str, JsonValue] | None = None
    ) -> AgentState:
        """Append a user turn; with ``reset`` (the default) it starts a new execution."""
        state = self.for_continuation() if reset else self
        message = Message.user(content, **(metadata or {}))
        return state.with_(messages=(*state.messages, message))

    def with_options(self, **changes: Any) -> AgentState:
        """A copy whose completion options have ``changes`` (validated)."""
        return self.with_(options=self.options.with_(**changes))

    def with_metadata(self, **changes: JsonValue) -> AgentState:
        """A copy whose metadata has ``changes`` merged in."""
        return self.with_(metadata={**self.metadata, **changes})

    def with_failure(self, error: str) -> AgentState:
        """The execution failed: status ``failed``, buffer and in-flight step cleared."""
        return self.with_(
            status=AgentStatus.FAILED,
            error=error,
            execution_buffer=(),
            in_flight=None,
            approval=None,
        )

    def aborted(self, reason: str = "aborted") -> AgentState:
        """The execution was abandoned: status ``paused``, buffer and in-flight step cleared.

        The next :meth:`with_user_message` starts afresh; nothing of the
        abandoned execution's tool trace remains.
        """
        return self.with_(
            status=AgentStatus.PAUSED,
            error=reason,
            execution_buffer=(),
            in_flight=None,
            approval=None,
        )

    def with_time(self, seconds: float) -> AgentState:
        """``seconds`` more of running time, in the execution and the session."""
        timing = self.execution
        return self.with_(
            execution=ExecutionTiming(
                started_at=timing.started_at,
                updated_at=utcnow(),
                cumulative_seconds=timing.cumulative_seconds + max(0.0, seconds),
                execution_seconds=timing.execution_seconds + max(0.0, seconds),
            )
        )
