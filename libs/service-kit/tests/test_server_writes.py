"""The server's writes: what a response writes within one loop turn leaves in one send."""

from __future__ import annotations

import asyncio
import socket

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from disco_service._server import _GuardedH11, _TurnWriter, guarded_http_protocol


class _Recorder(asyncio.Transport):
    """A transport that records each send it is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.sends: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.sends.append(bytes(data))

    def writelines(self, list_of_data: object) -> None:
        self.sends.append(b"".join(list_of_data))  # type: ignore[arg-type]

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


async def test_a_write_leaves_with_the_next_one_at_once_or_alone_at_the_end_of_the_turn() -> None:
    transport = _Recorder()
    writer = _TurnWriter(transport, asyncio.get_running_loop())

    writer.write(b"HTTP/1.1 200 OK\r\n\r\n")
    writer.write(b"")
    assert transport.sends == []  # the head waits for the body
    writer.write(b"body")
    assert transport.sends == [b"HTTP/1.1 200 OK\r\n\r\nbody"]  # together, at once

    writer.write(b"a streamed part")
    assert transport.sends[1:] == []
    await asyncio.sleep(0)
    assert transport.sends[1:] == [b"a streamed part"]  # alone, at the end of the turn
    await asyncio.sleep(0)
    assert len(transport.sends) == 2


async def test_closing_sends_what_is_held_first_and_nothing_is_sent_after() -> None:
    transport = _Recorder()
    writer = _TurnWriter(transport, asyncio.get_running_loop())

    writer.write(b"last words")
    writer.close()
    assert transport.sends == [b"last words"]
    assert transport.closed
    assert writer.is_closing()

    writer.write(b"too late")
    await asyncio.sleep(0)
    assert transport.sends == [b"last words"]


@pytest.mark.parametrize("keep_alive", [True, False])
@pytest.mark.parametrize("parser", ["httptools", "h11"])
async def test_a_served_response_arrives_whole_in_one_segment(
    keep_alive: bool, parser: str
) -> None:
    """Through uvicorn with the kit's protocol (either parser): head and body of a small
    response arrive in one read, and a kept-alive connection serves the next request
    the same way."""
    protocol = (
        guarded_http_protocol(10.0)
        if parser == "httptools"
        else type("GuardedH11", (_GuardedH11,), {"head_timeout": 10.0})
    )

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        headers = [(b"content-length", b"5")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"hello"})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, lifespan="off", log_config=None, http=protocol)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection(*sock.getsockname())
        connection = b"keep-alive" if keep_alive else b"close"
        for _ in range(2 if keep_alive else 1):
            writer.write(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: " + connection + b"\r\n\r\n")
            await writer.drain()
            first = await asyncio.wait_for(reader.read(65536), 10)
            assert first.startswith(b"HTTP/1.1 200 OK\r\n")
            assert first.endswith(b"\r\n\r\nhello")
        if not keep_alive:
            assert await asyncio.wait_for(reader.read(), 10) == b""  # closed after it
        writer.close()
    finally:
        server.should_exit = True
        await serving
