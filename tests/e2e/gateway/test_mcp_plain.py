"""The calls ``/mcp`` answers with one JSON body by itself (disco_gateway.mcp.plain) answer
exactly as the SDK's own entry does, and what those checks do not take still reaches it.

Each request is sent twice over raw HTTP: as it is (no progress token: the plain path) and
with a progress token (the SDK's entry, ready to stream). The JSON-RPC answers must match.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import pytest

from tests.e2e.gateway.conftest import GatewayProcess, bearer
from tests.e2e.gateway.mcp_clients import INITIALIZE

MODERN = "2026-07-28"
_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
_ACCEPT = {"Accept": "application/json, text/event-stream"}
_ids = itertools.count(1)

# (tool, arguments): an answer, an unknown tool, arguments the tool's schema refuses,
# an agent's error answer.
CALLS = [
    ("gw-math__gw.add", {"a": 2, "b": 40}),
    ("no-such__tool", {}),
    ("gw-strict__gw.strict", {"name": "far-too-long-for-the-schema", "count": 1}),
    ("gw-fail__gw.fail", {"text": "no way"}),
]


def _answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer of a response, a JSON body or the last event of a stream; its id
    left out (each request has its own)."""
    text = response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        text = [line[5:] for line in text.splitlines() if line.startswith("data:")][-1]
    answer: dict[str, Any] = json.loads(text)
    answer.pop("id")
    return answer


def _stable(answer: dict[str, Any]) -> dict[str, Any]:
    """What stays the same between two calls: the task id in an agent's answer differs."""
    text = json.dumps(answer)
    for word in text.split('"'):
        if word.startswith("mcp-") or word.count("-") == 4:  # a task id or a uuid
            text = text.replace(word, "<id>")
    stable: dict[str, Any] = json.loads(text)
    return stable


async def _modern_call(
    http: httpx.AsyncClient, url: str, tool: str, arguments: dict[str, Any], *, progress: bool
) -> httpx.Response:
    meta: dict[str, Any] = dict(_ENVELOPE)
    if progress:
        meta["progressToken"] = f"p-{next(_ids)}"
    body = {
        "jsonrpc": "2.0",
        "id": next(_ids),
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta},
    }
    headers = {
        **_ACCEPT,
        **bearer(),
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    return await http.post(f"{url}/mcp", json=body, headers=headers)


@pytest.mark.parametrize(("tool", "arguments"), CALLS, ids=[tool for tool, _ in CALLS])
async def test_a_2026_call_without_progress_is_answered_as_the_sdks_entry_answers_it(
    gateway: GatewayProcess, tool: str, arguments: dict[str, Any]
) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        plain = await _modern_call(http, gateway.url, tool, arguments, progress=False)
        by_sdk = await _modern_call(http, gateway.url, tool, arguments, progress=True)

    assert plain.headers["content-type"] == "application/json"
    assert _stable(_answer(plain)) == _stable(_answer(by_sdk))
    if by_sdk.headers["content-type"] == "application/json":
        assert plain.status_code == by_sdk.status_code
    assert "mcp-session-id" not in plain.headers


async def test_a_2026_call_whose_headers_disagree_with_its_body_is_refused_by_the_sdks_checks(
    gateway: GatewayProcess,
) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "gw-math__gw.add", "arguments": {"a": 1, "b": 2}, "_meta": _ENVELOPE},
    }
    headers = {**_ACCEPT, **bearer(), "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call"}
    async with httpx.AsyncClient(timeout=60) as http:
        wrong_name = await http.post(
            f"{gateway.url}/mcp", json=body, headers={**headers, "Mcp-Name": "gw-echo__gw.echo"}
        )
        no_envelope = await http.post(
            f"{gateway.url}/mcp",
            json={**body, "params": {"name": "gw-math__gw.add", "arguments": {"a": 1, "b": 2}}},
            headers={**headers, "Mcp-Name": "gw-math__gw.add"},
        )
        json_only = await http.post(
            f"{gateway.url}/mcp",
            json=body,
            headers={**headers, "Mcp-Name": "gw-math__gw.add", "Accept": "application/json"},
        )

    assert wrong_name.status_code == 400, wrong_name.text
    assert "error" in wrong_name.json()
    assert no_envelope.status_code == 400, no_envelope.text
    assert "error" in no_envelope.json()
    assert json_only.status_code == 406  # the SDK's entry asks for both types


@pytest.mark.parametrize(("tool", "arguments"), CALLS, ids=[tool for tool, _ in CALLS])
async def test_a_session_call_without_progress_is_answered_as_the_sdks_transport_answers_it(
    gateway: GatewayProcess, tool: str, arguments: dict[str, Any]
) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        opened = await http.post(
            f"{gateway.url}/mcp", json=INITIALIZE, headers={**_ACCEPT, **bearer()}
        )
        session = opened.headers["mcp-session-id"]
        headers = {
            **_ACCEPT,
            **bearer(),
            "MCP-Protocol-Version": "2025-11-25",
            "Mcp-Session-Id": session,
        }
        answers = []
        for progress in (False, True):
            params: dict[str, Any] = {"name": tool, "arguments": arguments}
            if progress:
                params["_meta"] = {"progressToken": f"p-{next(_ids)}"}
            body = {"jsonrpc": "2.0", "id": next(_ids), "method": "tools/call", "params": params}
            answers.append(await http.post(f"{gateway.url}/mcp", json=body, headers=headers))
        listed = await http.post(
            f"{gateway.url}/mcp",
            json={"jsonrpc": "2.0", "id": next(_ids), "method": "tools/list"},
            headers=headers,
        )

    plain, by_sdk = answers
    assert plain.status_code == 200, plain.text
    assert plain.headers["content-type"] == "application/json"
    assert plain.headers["mcp-session-id"] == session
    assert _stable(_answer(plain)) == _stable(_answer(by_sdk))
    assert listed.status_code == 200
    assert listed.headers["mcp-session-id"] == session
    assert "gw-math__gw.add" in {tool["name"] for tool in listed.json()["result"]["tools"]}
