"""gateway: rate-limit counts shared by every instance.

Revision ID: gateway_0010
Revises: gateway_0009
Create Date: 2026-11-28

Each instance counted calls against the rate limits in its own memory, so N
instances behind a balancer let a tenant through N times its limit. Now each
shares its counts every ``DISCO_GATEWAY_RATE_LIMIT_SHARE_SECONDS``:

- ``rate_limit_counts``: one row per window of a limit's key (``limits``'
  sliding-window key: the limit, ``tenant`` or ``anonymous``, the tenant or the
  address, and the window's number) and instance, with the instance's hits in
  it, until the window is of no more use (``expires_at``). Not tenant data to
  read: only the system function below touches it (row-level security with the
  owner's policy alone, so the application role sees no row).
- ``share_rate_limit_counts(me, keys, hits, expires)``: writes ``me``'s counts,
  deletes expired rows (any instance's: a stopped one's too), and returns the
  other instances' hits by window.
"""

from collections.abc import Sequence

from alembic import op

from disco_service.migration_helpers import create_system_function, drop_system_function

revision: str = "gateway_0010"
down_revision: str | None = "gateway_0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "gateway"
_SHARE_ARGS = "p_me text, p_keys text[], p_hits integer[], p_expires double precision[]"


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE gateway.rate_limit_counts (
            window_key text        NOT NULL,
            instance   text        NOT NULL,
            hits       integer     NOT NULL CHECK (hits >= 0),
            expires_at timestamptz NOT NULL,
            PRIMARY KEY (window_key, instance)
        )
        """
    )
    op.execute("CREATE INDEX rate_limit_counts_expiry ON gateway.rate_limit_counts (expires_at)")
    op.execute("ALTER TABLE gateway.rate_limit_counts ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE gateway.rate_limit_counts FORCE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY rate_limit_counts_owner_maintenance ON gateway.rate_limit_counts "
        "AS PERMISSIVE FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true)"
    )
    create_system_function(
        SCHEMA,
        "share_rate_limit_counts",
        arguments=_SHARE_ARGS,
        returns="TABLE(window_key text, hits bigint)",
        language="plpgsql",
        body="""
        BEGIN
            INSERT INTO gateway.rate_limit_counts AS c (window_key, instance, hits, expires_at)
            SELECT k, p_me, h, to_timestamp(e)
            FROM unnest(p_keys, p_hits, p_expires) AS t(k, h, e)
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
        """,
    )


def downgrade() -> None:
    drop_system_function(SCHEMA, "share_rate_limit_counts", arguments=_SHARE_ARGS)
    op.execute("DROP TABLE IF EXISTS gateway.rate_limit_counts")
