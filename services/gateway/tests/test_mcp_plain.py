"""A 2026-07-28 call without progress: one JSON answer, cancelled when its client leaves,
an event stream with pings once it runs long (disco_gateway.mcp.plain).

The SDK's JSON entry is stood in for by small ASGI apps here; the gateway's e2e
tests (tests/e2e/gateway/test_mcp.py, the stateless era) run the real one.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from disco_gateway.mcp import plain
from disco_gateway.mcp.plain import PlainCall, is_plain_call

_ANSWER = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}).encode()


class _Client:
    """The server side of one HTTP exchange: what was sent, and a disconnect to give."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.left = asyncio.Event()
        self.received = 0

    async def receive(self) -> Message:
        self.received += 1
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")

    def headers(self) -> dict[bytes, bytes]:
        (start,) = (m for m in self.sent if m["type"] == "http.response.start")
        return dict(start["headers"])


def _json_app(delay: float = 0.0, seen: list[bytes] | None = None) -> Any:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        request = await receive()
        if seen is not None:
            seen.append(request["body"])
        await asyncio.sleep(delay)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": _ANSWER, "more_body": False})

    return app


def test_only_a_call_without_a_progress_token_is_plain() -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "a__b"}}
    assert is_plain_call(call)
    assert is_plain_call({**call, "params": {"name": "a__b", "_meta": {"other": 1}}})
    assert not is_plain_call({**call, "params": {"name": "a__b", "_meta": {"progressToken": 7}}})
    assert not is_plain_call({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert not is_plain_call({"jsonrpc": "2.0", "method": "tools/call"})  # a notification
    assert not is_plain_call(None)


async def test_a_call_answered_in_time_is_the_apps_json_unchanged() -> None:
    client = _Client()
    seen: list[bytes] = []

    await PlainCall(b'{"the": "body"}', client.receive, client.send).run(
        _json_app(seen=seen), {"type": "http"}
    )

    assert seen == [b'{"the": "body"}']  # the body the door read, handed to the app
    assert client.headers()[b"content-type"] == b"application/json"
    assert client.body() == _ANSWER


async def test_a_client_that_leaves_cancels_the_call_and_the_app_sees_the_disconnect() -> None:
    client = _Client()
    cancelled = asyncio.Event()
    disconnect_seen: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            # As the tool handler does: ask whether the client went away.
            disconnect_seen.append((await receive())["type"])
            raise

    call = PlainCall(b"{}", client.receive, client.send)
    running = asyncio.create_task(call.run(app, {"type": "http"}))
    await asyncio.sleep(0.01)
    client.left.set()
    await asyncio.wait_for(running, 5)

    assert cancelled.is_set()
    assert call.gone
    assert disconnect_seen == ["http.disconnect"]
    assert client.sent == []  # nobody to answer
    assert not running.cancelled()  # the cancel was the call's own, taken back


async def test_a_disconnect_after_the_answer_cancels_nothing() -> None:
    client = _Client()
    call = PlainCall(b"{}", client.receive, client.send)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await _json_app()(scope, receive, send)
        client.left.set()
        await asyncio.sleep(0.01)  # the watcher sees the disconnect, after the answer

    await call.run(app, {"type": "http"})

    assert not call.gone
    assert client.body() == _ANSWER


async def test_a_cancel_from_elsewhere_is_not_taken_for_the_client_leaving() -> None:
    client = _Client()
    call = PlainCall(b"{}", client.receive, client.send)
    running = asyncio.create_task(call.run(_json_app(delay=60), {"type": "http"}))
    await asyncio.sleep(0.01)
    running.cancel()  # the gateway stopping

    with pytest.raises(asyncio.CancelledError):
        await running
    assert not call.gone


async def test_a_long_call_becomes_an_event_stream_pinged_until_its_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(plain, "PING_SECONDS", 0.05)
    client = _Client()

    await PlainCall(b"{}", client.receive, client.send).run(_json_app(delay=0.2), {"type": "http"})

    assert client.headers()[b"content-type"] == b"text/event-stream"
    assert [m["type"] for m in client.sent].count("http.response.start") == 1
    body = client.body()
    assert body.count(b": ping\r\n\r\n") >= 2
    assert body.endswith(b"event: message\r\ndata: " + _ANSWER + b"\r\n\r\n")
    assert client.sent[-1]["more_body"] is False
