"""An LLM agent (the scripted model) whose tools are a real MCP server's: the example server
(``examples/mcp_server.py``, the official SDK's), over stdio and over Streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from disco._dev.ports import free_port
from disco.runtime import (
    AgentRunner,
    AgentStatus,
    ApprovalRequested,
    CollectingSink,
    ScriptedDriver,
    ScriptedReply,
    ScriptedRequest,
    StepsLimit,
    ToolFinished,
    ToolStarted,
)
from disco.runtime.mcp import MCPTools

ROOT = Path(__file__).resolve().parents[3]
SERVER = ROOT / "examples" / "mcp_server.py"


def _script(request: ScriptedRequest) -> ScriptedReply:
    """The weather, then a table (which waits for approval), then a word on each."""
    calls = [m.name for m in request.messages if m.role == "tool"]
    if "forecast" not in calls:
        return ScriptedReply(tool_calls=[("forecast", {"city": "Lisbon"})])
    if "book_table" not in calls and "book" in request.last_user_text():
        return ScriptedReply(tool_calls=[("book_table", {"restaurant": "Tasca", "time": "20:00"})])
    return ScriptedReply(text=f"done: {request.tool_results()[-1].content}")


@pytest.fixture
def stdio_tools() -> MCPTools:
    return MCPTools.stdio(
        sys.executable, [str(SERVER)], name="travel-tools", approval={"book_table": "always"}
    )


async def test_an_agent_calls_an_mcp_servers_tool_and_another_after_approval(
    stdio_tools: MCPTools,
) -> None:
    seen: list[ScriptedRequest] = []

    def script(request: ScriptedRequest) -> ScriptedReply:
        seen.append(request)
        return _script(request)

    runner = AgentRunner(
        "concierge",
        driver=ScriptedDriver(responder=script),
        tools=[stdio_tools],
        criteria=[StepsLimit(6)],
    )
    sink = CollectingSink()
    try:
        state = runner.new_state().with_user_message("weather in Lisbon, then book a table")
        waiting = await runner.run(state, events=sink)
        (asked,) = sink.of(ApprovalRequested)
        decided = await runner.decide(waiting, asked.call.id, approved=True, events=sink)
        done = await runner.run(decided, events=sink)
    finally:
        await runner.aclose()

    offered = {tool.name: tool for tool in seen[0].tools}
    assert set(offered) == {"forecast", "book_table"}
    assert offered["forecast"].parameters["required"] == ["city"]
    assert offered["forecast"].description == "Today's weather in a city."
    assert waiting.status is AgentStatus.AWAITING_APPROVAL
    assert asked.call.name == "book_table"
    assert asked.arguments == {"restaurant": "Tasca", "time": "20:00"}
    started = [event.call.name for event in sink.of(ToolStarted)]
    assert started == ["forecast", "book_table"]
    finished = {event.call.name: event for event in sink.of(ToolFinished)}
    assert finished["forecast"].result == {"city": "Lisbon", "sky": "sunny", "celsius": 24}
    assert finished["book_table"].result == {
        "reference": "TBL-TAS-2000-2",
        "restaurant": "Tasca",
        "time": "20:00",
        "people": 2,
    }
    assert done.status is AgentStatus.COMPLETED
    assert (
        done.last_response
        == 'done: {"reference":"TBL-TAS-2000-2","restaurant":"Tasca","time":"20:00","people":2}'
    )
    assert [step.tool_calls[0].name for step in done.steps if step.tool_calls] == [
        "forecast",
        "book_table",
    ]


async def test_arguments_that_break_the_tools_schema_go_back_to_the_model(
    stdio_tools: MCPTools,
) -> None:
    replies = [
        ScriptedReply(tool_calls=[("forecast", {"town": "Lisbon"})]),
        ScriptedReply(text="sorry"),
    ]
    runner = AgentRunner("concierge", driver=ScriptedDriver(replies), tools=[stdio_tools])
    sink = CollectingSink()
    try:
        await runner.run(runner.new_state().with_user_message("weather?"), events=sink)
    finally:
        await runner.aclose()

    (finished,) = sink.of(ToolFinished)
    assert finished.executed is False
    assert "'city' is a required property" in str(finished.error)


def _serve(port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def _listening(port: int) -> None:
    for _ in range(300):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the MCP server did not listen on {port}")


@contextlib.asynccontextmanager
async def _http_server(port: int) -> AsyncIterator[subprocess.Popen[bytes]]:
    process = _serve(port)
    try:
        await _listening(port)
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:  # it waits for the client's open streams
                process.kill()
                process.wait(10)


async def test_a_connection_that_failed_is_opened_again_on_the_next_run() -> None:
    port = free_port()
    tools = MCPTools.http(
        f"http://127.0.0.1:{port}/mcp", headers={"X-Api-Key": "k"}, call_timeout_seconds=20
    )
    runner = AgentRunner(
        "concierge",
        driver=ScriptedDriver(responder=_script),
        tools=[tools],
        criteria=[StepsLimit(4)],
    )
    sink = CollectingSink()

    async def ask() -> None:
        await runner.run(runner.new_state().with_user_message("weather in Lisbon"), events=sink)

    try:
        async with _http_server(port) as server:
            await ask()
            server.kill()
            server.wait(10)
            await ask()  # the server is gone: the call fails, the model hears why
        async with _http_server(port):
            await ask()  # a new connection
    finally:
        await runner.aclose()

    outcomes = [event.success for event in sink.of(ToolFinished)]
    assert outcomes == [True, False, True]
    failed = sink.of(ToolFinished)[1]
    assert "ConnectionError" in str(failed.error) or "connection" in str(failed.error).lower()
