"""Fixtures for the service kit's integration tests: a scratch schema, settings, a running app."""

# ruff: noqa: S608 - SQL names the scratch schema the fixtures generated, never input

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable

import asyncpg
import httpx
import pytest

from disco_service import ServiceSettings
from disco_service.migration_helpers import (
    outbox_table_statements,
    system_function_statements,
    tenant_rls_statements,
)
from tests.fixtures.infra import APP_ROLE, DatabaseUrls
from tests.fixtures.settings import settings_factory
from tests.integration.kit.support import build_app, serve

KIT_SCHEMA = f"kit_{uuid.uuid4().hex[:8]}"


def _schema_statements(schema: str) -> list[str]:
    return [
        f'CREATE SCHEMA "{schema}"',
        f'CREATE TABLE "{schema}".notes (id text NOT NULL, tenant_id text NOT NULL, '
        "body text NOT NULL, PRIMARY KEY (id))",
        *tenant_rls_statements(schema, "notes"),
        f'CREATE TABLE "{schema}".diary (id text PRIMARY KEY, tenant_id text NOT NULL, '
        "user_id text NOT NULL, body text NOT NULL, is_public boolean NOT NULL DEFAULT false)",
        *tenant_rls_statements(schema, "diary", user_scoped=True, public_read_column="is_public"),
        *outbox_table_statements(schema),
        *system_function_statements(
            schema,
            "count_all_notes",
            returns="bigint",
            body=f'SELECT count(*) FROM "{schema}".notes',
        ),
        f'GRANT USAGE ON SCHEMA "{schema}" TO {APP_ROLE}',
        f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}" TO {APP_ROLE}',
        f'GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA "{schema}" TO {APP_ROLE}',
    ]


@pytest.fixture(scope="session")
def kit_schema(database: DatabaseUrls) -> str:
    """A schema made like a service's (RLS tables, an outbox), owned by the admin."""

    async def create() -> None:
        conn = await asyncpg.connect(database.admin)
        try:
            async with conn.transaction():
                for statement in _schema_statements(KIT_SCHEMA):
                    await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(create())
    return KIT_SCHEMA


@pytest.fixture
def make_settings(
    database: DatabaseUrls, kafka_bootstrap: str, topic_prefix: str
) -> Callable[..., ServiceSettings]:
    """Settings for a test app: the session's database and broker, this test's topics."""
    return settings_factory(
        ServiceSettings,
        database,
        kafka_bootstrap,
        topic_prefix,
        readiness_timeout_seconds=1.5,
        outbox_sweep_interval_seconds=0.5,
    )


@pytest.fixture
async def client(
    make_settings: Callable[..., ServiceSettings], kit_schema: str
) -> AsyncIterator[httpx.AsyncClient]:
    """A client for a started test app (database, bus, outbox relay)."""
    async with serve(build_app(make_settings(), kit_schema)) as http:
        yield http
