"""OpenAIChatDriver against a local OpenAI-compatible server written for the test."""

from __future__ import annotations

from typing import Any

import pytest

from disco._dev.ports import free_port
from disco.runtime import (
    AgentRunner,
    ChatChunk,
    CollectingSink,
    CompletionOptions,
    LLMError,
    Message,
    OpenAIChatDriver,
    ReasoningEffort,
    StreamChunk,
    ToolSpec,
    Usage,
)
from libs.sdk.tests.runtime._fake_openai import FakeOpenAI, Reply, chunk
from libs.sdk.tests.runtime._helpers import lookup_weather

FAST_RETRY = {"retry-after-ms": "10"}
USAGE = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}


def hello_stream() -> Reply:
    return Reply(
        events=[
            chunk(content="Hel"),
            chunk(content="lo"),
            chunk(finish_reason="stop"),
            chunk(usage=USAGE, choices=False),
        ]
    )


def weather_call_stream() -> Reply:
    """Two tool calls whose deltas arrive interleaved, arguments in pieces."""
    return Reply(
        events=[
            chunk(
                tool_calls=[
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "lookup_weather", "arguments": '{"ci'},
                    }
                ]
            ),
            chunk(
                tool_calls=[
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "lookup_weather", "arguments": '{"city":'},
                    }
                ]
            ),
            chunk(tool_calls=[{"index": 0, "function": {"arguments": 'ty": "Oslo"}'}}]),
            chunk(tool_calls=[{"index": 1, "function": {"arguments": ' "Lisbon"}'}}]),
            chunk(finish_reason="tool_calls"),
            chunk(usage=USAGE, choices=False),
        ]
    )


async def test_streamed_text_arrives_in_pieces_and_is_assembled_with_its_usage() -> None:
    seen: list[str] = []

    async def on_chunk(piece: ChatChunk) -> None:
        seen.append(piece.text)

    async with (
        FakeOpenAI([hello_stream()]) as server,
        OpenAIChatDriver(server.base_url, model="fake-1", api_key="k-1") as driver,
    ):
        response = await driver.chat([Message.user("hi")], on_chunk=on_chunk)

    assert response.content == "Hello"
    assert response.finish_reason == "stop"
    assert response.usage == Usage(prompt_tokens=11, completion_tokens=3, total_tokens=14)
    assert [text for text in seen if text] == ["Hel", "lo"]
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    assert request["messages"] == [{"role": "user", "content": "hi"}]
    assert server.headers[0]["authorization"] == "Bearer k-1"


async def test_streamed_tool_call_deltas_are_joined_into_calls() -> None:
    tool = ToolSpec(name="lookup_weather", description="Weather.", parameters={"type": "object"})
    async with (
        FakeOpenAI([weather_call_stream()]) as server,
        OpenAIChatDriver(server.base_url, model="fake-1") as driver,
    ):
        response = await driver.chat([Message.user("weather?")], tools=[tool])

    assert [(c.id, c.name, c.parsed_arguments()) for c in response.tool_calls] == [
        ("call_a", "lookup_weather", {"city": "Oslo"}),
        ("call_b", "lookup_weather", {"city": "Lisbon"}),
    ]
    assert response.finish_reason == "tool_calls"
    assert server.requests[0]["tools"] == [tool.to_chat()]


async def test_completion_options_are_sent_as_the_server_takes_them() -> None:
    options = CompletionOptions(
        temperature=0.3,
        top_p=0.9,
        max_tokens=64,
        presence_penalty=0.5,
        frequency_penalty=-0.5,
        reasoning_effort=ReasoningEffort.HIGH,
        budget_tokens=2048,
    )
    async with FakeOpenAI([hello_stream()]) as server:
        async with OpenAIChatDriver(
            server.base_url, model="fake-1", budget_tokens_as="thinking", extra_body={"seed": 7}
        ) as driver:
            await driver.chat([Message.user("hi")], options=options)
        async with OpenAIChatDriver(server.base_url, model="fake-1") as plain:
            await plain.chat([Message.user("hi")], options=options)

    first, second = server.requests
    assert {k: first[k] for k in ("temperature", "top_p", "max_tokens")} == {
        "temperature": 0.3,
        "top_p": 0.9,
        "max_tokens": 64,
    }
    assert (first["presence_penalty"], first["frequency_penalty"]) == (0.5, -0.5)
    assert first["reasoning_effort"] == "high"
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first["seed"] == 7
    assert "thinking" not in second  # the server was not said to take it


