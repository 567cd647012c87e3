"""Full (lossless, versioned) and slim (bounded) serializers of agent states."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from disco.runtime import (
    AgentState,
    AgentStatus,
    FullSerializer,
    Message,
    ReasoningEffort,
    SlimConfig,
    SlimSerializer,
    StateSerializationError,
    ToolCall,
)
from libs.sdk.tests.runtime._helpers import runner
from libs.sdk.tests.runtime._strategies import states
from tests.fixtures.properties import examples

FIXTURES = Path(__file__).parent / "fixtures"
properties = settings(max_examples=examples(150), suppress_health_check=[HealthCheck.too_slow])


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def through_json(data: dict[str, Any]) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(json.dumps(data, allow_nan=False))
    return loaded


# -- full -----------------------------------------------------------------------------


@properties
@given(states)
def test_every_field_of_any_state_round_trips_exactly(state: AgentState) -> None:
    serializer = FullSerializer()

    restored = serializer.deserialize(through_json(serializer.serialize(state)))

    assert restored == state
    assert serializer.serialize(restored) == serializer.serialize(state)


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("full_v*.json")))
def test_every_stored_full_version_still_loads(name: str) -> None:
    state = FullSerializer().deserialize(fixture(name))

    assert state.agent_id
    assert state.messages


def test_version_1_json_loads_with_defaults_for_what_version_2_added() -> None:
    state = FullSerializer().deserialize(fixture("full_v1_completed.json"))

    assert [m.content for m in state.messages] == [
        "Weather and time in Oslo?",
        "Snow in Oslo; it is 14:05.",
    ]
    assert state.options.temperature == 0.2
    assert state.options.reasoning_effort is None
    assert state.options.budget_tokens is None
    assert state.execution.execution_seconds == 0.0
    assert state.last_continuation is None
    assert state.in_flight is None


def test_the_fewest_fields_of_version_1_load() -> None:
    state = FullSerializer().deserialize(fixture("full_v1_minimal.json"))

    assert state.status is AgentStatus.COMPLETED
    assert state.last_response == "hello"


@pytest.mark.parametrize("name", ["full_v2_completed.json", "full_v2_awaiting_approval.json"])
def test_current_version_json_is_written_back_unchanged(name: str) -> None:
    data = fixture(name)
    serializer = FullSerializer()

    assert serializer.serialize(serializer.deserialize(data)) == data


def test_reasoning_options_survive_a_save_and_load() -> None:
    state = FullSerializer().deserialize(fixture("full_v2_awaiting_approval.json"))

    assert state.options.reasoning_effort is ReasoningEffort.LOW
    assert state.options.budget_tokens == 1024
    assert state.status is AgentStatus.AWAITING_APPROVAL
    assert state.approval is not None
    assert state.approval.arguments == {
        "city": "Lisbon",
        "date": "2026-05-01",
        "card": "[redacted]",
    }


def test_an_unknown_reasoning_effort_is_a_clear_error_naming_the_field() -> None:
    data = fixture("full_v2_completed.json")
    data["options"]["reasoning_effort"] = "extreme"

    with pytest.raises(StateSerializationError) as caught:
        FullSerializer().deserialize(data)

    assert "options.reasoning_effort" in str(caught.value)
    assert "extreme" in str(caught.value)
    assert "'low'" in str(caught.value)


def test_json_of_a_newer_sdk_is_refused_with_what_to_do() -> None:
    data = {**fixture("full_v2_completed.json"), "schema_version": 3}

    with pytest.raises(StateSerializationError, match=r"schema_version 3.*upgrade disco-sdk"):
        FullSerializer().deserialize(data)


def test_a_slim_state_given_to_the_full_serializer_says_which_one_to_use() -> None:
    with pytest.raises(StateSerializationError, match="SlimSerializer"):
        FullSerializer().deserialize(fixture("slim_v1_completed.json"))


def test_a_state_without_its_ids_is_refused_naming_them() -> None:
    with pytest.raises(StateSerializationError, match=r"agent_id.*session_id"):
        FullSerializer().deserialize({"schema_version": 2, "messages": []})


# -- slim -----------------------------------------------------------------------------


def long_state(count: int, length: int = 1000) -> AgentState:
    messages = tuple(
        Message.user(f"{i} " + "q" * length) if i % 2 == 0 else Message.assistant("a" * length)
        for i in range(count)
    )
    buffer = (
        Message.assistant(
            "", (ToolCall(id="call-1", name="pay", arguments='{"card": "4111-1111-1111"}'),)
        ),
        Message.tool("call-1", "pay", "paid " + "r" * length),
    )
    return AgentState(
        agent_id="assistant",
        session_id="s-1",
        messages=messages,
        execution_buffer=buffer,
        metadata={"customer": "c-7"},
    )


def encoded(data: dict[str, Any]) -> int:
    return len(json.dumps(data, ensure_ascii=False, allow_nan=False).encode())


def test_minimal_keeps_a_500_message_state_to_a_few_kilobytes() -> None:
    state = long_state(500, length=400)

    slim = SlimSerializer(SlimConfig.minimal()).serialize(state)

    assert encoded(slim) < 16 * 1024
    assert len(slim["messages"]) == 20
    assert slim["messages_omitted"] == 480
    assert slim["messages"][-1]["content"].startswith("a")  # the most recent ones are kept
    assert slim["steps"] == []
    assert slim["execution_buffer"][1]["content"] == "[tool result omitted]"


def test_standard_is_a_tenth_of_full_at_a_thousand_messages() -> None:
    state = long_state(1000)

    full = encoded(FullSerializer().serialize(state))
    slim = encoded(SlimSerializer(SlimConfig.standard()).serialize(state))

    assert slim <= full / 10


def test_presets_keep_what_seed_000_says() -> None:
    assert SlimConfig.minimal() == SlimConfig(
        max_messages=20,
        max_steps=0,
        max_content_length=500,
        include_tool_results=False,
        include_steps=False,
    )
    assert SlimConfig.standard() == SlimConfig()
    assert SlimConfig.full() == SlimConfig(
        max_messages=100,
        max_steps=50,
        max_content_length=5000,
        include_continuation_trace=True,
    )


def test_long_content_is_cut_and_marked() -> None:
    slim = SlimSerializer(SlimConfig(max_content_length=10)).serialize(long_state(2, length=50))

    message = slim["messages"][0]
    assert message["content"] == "0 qqqqqqqq…"
    assert message["truncated"] is True
    assert "truncated" not in SlimSerializer().serialize(long_state(2, length=5))["messages"][0]


def test_redaction_keeps_only_the_id_and_name_of_tool_calls() -> None:
    state = long_state(2)
    redacting = SlimSerializer(SlimConfig(redact_tool_args=True)).serialize(state)
    plain = SlimSerializer().serialize(state)

    assert redacting["execution_buffer"][0]["metadata"]["tool_calls"] == [
        {"id": "call-1", "name": "pay"}
    ]
    assert "4111" not in json.dumps(redacting)
    assert plain["execution_buffer"][0]["metadata"]["tool_calls"][0]["arguments"] == (
        '{"card": "4111-1111-1111"}'
    )
    tool_result = plain["execution_buffer"][1]
    assert tool_result["metadata"] == {"tool_call_id": "call-1", "tool_name": "pay"}


async def test_slim_json_deserializes_into_a_state_that_takes_the_next_turn() -> None:
    agent, _ = runner(["Noted.", "Still here."])
    done = await agent.send(agent.new_state("s-1"), "Remember 42.")
    slim = through_json(SlimSerializer().serialize(done))

    restored = SlimSerializer().deserialize(slim)
    again = await agent.send(restored, "What did I say?")

    assert [m.content for m in restored.messages] == ["Remember 42.", "Noted."]
    assert restored.options == done.options
    assert restored.execution == done.execution
    assert again.status is AgentStatus.COMPLETED
    assert [m.content for m in again.messages][-2:] == ["What did I say?", "Still here."]


def test_an_execution_under_way_comes_back_paused_from_slim_json() -> None:
    restored = SlimSerializer().deserialize(fixture("slim_v1_awaiting_approval.json"))

    assert restored.status is AgentStatus.PAUSED
    assert restored.execution_buffer == ()
    assert restored.approval is None
    assert [m.content for m in restored.messages] == ["Book me Lisbon on May 1st"]


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("slim_v*.json")))
def test_every_stored_slim_version_still_loads(name: str) -> None:
    assert SlimSerializer().deserialize(fixture(name)).agent_id == "assistant"


@properties
@given(states)
def test_any_state_has_valid_bounded_slim_json_that_loads_back(state: AgentState) -> None:
    config = SlimConfig(max_messages=3, max_steps=2, max_content_length=20)

    slim = through_json(SlimSerializer(config).serialize(state))
    restored = SlimSerializer(config).deserialize(slim)

    assert len(slim["messages"]) <= 3
    assert len(slim["steps"]) <= 2
    assert all(len(m["content"]) <= 21 for m in slim["messages"])
    assert restored.agent_id == state.agent_id
    assert restored.options == state.options
