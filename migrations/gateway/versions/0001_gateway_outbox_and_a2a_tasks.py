"""gateway: the transactional outbox and the A2A task store (tenant-scoped, RLS).

Revision ID: gateway_0001
Revises:
Create Date: 2026-11-23
"""

from collections.abc import Sequence

from alembic import op

from disco_service.migration_helpers import (
    create_outbox_table,
    disable_tenant_rls,
    drop_outbox_table,
    enable_tenant_rls,
)

revision: str = "gateway_0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "gateway"


def upgrade() -> None:
    create_outbox_table(SCHEMA)
    # One row per A2A task. The task JSON is the A2A `Task` object as the a2a-sdk
    # task store hands it over; `status` repeats its state for filtering.
    # The key includes the tenant so one tenant can never learn, through a
    # conflict, that another tenant has a task with the same id.
    op.execute(
        """
        CREATE TABLE gateway.a2a_tasks (
            tenant_id  text        NOT NULL CHECK (tenant_id <> ''),
            task_id    text        NOT NULL CHECK (task_id <> ''),
            context_id text        NOT NULL CHECK (context_id <> ''),
            user_id    text,
            status     text        NOT NULL,
            task       jsonb       NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, task_id)
        )
        """
    )
    op.execute("CREATE INDEX a2a_tasks_context_idx ON gateway.a2a_tasks (tenant_id, context_id)")
    op.execute(
        "CREATE INDEX a2a_tasks_status_idx ON gateway.a2a_tasks (tenant_id, status, updated_at)"
    )
    enable_tenant_rls(SCHEMA, "a2a_tasks")


def downgrade() -> None:
    disable_tenant_rls(SCHEMA, "a2a_tasks")
    op.execute("DROP TABLE IF EXISTS gateway.a2a_tasks")
    drop_outbox_table(SCHEMA)
