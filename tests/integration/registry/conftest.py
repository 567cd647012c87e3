"""Fixtures for the registry's integration tests: the real service in-process
(kit lifespan, real Postgres, real broker) and clients talking to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from asgi_lifespan import LifespanManager
from starlette.types import ASGIApp

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.clients import RegistryClient, StaticToken
from disco_common.auth import Role
from disco_registry import RegistrySettings, create_app
from tests.fixtures.infra import DatabaseUrls
from tests.fixtures.settings import settings_factory

BASE_URL = "http://registry.test"


@pytest.fixture
def make_settings(
    database: DatabaseUrls, kafka_bootstrap: str, topic_prefix: str
) -> Callable[..., RegistrySettings]:
    """Registry settings on the session's database and broker, with this test's topics."""
    return settings_factory(
        RegistrySettings,
        database,
        kafka_bootstrap,
        topic_prefix,
        outbox_sweep_interval_seconds=0.5,
        sweep_interval_seconds=0.2,
    )


@pytest.fixture
async def registry_app(make_settings: Callable[..., RegistrySettings]) -> AsyncIterator[ASGIApp]:
    """A started registry (database, bus, outbox relay, sweeper), as an ASGI app."""
    app = create_app(make_settings())
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30) as manager:
        yield manager.app


@pytest.fixture
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
