"""gateway: the two writes of every A2A message as scoped functions (one round trip each).

Revision ID: gateway_0005
Revises: gateway_0004
Create Date: 2026-11-24

Every A2A message records its turn before the request goes out, and stores its
task when the agent answers. As units of work each was BEGIN, the tenant scope
(``set_config``), the write(s) and COMMIT: four round trips or more, on the
path a caller waits on. These functions do the same in one statement, run in
its own transaction (autocommit):

- ``a2a_add_turn(...)``: sets the scope, records the turn (a second record of
  the same turn is ignored);
- ``a2a_write_task(...)``: sets the scope, writes the task — ``insert`` at
  version 1, ``update`` of version ``prev`` (compare and swap), or ``cancel`` of
  any version not over — and, when it wrote and there is an event, logs the
  event at the version it produced and notifies the log's tails
  (``NOTIFY gateway_a2a_task_events``, delivered on commit). Returns the new
  version (NULL: nothing written) and whether the task has push
  configurations.

They are ``SECURITY INVOKER``: they run as the application role, under
row-level security, in the tenant (and user) they are given, exactly like a
unit of work scoped to them.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "gateway_0005"
down_revision: str | None = "gateway_0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ADD_TURN_ARGS = (
    "p_tenant text, p_user text, p_task_id text, p_turn integer, p_correlation_id text, "
    "p_context_id text, p_agent text, p_skill text, p_event_type text, p_message jsonb"
)
_WRITE_TASK_ARGS = (
    "p_tenant text, p_user text, p_op text, p_task_id text, p_context_id text, "
    "p_owner text, p_agent text, p_status text, p_status_timestamp timestamptz, "
    "p_task jsonb, p_prev bigint, p_terminal text[], p_event jsonb, "
    "OUT version bigint, OUT pushes boolean"
)
_WRITE_TASK_SIGNATURE = (
    "text, text, text, text, text, text, text, text, timestamptz, jsonb, bigint, text[], jsonb"
)
_ADD_TURN_SIGNATURE = "text, text, text, integer, text, text, text, text, text, jsonb"


def upgrade() -> None:
    op.execute(
        f"""
        CREATE FUNCTION gateway.a2a_add_turn({_ADD_TURN_ARGS}) RETURNS void
        LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $$
        BEGIN
            PERFORM set_config('disco.tenant_id', p_tenant, true),
                    set_config('disco.user_id', coalesce(p_user, ''), true);
            INSERT INTO gateway.a2a_turns (tenant_id, task_id, turn, correlation_id,
                                           context_id, user_id, agent, skill, event_type,
                                           message)
            VALUES (p_tenant, p_task_id, p_turn, p_correlation_id, p_context_id, p_user,
                    p_agent, p_skill, p_event_type, p_message)
            ON CONFLICT DO NOTHING;
        END
        $$
        """  # noqa: S608 - the argument list is a constant of this file
    )
    op.execute(
        f"""
        CREATE FUNCTION gateway.a2a_write_task({_WRITE_TASK_ARGS})
        LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $$
        BEGIN
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
            END IF;
        END
        $$
        """  # noqa: S608 - the argument list is a constant of this file
    )


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS gateway.a2a_write_task({_WRITE_TASK_SIGNATURE})")
    op.execute(f"DROP FUNCTION IF EXISTS gateway.a2a_add_turn({_ADD_TURN_SIGNATURE})")
