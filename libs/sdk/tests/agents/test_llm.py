"""LLM drivers: the OpenAI-compatible driver against a fake server on loopback; the scripted one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from disco._dev.ports import free_port
from disco.llm import LLMError, OpenAICompatibleDriver, ScriptedDriver, plan_from_llm


class FakeChatServer:
    """A tiny HTTP/1.1 server answering POST /v1/chat/completions with a fixed reply."""

    def __init__(self, reply: dict[str, Any], status: int = 200) -> None:
        self.reply = reply
        self.status = status
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.port = free_port()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> FakeChatServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {
            k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.headers.append(headers)
        self.requests.append({"path": lines[0].split(" ")[1], **json.loads(body)})
        payload = json.dumps(self.reply).encode()
        writer.write(
            f"HTTP/1.1 {self.status} X\r\ncontent-type: application/json\r\n"
            f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n".encode()
            + payload
        )
        await writer.drain()
        writer.close()


@pytest.fixture
async def server() -> AsyncIterator[FakeChatServer]:
    reply = {
        "model": "tiny-1",
        "choices": [
            {"message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 1},
    }
    async with FakeChatServer(reply) as fake:
        yield fake


async def test_the_openai_compatible_driver_posts_the_chat_and_reads_the_answer(
    server: FakeChatServer,
) -> None:
    async with OpenAICompatibleDriver(
        f"http://127.0.0.1:{server.port}/v1", model="tiny-1", api_key="k-123"
    ) as llm:
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
        FakeChatServer({"error": "overloaded"}, status=503) as server,
        OpenAICompatibleDriver(f"http://127.0.0.1:{server.port}/v1", model="m") as llm,
    ):
        with pytest.raises(LLMError, match="503"):
            await llm.complete([{"role": "user", "content": "hi"}])


async def test_an_unreachable_model_server_is_an_llm_error() -> None:
    async with OpenAICompatibleDriver(f"http://127.0.0.1:{free_port()}/v1", model="m") as llm:
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
