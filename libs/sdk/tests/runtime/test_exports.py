"""The public names of `disco.runtime` are pinned (outside checks import them)."""

from __future__ import annotations

import disco.llm
import disco.runtime

NAMES_OTHERS_USE = {
    "AgentState",
    "CompletionOptions",
    "ReasoningEffort",
    "FullSerializer",
    "SlimSerializer",
    "SlimConfig",
    "to_json_safe",
    "StepsLimit",
    "TokenBudget",
    "TimeLimit",
    "ToolCallPresence",
    "FinishReason",
    "ErrorLimit",
    "ScriptedDriver",
    "OpenAIChatDriver",
    "AgentRunner",
}


def test_disco_runtime_exports_its_public_api() -> None:
    assert sorted(disco.runtime.__all__) == [
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
    assert all(hasattr(disco.runtime, name) for name in disco.runtime.__all__)


def test_the_names_other_checks_import_are_all_there() -> None:
    assert set(disco.runtime.__all__) >= NAMES_OTHERS_USE


def test_serializers_have_serialize_and_deserialize() -> None:
    for serializer in (disco.runtime.FullSerializer(), disco.runtime.SlimSerializer()):
        assert callable(serializer.serialize)
        assert callable(serializer.deserialize)
    assert {"minimal", "standard", "full"} <= set(dir(disco.runtime.SlimConfig))


def test_there_is_one_scripted_and_one_openai_driver_for_planners_and_agents() -> None:
    assert disco.llm.ScriptedDriver is disco.runtime.ScriptedDriver
    assert disco.llm.OpenAICompatibleDriver is disco.runtime.OpenAIChatDriver
    assert disco.llm.LLMError is disco.runtime.LLMError
    assert disco.llm.Completion is disco.runtime.Completion


def test_disco_runtime_mcp_exports_the_mcp_tools() -> None:
    import disco.runtime.mcp

    assert sorted(disco.runtime.mcp.__all__) == ["MCPToolError", "MCPTools"]
