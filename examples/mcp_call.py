"""Call disco agents from any MCP client: here the official ``mcp`` SDK's, through the gateway.

    uv run python examples/hello_tool.py &                          # an agent to call
    uv run python examples/mcp_call.py                              # the tools you may call
    uv run python examples/mcp_call.py hello__hello '{"name": "Ada"}'

Every agent skill your token's tenant may call is a tool of ``<gateway>/mcp``,
named ``<agent>__<skill>``; a call's result is the agent's answer
(``structuredContent`` and its JSON as text). It connects with a dev token
(``disco token``'s, for ``DISCO_TENANT_ID``, default ``default``) unless
``--token`` gives one; ``--gateway`` another gateway than the local one
(``DISCO_GATEWAY_URL``); ``--mode legacy`` the 2025-11-25 handshake instead of
the stateless 2026-07-28 protocol. A question the agent asks a person is shown
as a form here and your typed answer sent back.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco_common.auth import Role


async def _answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """A form from the agent's question: ask on the terminal, one field after another."""
    print(f"\n{params.message}")
    schema = getattr(params, "requested_schema", {}) or {}
    content: dict[str, Any] = {}
    for field, spec in schema.get("properties", {}).items():
        choices = spec.get("enum")
        hint = f" (one of: {', '.join(choices)})" if choices else ""
        typed = (await asyncio.to_thread(input, f"{spec.get('title', field)}{hint}: ")).strip()
        if not typed:
            return types.ElicitResult(action="decline")
        if choices:  # as shown, whatever the case
            typed = next((c for c in choices if c.lower() == typed.lower()), typed)
        content[field] = int(typed) if spec.get("type") == "integer" else typed
    return types.ElicitResult(action="accept", content=content)


async def main(args: argparse.Namespace) -> int:
    token = args.token or mint_dev_token(
        DEV_AUTH_SECRET, os.environ.get("DISCO_TENANT_ID", "default"), "you", (Role.USER,), 3600
    )
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300)
    )
    transport = streamable_http_client(f"{args.gateway}/mcp", http_client=http)
    async with http, Client(transport, mode=args.mode, elicitation_callback=_answer) as client:
        if args.tool is None:
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor)
                for tool in page.tools:
                    print(f"{tool.name:<40} {tool.description or ''}")
                if (cursor := page.next_cursor) is None:
                    return 0
        result = await client.call_tool(args.tool, json.loads(args.arguments))
    for block in result.content:
        if isinstance(block, types.TextContent):
            print(block.text)
    return 1 if result.is_error else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tool", nargs="?", help="the tool to call (none: list them)")
    parser.add_argument("arguments", nargs="?", default="{}", help="its arguments, as JSON")
    parser.add_argument(
        "--gateway", default=os.environ.get("DISCO_GATEWAY_URL", "http://127.0.0.1:8080")
    )
    parser.add_argument("--token", help="a bearer token (default: a dev token)")
    parser.add_argument("--mode", default="2026-07-28", choices=["2026-07-28", "legacy"])
    sys.exit(asyncio.run(main(parser.parse_args())))
