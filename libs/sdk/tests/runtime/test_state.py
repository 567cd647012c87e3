"""AgentState: persistent conversation apart from the execution trace (seed 001)."""

from __future__ import annotations

from disco.runtime import (
    AgentState,
    AgentStatus,
    LLMError,
    Message,
    Role,
    ScriptedReply,
    StepType,
)
from libs.sdk.tests.runtime._helpers import call, runner


def roles_and_text(messages: tuple[Message, ...]) -> list[tuple[str, str]]:
    return [(message.role.value, message.content) for message in messages]


async def test_after_a_two_tool_execution_messages_hold_only_the_turn_and_the_final_answer() -> (
    None
):
    agent, driver = runner(
        [
            ScriptedReply(
                text="Let me check.",
                tool_calls=[("lookup_weather", {"city": "Oslo"}), ("local_time", {"city": "Oslo"})],
            ),
            "Snowing in Oslo, it is 14:05.",
        ]
    )

    state = await agent.send(agent.new_state("s-1"), "Weather and time in Oslo?")

    assert state.status is AgentStatus.COMPLETED
    assert roles_and_text(state.messages) == [
        ("user", "Weather and time in Oslo?"),
        ("assistant", "Snowing in Oslo, it is 14:05."),
    ]
    assert state.execution_buffer == ()
    # ...while the model saw the calls and their results during the execution.
    second = driver.requests[1].messages
    assert [m.role for m in second] == [
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.TOOL,
    ]
    assert [c.name for c in second[2].tool_calls] == ["lookup_weather", "local_time"]
    assert second[2].content == "Let me check."
    assert second[3].content == "Oslo: snow, -3°C"
    assert second[4].content == '{"city":"Oslo","time":"14:05"}'
    assert [step.type for step in state.steps] == [StepType.TOOL_EXECUTION, StepType.FINAL]
    assert [c.name for c in state.steps[0].tool_calls] == ["lookup_weather", "local_time"]


def both_tools() -> ScriptedReply:
    return ScriptedReply(
        tool_calls=[
            ("lookup_weather", {"city": "Oslo"}),
            ("book_trip", {"city": "Oslo", "date": "2026-01-05"}),
        ]
    )


async def test_for_continuation_leaves_no_trace_of_the_execution() -> None:
    agent, _ = runner([both_tools()])
    waiting = await agent.send(agent.new_state("s-1"), "Oslo?")
    assert waiting.status is AgentStatus.AWAITING_APPROVAL
    assert len(waiting.execution_buffer) == 2  # the model's calls and the first result

    fresh = waiting.for_continuation()

    assert fresh.execution_buffer == ()
    assert fresh.steps == ()
    assert fresh.in_flight is None
    assert fresh.status is AgentStatus.IN_PROGRESS
    assert fresh.execution_id != waiting.execution_id
    assert fresh.messages == waiting.messages
    assert fresh.options == waiting.options
    assert fresh.metadata == waiting.metadata


async def test_an_execution_that_fails_mid_tool_leaves_no_trace() -> None:
    agent, _ = runner(
        [
            call("lookup_weather", city="Oslo"),
            ScriptedReply(error=LLMError("the model server answered 500")),
        ]
    )

    state = await agent.send(agent.new_state("s-1"), "Oslo?")

    assert state.status is AgentStatus.FAILED
    assert state.error == "LLMError: the model server answered 500"
    assert roles_and_text(state.messages) == [("user", "Oslo?")]
    assert state.execution_buffer == ()
    assert state.steps[-1].type is StepType.ERROR
    assert state.steps[-1].errors == ("LLMError: the model server answered 500",)


async def test_an_aborted_execution_leaves_no_trace_and_the_next_turn_starts_clean() -> None:
    agent, _ = runner([both_tools()])
    mid = await agent.send(agent.new_state("s-1"), "Oslo?")
    assert mid.execution_buffer

    aborted = mid.aborted("the user left")
    retried = aborted.with_user_message("And Lisbon?")

    assert aborted.status is AgentStatus.PAUSED
    assert aborted.execution_buffer == ()
    assert retried.execution_buffer == ()
    assert aborted.approval is None
    assert aborted.in_flight is None
    assert roles_and_text(retried.messages) == [("user", "Oslo?"), ("user", "And Lisbon?")]


def test_the_model_sees_system_prompt_summary_messages_then_the_buffer() -> None:
    state = AgentState(
        agent_id="a",
        session_id="s",
        system_prompt="Be brief.",
        summary="They talked about Oslo.",
        messages=(Message.user("hi"), Message.assistant("hello")),
        execution_buffer=(Message.tool("c1", "lookup_weather", "sunny"),),
    )

    seen = state.messages_for_inference()

    assert roles_and_text(seen) == [
        ("system", "Be brief."),
        ("system", "Summary of the earlier conversation:\nThey talked about Oslo."),
        ("user", "hi"),
        ("assistant", "hello"),
        ("tool", "sunny"),
    ]


def test_a_new_user_message_starts_a_new_execution_keeping_the_conversation() -> None:
    state = AgentState(
        agent_id="a",
        session_id="s",
        status=AgentStatus.COMPLETED,
        messages=(Message.user("hi"), Message.assistant("hello")),
        execution_buffer=(Message.tool("c1", "t", "leftover"),),
        metadata={"customer": 7},
    ).with_options(temperature=0.5)

    turn = state.with_user_message("again")

    assert turn.status is AgentStatus.IN_PROGRESS
    assert turn.execution_id != state.execution_id
    assert turn.execution_buffer == ()
    assert [m.content for m in turn.messages] == ["hi", "hello", "again"]
    assert turn.options.temperature == 0.5
    assert turn.metadata == {"customer": 7}


def test_states_are_immutable_values() -> None:
    state = AgentState(agent_id="a", session_id="s")

    changed = state.with_metadata(k=1)

    assert state.metadata == {}
    assert changed.metadata == {"k": 1}
    assert changed.execution.updated_at >= state.execution.updated_at


async def test_cumulative_time_adds_up_across_executions_and_the_execution_count_restarts() -> None:
    agent, _ = runner([call("lookup_weather", city="Oslo"), "Snow.", "Sun."])
    first = await agent.send(agent.new_state("s-1"), "Oslo?")

    second = await agent.send(first, "Lisbon?")

    assert first.execution.cumulative_seconds > 0
    assert second.execution.cumulative_seconds > first.execution.cumulative_seconds
    assert second.execution.execution_seconds < second.execution.cumulative_seconds
    assert second.execution.execution_seconds == sum(s.duration_ms for s in second.steps) / 1000