async def test_a_429_is_retried_and_then_succeeds() -> None:
    replies = [Reply(status=429, body={"error": {"message": "slow down"}}, headers=FAST_RETRY)]
    replies.append(hello_stream())
    async with (
        FakeOpenAI(replies) as server,
        OpenAIChatDriver(server.base_url, model="fake-1", max_retries=2) as driver,
    ):
        response = await driver.chat([Message.user("hi")])

    assert response.content == "Hello"
    assert len(server.requests) == 2


async def test_a_server_failing_forever_is_a_clear_error_after_the_retries() -> None:
    failing = Reply(status=500, body={"error": {"message": "model crashed"}}, headers=FAST_RETRY)
    async with (
        FakeOpenAI([failing]) as server,
        OpenAIChatDriver(server.base_url, model="fake-1", max_retries=2) as driver,
    ):
        with pytest.raises(LLMError) as caught:
            await driver.chat([Message.user("hi")])

    assert len(server.requests) == 3
    message = str(caught.value)
    assert "answered 500 (after 2 retries)" in message
    assert "model crashed" in message
    assert server.base_url in message


async def test_a_refusal_is_not_retried() -> None:
    async with (
        FakeOpenAI([Reply(status=400, body={"error": {"message": "bad model"}})]) as server,
        OpenAIChatDriver(server.base_url, model="nope", max_retries=3) as driver,
    ):
        with pytest.raises(LLMError, match=r"answered 400: .*bad model"):
            await driver.chat([Message.user("hi")])

    assert len(server.requests) == 1


async def test_an_unreachable_server_is_a_clear_error() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    async with OpenAIChatDriver(url, model="m", max_retries=0) as driver:
        with pytest.raises(LLMError, match="could not be reached"):
            await driver.chat([Message.user("hi")])


async def test_without_streaming_the_whole_answer_comes_at_once() -> None:
    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": "fake-1",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "lookup_weather", "arguments": '{"city":"Oslo"}'},
                        }
                    ],
                },
            }
        ],
        "usage": USAGE,
    }
    async with (
        FakeOpenAI([Reply(body=body)]) as server,
        OpenAIChatDriver(server.base_url, model="fake-1", streaming=False) as driver,
    ):
        response = await driver.chat([Message.user("weather?")])

    assert response.tool_calls[0].parsed_arguments() == {"city": "Oslo"}
    assert response.usage.total_tokens == 14
    assert "stream" not in server.requests[0]


async def test_an_agent_runs_on_the_server_streaming_its_answer() -> None:
    async with (
        FakeOpenAI([weather_call_stream(), hello_stream()]) as server,
        OpenAIChatDriver(server.base_url, model="fake-1") as driver,
    ):
        agent = AgentRunner("assistant", driver=driver, tools=[lookup_weather])
        events = CollectingSink()
        state = await agent.send(agent.new_state("s"), "Weather in Oslo and Lisbon?", events=events)

    assert state.last_response == "Hello"
    second: list[dict[str, Any]] = server.requests[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    assert [m["content"] for m in second[2:]] == ["Oslo: snow, -3°C", "Lisbon: sunny, 24°C"]
    assert [e.chunk for e in events.of(StreamChunk)] == ["Hel", "lo", ""]
    assert state.usage.total_tokens == 28


def test_the_driver_is_configured_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISCO_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("DISCO_LLM_MODEL", raising=False)
    assert OpenAIChatDriver.from_env() is None

    monkeypatch.setenv("DISCO_LLM_BASE_URL", "http://127.0.0.1:11434/v1/")
    monkeypatch.setenv("DISCO_LLM_MODEL", "qwen3")
    monkeypatch.setenv("DISCO_LLM_API_KEY", "k")
    driver = OpenAIChatDriver.from_env()

    assert driver is not None
    assert (driver.base_url, driver.model, driver.api_key) == (
        "http://127.0.0.1:11434/v1",
        "qwen3",
        "k",
    )
