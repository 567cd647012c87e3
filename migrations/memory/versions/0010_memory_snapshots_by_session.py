"""memory: an agent's state in a session is found by session and agent within the tenant.

Snapshots were keyed and row-level-secured by user as well: the state an agent
saved while handling a request with no user (a service or another agent started
the session) belonged to the agent's own identity, and the decision of the person
who approved one of its tool calls looked it up as that person and found nothing
(``agent_state_lost``). A session's state is now one row per (tenant, session,
agent) whoever resumes it; ``user_id`` stays on the row as its owner (the user the
session was started by or for, who may read it, and whose erasure deletes it).
Who may resume is the agents' and the gateway's to check; the service serves a
plain user only the rows it owns, and a ``service``, ``operator`` or ``admin``
caller any row of the tenant.

Where one session and agent had rows of several users, the newest is kept.

Revision ID: memory_0010
Revises: memory_0009
Create Date: 2026-12-03
"""

from collections.abc import Sequence

from alembic import op

from disco_service.migration_helpers import disable_tenant_rls, enable_tenant_rls

revision: str = "memory_0010"
down_revision: str | None = "memory_0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "memory"
TABLE = "agent_snapshots"


def upgrade() -> None:
    op.execute(
        f"""DELETE FROM {SCHEMA}.{TABLE} s USING {SCHEMA}.{TABLE} newer
        WHERE s.tenant_id = newer.tenant_id AND s.session_id = newer.session_id
          AND s.agent_id = newer.agent_id
          AND (s.updated_at, s.user_id) < (newer.updated_at, newer.user_id)"""  # noqa: S608
    )
    op.execute(f"ALTER TABLE {SCHEMA}.{TABLE} DROP CONSTRAINT {TABLE}_pkey")
    op.execute(f"ALTER TABLE {SCHEMA}.{TABLE} ADD PRIMARY KEY (tenant_id, session_id, agent_id)")
    op.execute(f"CREATE INDEX {TABLE}_owner ON {SCHEMA}.{TABLE} (tenant_id, user_id)")
    disable_tenant_rls(SCHEMA, TABLE)
    enable_tenant_rls(SCHEMA, TABLE)


def downgrade() -> None:
    disable_tenant_rls(SCHEMA, TABLE)
    enable_tenant_rls(SCHEMA, TABLE, user_scoped=True)
    op.execute(f"DROP INDEX IF EXISTS {SCHEMA}.{TABLE}_owner")
    op.execute(f"ALTER TABLE {SCHEMA}.{TABLE} DROP CONSTRAINT {TABLE}_pkey")
    op.execute(
        f"ALTER TABLE {SCHEMA}.{TABLE} ADD PRIMARY KEY (tenant_id, user_id, session_id, agent_id)"
    )
