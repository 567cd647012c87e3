"""The gateway's ``/mcp`` with the official MCP SDK's client, on both protocol eras.

The gateway, its agents, the registry and memory run as processes on the
session's broker and a database of their own (:mod:`tests.e2e.gateway.conftest`).
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.e2e.gateway.conftest import OTHER_TENANT, TENANT, GatewayProcess, GatewayStack, bearer
from tests.e2e.gateway.mcp_clients import (
    ERAS,
    Answered,
    all_tools,
    answering,
    mcp_client,
    text_of,
)
from tests.e2e.gateway.support import bus_side
from tests.fixtures.waiting import eventually

pytestmark = pytest.mark.parametrize("era", ERAS)


async def test_tools_are_the_tenants_skills_with_their_schemas_and_agent_version(
    gateway: GatewayProcess, era: str
) -> None:
    async with mcp_client(gateway.url, era) as client:
        tools = {tool.name: tool for tool in await all_tools(client)}

    echo = tools["gw-echo__gw.echo"]
    assert echo.description == "Echoes the text it is given."
    assert echo.input_schema["type"] == "object"
    assert echo.input_schema["required"] == ["text"]
    assert echo.output_schema is not None
    assert echo.output_schema["type"] == "object"
    assert echo.meta is not None
    assert echo.meta["disco/agent"] == "gw-echo"
    assert echo.meta["disco/skill"] == "gw.echo"
    assert echo.meta["disco/version"]
    assert {"gw-math__gw.add", "gw-math__gw.mul", "hello__hello"} <= set(tools)


async def test_a_call_answers_with_structured_content_and_its_json_as_text(
    gateway: GatewayProcess, era: str
) -> None:
    async with mcp_client(gateway.url, era) as client:
        result = await client.call_tool("gw-math__gw.add", {"a": 2, "b": 40})

    assert result.is_error is not True
    assert result.structured_content == {"total": 42}
    assert text_of(result) == '{"total":42}'


async def test_invalid_arguments_are_refused_with_the_schemas_message_and_nothing_is_sent(
    gateway_stack: GatewayStack, gateway: GatewayProcess, era: str
) -> None:
    marker = uuid.uuid4().hex[:6]
    too_long = f"far-too-long-{marker}"
    async with bus_side(gateway_stack) as bus, mcp_client(gateway.url, era) as client:
        refused = await client.call_tool("gw-strict__gw.strict", {"name": too_long, "count": 1})
        # Sent after the refused one: once its answer is back, the bus shows all before it.
        answered = await client.call_tool("gw-strict__gw.strict", {"name": marker, "count": 2})
        await bus.first(
            lambda topic, e: topic == "action-requests" and (e.data or {}).get("name") == marker  # type: ignore[union-attr]
        )
        sent = bus.matching(
            lambda topic, e: topic == "action-requests" and (e.data or {}).get("name") == too_long  # type: ignore[union-attr]
        )

    assert refused.is_error is True
    assert "name" in text_of(refused)
    assert "too long" in text_of(refused)
    assert sent == []
    assert answered.structured_content == {"name": marker, "count": 2}


async def test_an_agents_error_answer_is_an_error_result_with_its_type_and_message(
    gateway: GatewayProcess, era: str
) -> None:
    async with mcp_client(gateway.url, era) as client:
        result = await client.call_tool("gw-fail__gw.fail", {"text": "no way"})

    assert result.is_error is True
    assert "the tool refuses: no way" in text_of(result)
    assert result.structured_content is not None
    error = result.structured_content["error"]
    assert error["message"] == "the tool refuses: no way"
    assert error["type"]


async def test_progress_and_partial_answers_become_progress_notifications(
    gateway: GatewayProcess, era: str
) -> None:
    seen: list[tuple[float, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, message))

    async with mcp_client(gateway.url, era) as client:
        result = await client.call_tool(
            "gw-story__gw.story", {"text": "a dragon"}, progress_callback=progress
        )

    messages = [message for _, message in seen]
    assert "Thinking of a story..." in messages
    assert "Once " in messages
    assert "upon a time." in messages
    values = [value for value, _ in seen]
    assert values == sorted(values)
    assert len(set(values)) == len(values)
    assert result.is_error is not True
    blocks = result.content
    # The artifact it streamed in chunks, then the ones of its answer: a file, a link, data.
    assert isinstance(blocks[0], types.TextContent)
    assert blocks[0].text == "Once upon a time."
    (story,) = [b for b in blocks if isinstance(b, types.EmbeddedResource)]
    assert isinstance(story.resource, types.BlobResourceContents)
    assert base64.b64decode(story.resource.blob) == b"Once upon a time."
    assert story.resource.mime_type == "text/plain"
    (cover,) = [b for b in blocks if isinstance(b, types.ResourceLink)]
    assert str(cover.uri) == "https://example.com/cover.png"
    assert '{"words":4,"about":"a dragon"}' in text_of(result)


async def test_a_cancelled_call_asks_the_agent_to_stop_and_it_does(
    gateway_stack: GatewayStack, gateway: GatewayProcess, era: str
) -> None:
    text = f"cancel-me-{uuid.uuid4().hex[:8]}"
    answers = Answered()
    async with (
        bus_side(gateway_stack) as bus,
        mcp_client(gateway.url, era, transport=answers) as client,
    ):

        async def call() -> None:
            await client.call_tool("gw-slow__gw.slow", {"text": text})

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            request = await bus.first(
                lambda topic, e: topic == "action-requests" and (e.data or {}).get("text") == text  # type: ignore[union-attr]
            )
            # The agent works on it (it said so to the caller): now cancel the call.
            await bus.first(
                lambda topic, e: (
                    topic == "action-results"
                    and e.type == "action.progressed"
                    and e.correlation_id == request.correlation_id
                )
            )
            group.cancel_scope.cancel()
        cancelled = await bus.first(
            lambda topic, e: (
                topic == "system-events"
                and e.type == "task.cancelled"
                and e.task_id == request.task_id
            )
        )
        # The cancelled call's own answer (a 2025 session answers it with a JSON body) is
        # read before the client closes.
        await eventually(lambda: answers.unread == 0, what="every answer read")

    assert cancelled.tenant_id == TENANT


async def test_a_question_to_a_person_is_a_form_whose_answer_the_agent_gets(
    gateway: GatewayProcess, era: str
) -> None:
    form = answering({"name": "Ada", "age": 36})
    async with mcp_client(gateway.url, era, elicitation=form) as client:
        result = await client.call_tool("gw-form__gw.form", {"text": "stranger"})

    assert result.is_error is not True, text_of(result)
    assert result.structured_content == {"text": "Hello, Ada (36)!"}
    (asked,) = form.asked  # type: ignore[attr-defined]
    assert asked.message == "Who are you, stranger?"
    assert set(asked.requested_schema["properties"]) == {"name", "age"}


async def test_a_choice_is_a_form_of_the_options(gateway: GatewayProcess, era: str) -> None:
    form = answering({"answer": "Grace"})
    async with mcp_client(gateway.url, era, elicitation=form) as client:
        result = await client.call_tool("gw-asker__gw.ask", {"text": "hi"})

    assert result.structured_content == {"text": "Hello, Grace!"}
    (asked,) = form.asked  # type: ignore[attr-defined]
    assert asked.requested_schema["properties"]["answer"]["enum"] == ["Ada", "Grace"]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_form_is_the_agents_timeout_path(
    gateway: GatewayProcess, era: str, action: str
) -> None:
    form = answering(None, action=action)
    async with mcp_client(gateway.url, era, elicitation=form) as client:
        result = await client.call_tool("gw-form__gw.form", {"text": "shy"})

    assert result.structured_content == {"text": "nobody answered"}


async def test_a_client_without_forms_is_told_how_to_answer_over_http(
    gateway: GatewayProcess, era: str
) -> None:
    async with mcp_client(gateway.url, era) as client:
        asked = await client.call_tool("gw-asker__gw.ask", {"text": "hi"})

    assert asked.is_error is True
    assert "What is your name?" in text_of(asked)
    details: dict[str, Any] = asked.structured_content or {}
    assert details["status"] == "input-required"
    answer = details["answer"]
    async with httpx.AsyncClient(headers=bearer(), timeout=30) as http:
        response = await http.post(answer["url"], json={"answer": "Ada"})
        assert response.status_code == 202, response.text

        async def completed() -> dict[str, Any] | None:
            task_url = f"{gateway.url}/a2a/gw-asker/tasks/{details['task_id']}"
            task = (await http.get(task_url, headers={"A2A-Version": "1.0"})).json()
            state = task.get("status", {}).get("state")
            return task if state == "TASK_STATE_COMPLETED" else None

        task = await _until(completed)
    assert "Hello, Ada!" in str(task)


async def test_another_tenant_neither_sees_nor_calls_the_tenants_agents(
    gateway: GatewayProcess, era: str
) -> None:
    async with mcp_client(gateway.url, era, tenant=OTHER_TENANT) as client:
        names = {tool.name for tool in await all_tools(client)}
        with pytest.raises(MCPError, match="unknown tool"):
            await client.call_tool("gw-echo__gw.echo", {"text": "hi"})

    assert "gw-echo__gw.echo" not in names
    assert "gw-slow__gw.slow" in names  # registered public: every tenant sees it


async def test_without_a_token_only_the_public_agents_are_tools(
    gateway: GatewayProcess, era: str
) -> None:
    async with mcp_client(gateway.url, era, tenant=None) as client:
        names = {tool.name for tool in await all_tools(client)}
        greeted = await client.call_tool("hello__hello", {"name": "Ada"})
        with pytest.raises(MCPError, match="unknown tool"):
            await client.call_tool("gw-echo__gw.echo", {"text": "hi"})

    assert names == {"hello__hello"}
    assert greeted.structured_content == {"message": "Hello, Ada!"}


async def _until(check: Any, timeout: float = 30.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while (found := await check()) is None:
        assert asyncio.get_running_loop().time() < deadline, "not in time"
        await asyncio.sleep(0.2)
    return found
