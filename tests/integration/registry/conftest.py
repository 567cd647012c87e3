"""Fixtures for the registry's integration tests: the real service in-process
(kit lifespan, real Postgres, real broker) and clients talking to it.

One registry app serves each test module (its start costs more than most tests):
every test acts for a tenant and agents of its own (``new_tenant``, ``unique``),
so row-level security and fresh ids keep the tests apart, and the tests that
read the app's announcements pick their own agents' envelopes out of the
module's topics. The tests run in the module's event loop, the app's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from asgi_lifespan import LifespanManager
from starlette.types import ASGIApp

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.clients import RegistryClient, StaticToken
from disco_common.auth import Role
from disco_registry import RegistrySettings, create_app
from tests.fixtures.asyncapi import asyncapi_parser
from tests.fixtures.infra import DatabaseUrls
from tests.fixtures.settings import settings_factory

__all__ = ["asyncapi_parser"]

BASE_URL = "http://registry.test"
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run this package's async tests in their module's loop (the shared app's)."""
    for item in items:
        if HERE in item.path.parents and item.get_closest_marker("asyncio") is not None:
            item.add_marker(pytest.mark.asyncio(loop_scope="module"), append=False)


@pytest.fixture
def topic_prefix(module_topic_prefix: str) -> str:
    """The topic prefix of the module's registry app (its announcements go there)."""
    return module_topic_prefix


@pytest.fixture(scope="module")
def make_settings(
    database: DatabaseUrls, kafka_bootstrap: str, module_topic_prefix: str
) -> Callable[..., RegistrySettings]:
    """Registry settings on the session's database and broker, with the module's topics."""
    return settings_factory(
        RegistrySettings,
        database,
        kafka_bootstrap,
        module_topic_prefix,
        outbox_sweep_interval_seconds=0.5,
        sweep_interval_seconds=0.2,
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def registry_app(make_settings: Callable[..., RegistrySettings]) -> AsyncIterator[ASGIApp]:
    """The module's started registry (database, bus, outbox relay, sweeper), as an ASGI app."""
    app = create_app(make_settings())
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30) as manager:
        yield manager.app


@pytest_asyncio.fixture(loop_scope="module")
async def http(registry_app: ASGIApp) -> AsyncIterator[httpx.AsyncClient]:
    """A raw HTTP client of the started registry."""
    transport = httpx.ASGITransport(app=registry_app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        yield client


@pytest.fixture
def make_client(registry_app: ASGIApp) -> Callable[..., RegistryClient]:
    """``make_client(tenant)``: a :class:`RegistryClient` (not started) acting for ``tenant``."""

    def make(tenant: str, *, roles: tuple[Role, ...] = (Role.USER,)) -> RegistryClient:
        token = mint_dev_token(DEV_AUTH_SECRET, tenant, "agent", roles, 600)
        return RegistryClient(
            BASE_URL,
            token=StaticToken(token),
            transport=httpx.ASGITransport(app=registry_app, raise_app_exceptions=False),
        )

    return make
