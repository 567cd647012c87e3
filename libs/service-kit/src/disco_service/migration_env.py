"""The body of every service's Alembic ``env.py`` (``migrations/<service>/env.py``).

Each service's Alembic environment is the same but for the schema it owns, so
the environment files call :func:`run` and nothing else. ``disco db upgrade``
gives the schema and the application role in the Alembic config's attributes.
Migrations are written by hand (no autogenerate): they create tables, indexes
and row-level-security policies explicitly.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["app_role", "run", "schema"]


def schema() -> str:
    """The schema the running environment owns (the service's name)."""
    from alembic import context

    value = context.config.attributes.get("schema") or context.config.get_main_option(
        "disco.schema"
    )
    if not value:
        raise RuntimeError("run migrations with `disco db upgrade`: no schema was given")
    return str(value)


def app_role() -> str:
    """The application role, for migrations that name it in a policy or grant."""
    from alembic import context

    return str(context.config.attributes.get("app_role", "disco_app"))


def _configure_and_run(connection: Any, owned_schema: str) -> None:
    from alembic import context
    from sqlalchemy import text

    context.configure(
        connection=connection,
        target_metadata=None,
        version_table_schema=owned_schema,
        include_schemas=True,
        transaction_per_migration=False,
    )
    with context.begin_transaction():
        # Two upgrades of one schema at once (two containers starting) wait in line.
        connection.execute(
            text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
            {"key": f"disco.migrate.{owned_schema}"},
        )
        context.run_migrations()


async def _run_online(url: str, owned_schema: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as connection:
            await connection.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{owned_schema}"'))
            await connection.commit()
            await connection.run_sync(_configure_and_run, owned_schema)
            await connection.commit()
    finally:
        await engine.dispose()


def run() -> None:
    """Run the migrations Alembic asked for, online or as offline SQL."""
    from alembic import context

    owned_schema = schema()
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("run migrations with `disco db upgrade`: no database URL was given")
    if context.is_offline_mode():
        context.configure(url=url, literal_binds=True, version_table_schema=owned_schema)
        with context.begin_transaction():
            context.run_migrations()
        return
    asyncio.run(_run_online(url, owned_schema))
