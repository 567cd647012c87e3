"""The agent runtime: an LLM agent loop with clean state, snapshots, criteria and approvals.

Write an agent as a system prompt, typed functions as tools and continuation
limits; run it with :class:`AgentRunner` in-process, or host it on a disco
:class:`~disco.Worker` (``runner.attach_worker(worker, "assistant.requested")``)
to answer tasks on the bus::

    from disco import Worker
    from disco.runtime import AgentRunner, ScriptedDriver, StepsLimit, agent_tool

    @agent_tool
    def lookup_weather(city: str) -> str:
        \"\"\"Today's weather in a city.\"\"\"
        return f"sunny in {city}"

    @agent_tool(approval="always")
    def book_trip(city: str, date: str) -> str:
        \"\"\"Book a trip (a person approves first).\"\"\"
        return f"booked {city} on {date}"

    runner = AgentRunner(
        "assistant",
        driver=OpenAIChatDriver.from_env() or ScriptedDriver([...]),
        system_prompt="You are a travel assistant.",
        tools=[lookup_weather, book_trip],
        criteria=[StepsLimit(8), TokenBudget(20_000), TimeLimit(60)],
    )
    worker = Worker("assistant")
    runner.attach_worker(worker, "assistant.requested")
    worker.serve()

- :class:`AgentState`: persistent ``messages`` (user turns and final answers)
  apart from the ephemeral ``execution_buffer`` (tool calls and results of the
  execution under way), steps, usage, cumulative time, completion options.
- :class:`FullSerializer` (lossless, versioned) and :class:`SlimSerializer`
  (bounded, :class:`SlimConfig` presets); :func:`to_json_safe` for every payload.
- Continuation criteria: :class:`StepsLimit`, :class:`TokenBudget`,
  :class:`TimeLimit`, :class:`ToolCallPresence`, :class:`FinishReason`,
  :class:`ErrorLimit` and plain functions; every verdict is recorded.
- Tools from MCP servers: :class:`disco.runtime.mcp.MCPTools` in ``tools=[...]`` (the
  ``mcp`` extra): an MCP server's tools are the agent's, with the same policies.
- Drivers: :class:`OpenAIChatDriver` (official ``openai`` SDK) and
  :class:`ScriptedDriver`, behind :class:`ChatDriver`.
- Events → :class:`UIEventAdapter` → the UI envelope on ``notification-events``;
  :func:`publish_ui_event` publishes one from any agent (the gateway's session streams
  show them).
"""

from disco.runtime._approvals import ApprovalChannel, NoPendingApprovalError
from disco.runtime._continuation import (
    ContinuationCriteria,
    ContinuationEvaluation,
    ContinuationOutcome,
    Criterion,
    CriterionResult,
    Decision,
    ErrorLimit,
    FinishReason,
    StepsLimit,
    StopReason,
    TimeLimit,
    TokenBudget,
    ToolCallPresence,
)
from disco.runtime._drivers import (
    ChatAccumulator,
    ChatChunk,
    ChatDriver,
    ChatResponse,
    Completion,
    LLMError,
    ToolCallDelta,
    ToolSpec,
)
from disco.runtime._events import (
    ApprovalDecided,
    ApprovalRequested,
    CollectingSink,
    ContinuationEvaluated,
    EventSink,
    FanOutSink,
    RuntimeEvent,
    StatusChanged,
    StepCompleted,
    StepStarted,
    StreamChunk,
    ToolFinished,
    ToolLogged,
    ToolStarted,
)
from disco.runtime._hosting import TextAnswer, TextRequest
from disco.runtime._json_safe import to_json_safe
from disco.runtime._messages import (
    CompletionOptions,
    Message,
    ReasoningEffort,
    Role,
    ToolCall,
    Usage,
)
from disco.runtime._openai import OpenAIChatDriver
from disco.runtime._runner import AgentRunner
from disco.runtime._scripted import ScriptedDriver, ScriptedReply, ScriptedRequest, ScriptedToolCall
from disco.runtime._serializers import (
    FullSerializer,
    SlimConfig,
    SlimSerializer,
    StateSerializationError,
    StateSerializer,
)
from disco.runtime._snapshots import (
    InMemorySnapshotStore,
    MemorySnapshotStore,
    SnapshotError,
    SnapshotStore,
)
from disco.runtime._state import (
    AgentState,
    AgentStatus,
    AgentStep,
    ApprovalDecision,
    ApprovalWait,
    ExecutionTiming,
    InFlightStep,
    StepType,
)
from disco.runtime._tools import AgentTool, ToolArgumentsError, ToolSource, agent_tool, tool_log
from disco.runtime._ui import BusEventSink, UIEventAdapter, publish_ui_event, ui_envelope

__all__ = [
    "AgentRunner",
    "AgentState",
    "AgentStatus",
    "AgentStep",
    "AgentTool",
    "ApprovalChannel",
    "ApprovalDecided",
    "ApprovalDecision",
    "ApprovalRequested",
    "ApprovalWait",
    "BusEventSink",
    "ChatAccumulator",
    "ChatChunk",
    "ChatDriver",
    "ChatResponse",
    "CollectingSink",
    "Completion",
    "CompletionOptions",
    "ContinuationCriteria",
    "ContinuationEvaluated",
    "ContinuationEvaluation",
    "ContinuationOutcome",
    "Criterion",
    "CriterionResult",
    "Decision",
    "ErrorLimit",
    "EventSink",
    "ExecutionTiming",
    "FanOutSink",
    "FinishReason",
    "FullSerializer",
    "InFlightStep",
    "InMemorySnapshotStore",
    "LLMError",
    "MemorySnapshotStore",
    "Message",
    "NoPendingApprovalError",
    "OpenAIChatDriver",
    "ReasoningEffort",
    "Role",
    "RuntimeEvent",
    "ScriptedDriver",
    "ScriptedReply",
    "ScriptedRequest",
    "ScriptedToolCall",
    "SlimConfig",
    "SlimSerializer",
    "SnapshotError",
    "SnapshotStore",
    "StateSerializationError",
    "StateSerializer",
    "StatusChanged",
    "StepCompleted",
    "StepStarted",
    "StepType",
    "StepsLimit",
    "StopReason",
    "StreamChunk",
    "TextAnswer",
    "TextRequest",
    "TimeLimit",
    "TokenBudget",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallPresence",
    "ToolFinished",
    "ToolLogged",
    "ToolSource",
    "ToolSpec",
    "ToolStarted",
    "UIEventAdapter",
    "Usage",
    "agent_tool",
    "publish_ui_event",
    "to_json_safe",
    "tool_log",
    "ui_envelope",
]
