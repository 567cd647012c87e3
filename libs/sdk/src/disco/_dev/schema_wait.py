"""Waiting for migrations: a service's schema at the head of its Alembic scripts.

What a service's pod runs before it starts (``disco db wait``, an init
container in deploy/k8s) while the migration Job runs: it connects as the
application role (no owner credentials in the service's pod) and returns once
the schema's ``alembic_version`` is the newest script's revision and readable,
which the migration step makes true only after its grants.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from disco._dev.errors import DevStackError
from disco._dev.services import migrations_dir, select_services
from disco_common.services import ServiceManifest

__all__ = ["head_revision", "wait_for_migrations"]


def head_revision(service: ServiceManifest) -> str:
    """The newest revision of ``service``'s migrations."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(migrations_dir(service)))
    head = ScriptDirectory.from_config(config).get_current_head()
    if head is None:
        raise DevStackError(f"{service.name} has no migrations: nothing to wait for")
    return head


async def _current(app_url: str, schema: str) -> str | None:
    import asyncpg

    from disco._dev.migrate import asyncpg_url

    dsn = asyncpg_url(app_url).replace("postgresql+asyncpg://", "postgresql://", 1)
    try:
        connection = await asyncpg.connect(dsn, timeout=5)
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return None
    try:
        # The schema is a service's manifest name (an identifier it was built from).
        query = f'SELECT version_num FROM "{schema}".alembic_version'  # noqa: S608
        value = await connection.fetchval(query)
    except asyncpg.PostgresError:  # no schema or table yet, or not granted yet
        return None
    finally:
        await connection.close()
    return str(value) if value is not None else None


async def wait_for_migrations(
    app_url: str,
    services: Sequence[str] | None = None,
    *,
    timeout: float,  # noqa: ASYNC109 - a command's overall budget
    interval: float = 2.0,
) -> dict[str, str]:
    """Wait until every chosen service's schema is at its head revision.

    Returns:
        The revision each service's schema is at.

    Raises:
        DevStackError: ``timeout`` seconds passed first (naming what was seen).
    """
    wanted = {service.name: head_revision(service) for service in select_services(services)}
    deadline = time.monotonic() + timeout
    seen: dict[str, str | None] = {}
    while True:
        for name, head in wanted.items():
            if seen.get(name) != head:
                seen[name] = await _current(app_url, name)
        if all(seen.get(name) == head for name, head in wanted.items()):
            return dict(wanted)
        if time.monotonic() >= deadline:
            behind = {n: seen.get(n) for n, head in wanted.items() if seen.get(n) != head}
            raise DevStackError(
                f"migrations not at head after {timeout:g}s: {behind} (head: {wanted}); "
                "has the migration step (`disco db upgrade`) run?"
            )
        await asyncio.sleep(interval)
