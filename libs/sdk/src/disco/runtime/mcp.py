"""The tools of MCP servers as an LLM agent's tools (the official ``mcp`` SDK's client).

Needs the ``mcp`` extra (``pip install 'disco-sdk[mcp]'``)::

    from disco.runtime import AgentRunner
    from disco.runtime.mcp import MCPTools

    runner = AgentRunner(
        "assistant",
        driver=driver,
        tools=[
            lookup_weather,                                   # a typed function, as ever
            MCPTools.http(
                "https://tools.example.com/mcp",
                headers={"Authorization": f"Bearer {token}"},
                approval={"book_table": "always"},            # per tool; the rest: never
            ),
            MCPTools.stdio(sys.executable, ["examples/mcp_server.py"], prefix="local_"),
        ],
    )

Each MCP tool becomes a tool of the agent: its name (``prefix`` + the tool's
name, written with what model APIs accept: ``[A-Za-z0-9_-]{1,64}``), its
description and its input schema are what the model sees; its arguments are
checked against that schema; a call goes through the runtime like any tool's
(approval policy, continuation limits, the call and its result in the state's
execution buffer, steps, ``TOOL_*`` and ``agent.tool.*`` UI events). A result
is the tool's ``structuredContent``, else its text; an ``isError`` result is a
failed call (:class:`MCPToolError`), which the model reads as an error.

The connection is opened on the runner's first run and kept for the process
(one per :class:`MCPTools`), by a task of its own; when it fails (the server
went away), the call fails and the next use opens a new one. The tools are
listed once and again when the server says they changed
(``notifications/tools/list_changed``, or a 2026-07-28 ``subscriptions/listen``
stream). ``await runner.aclose()`` (or ``MCPTools.aclose``) closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client import Transport
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from disco.runtime._tools import AgentTool, ApprovalPolicy, Redaction

__all__ = ["MCPToolError", "MCPTools"]

_MODEL_NAME = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64
_OPEN_TIMEOUT_SECONDS = 60.0


class MCPToolError(RuntimeError):
    """An MCP tool answered with an error (``isError``); its message is the tool's text."""


def _model_name(name: str) -> str:
    safe = _MODEL_NAME.sub("_", name)
    if len(safe) <= _MAX_NAME:
        return safe
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{safe[: _MAX_NAME - 9]}_{digest}"


def _value(result: types.CallToolResult) -> Any:
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    if result.is_error:
        raise MCPToolError("\n".join(texts) or "the tool failed")
    if result.structured_content is not None:
        return result.structured_content
    if len(texts) == len(result.content):
        return "\n".join(texts)
    return [
        block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
    ]


class _Connection:
    """One open client, in a task of its own (the SDK's client is entered and left in one task)."""

    def __init__(self, transport: Transport, changed: Callable[[], None]) -> None:
        self._transport = transport
        self._changed = changed
        self.client: Client | None = None
        self.broken = False
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> Client:
        self._task = asyncio.create_task(self._run(), name="disco-mcp-connection")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), _OPEN_TIMEOUT_SECONDS)
        if self.client is None:
            await self.close()
            raise ConnectionError(f"cannot connect: {self._error!r}") from self._error
        return self.client

    async def _messages(self, message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._changed()

    async def _listen(self, client: Client) -> None:
        with contextlib.suppress(Exception):  # no stream: the tools are listed again on failure
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    self._changed()

    async def _run(self) -> None:
        try:
            async with Client(
                self._transport, mode="auto", message_handler=self._messages, cache=None
            ) as client:
                self.client = client
                self._ready.set()
                async with anyio.create_task_group() as group:
                    tools = client.server_capabilities.tools
                    if client.protocol_version in MODERN_PROTOCOL_VERSIONS and (
                        tools is not None and tools.list_changed
                    ):
                        group.start_soon(self._listen, client)
                    await self._stop.wait()
                    group.cancel_scope.cancel()
        except BaseException as exc:
            self._error = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            self.broken = True
            self.client = None
            self._ready.set()

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 10)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task


