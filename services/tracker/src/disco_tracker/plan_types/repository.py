"""SQL of registered plan types (``tracker.plan_types``)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import JsonValue
from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_common.canonical import canonical_json
from disco_service import Keyset

__all__ = ["PlanTypeRepository"]

_COLUMNS = "plan_type, version, definition, content_hash, created_at"

_INSERT = text(
    "INSERT INTO tracker.plan_types "  # noqa: S608 - fixed fragments
    "(tenant_id, plan_type, version, sort_key, definition, content_hash) "
    "VALUES (:tenant, :plan_type, :version, :sort_key, CAST(:definition AS jsonb), "
    ":content_hash) ON CONFLICT (tenant_id, plan_type, version) DO NOTHING "
    f"RETURNING {_COLUMNS}"
)
_GET = text(
    f"SELECT {_COLUMNS} FROM tracker.plan_types "  # noqa: S608 - fixed fragments
    "WHERE tenant_id = :tenant AND plan_type = :plan_type AND version = :version"
)
_LATEST = text(
    f"SELECT {_COLUMNS} FROM tracker.plan_types "  # noqa: S608 - fixed fragments
    "WHERE tenant_id = :tenant AND plan_type = :plan_type "
    "ORDER BY sort_key DESC, version DESC LIMIT 1"
)
_TYPES_ORDER = Keyset("plan_type")


class PlanTypeRepository:
    """Reads and writes the plan types of one tenant."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self.session = session
        self.tenant_id = tenant_id

    async def insert_if_absent(
        self,
        *,
        plan_type: str,
        version: str,
        sort_key: str,
        definition: JsonValue,
        content_hash: str,
    ) -> RowMapping | None:
        """Insert a version; None when that version already exists (whatever its content)."""
        result = await self.session.execute(
            _INSERT,
            {
                "tenant": self.tenant_id,
                "plan_type": plan_type,
                "version": version,
                "sort_key": sort_key,
                "definition": canonical_json(definition).decode(),
                "content_hash": content_hash,
            },
        )
        return result.mappings().first()

    async def get(self, plan_type: str, version: str) -> RowMapping | None:
        """One version, or None."""
        result = await self.session.execute(
            _GET, {"tenant": self.tenant_id, "plan_type": plan_type, "version": version}
        )
        return result.mappings().first()

    async def latest(self, plan_type: str) -> RowMapping | None:
        """The version with the highest semver precedence, or None."""
        result = await self.session.execute(
            _LATEST, {"tenant": self.tenant_id, "plan_type": plan_type}
        )
        return result.mappings().first()

    async def list_latest(
        self, *, after: tuple[str, ...] | None, limit: int
    ) -> Sequence[RowMapping]:
        """The latest version of each plan type, by name, after the cursor position."""
        seek, params = _TYPES_ORDER.after(after)
        params.update(tenant=self.tenant_id, limit=limit)
        statement = text(
            f"SELECT DISTINCT ON (plan_type) {_COLUMNS} FROM tracker.plan_types "  # noqa: S608
            f"WHERE tenant_id = :tenant AND {seek} "
            "ORDER BY plan_type, sort_key DESC, version DESC LIMIT :limit"
        )
        result = await self.session.execute(statement, params)
        return result.mappings().all()
