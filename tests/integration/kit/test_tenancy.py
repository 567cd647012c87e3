"""Tenant isolation under row-level security.

Through the kit's request session, in background units of work, and on a raw
application-role connection to a real service table (gateway.a2a_tasks).
"""

# ruff: noqa: S608 - SQL names the scratch schema the fixtures generated, never input

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import asyncpg
import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from disco_service import Database, ServiceSettings
from tests.fixtures.infra import DatabaseUrls
from tests.integration.kit.support import bearer, new_tenant

# -- through the kit's request session ------------------------------------------


async def test_a_tenant_lists_only_its_own_rows(client: httpx.AsyncClient) -> None:
    acme, globex = new_tenant(), new_tenant()
    await client.post("/notes", json={"body": "acme plan"}, headers=bearer(acme))
    await client.post("/notes", json={"body": "globex plan"}, headers=bearer(globex))

    listed = await client.get("/notes", headers=bearer(globex))

    assert listed.status_code == 200
    assert [(n["tenant_id"], n["body"]) for n in listed.json()] == [(globex, "globex plan")]


async def test_a_tenant_cannot_read_another_tenants_row_by_id(client: httpx.AsyncClient) -> None:
    acme, globex = new_tenant(), new_tenant()
    created = await client.post("/notes", json={"body": "secret"}, headers=bearer(acme))

    response = await client.get(f"/notes/{created.json()['id']}", headers=bearer(globex))

    assert response.status_code == 404


async def test_a_tenant_cannot_update_another_tenants_row(client: httpx.AsyncClient) -> None:
    acme, globex = new_tenant(), new_tenant()
    created = await client.post("/notes", json={"body": "original"}, headers=bearer(acme))
    note_id = created.json()["id"]

    response = await client.put(
        f"/notes/{note_id}", json={"body": "overwritten"}, headers=bearer(globex)
    )

    assert response.status_code == 404
    unchanged = await client.get(f"/notes/{note_id}", headers=bearer(acme))
    assert unchanged.json()["body"] == "original"


async def test_a_service_acting_on_behalf_of_a_tenant_sees_that_tenants_rows(
    client: httpx.AsyncClient,
) -> None:
    from disco_common.auth import ON_BEHALF_OF_TENANT_HEADER, Role

    acme = new_tenant()
    await client.post("/notes", json={"body": "for the agent"}, headers=bearer(acme))
    headers = bearer("platform", "indexer", [Role.SERVICE])
    headers[ON_BEHALF_OF_TENANT_HEADER] = acme

    listed = await client.get("/notes", headers=headers)

    assert [n["body"] for n in listed.json()] == ["for the agent"]


async def test_a_rolled_back_request_leaves_no_row(client: httpx.AsyncClient) -> None:
    acme = new_tenant()
    failed = await client.post(
        "/notes",
        params={"fail_after_publish": "true"},
        json={"body": "never"},
        headers=bearer(acme),
    )
    listed = await client.get("/notes", headers=bearer(acme))
    assert failed.status_code == 409
    assert listed.json() == []


# -- background units of work and system jobs -------------------------------------


@pytest.fixture
async def kit_database(
    make_settings: Callable[..., ServiceSettings], kit_schema: str
) -> AsyncIterator[Database]:
    database = Database(make_settings(), schema=kit_schema)
    yield database
    await database.dispose()


async def _insert_note(database: Database, tenant: str, body: str) -> None:
    async with database.unit_of_work(tenant) as session:
        await session.execute(
            text(
                f'INSERT INTO "{database.schema}".notes (id, tenant_id, body) '
                "VALUES (gen_random_uuid()::text, :tenant, :body)"
            ),
            {"tenant": tenant, "body": body},
        )


async def test_a_unit_of_work_for_a_tenant_sees_only_that_tenant(kit_database: Database) -> None:
    acme, globex = new_tenant(), new_tenant()
    await _insert_note(kit_database, acme, "a")
    await _insert_note(kit_database, globex, "g")

    async with kit_database.unit_of_work(acme) as session:
        query = text(f'SELECT DISTINCT tenant_id FROM "{kit_database.schema}".notes')
        tenants = (await session.execute(query)).scalars().all()

    assert tenants == [acme]


async def test_a_unit_of_work_without_a_tenant_sees_no_tenant_row(kit_database: Database) -> None:
    await _insert_note(kit_database, new_tenant(), "hidden")

    async with kit_database.unit_of_work(None) as session:
        count = await session.scalar(text(f'SELECT count(*) FROM "{kit_database.schema}".notes'))

    assert count == 0


async def test_a_unit_of_work_cannot_write_a_row_for_another_tenant(
    kit_database: Database,
) -> None:
    acme, globex = new_tenant(), new_tenant()
    with pytest.raises(DBAPIError, match="row-level security"):
        async with kit_database.unit_of_work(acme) as session:
            await session.execute(
                text(
                    f'INSERT INTO "{kit_database.schema}".notes (id, tenant_id, body) '
                    "VALUES (gen_random_uuid()::text, :tenant, 'smuggled')"
                ),
                {"tenant": globex},
            )


