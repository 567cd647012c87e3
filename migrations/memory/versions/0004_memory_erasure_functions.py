"""memory: erasure functions over every tenant-scoped table of the schema.

``memory.erase_user(target_user)`` and ``memory.erase_tenant()`` delete the
calling transaction's tenant's rows (a user's, or all) from every table of the
schema with a ``tenant_id`` column, found in the catalog when they run.
It replaces the erasure functions of memory_0002 (a fixed list of tables) with the
generic ones, so that tables added since (and later) are erased too.

Revision ID: memory_0004
Revises: memory_0003
Create Date: 2026-11-24
"""

from collections.abc import Sequence

from disco_service.migration_helpers import create_erasure_functions

revision: str = "memory_0004"
down_revision: str | None = "memory_0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "memory"


def upgrade() -> None:
    create_erasure_functions(SCHEMA)


def downgrade() -> None:
    # The generic functions do what the ones of memory_0002 did, for every table
    # (those listed there included): leaving them is the safe way down.
    return None
