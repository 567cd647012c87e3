"""tracker: the read model of everything that runs (plans, tasks, timelines, metrics, feed).

The tracker's ingest consumer builds these tables from `system-events`,
`action-requests` and `action-results`, idempotently:

- `events` is the timeline: one compact row per envelope consumed, keyed by
  (tenant, envelope id); `seq` (order of arrival) only breaks ties of time, so
  its values are drawn a hundred at a time. Inserting it is also the deduplication: an envelope
  whose row exists changed the read model already and is skipped, in the same
  transaction as the read-model writes.
- `plans` and `tasks` (room left on their pages, so that most of their updates
  are HOT) keep, per field, a rule that gives the same row whatever
  order the events arrive in: ids are set once, times take the earliest or the
  latest, the live (non-final) status follows the latest event, a final status
  the earliest final event (a HITL timeout at its deadline wins over the
  worker's later answer on its timeout path). `status` is derived from those.
- `delegation_groups` are the fan-outs; their counts are read from the member
  tasks (`tasks.parallel_group_id`), so an answer that comes before its
  `task.delegated` still counts.
- `pending_answers` keeps answers that carry no task id and whose request was
  not seen yet (a plain Kafka responder may omit `task_id`); the request
  picks them up.
- `event_counts` counts envelopes per minute, topic and event type (metrics).
- `plan_types` are registered plan state machines, immutable per version.
- `feed` is the change log behind `GET /v1/tracker/feed`: ids increase in
  commit order (writers take an advisory lock just before they append), so a
  client resuming after id N misses nothing.

Every table holds tenant data: tenant column first in every key, row-level
security. `sweep_tracker_retention` is the SECURITY DEFINER job that deletes
finished plans (and what belongs to them) older than the retention, in
batches.

Revision ID: tracker_0003
Revises: tracker_0002
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

from disco_service.migration_helpers import (
    create_system_function,
    disable_tenant_rls,
    drop_system_function,
    enable_tenant_rls,
)

revision: str = "tracker_0003"
down_revision: str | None = "tracker_0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "tracker"

TABLES = (
    "events",
    "plans",
    "tasks",
    "delegation_groups",
    "pending_answers",
    "event_counts",
    "plan_types",
    "feed",
)

SWEEP_ARGUMENTS = "cutoff timestamptz, feed_cutoff timestamptz, max_rows integer"


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE tracker.events (
            tenant_id       text        NOT NULL CHECK (tenant_id <> ''),
            event_id        text        NOT NULL,
            seq             bigint      GENERATED ALWAYS AS IDENTITY (CACHE 100),
            topic           text        NOT NULL,
            event_type      text        NOT NULL,
            source          text        NOT NULL,
            agent_name      text,
            at              timestamptz NOT NULL,
            received_at     timestamptz NOT NULL DEFAULT now(),
            plan_id         text,
            task_id         text,
            correlation_id  text,
            causation_id    text,
            summary         text,
            data            jsonb,
            PRIMARY KEY (tenant_id, event_id)
        )
        """
    )
    op.execute(
        "CREATE INDEX events_plan_idx ON tracker.events (tenant_id, plan_id, at, seq) "
        "WHERE plan_id IS NOT NULL"
    )
    # Retention of envelopes outside any plan.
    op.execute(
        "CREATE INDEX events_unplanned_idx ON tracker.events (received_at) WHERE plan_id IS NULL"
    )

    op.execute(
        """
        CREATE TABLE tracker.plans (
            tenant_id         text        NOT NULL CHECK (tenant_id <> ''),
            plan_id           text        NOT NULL,
            plan_type         text,
            plan_type_version text,
            goal_event        text,
            goal_task_id      text,
            session_id        text,
            parent_plan_id    text,
            agent_name        text,
            agent_id          text,
            initial_state     text,
            live_status       text CHECK (live_status IN ('running', 'paused')),
            live_at           timestamptz,
            pause_reason      text,
            final_status      text CHECK (final_status IN ('completed', 'failed')),
            final_at          timestamptz,
            final_state       text,
            error             jsonb,
            state             text,
            state_step        integer     NOT NULL DEFAULT -1,
            state_at          timestamptz,
            status            text        GENERATED ALWAYS AS
                                  (COALESCE(final_status, live_status, 'pending')) STORED,
            started_at        timestamptz NOT NULL,
            updated_at        timestamptz NOT NULL,
            PRIMARY KEY (tenant_id, plan_id)
        ) WITH (fillfactor = 80)
        """
    )
    op.execute(
        "CREATE INDEX plans_listing_idx ON tracker.plans (tenant_id, started_at DESC, plan_id DESC)"
    )
    # Listing by status (failed, paused...) without walking every plan.
    op.execute(
        "CREATE INDEX plans_status_idx "
        "ON tracker.plans (tenant_id, status, started_at DESC, plan_id DESC)"
    )
    op.execute(
        "CREATE INDEX plans_parent_idx ON tracker.plans (tenant_id, parent_plan_id) "
        "WHERE parent_plan_id IS NOT NULL"
    )
    op.execute(
        "CREATE INDEX plans_session_idx ON tracker.plans (tenant_id, session_id) "
        "WHERE session_id IS NOT NULL"
    )
    op.execute(
        "CREATE INDEX plans_ended_idx ON tracker.plans (final_at) WHERE final_at IS NOT NULL"
    )

    op.execute(
        """
        CREATE TABLE tracker.tasks (
            tenant_id            text        NOT NULL CHECK (tenant_id <> ''),
            task_id              text        NOT NULL,
            plan_id              text,
            parent_task_id       text,
            parallel_group_id    text,
            event_type           text,
            response_event       text,
            correlation_id       text,
            agent_name           text,
            agent_id             text,
            requested_by         text,
            live_status          text CHECK (live_status IN ('running', 'waiting')),
            live_at              timestamptz,
            progress             double precision,
            message              text,
            progress_at          timestamptz,
            final_status         text CHECK (final_status IN ('completed', 'failed')),
            final_at             timestamptz,
            error                jsonb,
            reported_duration_ms double precision,
            status               text        GENERATED ALWAYS AS
                                     (COALESCE(final_status, live_status, 'pending')) STORED,
            starts               integer     NOT NULL DEFAULT 0,
            requested_at         timestamptz,
            started_at           timestamptz,
            first_seen_at        timestamptz NOT NULL,
            updated_at           timestamptz NOT NULL,
            duration_ms          double precision GENERATED ALWAYS AS (
                CASE WHEN final_at IS NULL THEN NULL
                     ELSE COALESCE(
                         reported_duration_ms,
                         GREATEST(0, EXTRACT(EPOCH FROM
                             final_at - COALESCE(started_at, requested_at, first_seen_at)) * 1000))
                END) STORED,
            PRIMARY KEY (tenant_id, task_id)
        ) WITH (fillfactor = 80)
        """
    )
    op.execute(
        "CREATE INDEX tasks_plan_idx ON tracker.tasks (tenant_id, plan_id, first_seen_at, task_id) "
        "WHERE plan_id IS NOT NULL"
    )
    op.execute(
        "CREATE INDEX tasks_correlation_idx ON tracker.tasks (tenant_id, correlation_id) "
        "WHERE correlation_id IS NOT NULL"
    )
    op.execute(
        "CREATE INDEX tasks_parent_idx ON tracker.tasks (tenant_id, parent_task_id) "
        "WHERE parent_task_id IS NOT NULL"
    )
    op.execute(
        "CREATE INDEX tasks_ended_idx ON tracker.tasks (tenant_id, final_at) "
        "WHERE final_at IS NOT NULL"
    )
    op.execute(
        "CREATE INDEX tasks_unplanned_ended_idx ON tracker.tasks (final_at) "
        "WHERE plan_id IS NULL AND final_at IS NOT NULL"
    )

    op.execute(
        """
        CREATE TABLE tracker.delegation_groups (
            tenant_id   text        NOT NULL CHECK (tenant_id <> ''),
            group_id    text        NOT NULL,
            task_id     text        NOT NULL,
            plan_id     text,
            agent_name  text,
            expected    integer     NOT NULL CHECK (expected >= 0),
            created_at  timestamptz NOT NULL,
            PRIMARY KEY (tenant_id, group_id)
        )
        """
    )
    op.execute(
        "CREATE INDEX delegation_groups_task_idx ON tracker.delegation_groups (tenant_id, task_id)"
    )
    op.execute(
        "CREATE INDEX delegation_groups_plan_idx ON tracker.delegation_groups (tenant_id, plan_id) "
        "WHERE plan_id IS NOT NULL"
    )
    op.execute(
        "CREATE INDEX delegation_groups_unplanned_idx ON tracker.delegation_groups (created_at) "
        "WHERE plan_id IS NULL"
    )

    op.execute(
        """
        CREATE TABLE tracker.pending_answers (
            tenant_id       text        NOT NULL CHECK (tenant_id <> ''),
            correlation_id  text        NOT NULL,
            event_id        text        NOT NULL,
            at              timestamptz NOT NULL,
            success         boolean     NOT NULL,
            error           jsonb,
            agent_name      text,
            received_at     timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, correlation_id, event_id)
        )
        """
    )

    op.execute(
        """
        CREATE TABLE tracker.event_counts (
            tenant_id   text        NOT NULL CHECK (tenant_id <> ''),
            minute      timestamptz NOT NULL,
            topic       text        NOT NULL,
            event_type  text        NOT NULL,
            count       bigint      NOT NULL CHECK (count >= 0),
            errors      bigint      NOT NULL DEFAULT 0 CHECK (errors >= 0),
            PRIMARY KEY (tenant_id, minute, topic, event_type)
        )
        """
    )
    op.execute("CREATE INDEX event_counts_minute_idx ON tracker.event_counts (minute)")

    op.execute(
        """
        CREATE TABLE tracker.plan_types (
            tenant_id     text        NOT NULL CHECK (tenant_id <> ''),
            plan_type     text        NOT NULL,
            version       text        NOT NULL,
            sort_key      text COLLATE "C" NOT NULL,
            definition    jsonb       NOT NULL,
            content_hash  text        NOT NULL,
            created_at    timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, plan_type, version)
        )
        """
    )
    op.execute(
        "CREATE INDEX plan_types_latest_idx "
        "ON tracker.plan_types (tenant_id, plan_type, sort_key DESC, version DESC)"
    )

    op.execute(
        """
        CREATE TABLE tracker.feed (
            id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            tenant_id      text        NOT NULL CHECK (tenant_id <> ''),
            kind           text        NOT NULL CHECK (kind IN ('plan', 'task')),
            plan_id        text,
            task_id        text,
            status         text        NOT NULL,
            current_state  text,
            event_type     text,
            agent_name     text,
            cause          text,
            at             timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute("CREATE INDEX feed_tenant_idx ON tracker.feed (tenant_id, id)")

    # The waits of a task, for its view.
    op.execute(
        "CREATE INDEX hitl_waits_task_idx ON tracker.hitl_waits (tenant_id, task_id) "
        "WHERE task_id IS NOT NULL"
    )

    for table in TABLES:
        enable_tenant_rls(SCHEMA, table)

    create_system_function(
        SCHEMA,
        "sweep_tracker_retention",
        arguments=SWEEP_ARGUMENTS,
        returns="integer",
        language="plpgsql",
        body="""
        DECLARE
            removed integer := 0;
            n integer;
        BEGIN
            -- Finished plans older than the cutoff, with their timelines, tasks and groups.
            WITH doomed AS (
                SELECT tenant_id, plan_id FROM tracker.plans
                 WHERE final_at < cutoff
                 ORDER BY final_at
                 LIMIT max_rows
                 FOR UPDATE SKIP LOCKED
            ), gone_events AS (
                DELETE FROM tracker.events e USING doomed d
                 WHERE e.tenant_id = d.tenant_id AND e.plan_id = d.plan_id
            ), gone_tasks AS (
                DELETE FROM tracker.tasks t USING doomed d
                 WHERE t.tenant_id = d.tenant_id AND t.plan_id = d.plan_id
            ), gone_groups AS (
                DELETE FROM tracker.delegation_groups g USING doomed d
                 WHERE g.tenant_id = d.tenant_id AND g.plan_id = d.plan_id
            ), gone_plans AS (
                DELETE FROM tracker.plans p USING doomed d
                 WHERE p.tenant_id = d.tenant_id AND p.plan_id = d.plan_id
                RETURNING 1
            )
            SELECT count(*) INTO n FROM gone_plans;
            removed := removed + n;

            -- What ran outside any plan.
            DELETE FROM tracker.events WHERE ctid IN (
                SELECT ctid FROM tracker.events
                 WHERE plan_id IS NULL AND received_at < cutoff LIMIT max_rows);
            GET DIAGNOSTICS n = ROW_COUNT;
            removed := removed + n;
            DELETE FROM tracker.tasks WHERE ctid IN (
                SELECT ctid FROM tracker.tasks
                 WHERE plan_id IS NULL AND final_at < cutoff LIMIT max_rows);
            GET DIAGNOSTICS n = ROW_COUNT;
            removed := removed + n;
            DELETE FROM tracker.delegation_groups WHERE ctid IN (
                SELECT ctid FROM tracker.delegation_groups
                 WHERE plan_id IS NULL AND created_at < cutoff LIMIT max_rows);
            GET DIAGNOSTICS n = ROW_COUNT;
            removed := removed + n;
            DELETE FROM tracker.pending_answers WHERE ctid IN (
                SELECT ctid FROM tracker.pending_answers
                 WHERE received_at < cutoff LIMIT max_rows);
            GET DIAGNOSTICS n = ROW_COUNT;
            removed := removed + n;
            DELETE FROM tracker.event_counts WHERE ctid IN (
                SELECT ctid FROM tracker.event_counts WHERE minute < cutoff LIMIT max_rows);
            GET DIAGNOSTICS n = ROW_COUNT;
            removed := removed + n;

            -- The feed is read live: it is kept for a shorter time. Its ids grow
            -- with time, so the oldest rows are the first ones.
            WITH head AS (
                SELECT id, at FROM tracker.feed ORDER BY id LIMIT max_rows
            )
            DELETE FROM tracker.feed WHERE id IN (SELECT id FROM head WHERE at < feed_cutoff);
            GET DIAGNOSTICS n = ROW_COUNT;
            removed := removed + n;
            RETURN removed;
        END
        """,
    )


def downgrade() -> None:
    drop_system_function(SCHEMA, "sweep_tracker_retention", arguments=SWEEP_ARGUMENTS)
    op.execute("DROP INDEX IF EXISTS tracker.hitl_waits_task_idx")
    for table in reversed(TABLES):
        disable_tenant_rls(SCHEMA, table)
        op.execute(f"DROP TABLE IF EXISTS tracker.{table}")
