"""registry: discovery reads that stay fast as agents register.

Measured at 10,000 agents (``bench/table.py --only registry``, EXPLAIN ANALYZE
of ``registry.discover_agents``), the discovery statement, not the service, was
what capped discovery: ~2.7 ms of PostgreSQL per call, of which

- **the GIN pending lists** (~0.6 ms): with ``fastupdate`` on, every new
  registration's array and text entries wait in a list that each query reads
  through, in full, until a vacuum moves them into the index. A registry is
  read far more than it is written, and its readers wait on the answer, so the
  entries now go into the index when they are written (a registration costs a
  few index inserts more) and the lists there are now are emptied;
- **turning ``discovery`` from jsonb into text** (~0.3 ms at 50 agents): the
  answer embeds each agent's resolved capabilities, which were stored as jsonb
  and printed again on every read. Stored as ``json`` (the text as written)
  they are copied into the answer as they are. Nothing queries inside them; the
  registration functions still take jsonb (assigned to json as its text).

Revision ID: registry_0007
Revises: registry_0006
Create Date: 2026-11-28
"""

from collections.abc import Sequence

from alembic import op

revision: str = "registry_0007"
down_revision: str | None = "registry_0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GIN_INDEXES = (
    "agents_capability_names",
    "agents_consumed_events",
    "agents_produced_events",
    "agents_tags",
    "agents_search_vector",
)


def upgrade() -> None:
    for index in GIN_INDEXES:
        op.execute(f"ALTER INDEX registry.{index} SET (fastupdate = off)")
        op.execute(f"SELECT gin_clean_pending_list('registry.{index}'::regclass)")
    op.execute(
        "ALTER TABLE registry.agents ALTER COLUMN discovery TYPE json USING discovery::json, "
        "ALTER COLUMN discovery SET DEFAULT '[]'::json"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE registry.agents ALTER COLUMN discovery TYPE jsonb USING discovery::jsonb, "
        "ALTER COLUMN discovery SET DEFAULT '[]'::jsonb"
    )
    for index in GIN_INDEXES:
        op.execute(f"ALTER INDEX registry.{index} RESET (fastupdate)")
