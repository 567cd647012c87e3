"""gateway: a task's push notifications are queued by the write that changes the task.

Revision ID: gateway_0009
Revises: gateway_0008
Create Date: 2026-11-28

The write of a task and the queueing of its push notifications were two
transactions, a few milliseconds apart: a gateway that died between them had
stored the change and lost its notifications. ``a2a_write_task`` now takes the
notification's body (``p_push``: the event as a ``StreamResponse``) and, in the
same transaction as the write, queues a row per configuration of the task in
``a2a_push_deliveries``, held under the writer's token ``p_push_me`` for
``p_push_lease`` seconds (the first of its configuration for its first try, as
``RetryingPushSender`` does). The rows it queued come back in ``queued``; the
instance tries them at once, and should it die first, a sweeper takes them once
the lease ends. Everything else the function does is unchanged (``gateway_0005``).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "gateway_0009"
down_revision: str | None = "gateway_0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_SIGNATURE = (
    "text, text, text, text, text, text, text, text, timestamptz, jsonb, bigint, text[], jsonb"
)
_NEW_SIGNATURE = f"{_OLD_SIGNATURE}, jsonb, text, double precision"
_ARGS = (
    "p_tenant text, p_user text, p_op text, p_task_id text, p_context_id text, "
    "p_owner text, p_agent text, p_status text, p_status_timestamp timestamptz, "
    "p_task jsonb, p_prev bigint, p_terminal text[], p_event jsonb"
)
_OUT = "OUT version bigint, OUT pushes boolean"

# The write itself, as gateway_0005 made it.
_WRITE = """
            PERFORM set_config('disco.tenant_id', p_tenant, true),
                    set_config('disco.user_id', coalesce(p_user, ''), true);
            IF p_op = 'insert' THEN
                INSERT INTO gateway.a2a_tasks AS t (tenant_id, task_id, context_id, user_id,
                                                    agent, status, task, version,
                                                    status_timestamp)
                VALUES (p_tenant, p_task_id, p_context_id, p_owner, p_agent, p_status,
                        p_task, 1, p_status_timestamp)
                ON CONFLICT DO NOTHING
                RETURNING t.version INTO version;
            ELSIF p_op = 'update' THEN
                UPDATE gateway.a2a_tasks AS t
                   SET task = p_task, status = p_status, status_timestamp = p_status_timestamp,
                       version = t.version + 1, updated_at = now()
                 WHERE t.tenant_id = p_tenant AND t.task_id = p_task_id AND t.version = p_prev
                RETURNING t.version INTO version;
            ELSIF p_op = 'cancel' THEN
                -- Cancel overwrites whatever version is stored, unless the task is over.
                UPDATE gateway.a2a_tasks AS t
                   SET task = p_task, status = p_status, status_timestamp = p_status_timestamp,
                       version = t.version + 1, updated_at = now()
                 WHERE t.tenant_id = p_tenant AND t.task_id = p_task_id
                   AND t.status <> ALL(p_terminal)
                RETURNING t.version INTO version;
            ELSE
                RAISE EXCEPTION 'a2a_write_task: unknown operation %', p_op;
            END IF;
            IF version IS NULL THEN
                RETURN;  -- nothing written: nothing logged, nobody woken
            END IF;
            pushes := EXISTS (SELECT 1 FROM gateway.a2a_push_configs p
                               WHERE p.tenant_id = p_tenant AND p.task_id = p_task_id);
            IF p_event IS NOT NULL THEN
                INSERT INTO gateway.a2a_task_events (tenant_id, task_id, version, event)
                VALUES (p_tenant, p_task_id, version, p_event)
                ON CONFLICT DO NOTHING;
                PERFORM pg_notify('gateway_a2a_task_events', p_tenant || ' ' || p_task_id);
            END IF;"""


def upgrade() -> None:
    op.execute(f"DROP FUNCTION gateway.a2a_write_task({_OLD_SIGNATURE})")
    op.execute(
        f"""
        CREATE FUNCTION gateway.a2a_write_task(
            {_ARGS}, p_push jsonb, p_push_me text, p_push_lease double precision,
            {_OUT}, OUT queued jsonb)
        LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $$
        BEGIN
            {_WRITE}
            IF pushes AND p_push IS NOT NULL THEN
                -- A row per configuration, held under the writer's token for the lease;
                -- the first of its configuration is held for its first try at once.
                WITH configs AS (
                    SELECT config_id, user_id, config FROM gateway.a2a_push_configs
                     WHERE tenant_id = p_tenant AND task_id = p_task_id),
                queued_rows AS (
                    INSERT INTO gateway.a2a_push_deliveries
                           (tenant_id, task_id, config_id, user_id, body, claimed_by, due_at,
                            attempts)
                    SELECT p_tenant, p_task_id, c.config_id, c.user_id, p_push, p_push_me,
                           now() + make_interval(secs => p_push_lease),
                           CASE WHEN EXISTS (
                               SELECT 1 FROM gateway.a2a_push_deliveries AS e
                                WHERE e.tenant_id = p_tenant AND e.task_id = p_task_id
                                  AND e.config_id = c.config_id) THEN 0 ELSE 1 END
                      FROM configs AS c ORDER BY c.config_id
                    RETURNING seq, config_id, attempts)
                SELECT jsonb_agg(jsonb_build_object('seq', r.seq, 'config_id', r.config_id,
                                                    'attempts', r.attempts, 'config', c.config)
                                 ORDER BY r.seq)
                  INTO queued
                  FROM queued_rows AS r JOIN configs AS c USING (config_id);
            END IF;
        END
        $$
        """  # noqa: S608 - the argument lists are constants of this file
    )


def downgrade() -> None:
    op.execute(f"DROP FUNCTION gateway.a2a_write_task({_NEW_SIGNATURE})")
    op.execute(
        f"""
        CREATE FUNCTION gateway.a2a_write_task({_ARGS}, {_OUT})
        LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $$
        BEGIN
            {_WRITE}
        END
        $$
        """
    )
