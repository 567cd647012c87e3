"""A websocket client of a session stream for the tests: collects what arrives, waits on it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

import websockets
from websockets.asyncio.client import ClientConnection

from tests.e2e.gateway.conftest import TENANT, USER, token

Message = dict[str, Any]


class StreamClient:
    """One socket on ``/v1/sessions/{id}/stream``: every message kept in ``received``."""

    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection
        self.received: list[Message] = []
        self.closed: tuple[int | None, str | None] | None = None
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for raw in self.connection:
                self.received.append(json.loads(raw))
                self._changed.set()
        except websockets.ConnectionClosed:
            pass
        self.closed = (self.connection.close_code, self.connection.close_reason)
        self._changed.set()

    async def send(self, message: Message) -> None:
        await self.connection.send(json.dumps(message))

    def of_type(self, *types: str) -> list[Message]:
        return [m for m in self.received if m["type"] in types]

    async def wait_for(
        self, predicate: Callable[[Message], bool], *, count: int = 1, timeout: float = 30.0
    ) -> list[Message]:
        """The first ``count`` messages matching ``predicate`` (waits for them)."""
        try:
            async with asyncio.timeout(timeout):
                while len(found := [m for m in self.received if predicate(m)]) < count:
                    if self.closed is not None:
                        raise AssertionError(f"the socket closed: {self.closed}")
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            types = [m["type"] for m in self.received][-30:]
            raise AssertionError(
                f"no {count} matching messages in {timeout}s; got {types}"
            ) from None
        return found[:count]

    async def request(self, message: Message, *, timeout: float = 30.0) -> Message:
        """Send ``message`` with a request id; its ACK, ERROR or PONG."""
        request_id = f"r{len(self.received)}-{id(message)}"
        await self.send({**message, "request_id": request_id})
        (reply,) = await self.wait_for(
            lambda m: (
                m["type"] in ("ACK", "ERROR", "PONG")
                and m["payload"].get("request_id") == request_id
            ),
            timeout=timeout,
        )
        return reply

    async def wait_closed(self, timeout: float = 30.0) -> tuple[int | None, str | None]:
        async with asyncio.timeout(timeout):
            while self.closed is None:
                self._changed.clear()
                await self._changed.wait()
        return self.closed


def ws_url(http_url: str, session_id: str, **query: str | list[str]) -> str:
    from urllib.parse import urlencode

    base = http_url.replace("http://", "ws://", 1)
    suffix = f"?{urlencode(query, doseq=True)}" if query else ""
    return f"{base}/v1/sessions/{session_id}/stream{suffix}"


@contextlib.asynccontextmanager
async def stream(
    http_url: str,
    session_id: str,
    *,
    tenant: str = TENANT,
    user: str = USER,
    bearer: str | None = None,
    how: str = "header",
    max_queue: int | None = 1024,
    read: bool = True,
    receive_buffer: int | None = None,
    **query: str | list[str],
) -> AsyncIterator[StreamClient]:
    """A connected :class:`StreamClient` (token in the header, a subprotocol or the query).

    With ``read=False`` nothing is read until ``client.start()`` (a client that stalls).
    ``receive_buffer`` fixes the socket's kernel receive buffer (no autotuning: on
    loopback it would grow to tens of MB and hide a stalled reader from the server).
    """
    jwt = bearer if bearer is not None else token(tenant, user)
    headers: dict[str, str] = {}
    protocols: list[str] | None = None
    if how == "header":
        headers["Authorization"] = f"Bearer {jwt}"
    elif how == "subprotocol":
        protocols = ["disco.v1", f"bearer.{jwt}"]
    elif how == "query":
        query = {**query, "access_token": jwt}
    sock: socket.socket | None = None
    if receive_buffer is not None:
        address = urlsplit(http_url)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (address.hostname, address.port))
    connection = await websockets.connect(
        ws_url(http_url, session_id, **query),
        sock=sock,
        additional_headers=headers,
        subprotocols=protocols,  # type: ignore[arg-type]
        max_queue=max_queue,
        max_size=None,
        compression=None,  # what a test sends must weigh on the wire what it weighs
        # A stalled client reads no frame, its own keepalive pongs included: with the
        # default keepalive (a ping every 20 s, 20 s for its pong) it closed itself
        # (1006) whenever a loaded machine made the stall last longer than that.
        ping_interval=20 if read else None,
    )
    client = StreamClient(connection)
    if read:
        client.start()
    try:
        yield client
    finally:
        await connection.close()
        if client._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await client._task


def subsequence(types: list[str], expected: list[str]) -> bool:
    """Whether ``expected`` appears in ``types`` in order (other types may sit between)."""
    position = 0
    for kind in types:
        if position < len(expected) and kind == expected[position]:
            position += 1
    return position == len(expected)
