"""SQL of erasure: the ``SECURITY DEFINER`` functions ``memory.erase_user``/``erase_tenant``.

They see every user's rows (the application role alone sees only the
caller's private ones) but only ever touch the tenant the transaction is
scoped to: they read it from ``disco.tenant_id``, not from an argument.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["ErasureRepository"]

_ERASE_USER = text("SELECT table_name, deleted FROM memory.erase_user(:user_id)")
_ERASE_TENANT = text("SELECT table_name, deleted FROM memory.erase_tenant()")
# Dedup marks are shared by the tenant's users (no user-private rows), so the
# application role reaches all of them under row-level security: plain deletes.
_TENANT = "tenant_id = current_setting('disco.tenant_id')"
_ERASE_USER_MARKS = text(f"DELETE FROM memory.dedup_marks WHERE {_TENANT} AND user_id = :user_id")  # noqa: S608
_ERASE_TENANT_MARKS = text(f"DELETE FROM memory.dedup_marks WHERE {_TENANT}")  # noqa: S608


class ErasureRepository:
    """Runs the erasure functions in the request's transaction."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def erase_user(self, user_id: str) -> dict[str, int]:
        """Delete every row of ``user_id`` in the transaction's tenant; rows per table."""
        rows = await self._session.execute(_ERASE_USER, {"user_id": user_id})
        deleted = {row.table_name: int(row.deleted) for row in rows}
        marks = await self._session.execute(_ERASE_USER_MARKS, {"user_id": user_id})
        return {**deleted, "dedup_marks": int(marks.rowcount)}  # type: ignore[attr-defined]

    async def erase_tenant(self) -> dict[str, int]:
        """Delete every row of the transaction's tenant; rows per table."""
        rows = await self._session.execute(_ERASE_TENANT)
        deleted = {row.table_name: int(row.deleted) for row in rows}
        marks = await self._session.execute(_ERASE_TENANT_MARKS)
        return {**deleted, "dedup_marks": int(marks.rowcount)}  # type: ignore[attr-defined]
