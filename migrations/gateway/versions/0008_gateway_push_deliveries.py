"""gateway: push notifications waiting to be delivered, kept until they are.

Revision ID: gateway_0008
Revises: gateway_0007
Create Date: 2026-11-28

A push notification lived in the memory of the instance that sent it: one
waiting out its retries' backoff when the instance stopped was lost. Now each
is a row until it is delivered or given up on:

- ``a2a_push_deliveries``: one row per notification and configuration, in the
  order they were sent (``seq``). ``claimed_by`` holds the token
  (``<instance>/<n>``) of the try under way, and nobody else may try it until
  ``due_at`` (the try's lease); a failed try lets go of it, due again after the
  backoff. Only the oldest row of a configuration is tried, so a receiver gets
  a task's notifications in order, whichever instance sends them.
  Deleted with its configuration (a deleted configuration stops its pushes;
  the retention job and erasure delete configurations). Tenant data: RLS on;
  ``user_id`` is the configuration's owner, so a user's erasure takes them.
- ``claim_a2a_push_deliveries(me, lease_seconds, max_rows)``: the sweeper of
  every instance takes due rows of every tenant (a dead instance's, or retries
  due) under its token ``me``, with their configuration.
- ``release_a2a_push_deliveries(instance)``: a stopping instance lets go of the
  rows its tokens hold (due at once).
"""

from collections.abc import Sequence

from alembic import op

from disco_service.migration_helpers import (
    create_system_function,
    disable_tenant_rls,
    drop_system_function,
    enable_tenant_rls,
)

revision: str = "gateway_0008"
down_revision: str | None = "gateway_0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "gateway"
_CLAIM_ARGS = "me text, lease_seconds double precision, max_rows integer"
_RELEASE_ARGS = "instance text"


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE gateway.a2a_push_deliveries (
            tenant_id  text        NOT NULL CHECK (tenant_id <> ''),
            seq        bigint      GENERATED ALWAYS AS IDENTITY,
            task_id    text        NOT NULL,
            config_id  text        NOT NULL,
            user_id    text        NOT NULL,
            body       jsonb       NOT NULL,
            attempts   integer     NOT NULL DEFAULT 0,
            claimed_by text,
            due_at     timestamptz NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, seq),
            FOREIGN KEY (tenant_id, task_id, config_id)
                REFERENCES gateway.a2a_push_configs (tenant_id, task_id, config_id)
                ON DELETE CASCADE
        )
        """
    )
    op.execute(
        "CREATE INDEX a2a_push_deliveries_order "
        "ON gateway.a2a_push_deliveries (tenant_id, task_id, config_id, seq)"
    )
    op.execute("CREATE INDEX a2a_push_deliveries_due ON gateway.a2a_push_deliveries (due_at)")
    enable_tenant_rls(SCHEMA, "a2a_push_deliveries")
    create_system_function(
        SCHEMA,
        "claim_a2a_push_deliveries",
        arguments=_CLAIM_ARGS,
        returns=(
            "TABLE(tenant_id text, seq bigint, task_id text, attempts integer, "
            "body jsonb, config jsonb)"
        ),
        body="""
            UPDATE gateway.a2a_push_deliveries AS d
               SET claimed_by = me,
                   due_at = now() + make_interval(secs => lease_seconds),
                   attempts = d.attempts + 1
              FROM gateway.a2a_push_configs AS c
             WHERE (d.tenant_id, d.seq) IN (
                   SELECT x.tenant_id, x.seq
                     FROM gateway.a2a_push_deliveries AS x
                    WHERE x.due_at <= now()
                      AND NOT EXISTS (
                          SELECT 1 FROM gateway.a2a_push_deliveries AS e
                           WHERE e.tenant_id = x.tenant_id AND e.task_id = x.task_id
                             AND e.config_id = x.config_id AND e.seq < x.seq)
                    ORDER BY x.due_at
                    LIMIT max_rows
                    FOR UPDATE SKIP LOCKED)
               AND c.tenant_id = d.tenant_id AND c.task_id = d.task_id
               AND c.config_id = d.config_id
            RETURNING d.tenant_id, d.seq, d.task_id, d.attempts, d.body, c.config
        """,
    )
    create_system_function(
        SCHEMA,
        "release_a2a_push_deliveries",
        arguments=_RELEASE_ARGS,
        returns="integer",
        language="plpgsql",
        body="""
        DECLARE released integer;
        BEGIN
            UPDATE gateway.a2a_push_deliveries
               SET claimed_by = NULL, due_at = LEAST(due_at, now())
             WHERE starts_with(claimed_by, instance || '/');
            GET DIAGNOSTICS released = ROW_COUNT;
            RETURN released;
        END
        """,
    )


def downgrade() -> None:
    drop_system_function(SCHEMA, "release_a2a_push_deliveries", arguments=_RELEASE_ARGS)
    drop_system_function(SCHEMA, "claim_a2a_push_deliveries", arguments=_CLAIM_ARGS)
    disable_tenant_rls(SCHEMA, "a2a_push_deliveries")
    op.execute("DROP TABLE IF EXISTS gateway.a2a_push_deliveries")
