"""A local OpenAI-compatible chat-completions server for the driver tests.

It speaks just enough HTTP/1.1 (one request per connection) and answers each
``POST /v1/chat/completions`` with the next scripted reply: a JSON body, a
stream of server-sent events, or an error status.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from disco._dev.ports import free_port


@dataclass
class Reply:
    """One answer: ``events`` (streamed as SSE) or ``body`` (JSON), with a status."""

    status: int = 200
    body: dict[str, Any] | None = None
    events: list[dict[str, Any]] | None = None
    headers: dict[str, str] = field(default_factory=dict)


def chunk(
    *,
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
    usage: dict[str, int] | None = None,
    choices: bool = True,
) -> dict[str, Any]:
    """One ``chat.completion.chunk``."""
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "fake-1",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
        if choices
        else [],
        "usage": usage,
    }


class FakeOpenAI:
    """``async with FakeOpenAI(replies) as server:``; ``server.base_url`` for the driver."""

    def __init__(self, replies: list[Reply] | Callable[[dict[str, Any]], Reply]) -> None:
        self._replies = replies
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.port = free_port()
        self._server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> FakeOpenAI:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def _next(self, request: dict[str, Any]) -> Reply:
        if callable(self._replies):
            return self._replies(request)
        if len(self._replies) > 1:
            return self._replies.pop(0)
        return self._replies[0]  # the last reply repeats

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            headers = {
                k.lower(): v.strip()
                for k, _, v in (line.partition(":") for line in lines[1:] if line)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            request = {"path": lines[0].split(" ")[1], **json.loads(body)}
            self.headers.append(headers)
            self.requests.append(request)
            reply = self._next(request)
            extra = "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items())
            if reply.events is not None:
                writer.write(
                    f"HTTP/1.1 {reply.status} X\r\ncontent-type: text/event-stream\r\n{extra}"
                    "connection: close\r\n\r\n".encode()
                )
                for event in reply.events:
                    writer.write(f"data: {json.dumps(event)}\n\n".encode())
                    await writer.drain()
                writer.write(b"data: [DONE]\n\n")
            else:
                payload = json.dumps(reply.body or {}).encode()
                writer.write(
                    f"HTTP/1.1 {reply.status} X\r\ncontent-type: application/json\r\n{extra}"
                    f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n".encode()
                    + payload
                )
            await writer.drain()
        finally:
            writer.close()
