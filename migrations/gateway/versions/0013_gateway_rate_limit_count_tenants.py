"""gateway: each shared rate-limit count names its tenant, so erasure reaches it.

Revision ID: gateway_0013
Revises: gateway_0012
Create Date: 2026-12-02

A tenant's windows in ``rate_limit_counts`` carried the tenant only inside their
key (``LIMITER/tenant/<tenant>/...``), so the erasure functions, which find a
schema's tenant data by its ``tenant_id`` column, left them behind. Now the
column is there (null for the windows of an address without a token), filled
for the rows already kept, and ``share_rate_limit_counts`` takes each count's
tenant beside its key.
"""

from collections.abc import Sequence

from alembic import op

from disco_service.migration_helpers import create_system_function, drop_system_function

revision: str = "gateway_0013"
down_revision: str | None = "gateway_0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "gateway"
_BEFORE_ARGS = "p_me text, p_keys text[], p_hits integer[], p_expires double precision[]"
_AFTER_ARGS = (
    "p_me text, p_keys text[], p_tenants text[], p_hits integer[], p_expires double precision[]"
)
_RETURNS = "TABLE(window_key text, hits bigint)"


def _body(tenants: bool) -> str:
    columns = (
        "(window_key, instance, tenant_id, hits, expires_at)"
        if tenants
        else ("(window_key, instance, hits, expires_at)")
    )
    select = (
        "SELECT k, p_me, t, h, to_timestamp(e)"
        if tenants
        else ("SELECT k, p_me, h, to_timestamp(e)")
    )
    source = (
        "unnest(p_keys, p_tenants, p_hits, p_expires) AS u(k, t, h, e)"
        if tenants
        else "unnest(p_keys, p_hits, p_expires) AS u(k, h, e)"
    )
    return f"""
        BEGIN
            INSERT INTO gateway.rate_limit_counts AS c {columns}
            {select}
            FROM {source}
            ON CONFLICT ON CONSTRAINT rate_limit_counts_pkey
            DO UPDATE SET hits = EXCLUDED.hits, expires_at = EXCLUDED.expires_at;
            -- Every instance sweeps; one that finds a row taken skips it (no waits, no
            -- deadlocks between instances sweeping at once).
            DELETE FROM gateway.rate_limit_counts
            WHERE ctid IN (
                SELECT ctid FROM gateway.rate_limit_counts
                WHERE expires_at <= now()
                FOR UPDATE SKIP LOCKED
            );
            RETURN QUERY
            SELECT c.window_key, sum(c.hits)::bigint
            FROM gateway.rate_limit_counts AS c
            WHERE c.instance <> p_me AND c.expires_at > now()
            GROUP BY c.window_key;
        END
        """  # noqa: S608


def upgrade() -> None:
    op.execute("ALTER TABLE gateway.rate_limit_counts ADD COLUMN tenant_id text")
    op.execute(
        "UPDATE gateway.rate_limit_counts SET tenant_id = split_part(window_key, '/', 3) "
        "WHERE split_part(window_key, '/', 2) = 'tenant'"
    )
    op.execute(
        "CREATE INDEX rate_limit_counts_tenant ON gateway.rate_limit_counts (tenant_id) "
        "WHERE tenant_id IS NOT NULL"
    )
    drop_system_function(SCHEMA, "share_rate_limit_counts", arguments=_BEFORE_ARGS)
    create_system_function(
        SCHEMA,
        "share_rate_limit_counts",
        arguments=_AFTER_ARGS,
        returns=_RETURNS,
        language="plpgsql",
        body=_body(tenants=True),
    )


def downgrade() -> None:
    drop_system_function(SCHEMA, "share_rate_limit_counts", arguments=_AFTER_ARGS)
    create_system_function(
        SCHEMA,
        "share_rate_limit_counts",
        arguments=_BEFORE_ARGS,
        returns=_RETURNS,
        language="plpgsql",
        body=_body(tenants=False),
    )
    op.execute("DROP INDEX IF EXISTS gateway.rate_limit_counts_tenant")
    op.execute("ALTER TABLE gateway.rate_limit_counts DROP COLUMN tenant_id")
