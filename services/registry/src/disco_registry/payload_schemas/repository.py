"""SQL for ``registry.payload_schemas``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_common.canonical import canonical_json
from disco_common.registry import PayloadSchema
from disco_service import Keyset

__all__ = ["PayloadSchemaRepository"]

_VERSION_ORDER = Keyset("sort_key", "version", descending=True)

# Fixed column list spliced into fixed statements (S608 does not apply: nothing is user input).
_COLUMNS = "tenant_id, name, version, json_schema, description, content_hash, created_at"

_INSERT = text(
    "INSERT INTO registry.payload_schemas "  # noqa: S608
    "(tenant_id, name, version, sort_key, json_schema, description, content_hash) "
    "VALUES (:tenant, :name, :version, :sort_key, CAST(:json_schema AS jsonb), :description, "
    ":content_hash) "
    "ON CONFLICT (tenant_id, name, version) DO NOTHING "
    f"RETURNING {_COLUMNS}"
)
_GET = text(
    f"SELECT {_COLUMNS} FROM registry.payload_schemas "  # noqa: S608
    "WHERE tenant_id = :tenant AND name = :name AND version = :version"
)
_LATEST = text(
    f"SELECT {_COLUMNS} FROM registry.payload_schemas "  # noqa: S608
    "WHERE tenant_id = :tenant AND name = :name "
    "ORDER BY sort_key DESC, version DESC LIMIT 1"
)
_FIND_MANY = text(
    f"SELECT {_COLUMNS} FROM registry.payload_schemas "  # noqa: S608
    "WHERE tenant_id = :tenant AND (name, version) IN "
    "(SELECT * FROM unnest(CAST(:names AS text[]), CAST(:versions AS text[])))"
)


def _schema(row: Row[Any]) -> PayloadSchema:
    return PayloadSchema.model_validate(row._mapping)


class PayloadSchemaRepository:
    """Reads and writes payload schema versions of the session's tenant."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def insert_if_absent(
        self,
        *,
        tenant_id: str,
        name: str,
        version: str,
        sort_key: str,
        json_schema: dict[str, Any],
        description: str,
        content_hash: str,
    ) -> PayloadSchema | None:
        """Insert a version; None when that version already exists (whatever its content)."""
        row = (
            await self._session.execute(
                _INSERT,
                {
                    "tenant": tenant_id,
                    "name": name,
                    "version": version,
                    "sort_key": sort_key,
                    "json_schema": canonical_json(json_schema).decode(),
                    "description": description,
                    "content_hash": content_hash,
                },
            )
        ).first()
        return _schema(row) if row is not None else None

    async def get(self, *, tenant_id: str, name: str, version: str) -> PayloadSchema | None:
        """One version, or None."""
        row = (
            await self._session.execute(
                _GET, {"tenant": tenant_id, "name": name, "version": version}
            )
        ).first()
        return _schema(row) if row is not None else None

    async def latest(self, *, tenant_id: str, name: str) -> PayloadSchema | None:
        """The version with the highest semver precedence, or None."""
        row = (await self._session.execute(_LATEST, {"tenant": tenant_id, "name": name})).first()
        return _schema(row) if row is not None else None

    async def list_versions(
        self, *, tenant_id: str, name: str, after: tuple[str, str] | None, limit: int
    ) -> list[PayloadSchema]:
        """Versions by descending precedence after the ``(sort_key, version)`` position."""
        seek, params = _VERSION_ORDER.after(after)
        params.update(tenant=tenant_id, name=name, limit=limit)
        statement = text(
            f"SELECT {_COLUMNS} FROM registry.payload_schemas "  # noqa: S608 - fixed fragments
            f"WHERE tenant_id = :tenant AND name = :name AND {seek} "
            f"{_VERSION_ORDER.order_by} LIMIT :limit"
        )
        rows = (await self._session.execute(statement, params)).all()
        return [_schema(row) for row in rows]

    async def find_many(
        self, *, tenant_id: str, refs: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], PayloadSchema]:
        """The versions among ``refs`` (``(name, version)`` pairs) that exist."""
        pairs = sorted(set(refs))
        if not pairs:
            return {}
        rows = (
            await self._session.execute(
                _FIND_MANY,
                {
                    "tenant": tenant_id,
                    "names": [name for name, _ in pairs],
                    "versions": [version for _, version in pairs],
                },
            )
        ).all()
        return {(row.name, row.version): _schema(row) for row in rows}
