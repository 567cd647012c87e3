"""gateway: the MCP sessions of clients on a 2025 protocol version, for every instance.

Revision ID: gateway_0012
Revises: gateway_0011
Create Date: 2026-12-01

An MCP client on a handshake protocol version (2025-06-18, 2025-11-25, ...)
``initialize`` s once and sends every later request with the ``Mcp-Session-Id``
it was given; any gateway instance may receive any of them. ``mcp_sessions``
keeps what such a request needs (who opened the session, the negotiated
version, the client's capabilities and info), so no instance holds it alone:

- one row per session, tenant first in the key, row-level security on (a
  session id sent with another tenant's token is not found);
- ``used_at`` is refreshed now and then by the requests; a session idle for
  ``DISCO_GATEWAY_MCP_SESSION_IDLE_SECONDS`` is deleted by
  ``purge_mcp_sessions(cutoff)`` (a system function: it crosses tenants).
"""

from collections.abc import Sequence

from alembic import op

from disco_service.migration_helpers import (
    create_system_function,
    disable_tenant_rls,
    drop_system_function,
    enable_tenant_rls,
)

revision: str = "gateway_0012"
down_revision: str | None = "gateway_0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "gateway"


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE gateway.mcp_sessions (
            tenant_id        text        NOT NULL CHECK (tenant_id <> ''),
            session_id       text        NOT NULL CHECK (session_id <> ''),
            user_id          text        NOT NULL,
            subject          text        NOT NULL,
            anonymous        boolean     NOT NULL DEFAULT false,
            protocol_version text        NOT NULL,
            client_info      jsonb,
            capabilities     jsonb,
            created_at       timestamptz NOT NULL DEFAULT now(),
            used_at          timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, session_id)
        )
        """
    )
    op.execute("CREATE INDEX mcp_sessions_used_idx ON gateway.mcp_sessions (used_at)")
    enable_tenant_rls(SCHEMA, "mcp_sessions")
    create_system_function(
        SCHEMA,
        "purge_mcp_sessions",
        arguments="cutoff timestamptz",
        returns="integer",
        language="plpgsql",
        body="""
        DECLARE purged integer;
        BEGIN
            DELETE FROM gateway.mcp_sessions WHERE used_at < cutoff;
            GET DIAGNOSTICS purged = ROW_COUNT;
            RETURN purged;
        END
        """,
    )


def downgrade() -> None:
    drop_system_function(SCHEMA, "purge_mcp_sessions", arguments="cutoff timestamptz")
    disable_tenant_rls(SCHEMA, "mcp_sessions")
    op.execute("DROP TABLE IF EXISTS gateway.mcp_sessions")
