"""``/mcp`` on two gateway instances: one client's requests spread over both, with no
affinity; and what a second instance configured otherwise does (a short call wait, small
pages, no public agent)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from tests.e2e.gateway.conftest import GatewayProcess, GatewayStack, bearer
from tests.e2e.gateway.mcp_clients import (
    ERAS,
    RoundRobin,
    all_tools,
    answering,
    mcp_client,
    text_of,
)
from tests.e2e.gateway.support import until

WAIT_SECONDS = 3


@pytest.fixture(scope="module")
def second(gateway_stack: GatewayStack) -> Iterator[GatewayProcess]:
    """Another instance of the same gateway: a 3 s call wait, pages of 3, no public agent."""
    env = {
        **gateway_stack.gateway_env,
        "DISCO_GATEWAY_MCP_CALL_TIMEOUT_SECONDS": str(WAIT_SECONDS),
        "DISCO_GATEWAY_MCP_PAGE_SIZE": "3",
        "DISCO_GATEWAY_PUBLIC_AGENTS": "",
    }
    process = GatewayProcess(env, gateway_stack.logs)
    gateway_stack.gateways.append(process)
    yield process.start()
    process.stop()


@pytest.mark.parametrize("era", ERAS)
async def test_two_instances_serve_one_clients_consecutive_requests(
    gateway: GatewayProcess, twin_gateway: GatewayProcess, era: str
) -> None:
    # Two instances configured alike: the short-wait ``second`` would turn a slow answer on a
    # loaded machine into a "still working" result, which is the next test's subject.
    spread = RoundRobin([gateway.url, twin_gateway.url])
    form = answering({"name": "Grace", "age": 85})
    async with mcp_client(gateway.url, era, elicitation=form, transport=spread) as client:
        tools = {tool.name for tool in await all_tools(client)}
        added = await client.call_tool("gw-math__gw.add", {"a": 1, "b": 2})
        multiplied = await client.call_tool("gw-math__gw.mul", {"a": 3, "b": 4})
        # Asked on one instance, answered through the other.
        greeted = await client.call_tool("gw-form__gw.form", {"text": "admiral"})

    posts = [instance for method, instance in spread.sent if method == "POST"]
    assert len(set(posts)) == 2
    assert "gw-echo__gw.echo" in tools
    assert added.structured_content == {"total": 3}
    assert multiplied.structured_content == {"total": 12}
    assert greeted.structured_content == {"text": "Hello, Grace (85)!"}


@pytest.mark.parametrize("era", ERAS)
async def test_a_call_unanswered_in_time_names_its_task_which_a2a_follows(
    gateway: GatewayProcess, second: GatewayProcess, era: str
) -> None:
    async with mcp_client(second.url, era) as client:
        result = await client.call_tool("gw-slow__gw.slow", {"text": "forever"})

    assert result.is_error is True
    details = result.structured_content or {}
    task_id = details["task_id"]
    assert task_id in text_of(result)
    assert f"within {WAIT_SECONDS} s" in text_of(result)
    task_url = f"{gateway.url}/a2a/gw-slow/tasks/{task_id}"
    headers = {**bearer(), "A2A-Version": "1.0"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        task = (await http.get(task_url)).json()
        assert task["status"]["state"] == "TASK_STATE_WORKING"
        canceled = await http.post(f"{task_url}:cancel", json={})
        assert canceled.status_code == 200, canceled.text

        async def stopped() -> str | None:
            state = (await http.get(task_url)).json()["status"]["state"]
            return state if state == "TASK_STATE_CANCELED" else None

        await until(stopped, what="the task canceled")


async def test_tools_list_comes_in_pages_by_name(
    gateway: GatewayProcess, second: GatewayProcess
) -> None:
    async with mcp_client(second.url, "legacy") as client:
        first = await client.list_tools()
        paged = await all_tools(client)
        with pytest.raises(MCPError, match="cursor"):
            await client.list_tools(cursor="not-a-cursor")
    async with mcp_client(gateway.url, "legacy") as client:
        whole = await all_tools(client)

    assert len(first.tools) == 3
    assert first.next_cursor is not None
    names = [tool.name for tool in paged]
    assert names == sorted(names)
    assert names == [tool.name for tool in whole]


async def test_without_a_token_and_no_public_agent_it_is_a_401_naming_the_metadata(
    second: GatewayProcess,
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        refused = await http.post(
            f"{second.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )

    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    metadata = f"{second.url}/.well-known/oauth-protected-resource/mcp"
    assert challenge == f'Bearer resource_metadata="{metadata}"'
    with pytest.raises(BaseExceptionGroup) as caught:
        async with mcp_client(second.url, "legacy", tenant=None):
            pass
    # The SDK's client gets no session: it says the server answered with an error.
    assert [type(error) for error in _leaves(caught.value)] == [MCPError]


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error
