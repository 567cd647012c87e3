"""gateway: where the session streams' reader got to, kept with the events it stored.

Revision ID: gateway_0006
Revises: gateway_0005
Create Date: 2026-11-24

The session hub hands each event to its sockets as soon as it reads it and
stores the events behind, in order, in batches. So that a gateway killed
between the two still keeps every event for replay, the batch and the reader's
position after it are stored in one transaction, and a gateway starts reading
``notification-events`` at the stored positions (not at the end):

- ``session_stream_positions``: per topic (with its environment prefix) and
  partition, the offset of the next record no session event of it was stored
  from. Every instance advances it (never back: ``GREATEST``), and each stores
  what it reads in order, so every record below a stored position is stored.
  Not tenant data (broker positions), so no tenant column and no RLS; the
  gateway writes and reads it through the two functions below.
- ``store_session_batch(batch, positions)``: ``store_session_events(batch)``
  and the positions (``[{"topic", "partition", "next_offset"}]``) at once.
- ``session_stream_positions_of(topics)``: the stored positions of the topics.
"""

from collections.abc import Sequence

from alembic import op

from disco_service.migration_helpers import create_system_function, drop_system_function

revision: str = "gateway_0006"
down_revision: str | None = "gateway_0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "gateway"
_STORE_ARGS = "batch jsonb, positions jsonb"
_READ_ARGS = "topics text[]"


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE gateway.session_stream_positions (
            topic       text    NOT NULL CHECK (topic <> ''),
            partition   integer NOT NULL CHECK (partition >= 0),
            next_offset bigint  NOT NULL CHECK (next_offset >= 0),
            updated_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (topic, partition)
        )
        """
    )
    op.execute("REVOKE ALL ON gateway.session_stream_positions FROM PUBLIC")
    create_system_function(
        SCHEMA,
        "store_session_batch",
        arguments=_STORE_ARGS,
        returns="integer",
        language="plpgsql",
        body="""
        DECLARE stored integer;
        BEGIN
            stored := gateway.store_session_events(batch);
            INSERT INTO gateway.session_stream_positions AS p (topic, partition, next_offset)
            SELECT x->>'topic', (x->>'partition')::integer, (x->>'next_offset')::bigint
              FROM jsonb_array_elements(positions) AS x
             ORDER BY 1, 2
            ON CONFLICT (topic, partition) DO UPDATE
               SET next_offset = GREATEST(p.next_offset, EXCLUDED.next_offset),
                   updated_at = now();
            RETURN stored;
        END
        """,
    )
    create_system_function(
        SCHEMA,
        "session_stream_positions_of",
        arguments=_READ_ARGS,
        returns="TABLE(topic text, partition integer, next_offset bigint)",
        volatility="STABLE",
        body="""
        SELECT p.topic, p.partition, p.next_offset
          FROM gateway.session_stream_positions p
         WHERE p.topic = ANY(topics)
        """,
    )


def downgrade() -> None:
    drop_system_function(SCHEMA, "session_stream_positions_of", arguments=_READ_ARGS)
    drop_system_function(SCHEMA, "store_session_batch", arguments=_STORE_ARGS)
    op.execute("DROP TABLE IF EXISTS gateway.session_stream_positions")
