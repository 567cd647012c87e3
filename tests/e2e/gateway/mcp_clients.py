"""The official MCP SDK's client against the gateway's ``/mcp``, as the end-to-end tests use it."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.session import ElicitationFnT, MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.gateway.conftest import TENANT, USER, token

ERAS = ("legacy", "2026-07-28")
"""The two ways a client connects: the initialize handshake (2025-11-25, a session), and
the stateless 2026-07-28 protocol."""

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"},
    },
}
"""The ``initialize`` a raw HTTP client posts to open a 2025-11-25 session."""


class Answered(httpx2.AsyncBaseTransport):
    """Counts the POSTs whose answers the client has not read to their end yet
    (``unread``; a session's standing GET stream is not counted): a test waits for none
    before it closes its client, so that no late answer lands on a client being closed
    (the SDK's client then fails its own exit)."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self.unread = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST":
            return await self._inner.handle_async_request(request)
        self.unread += 1
        try:
            response = await self._inner.handle_async_request(request)
        except BaseException:
            self.unread -= 1
            raise
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_Counted(response.stream, self),  # type: ignore[arg-type]
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Counted(httpx2.AsyncByteStream):
    """A response body that tells its :class:`Answered` once it is closed."""

    def __init__(self, inner: httpx2.AsyncByteStream, owner: Answered) -> None:
        self._inner = inner
        self._owner: Answered | None = owner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        owner, self._owner = self._owner, None
        try:
            await self._inner.aclose()
        finally:
            if owner is not None:
                owner.unread -= 1


class RoundRobin(httpx2.AsyncBaseTransport):
    """Sends each request to the next of several gateways, as a balancer without affinity."""

    def __init__(self, urls: Sequence[str]) -> None:
        self._targets = itertools.cycle([httpx2.URL(url) for url in urls])
        self._inner = httpx2.AsyncHTTPTransport()
        self.sent: list[tuple[str, str]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        target = next(self._targets)
        request.url = request.url.copy_with(host=target.host, port=target.port)
        self.sent.append((request.method, f"{target.host}:{target.port}"))
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def mcp_client(
    url: str,
    mode: str,
    *,
    tenant: str | None = TENANT,
    user: str = USER,
    bearer: str | None = None,
    elicitation: ElicitationFnT | None = None,
    messages: MessageHandlerFnT | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
) -> AsyncIterator[Client]:
    """A connected SDK client of ``{url}/mcp`` in ``mode`` (``legacy``: the handshake; a
    version: that stateless version), with a dev token of ``tenant`` (None: no token;
    ``bearer``: that one instead)."""
    headers: dict[str, str] = {}
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    elif tenant is not None:
        headers["Authorization"] = f"Bearer {token(tenant, user)}"
    http = httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(30, read=300), transport=transport
    )
    async with http:
        client = Client(
            streamable_http_client(f"{url}/mcp", http_client=http),
            mode=mode,
            elicitation_callback=elicitation,
            message_handler=messages,
            cache=None,
        )
        async with client:
            yield client


async def all_tools(client: Client) -> list[types.Tool]:
    """Every tool, page after page."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            return tools


def answering(content: dict[str, Any] | None, action: str = "accept") -> ElicitationFnT:
    """An elicitation callback that answers every form with ``content`` (or ``action``),
    and keeps the forms it was shown (``.asked``)."""
    asked: list[types.ElicitRequestParams] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    answer.asked = asked  # type: ignore[attr-defined]
    return answer


def text_of(result: types.CallToolResult) -> str:
    """The text blocks of a result, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
