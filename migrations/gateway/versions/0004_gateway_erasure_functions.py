"""gateway: erasure functions over every tenant-scoped table of the schema.

``gateway.erase_user(target_user)`` and ``gateway.erase_tenant()`` delete the
calling transaction's tenant's rows (a user's, or all) from every table of the
schema with a ``tenant_id`` column, found in the catalog when they run.
The service erases its rows when the memory service announces an erasure
(``erasure.requested`` on system-events; see disco_service's erasure consumer).

Revision ID: gateway_0004
Revises: gateway_0003
Create Date: 2026-11-24
"""

from collections.abc import Sequence

from disco_service.migration_helpers import create_erasure_functions, drop_erasure_functions

revision: str = "gateway_0004"
down_revision: str | None = "gateway_0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "gateway"


def upgrade() -> None:
    create_erasure_functions(SCHEMA)


def downgrade() -> None:
    drop_erasure_functions(SCHEMA)
