"""``disco db upgrade``: bring every service's schema to its newest migration.

Every installed service (found by its ``disco.services`` entry point, see
:mod:`disco._dev.services`) has one Alembic environment (``migrations/<service>/``
at the top of the repository: ``env.py``, ``script.py.mako``, ``versions/``; its
wheel carries it inside the package; see ``migrations/README.md``) and owns the
Postgres schema named after it.

One run, as the database owner (``DISCO_DATABASE_ADMIN_URL``):

0. creates the database when the server does not have it yet;
1. creates the ``vector`` extension and the application role named in
   ``DISCO_DATABASE_URL`` (LOGIN, NOSUPERUSER, NOBYPASSRLS — so row-level
   security binds it), or aligns an existing role with those attributes;
2. runs each service's migrations to head;
3. grants the application role what it needs on each schema, and no more:
   USAGE on the schema, DML on its tables, sequences, and the same for tables
   later migrations add.

Migrations are a step of their own: no service runs them on import or start.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from disco._dev.dburl import redact
from disco._dev.errors import DevStackError, missing_dev_extra
from disco._dev.services import migrations_dir, select_services
from disco_common.services import ServiceManifest

__all__ = ["AppRole", "asyncpg_url", "upgrade"]

_ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


@dataclass(frozen=True)
class AppRole:
    """The non-superuser role the services connect as."""

    name: str
    password: str | None

    @classmethod
    def from_url(cls, url: str) -> AppRole:
        parts = urlsplit(url)
        if not parts.username:
            raise DevStackError(f"DISCO_DATABASE_URL names no user: {redact(url)}")
        name = unquote(parts.username)
        if not _ROLE_NAME.fullmatch(name):
            raise DevStackError(
                f"application role {name!r} must be lower-case letters, digits and '_'"
            )
        return cls(name=name, password=unquote(parts.password) if parts.password else None)


def asyncpg_url(url: str) -> str:
    """``url`` with the SQLAlchemy asyncpg driver (``postgresql+asyncpg://``)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.split("+")[0] not in {"postgresql", "postgres"}:
        raise DevStackError(f"not a PostgreSQL URL: {redact(url)}")
    return f"postgresql+asyncpg://{rest}"


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


async def _ensure_database(admin_url: str) -> None:
    """Create the database ``admin_url`` names when the server does not have it yet."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url
    from sqlalchemy.ext.asyncio import create_async_engine

    url = make_url(asyncpg_url(admin_url))
    name = url.database
    if not name or name == "postgres":
        return
    maintenance = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        async with maintenance.connect() as conn:
            exists = await conn.scalar(
                text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
            )
            if not exists:
                await conn.execute(text(f'CREATE DATABASE "{name.replace(chr(34), "")}"'))
    finally:
        await maintenance.dispose()


async def _bootstrap(admin_url: str, role: AppRole) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    attributes = "LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE"
    password = f" PASSWORD {_literal(role.password)}" if role.password else ""
    # Validated against _ROLE_NAME, so quoting it as an identifier is safe.
    engine = create_async_engine(asyncpg_url(admin_url))
    try:
        async with engine.begin() as conn:
            # Two `disco db upgrade` runs may race on a fresh database.
            await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('disco.bootstrap'))"))
            await conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
            owner = await conn.scalar(text("SELECT current_user"))
            if owner == role.name:
                # The owner has an allow-all policy (for migrations and system
                # functions): services connecting as the owner would see every tenant.
                raise DevStackError(
                    f"DISCO_DATABASE_URL and DISCO_DATABASE_ADMIN_URL both connect as "
                    f"{role.name!r}: the services must use a role of their own (e.g. disco_app; "
                    "`disco db upgrade` creates it) so that row-level security binds them"
                )
            existing = (
                await conn.execute(
                    text("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = :name"),
                    {"name": role.name},
                )
            ).first()
            if existing is None:
                await conn.execute(text(f'CREATE ROLE "{role.name}" {attributes}{password}'))
            elif existing.rolsuper or existing.rolbypassrls:
                # Never demote an existing superuser behind someone's back: say what to fix.
                raise DevStackError(
                    f"DISCO_DATABASE_URL connects as {role.name!r}, which is a superuser or "
                    "bypasses row-level security, so tenant isolation would not hold. Point "
                    "DISCO_DATABASE_URL at a dedicated role (e.g. disco_app; `disco db upgrade` "
                    "creates it) and DISCO_DATABASE_ADMIN_URL at the owner."
                )
            elif password:
                await conn.execute(text(f'ALTER ROLE "{role.name}" LOGIN{password}'))
            database = await conn.scalar(text("SELECT current_database()"))
            await conn.execute(text(f'GRANT CONNECT ON DATABASE "{database}" TO "{role.name}"'))
    finally:
        await engine.dispose()


async def _grant(admin_url: str, schema: str, role: AppRole) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(asyncpg_url(admin_url))
    statements = [
        f'GRANT USAGE ON SCHEMA "{schema}" TO "{role.name}"',
        f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}" TO "{role.name}"',
        f'GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA "{schema}" TO "{role.name}"',
        f'GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA "{schema}" TO "{role.name}"',
        f'ALTER DEFAULT PRIVILEGES IN SCHEMA "{schema}" '
        f'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO "{role.name}"',
        f'ALTER DEFAULT PRIVILEGES IN SCHEMA "{schema}" '
        f'GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO "{role.name}"',
    ]
    try:
        async with engine.begin() as conn:
            for statement in statements:
                await conn.execute(text(statement))
    finally:
        await engine.dispose()


def _alembic_upgrade(service: ServiceManifest, admin_url: str, role: AppRole) -> None:
    try:
        from alembic import command
        from alembic.config import Config
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise missing_dev_extra("alembic") from exc
    config = Config()
    config.set_main_option("script_location", str(migrations_dir(service)))
    config.set_main_option("sqlalchemy.url", asyncpg_url(admin_url).replace("%", "%%"))
    # env.py reads these: the schema it owns and the role it may name in policies.
    config.attributes["schema"] = service.name
    config.attributes["app_role"] = role.name
    command.upgrade(config, "head")


def upgrade(admin_url: str, app_url: str, *, services: Sequence[str] | None = None) -> None:
    """Migrate ``services`` (every installed one when None) to head as the owner at ``admin_url``.

    ``app_url`` is the URL the services connect with; its user becomes the
    application role. Safe to run again: every step is idempotent.

    Raises:
        DevStackError: an unknown service, a missing Alembic environment, or an
            application role that row-level security would not bind.
    """
    chosen = select_services(services)
    role = AppRole.from_url(app_url)
    asyncio.run(_ensure_database(admin_url))
    asyncio.run(_bootstrap(admin_url, role))
    for service in chosen:
        _alembic_upgrade(service, admin_url, role)
        asyncio.run(_grant(admin_url, service.name, role))
