"""memory: HNSW build options from the settings (``m``, ``ef_construction``).

The HNSW indexes of the three vector tables are built with
``DISCO_MEMORY_HNSW_M`` and ``DISCO_MEMORY_HNSW_EF_CONSTRUCTION`` (defaults 16
and 64, what ``memory_0002`` used): an index built with other options is
rebuilt here, once, when this migration runs. To change them on a database that
is already at this revision, rebuild by hand (the service logs the statement at
start when its settings and an index disagree, see ``disco_memory.startup``).

Revision ID: memory_0003
Revises: memory_0002
Create Date: 2026-11-24
"""

from collections.abc import Sequence

from alembic import op
from sqlalchemy import text

from disco_memory.hnsw import HNSW_INDEXES, hnsw_build_options, index_options, rebuild_statements

revision: str = "memory_0003"
down_revision: str | None = "memory_0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    wanted = hnsw_build_options()
    connection = op.get_bind()
    for index in HNSW_INDEXES:
        current = connection.execute(
            text("SELECT reloptions FROM pg_class WHERE oid = to_regclass(:name)"),
            {"name": f"memory.{index.name}"},
        ).scalar()
        if current is not None and index_options(current) != wanted:
            for statement in rebuild_statements(index, wanted):
                op.execute(statement)


def downgrade() -> None:
    # The options stay as they are: memory_0002's indexes are still valid HNSW indexes.
    pass
