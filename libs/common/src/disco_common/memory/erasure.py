"""Erasure: deleting everything of a user or a tenant in one transaction."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, computed_field

from disco_common._base import Record
from disco_common.ids import Id, TenantId

__all__ = [
    "ErasureResult",
    "ErasureScope",
]


class ErasureScope(StrEnum):
    """What an erasure removed."""

    USER = "user"
    TENANT = "tenant"


class ErasureResult(Record):
    """What an erasure deleted, in one transaction."""

    scope: ErasureScope
    tenant_id: TenantId
    user_id: Id | None = Field(default=None, description="Set for a user erasure.")
    deleted: dict[str, int] = Field(description="Rows deleted per table.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total(self) -> int:
        """Rows deleted in all."""
        return sum(self.deleted.values())
