"""Fixtures for the memory tests: the real service in-process, real Postgres and broker.

One memory app serves the whole package (its start-up costs more than most tests):
every test acts for a tenant of its own (:func:`tenant`, :func:`new_id`), so
row-level security keeps the tests apart, and no memory test reads a topic. The
tests run in the package's event loop, the app's.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from asgi_lifespan import LifespanManager
from fastapi import FastAPI

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.clients import MemoryClient
from disco_common.auth import Role
from disco_memory import MemorySettings
from tests.fixtures.infra import DatabaseUrls
from tests.fixtures.memory import (
    BASE_URL,
    SharedEmbedder,
    memory_client,
    started_memory_app,
)
from tests.fixtures.settings import settings_factory

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run this package's async tests in the package's loop (the shared app's)."""
    for item in items:
        if HERE in item.path.parents and item.get_closest_marker("asyncio") is not None:
            item.add_marker(pytest.mark.asyncio(loop_scope="package"), append=False)


@pytest.fixture(scope="package")
def memory_settings(
    database: DatabaseUrls, kafka_bootstrap: str, session_topic_prefix: str
) -> Callable[..., MemorySettings]:
    """Settings for a memory app on the session's database and broker."""
    return settings_factory(
        MemorySettings, database, kafka_bootstrap, f"{session_topic_prefix}memory."
    )


@asynccontextmanager
async def serve(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """Run ``app``'s lifespan and hand out a client talking to it in-process."""
    async with LifespanManager(app, startup_timeout=60, shutdown_timeout=30) as manager:
        transport = httpx.ASGITransport(app=manager.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            yield client


@pytest_asyncio.fixture(scope="package", loop_scope="package")
async def memory_app(
    memory_settings: Callable[..., MemorySettings], embedder: SharedEmbedder
) -> AsyncIterator[FastAPI]:
    """The package's started memory app (database, bus, outbox relay, the session's model)."""
    async with started_memory_app(memory_settings(), embedder) as app:
        yield app


@pytest_asyncio.fixture(loop_scope="package")
async def client(memory_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the started memory app."""
    transport = httpx.ASGITransport(app=memory_app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
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
def memory_client_for(memory_app: FastAPI) -> Callable[..., MemoryClient]:
    """Build a started-on-enter :class:`MemoryClient` talking to the app in-process."""

    def make(
        tenant: str, user: str = "alice", roles: Iterable[Role] = (Role.USER,)
    ) -> MemoryClient:
        return memory_client(memory_app, tenant, user, roles)

    return make