async def test_a_security_definer_function_lets_a_system_job_count_across_tenants(
    kit_database: Database,
) -> None:
    await _insert_note(kit_database, new_tenant(), "one")
    await _insert_note(kit_database, new_tenant(), "two")

    async with kit_database.unit_of_work(None) as session:
        visible = await session.scalar(text(f'SELECT count(*) FROM "{kit_database.schema}".notes'))
        across = await session.scalar(text(f'SELECT "{kit_database.schema}".count_all_notes()'))

    assert visible == 0
    assert across is not None
    assert across >= 2


async def test_user_private_rows_are_hidden_from_other_users_but_public_ones_are_readable(
    kit_database: Database,
) -> None:
    acme = new_tenant()
    table = f'"{kit_database.schema}".diary'
    async with kit_database.unit_of_work(acme, "alice") as session:
        await session.execute(
            text(
                f"INSERT INTO {table} (id, tenant_id, user_id, body, is_public) VALUES "
                "(gen_random_uuid()::text, :t, 'alice', 'private', false), "
                "(gen_random_uuid()::text, :t, 'alice', 'shared', true)"
            ),
            {"t": acme},
        )
    async with kit_database.unit_of_work(acme, "bob") as session:
        seen = (await session.execute(text(f"SELECT body FROM {table}"))).scalars().all()
        updated = (
            await session.execute(text(f"UPDATE {table} SET body = 'defaced' RETURNING id"))
        ).all()

    assert seen == ["shared"]
    assert updated == []


# -- a raw application-role connection on a real service table -----------------


async def _app_connection(database: DatabaseUrls, tenant: str | None) -> asyncpg.Connection:
    conn = await asyncpg.connect(database.app)
    if tenant is not None:
        # Session-level here (is_local=false): this connection is the whole test.
        await conn.execute("SELECT set_config('disco.tenant_id', $1, false)", tenant)
    return conn


@pytest.fixture
async def two_tenants_tasks(database: DatabaseUrls) -> AsyncIterator[tuple[str, str]]:
    """One A2A task each for two new tenants in gateway.a2a_tasks, written by the owner."""
    acme, globex = new_tenant(), new_tenant()
    admin = await asyncpg.connect(database.admin)
    try:
        for tenant in (acme, globex):
            await admin.execute(
                "INSERT INTO gateway.a2a_tasks (tenant_id, task_id, context_id, status, task) "
                "VALUES ($1, $2, 'ctx-1', 'working', $3::jsonb)",
                tenant,
                f"task-of-{tenant}",
                json.dumps({"id": f"task-of-{tenant}", "status": {"state": "working"}}),
            )
        yield acme, globex
    finally:
        await admin.execute(
            "DELETE FROM gateway.a2a_tasks WHERE tenant_id = ANY($1::text[])", [acme, globex]
        )
        await admin.close()


async def test_the_app_role_cannot_read_another_tenants_a2a_tasks(
    database: DatabaseUrls, two_tenants_tasks: tuple[str, str]
) -> None:
    acme, globex = two_tenants_tasks
    conn = await _app_connection(database, acme)
    try:
        visible = await conn.fetch(
            "SELECT tenant_id FROM gateway.a2a_tasks WHERE tenant_id = ANY($1::text[])",
            [acme, globex],
        )
        by_id = await conn.fetchrow(
            "SELECT * FROM gateway.a2a_tasks WHERE task_id = $1", f"task-of-{globex}"
        )
    finally:
        await conn.close()
    assert [row["tenant_id"] for row in visible] == [acme]
    assert by_id is None


async def test_the_app_role_cannot_change_another_tenants_a2a_tasks(
    database: DatabaseUrls, two_tenants_tasks: tuple[str, str]
) -> None:
    acme, globex = two_tenants_tasks
    conn = await _app_connection(database, acme)
    try:
        updated = await conn.execute(
            "UPDATE gateway.a2a_tasks SET status = 'canceled' WHERE tenant_id = $1", globex
        )
        deleted = await conn.execute("DELETE FROM gateway.a2a_tasks WHERE tenant_id = $1", globex)
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            await conn.execute(
                "INSERT INTO gateway.a2a_tasks (tenant_id, task_id, context_id, status, task) "
                "VALUES ($1, 'planted', 'ctx', 'submitted', '{}'::jsonb)",
                globex,
            )
    finally:
        await conn.close()
    admin = await asyncpg.connect(database.admin)
    try:
        status = await admin.fetchval(
            "SELECT status FROM gateway.a2a_tasks WHERE tenant_id = $1", globex
        )
    finally:
        await admin.close()
    assert (updated, deleted) == ("UPDATE 0", "DELETE 0")
    assert status == "working"


async def test_the_app_role_without_a_tenant_sees_no_a2a_task(
    database: DatabaseUrls, two_tenants_tasks: tuple[str, str]
) -> None:
    conn = await _app_connection(database, None)
    try:
        count = await conn.fetchval("SELECT count(*) FROM gateway.a2a_tasks")
    finally:
        await conn.close()
    assert count == 0
