"""tracker: human-in-the-loop waits, so unanswered questions time out.

One row per question (tenant, correlation id, response event). The tracker's
consumer writes it when a `notification.human_input` with `timeout_seconds`
passes on `notification-events`, and marks it answered when the answer does.
The sweeper claims rows past their deadline through `claim_hitl_timeouts`, a
SECURITY DEFINER function, because it works across tenants while the
application role has no BYPASSRLS.

Revision ID: tracker_0002
Revises: tracker_0001
Create Date: 2026-11-23
"""

from collections.abc import Sequence

from alembic import op

from disco_service.migration_helpers import (
    create_system_function,
    disable_tenant_rls,
    enable_tenant_rls,
)

revision: str = "tracker_0002"
down_revision: str | None = "tracker_0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "tracker"


def upgrade() -> None:
    # An answer can be consumed before its question (they may sit on different
    # partitions), so the question's columns are nullable: such a row starts
    # as 'answered' and the question fills them in when it arrives.
    op.execute(
        """
        CREATE TABLE tracker.hitl_waits (
            tenant_id       text        NOT NULL CHECK (tenant_id <> ''),
            correlation_id  text        NOT NULL,
            response_event  text        NOT NULL,
            status          text        NOT NULL
                CHECK (status IN ('waiting', 'answered', 'timed_out', 'answered_late')),
            request_id      text,
            user_id         text,
            session_id      text,
            plan_id         text,
            task_id         text,
            question        text,
            timeout_seconds integer     CHECK (timeout_seconds > 0),
            asked_at        timestamptz,
            deadline        timestamptz,
            answered_at     timestamptz,
            timed_out_at    timestamptz,
            created_at      timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, correlation_id, response_event)
        )
        """
    )
    op.execute(
        "CREATE INDEX hitl_waits_due_idx ON tracker.hitl_waits (deadline) WHERE status = 'waiting'"
    )
    op.execute(
        "CREATE INDEX hitl_waits_listing_idx ON tracker.hitl_waits (tenant_id, status, created_at)"
    )
    enable_tenant_rls(SCHEMA, "hitl_waits")
    create_system_function(
        SCHEMA,
        "claim_hitl_timeouts",
        arguments="cutoff timestamptz, max_rows integer",
        returns="SETOF tracker.hitl_waits",
        body="""
            UPDATE tracker.hitl_waits AS w
               SET status = 'timed_out', timed_out_at = cutoff
             WHERE (w.tenant_id, w.correlation_id, w.response_event) IN (
                   SELECT tenant_id, correlation_id, response_event
                     FROM tracker.hitl_waits
                    WHERE status = 'waiting' AND deadline <= cutoff
                    ORDER BY deadline
                    LIMIT max_rows
                    FOR UPDATE SKIP LOCKED)
            RETURNING w.*
        """,
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS tracker.claim_hitl_timeouts(timestamptz, integer)")
    disable_tenant_rls(SCHEMA, "hitl_waits")
    op.execute("DROP TABLE IF EXISTS tracker.hitl_waits")
