"""memory: the semantic query by vector in one statement (``memory.semantic_query_as``).

A query by vector was four round trips to PostgreSQL (BEGIN, the tenant scope,
the query, COMMIT); on a loaded two-core box each one costs the service a
loopback write and a wake-up of the backend, as much as the HNSW walk itself.
``memory.semantic_query_as(tenant, user, ...)`` sets the tenant and user of its
own implicit transaction (what the kit's unit of work sets from the caller's
verified token; the application role may set them in any transaction anyway)
and answers the query, so the service sends one statement and no BEGIN/COMMIT.

It is ``SECURITY INVOKER``: row-level security applies as to the query it
replaces. The query is the service's: the HNSW walk (filters applied as it
goes; ``hnsw.iterative_scan`` keeps going until ``limit`` rows pass them) in a
materialized CTE, then exact order and the threshold. ``p_ef_search``, when
given, widens the candidate list for this statement only.

Revision ID: memory_0006
Revises: memory_0005
Create Date: 2026-11-24
"""

from collections.abc import Sequence

from alembic import op

revision: str = "memory_0006"
down_revision: str | None = "memory_0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ARGUMENTS = (
    "p_tenant text, p_user text, p_embedding vector, p_limit integer, "
    "p_threshold double precision, p_filter jsonb, p_include_public boolean, "
    "p_ef_search integer"
)

_RETURNS = (
    "TABLE (memory_id text, external_id text, content text, content_hash text, "
    "visibility text, metadata jsonb, user_id text, created_at timestamptz, "
    "updated_at timestamptz, distance double precision, score double precision)"
)

_BODY = """
#variable_conflict use_column
BEGIN
    PERFORM set_config('disco.tenant_id', coalesce(p_tenant, ''), true),
            set_config('disco.user_id', coalesce(p_user, ''), true);
    IF p_ef_search IS NOT NULL THEN
        PERFORM set_config('hnsw.ef_search', p_ef_search::text, true);
    END IF;
    RETURN QUERY
    WITH hits AS MATERIALIZED (
        SELECT m.memory_id, m.external_id, m.content, m.content_hash,
               CASE WHEN m.is_public THEN 'public' ELSE 'private' END AS visibility,
               m.metadata, m.user_id, m.created_at, m.updated_at,
               (m.embedding <=> p_embedding)::double precision AS distance
        FROM memory.semantic_memories m
        WHERE m.tenant_id = p_tenant
          AND (m.user_id = p_user OR (p_include_public AND m.is_public))
          AND m.metadata @> p_filter
        ORDER BY m.embedding <=> p_embedding
        LIMIT p_limit
    )
    SELECT h.memory_id, h.external_id, h.content, h.content_hash, h.visibility, h.metadata,
           h.user_id, h.created_at, h.updated_at, h.distance, 1 - h.distance
    FROM hits h
    WHERE p_threshold IS NULL OR 1 - h.distance >= p_threshold
    ORDER BY h.distance;
END
"""


def upgrade() -> None:
    op.execute(
        f"CREATE OR REPLACE FUNCTION memory.semantic_query_as({ARGUMENTS}) RETURNS {_RETURNS} "
        f"LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $query${_BODY}$query$"
    )


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS memory.semantic_query_as({ARGUMENTS})")
