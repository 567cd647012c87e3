"""`disco db upgrade` refuses application roles that row-level security would not bind."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest

from disco._dev.dburl import with_database, with_user
from disco._dev.errors import DevStackError
from disco._dev.migrate import upgrade
from disco._dev.schema_wait import head_revision, wait_for_migrations
from disco._dev.services import installed_services
from tests.fixtures.infra import DatabaseUrls


def _sql(url: str, statement: str) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(run())


def _create_database(admin_url: str) -> str:
    name = f"disco_migrate_{uuid.uuid4().hex[:8]}"
    _sql(with_database(admin_url, "postgres"), f'CREATE DATABASE "{name}"')
    return with_database(admin_url, name)


SCHEMAS = ("registry", "memory", "tracker", "gateway")


def _schema_state(url: str) -> dict[str, Any]:
    """Each service schema's Alembic revision and tables, and the databases on the server."""

    async def read() -> dict[str, Any]:
        conn = await asyncpg.connect(url)
        try:
            state: dict[str, Any] = {}
            for schema in SCHEMAS:
                state[f"{schema} revision"] = await conn.fetchval(
                    f'SELECT version_num FROM "{schema}".alembic_version'  # noqa: S608
                )
                state[f"{schema} tables"] = [
                    row["table_name"]
                    for row in await conn.fetch(
                        "SELECT table_name FROM information_schema.tables "
                        "WHERE table_schema = $1 ORDER BY table_name",
                        schema,
                    )
                ]
            return state
        finally:
            await conn.close()

    return asyncio.run(read())


def _database_exists(admin_url: str, name: str) -> bool:
    async def exists() -> bool:
        conn = await asyncpg.connect(with_database(admin_url, "postgres"))
        try:
            return bool(await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name))
        finally:
            await conn.close()

    return asyncio.run(exists())


def test_upgrade_creates_a_missing_database_and_is_idempotent(
    postgres_admin_url: str, database: DatabaseUrls
) -> None:
    name = f"disco_fresh_{uuid.uuid4().hex[:8]}"
    admin = with_database(postgres_admin_url, name)
    app = with_user(admin, "disco_app", "disco_app")
    existed = _database_exists(postgres_admin_url, name)

    upgrade(admin, app)
    first = _schema_state(admin)
    upgrade(admin, app)  # a second run changes nothing and fails nothing
    second = _schema_state(admin)

    assert existed is False
    assert first == _schema_state(database.admin)  # every service at head, as the harness's
    assert all(first[f"{schema} revision"] for schema in SCHEMAS)
    assert second == first


def test_upgrade_refuses_the_owner_as_the_application_role(postgres_admin_url: str) -> None:
    admin = _create_database(postgres_admin_url)

    with pytest.raises(DevStackError, match="role of their own"):
        upgrade(admin, admin)


def test_upgrade_refuses_a_superuser_as_the_application_role(postgres_admin_url: str) -> None:
    admin = _create_database(postgres_admin_url)
    role = f"root_{uuid.uuid4().hex[:6]}"
    _sql(admin, f"CREATE ROLE {role} LOGIN SUPERUSER")

    with pytest.raises(DevStackError, match="bypasses row-level security"):
        upgrade(admin, with_user(admin, role, "x"))


def test_wait_returns_once_the_schemas_are_at_head_and_fails_clearly_before(
    postgres_admin_url: str,
) -> None:
    admin = _create_database(postgres_admin_url)
    app = with_user(admin, "disco_app", "disco_app")

    with pytest.raises(DevStackError, match="not at head"):
        asyncio.run(wait_for_migrations(app, ["registry"], timeout=0.5, interval=0.1))
    upgrade(admin, app, services=["registry", "tracker"])
    revisions = asyncio.run(
        wait_for_migrations(app, ["registry", "tracker"], timeout=30, interval=0.1)
    )

    heads = {service.name: head_revision(service) for service in installed_services()}
    assert revisions == {"registry": heads["registry"], "tracker": heads["tracker"]}
    with pytest.raises(DevStackError, match="memory"):  # not migrated: still waits
        asyncio.run(wait_for_migrations(app, ["memory"], timeout=0.5, interval=0.1))
