"""Fixtures of the gateway's integration tests: its stores on the session's real Postgres."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text

from disco_common.auth import Role
from disco_gateway import GatewaySettings
from disco_gateway.scope import CallScope, system_identity
from disco_gateway.tasks.store import PostgresTaskStore
from disco_gateway.tasks.stream import PostgresTaskEventStream, TaskEventListener
from disco_service import Database, Identity
from tests.fixtures.infra import DatabaseUrls


@pytest.fixture
def settings(database: DatabaseUrls, kafka_bootstrap: str, topic_prefix: str) -> GatewaySettings:
    return GatewaySettings(
        env="dev",
        database_url=database.app,
        kafka_bootstrap=kafka_bootstrap,
        topic_prefix=topic_prefix,
        log_json=True,
    )


@pytest.fixture
async def db(settings: GatewaySettings) -> AsyncIterator[Database]:
    database = Database(settings, schema="gateway")
    try:
        yield database
    finally:
        await database.dispose()


@pytest.fixture
def store(db: Database) -> PostgresTaskStore:
    return PostgresTaskStore(db)


@pytest.fixture
async def stream(db: Database) -> AsyncIterator[PostgresTaskEventStream]:
    listener = TaskEventListener()
    async with listener.listening(db):
        yield PostgresTaskEventStream(db, listener)


def new_tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def caller(tenant: str, user: str = "alice", *, agent: str | None = "echo") -> CallScope:
    """The scope of a call by ``user`` of ``tenant`` at ``agent``'s endpoint."""
    return CallScope(Identity(tenant, user, user, frozenset({Role.USER})), agent=agent)


def system(tenant: str, *, agent: str | None = None) -> CallScope:
    """The gateway's own scope for ``tenant``."""
    return CallScope(system_identity(tenant), agent=agent, system=True)


async def task_rows(db: Database, tenant: str, table: str, task_id: str) -> int:
    """How many rows of ``gateway.<table>`` hang on ``task_id``, as ``tenant`` sees them."""
    async with db.unit_of_work(tenant) as session:
        found = await session.scalar(
            text(f"SELECT count(*) FROM gateway.{table} WHERE task_id = :id"),  # noqa: S608
            {"id": task_id},
        )
    return int(found or 0)
