"""memory: dedup marks, the bus's durable dedup store (``memory.dedup_marks``).

One row per (tenant, consumer group, envelope id) a group handled, so that an
envelope redelivered after a crash or a rebalance is not handled again even by
another process. Tenant-scoped with row-level security like every table here;
erasure deletes them (``disco_memory.erasure.repository``), the user's marks
with the user. Expired marks read as absent.

Revision ID: memory_0005
Revises: memory_0004
Create Date: 2026-11-24
"""

from collections.abc import Sequence

from alembic import op

from disco_service.migration_helpers import disable_tenant_rls, enable_tenant_rls

revision: str = "memory_0005"
down_revision: str | None = "memory_0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "memory"


def upgrade() -> None:
    op.execute(
        f"""CREATE TABLE {SCHEMA}.dedup_marks (
            tenant_id text NOT NULL,
            consumer_group text NOT NULL,
            event_id text NOT NULL,
            user_id text NOT NULL,
            expires_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, consumer_group, event_id))"""
    )
    op.execute(f"CREATE INDEX dedup_marks_user ON {SCHEMA}.dedup_marks (tenant_id, user_id)")
    enable_tenant_rls(SCHEMA, "dedup_marks")


def downgrade() -> None:
    disable_tenant_rls(SCHEMA, "dedup_marks")
    op.execute(f"DROP TABLE IF EXISTS {SCHEMA}.dedup_marks")
