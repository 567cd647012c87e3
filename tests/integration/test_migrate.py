"""`disco db upgrade` refuses application roles that row-level security would not bind."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from disco._dev.dburl import with_database, with_user
from disco._dev.errors import DevStackError
from disco._dev.migrate import upgrade


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


def test_upgrade_creates_a_missing_database_and_is_idempotent(postgres_admin_url: str) -> None:
    admin = with_database(postgres_admin_url, f"disco_fresh_{uuid.uuid4().hex[:8]}")
    app = with_user(admin, "disco_app", "disco_app")

    upgrade(admin, app)
    upgrade(admin, app)  # a second run changes nothing and fails nothing


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
