"""gateway: the recent events of each UI session, and the decisions taken on them.

Revision ID: gateway_0003
Revises: gateway_0002
Create Date: 2026-11-25

- ``session_events``: what the session streams showed (each bus envelope once per
  tenant, as the UI message it became), numbered in the order the gateway stored
  them (``seq``); ``after=<event id>`` replays what follows it. ``ref`` is the
  tool call id of the tool lifecycle events and the question id of the human
  input ones, so a decision finds what it decides. Every gateway instance stores
  what it reads (``store_session_events``, a system function: a batch crosses
  tenants; the first copy wins).
- ``session_decisions``: one row per tool call approved/denied or question
  answered through the gateway; its key makes the first decision win across
  instances, sockets and HTTP.
- ``purge_session_events(cutoff, keep)``: retention by age and by count per
  session (a system function: it crosses tenants).
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

revision: str = "gateway_0003"
down_revision: str | None = "gateway_0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "gateway"


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE gateway.session_events (
            seq        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            tenant_id  text        NOT NULL CHECK (tenant_id <> ''),
            session_id text        NOT NULL CHECK (session_id <> ''),
            event_id   text        NOT NULL CHECK (event_id <> ''),
            type       text        NOT NULL,
            ref        text,
            user_id    text,
            event      jsonb       NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            UNIQUE (tenant_id, event_id)
        )
        """
    )
    op.execute(
        "CREATE INDEX session_events_session_idx ON gateway.session_events "
        "(tenant_id, session_id, seq)"
    )
    op.execute(
        "CREATE INDEX session_events_ref_idx ON gateway.session_events "
        "(tenant_id, session_id, ref) WHERE ref IS NOT NULL"
    )
    op.execute("CREATE INDEX session_events_age_idx ON gateway.session_events (created_at)")
    enable_tenant_rls(SCHEMA, "session_events")
    op.execute(
        """
        CREATE TABLE gateway.session_decisions (
            tenant_id  text        NOT NULL CHECK (tenant_id <> ''),
            session_id text        NOT NULL,
            kind       text        NOT NULL CHECK (kind IN ('approval', 'answer')),
            ref        text        NOT NULL,
            decision   text        NOT NULL,
            decided_by text        NOT NULL,
            event_id   text        NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, session_id, kind, ref)
        )
        """
    )
    enable_tenant_rls(SCHEMA, "session_decisions")
    create_system_function(
        SCHEMA,
        "store_session_events",
        arguments="batch jsonb",
        returns="integer",
        language="plpgsql",
        body="""
        DECLARE stored integer;
        BEGIN
            INSERT INTO gateway.session_events
                   (tenant_id, session_id, event_id, type, ref, user_id, event)
            SELECT e.doc->>'tenant_id', e.doc->>'session_id', e.doc->>'event_id',
                   e.doc->>'type', e.doc->>'ref', e.doc->>'user_id', e.doc->'event'
              FROM jsonb_array_elements(batch) WITH ORDINALITY AS e(doc, ord)
             ORDER BY e.ord
            ON CONFLICT (tenant_id, event_id) DO NOTHING;
            GET DIAGNOSTICS stored = ROW_COUNT;
            RETURN stored;
        END
        """,
    )
    create_system_function(
        SCHEMA,
        "purge_session_events",
        arguments="cutoff timestamptz, keep integer",
        returns="integer",
        language="plpgsql",
        body="""
        DECLARE purged integer; trimmed integer;
        BEGIN
            DELETE FROM gateway.session_events WHERE created_at < cutoff;
            GET DIAGNOSTICS purged = ROW_COUNT;
            DELETE FROM gateway.session_events e
             USING (SELECT seq, row_number() OVER (PARTITION BY tenant_id, session_id
                                                    ORDER BY seq DESC) AS n
                      FROM gateway.session_events) r
             WHERE e.seq = r.seq AND r.n > keep;
            GET DIAGNOSTICS trimmed = ROW_COUNT;
            DELETE FROM gateway.session_decisions WHERE created_at < cutoff;
            RETURN purged + trimmed;
        END
        """,
    )


def downgrade() -> None:
    drop_system_function(
        SCHEMA, "purge_session_events", arguments="cutoff timestamptz, keep integer"
    )
    drop_system_function(SCHEMA, "store_session_events", arguments="batch jsonb")
    disable_tenant_rls(SCHEMA, "session_decisions")
    op.execute("DROP TABLE IF EXISTS gateway.session_decisions")
    disable_tenant_rls(SCHEMA, "session_events")
    op.execute("DROP TABLE IF EXISTS gateway.session_events")
