"""The door of ``/mcp``: tokens and the 401 challenge, RFC 9728 metadata, protocol versions,
and the tools' list changing as agents come and go."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

from disco.runtime import (
    AgentRunner,
    AgentStatus,
    ApprovalRequested,
    CollectingSink,
    ScriptedDriver,
    ScriptedReply,
    ToolFinished,
)
from disco.runtime.mcp import MCPTools
from tests.e2e.gateway.conftest import ROOT, GatewayProcess, GatewayStack, bearer, token
from tests.e2e.gateway.mcp_clients import INITIALIZE, all_tools, mcp_client
from tests.e2e.gateway.support import metric_value, until

_ACCEPT = {"Accept": "application/json, text/event-stream"}


async def test_a_bad_token_is_a_401_with_the_bearer_challenge_and_the_resource_metadata(
    gateway: GatewayProcess,
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        refused = await http.post(
            f"{gateway.url}/mcp",
            json=INITIALIZE,
            headers={**_ACCEPT, "Authorization": "Bearer not-a-token"},
        )
        metadata_url = f"{gateway.url}/.well-known/oauth-protected-resource/mcp"
        metadata = await http.get(metadata_url)
        root_metadata = await http.get(f"{gateway.url}/.well-known/oauth-protected-resource")

    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert 'error="invalid_token"' in challenge
    assert f'resource_metadata="{metadata_url}"' in challenge
    assert refused.json()["error"]["code"] == "unauthenticated"
    assert metadata.status_code == 200
    assert metadata.json() == root_metadata.json()
    assert metadata.json()["resource"] == f"{gateway.url}/mcp"
    assert metadata.json()["bearer_methods_supported"] == ["header"]


async def test_a_client_offering_2025_06_18_gets_it_and_lists_and_calls(
    gateway: GatewayProcess,
) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token()}"}, timeout=30)
    async with (
        http,
        streamable_http_client(f"{gateway.url}/mcp", http_client=http) as (read, write),
        ClientSession(dispatcher=JSONRPCDispatcher(read, write)) as session,
    ):
        offered = types.InitializeRequestParams(
            protocol_version="2025-06-18",
            capabilities=types.ClientCapabilities(),
            client_info=types.Implementation(name="an-older-client", version="1"),
        )
        initialized = await session.send_request(
            types.InitializeRequest(params=offered), types.InitializeResult
        )
        session.adopt(initialized)
        await session.send_notification(types.InitializedNotification())
        listed = await session.list_tools()
        result = await session.call_tool("gw-math__gw.mul", {"a": 6, "b": 7})

    assert initialized.protocol_version == "2025-06-18"
    assert initialized.capabilities.tools is not None
    assert initialized.capabilities.tools.list_changed is True
    assert "gw-math__gw.mul" in {tool.name for tool in listed.tools}
    assert result.structured_content == {"total": 42}


async def test_a_session_is_found_only_by_whoever_opened_it(gateway: GatewayProcess) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        opened = await http.post(
            f"{gateway.url}/mcp", json=INITIALIZE, headers={**_ACCEPT, **bearer()}
        )
        session_id = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        headers = {**_ACCEPT, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
        other_user = await http.post(
            f"{gateway.url}/mcp", json=listing, headers={**headers, **bearer(user="bob")}
        )
        other_tenant = await http.post(
            f"{gateway.url}/mcp", json=listing, headers={**headers, **bearer(tenant="beta")}
        )
        ended = await http.delete(f"{gateway.url}/mcp", headers={**headers, **bearer()})
        after = await http.post(f"{gateway.url}/mcp", json=listing, headers={**headers, **bearer()})

    assert opened.status_code == 200
    assert other_user.status_code == 404
    assert other_tenant.status_code == 404
    assert ended.status_code == 200
    assert after.status_code == 404


async def _listeners(gateway: GatewayProcess) -> float:
    async with httpx.AsyncClient(timeout=30) as http:
        page = (await http.get(f"{gateway.url}/metrics")).text
    return metric_value(page, "disco_gateway_mcp_listeners", default=0.0)


async def _more_listeners(gateway: GatewayProcess, than: float) -> bool | None:
    return True if await _listeners(gateway) > than else None


@contextlib.asynccontextmanager
async def _newcomer(stack: GatewayStack, name: str) -> AsyncIterator[subprocess.Popen[bytes]]:
    log = (stack.logs / f"{name}.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.gateway.newcomer", name],
        env=stack.env,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(30)
        log.close()


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_tools_list_changed_is_told_as_agents_come_and_go(
    gateway_stack: GatewayStack, gateway: GatewayProcess, era: str
) -> None:
    name = f"gw-new-{uuid.uuid4().hex[:6]}"
    tool = f"{name}__{name}"
    changed = asyncio.Event()

    async def messages(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    listeners_before = await _listeners(gateway)
    async with mcp_client(gateway.url, era, messages=messages) as client:
        if era == "legacy":
            # The SDK opens the session's GET stream by itself, once initialized.
            await until(lambda: _more_listeners(gateway, listeners_before), what="the GET stream")
            listening: contextlib.AbstractAsyncContextManager[object] = contextlib.nullcontext()
        else:
            listening = client.listen(tools_list_changed=True)
        async with listening as subscription:

            async def next_change() -> None:
                if subscription is None:
                    await asyncio.wait_for(changed.wait(), 60)
                    changed.clear()
                else:
                    await asyncio.wait_for(anext(aiter(subscription)), 60)  # type: ignore[call-overload]

            before = {t.name for t in await all_tools(client)}
            async with _newcomer(gateway_stack, name) as newcomer:
                await next_change()
                arrived = {t.name for t in await all_tools(client)}
                answered = await client.call_tool(tool, {"text": "hi"})
                newcomer.send_signal(signal.SIGTERM)
                newcomer.wait(30)
                await next_change()
                gone = {t.name for t in await all_tools(client)}

    assert tool not in before
    assert arrived == before | {tool}
    assert answered.structured_content == {"text": f"{name}: hi"}
    assert gone == before


async def test_an_llm_agent_takes_the_gateways_tools_with_a_token(gateway: GatewayProcess) -> None:
    tools = MCPTools.http(
        f"{gateway.url}/mcp", headers=bearer(), approval={"gw-math__gw.mul": "always"}
    )
    replies = [
        ScriptedReply(tool_calls=[("gw-math__gw_add", {"a": 20, "b": 22})]),
        ScriptedReply(tool_calls=[("gw-math__gw_mul", {"a": 6, "b": 7})]),
        ScriptedReply(text="added, and not multiplied"),
    ]
    runner = AgentRunner("calculator", driver=ScriptedDriver(replies), tools=[tools])
    sink = CollectingSink()
    try:
        waiting = await runner.run(runner.new_state().with_user_message("sums"), events=sink)
        (asked,) = sink.of(ApprovalRequested)
        denied = await runner.decide(waiting, asked.call.id, approved=False, reason="no")
        done = await runner.run(denied, events=sink)
    finally:
        await runner.aclose()

    added, refused = sink.of(ToolFinished)
    assert added.result == {"total": 42}
    assert asked.call.name == "gw-math__gw_mul"
    assert refused.executed is False
    assert done.status is AgentStatus.COMPLETED
