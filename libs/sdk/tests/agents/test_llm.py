"""LLM drivers as a Planner uses them: the OpenAI-compatible driver against a local server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from disco._dev.ports import free_port
from disco.llm import LLMError, OpenAICompatibleDriver, ScriptedDriver, plan_from_llm
from libs.sdk.tests.runtime._fake_openai import FakeOpenAI, Reply

FAST = {"retry-after-ms": "10"}


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    reply = {
        "model": "tiny-1",
        "choices": [
            {"message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 1},
    }
    async with FakeOpenAI([Reply(body=reply)]) as fake:
        yield fake


async def test_the_openai_compatible_driver_posts_the_chat_and_reads_the_answer(
    server: FakeOpenAI,
) -> None:
    async with OpenAICompatibleDriver(server.base_url, model="tiny-1", api_key="k-123") as llm:
        completion = await llm.complete(
            [{"role": "user", "content": "hi"}], temperature=0, json_mode=True
        )

    assert completion.content == "hello"
    assert completion.finish_reason == "stop"
    assert (completion.prompt_tokens, completion.completion_tokens) == (7, 1)
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["model"] == "tiny-1"
    assert request["messages"] == [{"role": "user", "content": "hi"}]
    assert request["response_format"] == {"type": "json_object"}
    assert server.headers[0]["authorization"] == "Bearer k-123"


async def test_an_error_status_from_the_model_server_is_an_llm_error() -> None:
    async with (
        FakeOpenAI([Reply(status=503, body={"error": "overloaded"}, headers=FAST)]) as server,
        OpenAICompatibleDriver(server.base_url, model="m") as llm,
    ):
        with pytest.raises(LLMError, match="503"):
            await llm.complete([{"role": "user", "content": "hi"}])


async def test_an_unreachable_model_server_is_an_llm_error() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    async with OpenAICompatibleDriver(url, model="m", max_retries=0) as llm:
        with pytest.raises(LLMError, match="could not be reached"):
            await llm.complete([{"role": "user", "content": "hi"}])


async def test_the_scripted_driver_says_when_its_script_ran_out() -> None:
    llm = ScriptedDriver(["one"])
    await llm.complete([{"role": "user", "content": "a"}])

    with pytest.raises(LLMError, match="no reply left"):
        await llm.complete([{"role": "user", "content": "b"}])


async def test_a_model_that_never_writes_a_valid_plan_gives_a_clear_error() -> None:
    llm = ScriptedDriver(["not json", '{"plan_type": "x"}'])

    with pytest.raises(LLMError, match="did not produce a valid plan"):
        await plan_from_llm(llm, "goal", {}, [])
