"""The scripted driver: replies in order or from a function, streamed like a real model."""

from __future__ import annotations

import pytest

from disco.runtime import (
    ChatChunk,
    Completion,
    LLMError,
    Message,
    ScriptedDriver,
    ScriptedReply,
    ScriptedRequest,
    ScriptedToolCall,
    Usage,
)


async def test_tool_calls_stream_in_pieces_and_are_joined() -> None:
    driver = ScriptedDriver(
        [ScriptedReply(tool_calls=[ScriptedToolCall("lookup", {"city": "Oslo"}, id="c-1")])]
    )
    chunks: list[ChatChunk] = []

    async def keep(chunk: ChatChunk) -> None:
        chunks.append(chunk)

    response = await driver.chat([Message.user("weather?")], on_chunk=keep)

    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("c-1", "lookup", '{"city":"Oslo"}')
    ]
    pieces = [delta.arguments for chunk in chunks for delta in chunk.tool_calls]
    assert len(pieces) == 2
    assert "".join(pieces) == '{"city":"Oslo"}'
    assert response.finish_reason == "tool_calls"


async def test_text_streams_in_the_scripted_chunks() -> None:
    driver = ScriptedDriver([ScriptedReply(text="Hello there", chunks=["Hel", "lo ", "there"])])

    texts = [chunk.text async for chunk in driver.stream([Message.user("hi")]) if chunk.text]

    assert texts == ["Hel", "lo ", "there"]


async def test_a_responder_answers_from_what_it_is_asked() -> None:
    def echo(request: ScriptedRequest) -> str:
        return f"you said: {request.last_user_text()}"

    driver = ScriptedDriver(["first"], responder=echo)

    first = await driver.chat([Message.user("a")])
    second = await driver.chat([Message.user("b")])

    assert (first.content, second.content) == ("first", "you said: b")
    assert len(driver.requests) == 2


async def test_generated_tool_call_ids_are_stable_for_a_conversation_and_differ_between_turns() -> (
    None
):
    def weather(_: ScriptedRequest) -> ScriptedReply:
        return ScriptedReply(tool_calls=[("lookup", {"city": "Oslo"})])

    driver = ScriptedDriver(responder=weather)
    same = [Message.user("weather?")]

    one = await driver.chat(same)
    again = await driver.chat(same)
    other = await driver.chat([Message.user("weather, again?")])

    assert one.tool_calls[0].id == again.tool_calls[0].id
    assert one.tool_calls[0].id != other.tool_calls[0].id


async def test_a_scripted_failure_is_raised() -> None:
    driver = ScriptedDriver([ScriptedReply(error=LLMError("rate limited"))])

    with pytest.raises(LLMError, match="rate limited"):
        await driver.chat([Message.user("hi")])


async def test_usage_is_scripted_or_estimated() -> None:
    driver = ScriptedDriver([ScriptedReply(text="x", usage=Usage.of(10, 2)), "twelve chars"])

    scripted = await driver.chat([Message.user("hi")])
    estimated = await driver.chat([Message.user("a longer question")])

    assert scripted.usage.total_tokens == 12
    assert estimated.usage.prompt_tokens == 4
    assert estimated.usage.completion_tokens == 3


async def test_the_planner_interface_still_works_with_plain_replies() -> None:
    driver = ScriptedDriver(
        ["{}", Completion(content="done", prompt_tokens=5, completion_tokens=1)]
    )

    first = await driver.complete([{"role": "user", "content": "plan"}], json_mode=True)
    second = await driver.complete([{"role": "user", "content": "next"}])

    assert first.content == "{}"
    assert (second.content, second.prompt_tokens, second.completion_tokens) == ("done", 5, 1)
    assert driver.calls == [
        [{"role": "user", "content": "plan"}],
        [{"role": "user", "content": "next"}],
    ]
    assert driver.requests[0].json_mode is True


async def test_an_exhausted_script_says_so() -> None:
    driver = ScriptedDriver([])

    with pytest.raises(LLMError, match="no reply left"):
        await driver.chat([Message.user("hi")])
