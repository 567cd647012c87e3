"""Fixtures for the registry's integration tests: the real service in-process
(kit lifespan, real Postgres, real broker) and clients talking to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from disco_registry import RegistrySettings, create_app
from tests.fixtures.infra import DatabaseUrls
from tests.integration.registry.support import serve


@pytest.fixture
def make_settings(
    database: DatabaseUrls, kafka_bootstrap: str, topic_prefix: str
) -> Callable[..., RegistrySettings]:
    """Registry settings on the session's database and broker, with this test's topics."""

    def make(**overrides: Any) -> RegistrySettings:
        values: dict[str, Any] = {
            "env": "dev",
            "database_url": database.app,
            "kafka_bootstrap": kafka_bootstrap,
            "topic_prefix": topic_prefix,
            "outbox_sweep_interval_seconds": 0.5,
            "sweep_interval_seconds": 0.2,
            "log_json": True,
        }
        values.update(overrides)
        return RegistrySettings(**values)

    return make


@pytest.fixture
async def http(make_settings: Callable[..., RegistrySettings]) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a started registry (database, bus, outbox relay, sweeper)."""
    async with serve(create_app(make_settings())) as client:
        yield client
