"""Helpers for the registry's integration tests: tokens, factories, raw SQL, the bus."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
import uvicorn
from starlette.types import ASGIApp

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco_common.auth import Role
from tests.fixtures.waiting import eventually

OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"result": {"type": "number"}},
    "required": ["result"],
}


def new_tenant() -> str:
    """A tenant id no other test uses."""
    return f"tenant-{uuid.uuid4().hex[:10]}"


def unique(prefix: str) -> str:
    """A name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def bearer(
    tenant: str, user: str = "alice", roles: Iterable[Role] = (Role.USER,)
) -> dict[str, str]:
    """An Authorization header with a dev token for ``tenant``."""
    token = mint_dev_token(DEV_AUTH_SECRET, tenant, user, roles, 600)
    return {"Authorization": f"Bearer {token}"}


def capability(
    task_name: str,
    *,
    request_type: str | None = None,
    response_type: str | None = None,
    description: str = "",
    request_schema: dict[str, Any] | None = None,
    request_ref: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A capability body: request on action-requests, one response on action-results."""
    consumed: dict[str, Any] = {
        "event_type": request_type or f"{task_name}.requested",
        "topic": "action-requests",
        "description": f"ask for {task_name}",
    }
    if request_ref is not None:
        consumed["schema_ref"] = request_ref
    else:
        consumed["json_schema"] = request_schema if request_schema is not None else OBJECT_SCHEMA
    return {
        "task_name": task_name,
        "description": description or f"does {task_name}",
        "consumed_event": consumed,
        "produced_events": [
            {
                "event_type": response_type or f"{task_name}.completed",
                "topic": "action-results",
                "json_schema": RESULT_SCHEMA,
            }
        ],
    }


def registration(
    *,
    agent_id: str | None = None,
    name: str | None = None,
    capabilities: list[dict[str, Any]] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """An agent registration body (a fresh agent id and name unless given)."""
    body: dict[str, Any] = {
        "agent_id": agent_id or unique("agent"),
        "name": name or unique("calc"),
        "version": "1.0.0",
        "description": "adds numbers",
        "tags": ["math"],
        "instance_id": unique("host"),
        "capabilities": capabilities if capabilities is not None else [capability("add")],
    }
    body.update(overrides)
    return body


async def register(
    http: httpx.AsyncClient, tenant: str, body: dict[str, Any] | None = None, **kwargs: Any
) -> dict[str, Any]:
    """Register an agent and return the record (the call must succeed)."""
    response = await http.post(
        "/v1/agents",
        json=body if body is not None else registration(**kwargs),
        headers=bearer(tenant),
    )
    assert response.status_code in (200, 201), response.text
    result: dict[str, Any] = response.json()
    return result


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    """The response is the stable error shape with ``status`` (and ``code``)."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    if code is not None:
        assert body["error"]["code"] == code, body
    error: dict[str, Any] = body["error"]
    return error


@asynccontextmanager
async def uvicorn_server(app: ASGIApp, port: int) -> AsyncIterator[None]:
    """Serve ``app``, already started, on a real loopback port until the block ends.

    The registry comes up when the port starts listening and goes down when it
    stops: what a client sees of a registry process starting and stopping. The
    app's lifespan is the caller's (the module's shared app), not the server's.
    """
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    try:

        def started() -> bool:
            if task.done():
                task.result()  # it failed to start: say why
            return server.started

        await eventually(started, timeout=30, what="uvicorn started")
        yield
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=30)


async def sql(admin_url: str, statement: str, *args: Any) -> list[asyncpg.Record]:
    """Run one statement as the database owner (to arrange or inspect rows)."""
    conn = await asyncpg.connect(admin_url)
    try:
        return list(await conn.fetch(statement, *args))
    finally:
        await conn.close()


async def age_instances(admin_url: str, tenant: str, agent_id: str, seconds: float = 3600) -> None:
    """Make every instance of an agent look last heard from ``seconds`` ago (past its TTL)."""
    await sql(
        admin_url,
        "UPDATE registry.agent_instances SET "
        "last_heartbeat_at = last_heartbeat_at - make_interval(secs => $3), "
        "expires_at = expires_at - make_interval(secs => $3) "
        "WHERE tenant_id = $1 AND agent_id = $2",
        tenant,
        agent_id,
        float(seconds),
    )
