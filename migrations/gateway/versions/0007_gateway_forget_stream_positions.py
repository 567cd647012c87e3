"""gateway: forget the session stream positions of topics no instance reads any more.

Revision ID: gateway_0007
Revises: gateway_0006
Create Date: 2026-11-28

``session_stream_positions`` is keyed by the topic's full name, environment
prefix included. A prefix that is no longer used (a renamed environment, test
runs against a shared database) left its rows behind for good. The session
retention sweeper now forgets them:

- ``forget_session_stream_positions(keep, cutoff)``: deletes the positions of
  every topic not in ``keep`` (the topics this instance reads) that no batch
  advanced since ``cutoff`` (the events they guarded are past their retention
  too); the number deleted.
"""

from collections.abc import Sequence

from alembic import op

from disco_service.migration_helpers import create_system_function, drop_system_function

revision: str = "gateway_0007"
down_revision: str | None = "gateway_0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "gateway"
_ARGS = "keep text[], cutoff timestamptz"


def upgrade() -> None:
    op.execute(
        "CREATE INDEX session_stream_positions_updated_at "
        "ON gateway.session_stream_positions (updated_at)"
    )
    create_system_function(
        SCHEMA,
        "forget_session_stream_positions",
        arguments=_ARGS,
        returns="integer",
        language="plpgsql",
        body="""
        DECLARE forgotten integer;
        BEGIN
            DELETE FROM gateway.session_stream_positions p
             WHERE p.updated_at < cutoff AND NOT (p.topic = ANY(keep));
            GET DIAGNOSTICS forgotten = ROW_COUNT;
            RETURN forgotten;
        END
        """,
    )


def downgrade() -> None:
    drop_system_function(SCHEMA, "forget_session_stream_positions", arguments=_ARGS)
    op.execute("DROP INDEX IF EXISTS gateway.session_stream_positions_updated_at")
