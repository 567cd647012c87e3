"""memory: the transactional outbox (events published after commit).

Revision ID: memory_0001
Revises:
Create Date: 2026-11-23
"""

from collections.abc import Sequence

from disco_service.migration_helpers import create_outbox_table, drop_outbox_table

revision: str = "memory_0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "memory"


def upgrade() -> None:
    create_outbox_table(SCHEMA)


def downgrade() -> None:
    drop_outbox_table(SCHEMA)
