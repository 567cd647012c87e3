"""Fixtures for the memory tests: the real service in-process, real Postgres and broker."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco_common.auth import Role
from disco_memory import MemorySettings, create_app
from tests.fixtures.infra import DatabaseUrls


@pytest.fixture
def memory_settings(
    database: DatabaseUrls, kafka_bootstrap: str, topic_prefix: str
) -> Callable[..., MemorySettings]:
    """Settings for a memory app on the session's database and broker."""

    def make(**overrides: Any) -> MemorySettings:
        values: dict[str, Any] = {
            "env": "dev",
            "database_url": database.app,
            "kafka_bootstrap": kafka_bootstrap,
            "topic_prefix": topic_prefix,
            "log_json": True,
        }
        values.update(overrides)
        return MemorySettings(**values)

    return make


@asynccontextmanager
async def serve(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """Run ``app``'s lifespan and hand out a client talking to it in-process."""
    async with LifespanManager(app, startup_timeout=60, shutdown_timeout=30) as manager:
        transport = httpx.ASGITransport(app=manager.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://memory.test") as client:
            yield client


@pytest.fixture
async def memory_app(memory_settings: Callable[..., MemorySettings]) -> AsyncIterator[FastAPI]:
    """A started memory app (database, bus, outbox relay, bundled embedding model)."""
    app = create_app(memory_settings())
    async with LifespanManager(app, startup_timeout=60, shutdown_timeout=30):
        yield app


@pytest.fixture
async def client(memory_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the started memory app."""
    transport = httpx.ASGITransport(app=memory_app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://memory.test") as http:
        yield http


def bearer(
    tenant: str, user: str = "alice", roles: Iterable[Role] = (Role.USER,)
) -> dict[str, str]:
    """An Authorization header with a dev token for ``tenant``/``user``."""
    token = mint_dev_token(DEV_AUTH_SECRET, tenant, user, roles, 600)
    return {"Authorization": f"Bearer {token}"}


def new_id(prefix: str = "id") -> str:
    """A fresh id for this test."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def tenant() -> str:
    """A tenant no other test uses."""
    return new_id("tenant")


@pytest.fixture
def alice(tenant: str) -> dict[str, str]:
    """Headers of user alice of this test's tenant."""
    return bearer(tenant, "alice")


@pytest.fixture
def bob(tenant: str) -> dict[str, str]:
    """Headers of user bob of this test's tenant."""
    return bearer(tenant, "bob")


@pytest.fixture
def stranger() -> dict[str, str]:
    """Headers of a user of another tenant."""
    return bearer(new_id("tenant"), "mallory")


def error_code(response: httpx.Response) -> str:
    """The stable error code of an error response (fails if it has not the stable shape)."""
    body = response.json()
    assert set(body) == {"error"}, body
    assert {"code", "message"} <= set(body["error"]), body
    return str(body["error"]["code"])


@pytest.fixture
def memory_client_for(memory_app: FastAPI) -> Callable[..., Any]:
    """Build a started-on-enter :class:`MemoryClient` talking to the app in-process."""
    from disco.clients import MemoryClient, StaticToken

    def make(tenant: str, user: str = "alice", roles: Iterable[Role] = (Role.USER,)) -> Any:
        token = mint_dev_token(DEV_AUTH_SECRET, tenant, user, roles, 600)
        return MemoryClient(
            "http://memory.test",
            token=StaticToken(token),
            transport=httpx.ASGITransport(app=memory_app, raise_app_exceptions=False),
        )

    return make
