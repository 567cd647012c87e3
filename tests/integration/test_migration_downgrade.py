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


def test_the_registry_downgrades_past_its_discovery_reads_and_upgrades_again(
    postgres_admin_url: str,
) -> None:
    database = migrated_database(postgres_admin_url)
    (registry,) = select_services(["registry"])
    config = Config()
    config.set_main_option("script_location", str(migrations_dir(registry)))
    config.set_main_option("sqlalchemy.url", asyncpg_url(database.admin).replace("%", "%%"))
    config.attributes["schema"] = "registry"
    config.attributes["app_role"] = APP_ROLE

    command.downgrade(config, "registry_0006")
    downgraded = schema_revisions(database.admin, ["registry"])

    async def discovery_function() -> str | None:
        conn = await asyncpg.connect(database.admin)
        try:
            found: str | None = await conn.fetchval(
                "SELECT pg_get_function_identity_arguments(oid) FROM pg_proc "
                "WHERE proname = 'discover_agents_as' AND pronamespace = 'registry'::regnamespace"
            )
            return found
        finally:
            await conn.close()

    rebuilt = asyncio.run(discovery_function())
    command.upgrade(config, "head")

    assert downgraded == {"registry": "registry_0006"}
    assert rebuilt is not None  # registry_0005's function, rebuilt from its file
    assert schema_revisions(database.admin, ["registry"])["registry"].startswith("registry_")
