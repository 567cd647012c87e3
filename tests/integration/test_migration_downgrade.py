"""A migration that reads an earlier one loads it by its path: its downgrade runs from a checkout.

registry_0007's downgrade rebuilds registry_0003's and registry_0005's discovery
functions from their files. It imported them as ``disco_registry.migrations...``,
a package path only a wheel has; the sources live in migrations/registry/ now.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
from alembic import command
from alembic.config import Config

from disco._dev.migrate import asyncpg_url
from disco._dev.services import migrations_dir, select_services
from disco_service.migration_helpers import load_migration
from tests.fixtures.infra import APP_ROLE, migrated_database, schema_revisions

VERSIONS = Path(__file__).resolve().parents[2] / "migrations" / "registry" / "versions"


def test_an_earlier_migration_is_loaded_by_its_path() -> None:
    first = load_migration(VERSIONS / "0003_registry_discovery_function.py")

    assert first.revision == "registry_0003"
    assert callable(first._body)


def _alembic(admin_url: str, service: str) -> Config:
    """The Alembic configuration of ``service``'s migrations on the database at ``admin_url``."""
    (manifest,) = select_services([service])
    config = Config()
    config.set_main_option("script_location", str(migrations_dir(manifest)))
    config.set_main_option("sqlalchemy.url", asyncpg_url(admin_url).replace("%", "%%"))
    config.attributes["schema"] = service
    config.attributes["app_role"] = APP_ROLE
    return config


def _function_result(admin_url: str, schema: str, name: str) -> str | None:
    """What the function ``schema.name`` returns (None: there is none)."""

    async def read() -> str | None:
        conn = await asyncpg.connect(admin_url)
        try:
            found: str | None = await conn.fetchval(
                "SELECT pg_get_function_result(oid) FROM pg_proc "
                "WHERE proname = $1 AND pronamespace = $2::regnamespace",
                name,
                schema,
            )
            return found
        finally:
            await conn.close()

    return asyncio.run(read())


def test_the_registry_downgrades_past_its_discovery_reads_and_upgrades_again(
    postgres_admin_url: str,
) -> None:
    database = migrated_database(postgres_admin_url)
    config = _alembic(database.admin, "registry")

    command.downgrade(config, "registry_0006")
    downgraded = schema_revisions(database.admin, ["registry"])
    rebuilt = _function_result(database.admin, "registry", "discover_agents_as")
    command.upgrade(config, "head")

    assert downgraded == {"registry": "registry_0006"}
    assert rebuilt is not None  # registry_0005's function, rebuilt from its file
    assert schema_revisions(database.admin, ["registry"])["registry"].startswith("registry_")


def test_the_memory_downgrades_past_its_step_records_and_upgrades_again(
    postgres_admin_url: str,
) -> None:
    database = migrated_database(postgres_admin_url)
    config = _alembic(database.admin, "memory")
    at_head = _function_result(database.admin, "memory", "dedup_check_as")

    command.downgrade(config, "memory_0008")
    downgraded = schema_revisions(database.admin, ["memory"])
    check = _function_result(database.admin, "memory", "dedup_check_as")
    purge = _function_result(database.admin, "memory", "purge_expired")
    sweep = _function_result(database.admin, "memory", "sweep_expired")
    command.upgrade(config, "head")

    assert downgraded == {"memory": "memory_0008"}
    # memory_0007's check, rebuilt from its file; memory_0002's purge back in place.
    assert at_head == "TABLE(o_event_id text, o_kind text)"
    assert check == "TABLE(o_event_id text)"
    assert purge == "integer"
    assert sweep is None
    assert _function_result(database.admin, "memory", "sweep_expired") is not None
