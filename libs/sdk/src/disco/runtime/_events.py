"""What the agent loop emits as it runs, and where those events go (sinks).

Events carry the rich values (the step, the arguments, the result, the
exception); :class:`~disco.runtime.UIEventAdapter` turns them into the UI
envelope, and a sink delivers them (to the bus, to a list in a test, nowhere).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from disco.runtime._messages import ToolCall
from disco.runtime._outcomes import ContinuationOutcome
from disco.runtime._state import AgentStatus, AgentStep
from disco_common.ids import utcnow

__all__ = [
    "ApprovalDecided",
    "ApprovalRequested",
    "CollectingSink",
    "ContinuationEvaluated",
    "EventSink",
    "FanOutSink",
    "RuntimeEvent",
    "StatusChanged",
    "StepCompleted",
    "StepStarted",
    "StreamChunk",
    "ToolFinished",
    "ToolLogged",
    "ToolStarted",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeEvent:
    """Something the loop did, in one session's execution."""

    session_id: str
    execution_id: str
    agent_id: str
    timestamp: datetime = field(default_factory=utcnow)


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusChanged(RuntimeEvent):
    status: AgentStatus
    step_count: int = 0
    error: str | None = None
    last_response: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStarted(RuntimeEvent):
    step_number: int
    message_count: int
    available_tools: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCompleted(RuntimeEvent):
    step: AgentStep
    continuation: ContinuationOutcome | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamChunk(RuntimeEvent):
    chunk: str
    is_complete: bool = False
    tokens_delta: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ContinuationEvaluated(RuntimeEvent):
    outcome: ContinuationOutcome


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested(RuntimeEvent):
    call: ToolCall
    arguments: Any
    """Redacted by the tool's policy."""
    reason: str | None = None
    timeout_seconds: int | None = None
    deadline: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecided(RuntimeEvent):
    """A decision the runtime itself announces (a timeout, or one taken in process)."""

    tool_call_id: str
    tool_name: str
    approved: bool
    reason: str | None = None
    decided_by: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStarted(RuntimeEvent):
    call: ToolCall
    arguments: Any
    """Redacted by the tool's policy."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFinished(RuntimeEvent):
    call: ToolCall
    success: bool
    result: Any = None
    error: BaseException | str | None = None
    duration_ms: float = 0.0
    executed: bool = True
    """False when the call never ran (denied, unknown tool, invalid arguments)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolLogged(RuntimeEvent):
    tool_call_id: str
    tool_name: str
    level: str
    message: str


class EventSink(Protocol):
    """Where runtime events go."""

    async def emit(self, event: RuntimeEvent) -> None:
        """Take one event (quickly: the loop waits)."""
        ...

    async def flush(self) -> None:
        """Deliver what was taken (the loop calls it after each step and at the end)."""
        ...


class CollectingSink:
    """Keeps every event in :attr:`events` (tests, debugging)."""

    def __init__(self) -> None:
        self.events: list[RuntimeEvent] = []

    async def emit(self, event: RuntimeEvent) -> None:
        self.events.append(event)

    async def flush(self) -> None:
        return None

    def of(self, kind: type[RuntimeEvent]) -> list[Any]:
        """The events of one kind, in order."""
        return [event for event in self.events if isinstance(event, kind)]


class FanOutSink:
    """Gives every event to several sinks, in order."""

    def __init__(self, sinks: Sequence[EventSink]) -> None:
        self.sinks = tuple(sinks)

    async def emit(self, event: RuntimeEvent) -> None:
        for sink in self.sinks:
            await sink.emit(event)

    async def flush(self) -> None:
        for sink in self.sinks:
            await sink.flush()


class NullSink:
    """Drops every event."""

    async def emit(self, event: RuntimeEvent) -> None:
        return None

    async def flush(self) -> None:
        return None