class MCPTools:
    """The tools of one MCP server, for an :class:`~disco.runtime.AgentRunner` (see the module
    docs). Build one with :meth:`http` or :meth:`stdio`.

    Args:
        connect: makes the transport to the server (a new one for each connection).
        name: what the server is called in errors and logs.
        approval: one policy for every tool, or a policy per tool name (others: never).
        redact: what approvers see of a call's arguments: one rule, or one per tool name.
        prefix: put before every tool's name (to tell two servers' tools apart).
        call_timeout_seconds: how long one call may take (None: no limit).
    """

    def __init__(
        self,
        connect: Callable[[], Transport],
        *,
        name: str,
        approval: ApprovalPolicy | Mapping[str, ApprovalPolicy] = "never",
        redact: Redaction | Mapping[str, Redaction] = None,
        prefix: str = "",
        call_timeout_seconds: float | None = 300.0,
    ) -> None:
        self.name = name
        self._connect = connect
        self._approval = approval
        self._redact = redact
        self._prefix = prefix
        self._call_timeout = call_timeout_seconds
        self._connection: _Connection | None = None
        self._tools: list[AgentTool] | None = None
        self._lock = asyncio.Lock()

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        timeout_seconds: float = 30.0,
        **options: Any,
    ) -> MCPTools:
        """The tools of the MCP server at ``url`` (Streamable HTTP), sent ``headers`` (a token).

        ``options``: :class:`MCPTools`'s ``approval``, ``redact``, ``prefix``,
        ``call_timeout_seconds``.
        """

        @contextlib.asynccontextmanager
        async def connect() -> AsyncIterator[Any]:
            timeout = httpx2.Timeout(timeout_seconds, read=max(timeout_seconds, 300.0))
            async with (
                httpx2.AsyncClient(headers=dict(headers or {}), timeout=timeout) as http,
                streamable_http_client(url, http_client=http) as streams,
            ):
                yield streams

        return cls(connect, name=name or url, **options)

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        name: str | None = None,
        **options: Any,
    ) -> MCPTools:
        """The tools of the MCP server the command starts (stdio); it gets a minimal
        environment plus ``env``. ``options``: as :meth:`http`."""
        parameters = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
        )
        return cls(lambda: stdio_client(parameters), name=name or command, **options)

    @property
    def may_need_approval(self) -> bool:
        """Whether any tool's call could need approval."""
        if isinstance(self._approval, Mapping):
            return any(policy not in ("never", False) for policy in self._approval.values())
        return self._approval not in ("never", False)

    async def agent_tools(self) -> Sequence[AgentTool]:
        """The server's tools as agent tools (listed once; again after a change).

        Raises:
            ConnectionError: the server cannot be reached.
            MCPError: it refused to list its tools.
        """
        async with self._lock:
            if self._tools is None or self._connection is None or self._connection.broken:
                client = await self._client()
                listed: list[types.Tool] = []
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    listed += page.tools
                    if (cursor := page.next_cursor) is None:
                        break
                self._tools = self._agent_tools(listed)
            return self._tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Call the server's tool ``tool`` (its MCP name): its structured content, else text.

        Raises:
            MCPToolError: the tool answered with an error.
            MCPError: the server refused the call (an unknown tool, bad arguments).
            ConnectionError: the call failed on the way (the next use opens another
                connection).
        """
        client = await self._client()
        try:
            result = await client.call_tool(
                tool, arguments, read_timeout_seconds=self._call_timeout
            )
        except MCPError as exc:
            if exc.code in (types.INVALID_PARAMS, types.METHOD_NOT_FOUND):
                self._tools = None  # an unknown tool, or other arguments: list them again
                raise
            # The server or the way to it failed (a restart, a lost session): start afresh.
            await self._drop()
            raise ConnectionError(f"the connection to {self.name} failed: {exc}") from exc
        except (
            OSError,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            httpx2.HTTPError,
        ) as exc:
            await self._drop()
            raise ConnectionError(f"the connection to {self.name} failed: {exc!r}") from exc
        return _value(result)

    async def aclose(self) -> None:
        """Close the connection (the next use opens another)."""
        await self._drop()

    async def _client(self) -> Client:
        connection = self._connection
        if connection is not None and not connection.broken and connection.client is not None:
            return connection.client
        await self._drop()
        self._connection = _Connection(self._connect(), self._changed)
        return await self._connection.open()

    async def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    def _changed(self) -> None:
        self._tools = None

    def _agent_tools(self, listed: Sequence[types.Tool]) -> list[AgentTool]:
        tools: list[AgentTool] = []
        taken: set[str] = set()
        for tool in listed:
            name = _model_name(f"{self._prefix}{tool.name}")
            if name in taken:
                name = _model_name(f"{name}_{hashlib.sha256(tool.name.encode()).hexdigest()[:6]}")
            taken.add(name)

            async def call(arguments: dict[str, Any], _tool: str = tool.name) -> Any:
                return await self.call(_tool, arguments)

            tools.append(
                AgentTool.from_schema(
                    name,
                    call,
                    parameters=tool.input_schema,
                    description=tool.description or tool.title or tool.name,
                    approval=_pick(self._approval, tool.name, "never"),
                    redact=_pick(self._redact, tool.name, None),
                )
            )
        return tools


def _pick(rule: Any, tool: str, default: Any) -> Any:
    if isinstance(rule, Mapping):
        return rule.get(tool, default)
    return rule
