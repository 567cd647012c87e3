"""gateway: the A2A task store (versions, event log), turns, push configs, retention.

Revision ID: gateway_0002
Revises: gateway_0001
Create Date: 2026-11-24

- ``a2a_tasks`` gains a write counter (``version``: each write compares and
  swaps it, the a2a-sdk's cluster contract), the agent the task is for, its
  owner (``user_id`` is set by every write now) and the status time;
- ``a2a_task_events``: every event a write applied, numbered by the version it
  produced; ``SubscribeToTask`` on any gateway instance replays it and tails it
  (``NOTIFY gateway_a2a_task_events`` wakes the tails);
- ``a2a_turns``: what the gateway asked an agent for each A2A message (the
  request's correlation id, the skill, the question to a human the task waits
  on), so that any instance can continue the task or apply its answer;
- ``a2a_push_configs``: push notification configurations per task;
- ``purge_a2a_tasks(cutoff)``: the retention job (a system function: it
  crosses tenants).
All tenant data: tenant first in every key, row-level security on.
"""

from collections.abc import Sequence

from alembic import op

from disco_service.migration_helpers import (
    create_system_function,
    disable_tenant_rls,
    drop_system_function,
    enable_tenant_rls,
)

revision: str = "gateway_0002"
down_revision: str | None = "gateway_0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "gateway"


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE gateway.a2a_tasks
            ADD COLUMN version          bigint      NOT NULL DEFAULT 1,
            ADD COLUMN agent            text,
            ADD COLUMN status_timestamp timestamptz NOT NULL DEFAULT now()
        """
    )
    # ListTasks: newest status first, per tenant (and per agent, per context).
    op.execute(
        "CREATE INDEX a2a_tasks_listing_idx ON gateway.a2a_tasks "
        "(tenant_id, status_timestamp DESC, task_id DESC)"
    )
    op.execute(
        """
        CREATE TABLE gateway.a2a_task_events (
            tenant_id  text        NOT NULL CHECK (tenant_id <> ''),
            task_id    text        NOT NULL,
            version    bigint      NOT NULL,
            event      jsonb       NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, task_id, version)
        )
        """
    )
    enable_tenant_rls(SCHEMA, "a2a_task_events")
    op.execute(
        """
        CREATE TABLE gateway.a2a_turns (
            tenant_id      text        NOT NULL CHECK (tenant_id <> ''),
            task_id        text        NOT NULL,
            turn           integer     NOT NULL CHECK (turn >= 1),
            correlation_id text        NOT NULL,
            context_id     text        NOT NULL,
            user_id        text        NOT NULL,
            agent          text        NOT NULL,
            skill          text        NOT NULL,
            event_type     text        NOT NULL,
            message        jsonb       NOT NULL,
            question       jsonb,
            created_at     timestamptz NOT NULL DEFAULT now(),
            updated_at     timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, task_id, turn),
            UNIQUE (tenant_id, correlation_id)
        )
        """
    )
    enable_tenant_rls(SCHEMA, "a2a_turns")
    op.execute(
        """
        CREATE TABLE gateway.a2a_push_configs (
            tenant_id  text        NOT NULL CHECK (tenant_id <> ''),
            task_id    text        NOT NULL,
            config_id  text        NOT NULL,
            user_id    text        NOT NULL,
            config     jsonb       NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, task_id, config_id)
        )
        """
    )
    enable_tenant_rls(SCHEMA, "a2a_push_configs")
    create_system_function(
        SCHEMA,
        "purge_a2a_tasks",
        arguments="cutoff timestamptz",
        returns="integer",
        language="plpgsql",
        body="""
        DECLARE purged integer;
        BEGIN
            -- Finished tasks not touched since the cutoff, with what hangs on them.
            WITH gone AS (
                DELETE FROM gateway.a2a_tasks
                 WHERE updated_at < cutoff
                   AND status IN ('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED',
                                  'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED')
                RETURNING tenant_id, task_id
            ), events AS (
                DELETE FROM gateway.a2a_task_events e USING gone
                 WHERE e.tenant_id = gone.tenant_id AND e.task_id = gone.task_id
            ), pushes AS (
                DELETE FROM gateway.a2a_push_configs p USING gone
                 WHERE p.tenant_id = gone.tenant_id AND p.task_id = gone.task_id
            )
            SELECT count(*) INTO purged FROM gone;
            -- Turns of tasks that are gone (or never came to be: a direct message).
            DELETE FROM gateway.a2a_turns t
             WHERE t.updated_at < cutoff
               AND NOT EXISTS (SELECT 1 FROM gateway.a2a_tasks k
                                WHERE k.tenant_id = t.tenant_id AND k.task_id = t.task_id);
            RETURN purged;
        END
        """,
    )


def downgrade() -> None:
    drop_system_function(SCHEMA, "purge_a2a_tasks", arguments="cutoff timestamptz")
    disable_tenant_rls(SCHEMA, "a2a_push_configs")
    op.execute("DROP TABLE IF EXISTS gateway.a2a_push_configs")
    disable_tenant_rls(SCHEMA, "a2a_turns")
    op.execute("DROP TABLE IF EXISTS gateway.a2a_turns")
    disable_tenant_rls(SCHEMA, "a2a_task_events")
    op.execute("DROP TABLE IF EXISTS gateway.a2a_task_events")
    op.execute("DROP INDEX IF EXISTS gateway.a2a_tasks_listing_idx")
    op.execute(
        """
        ALTER TABLE gateway.a2a_tasks
            DROP COLUMN status_timestamp,
            DROP COLUMN agent,
            DROP COLUMN version
        """
    )
