"""registry: discovery as a SECURITY DEFINER function, so that its indexes are used.

Under row-level security PostgreSQL may only push a query's conditions into an
index scan when their operators are leakproof. Array containment (``@>``),
full-text match (``@@``) and ``ILIKE`` are not, so as the application role
every discovery query read all agents of the table (a sequential scan: ~7 ms
at 3,000 agents for a capability, ~30 ms for free text, growing linearly).

Free text becomes a full-text query of prefix terms joined by OR (ranked by
cover density); the trigram index and the per-row word similarity it served
cost more than they found (word similarity alone was ~3x the rest of a text
query), so the index is dropped.

``registry.discover_agents`` runs as the migration owner, whose maintenance
policy lets the planner drop the policy conditions and use the GIN indexes.
Isolation holds because the function applies the very rule of the policies
itself, with the tenant it reads from the transaction setting the service
sets from the caller's verified token (``disco.tenant_id``): the caller's own
agents and public ones, nothing else; no tenant set, no rows. It returns the
answer as JSON text in ``DiscoveredAgent``'s shape.

Revision ID: registry_0003
Revises: registry_0002
Create Date: 2026-11-24
"""

# ruff: noqa: S608 - the SQL here is fixed text, nothing comes from input

from collections.abc import Sequence

from alembic import op

from disco_service.migration_helpers import system_function_statements

revision: str = "registry_0003"
down_revision: str | None = "registry_0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "registry"
ARGUMENTS = (
    "capabilities text[], consumed_event text, produced_event text, query text, max_agents integer"
)

# %s slots: 1 the score expression, 2 the conditions. Parameters: $1 tenant,
# $2 capabilities, $3 consumed, $4 produced, $5 the text query (tsquery), $6 limit.
_TEMPLATE = """
WITH m AS (
    SELECT a.tenant_id, a.agent_id, a.name, a.updated_at, %s AS score
    FROM registry.agents a
    WHERE %s
      AND EXISTS (
          SELECT 1 FROM registry.agent_instances i
          WHERE i.tenant_id = a.tenant_id AND i.agent_id = a.agent_id AND i.expires_at > now()
      )
), g AS (
    SELECT m.tenant_id, m.name,
           array_agg(m.agent_id ORDER BY m.agent_id) AS agent_ids,
           max(m.score) AS score,
           (array_agg(m.agent_id ORDER BY m.updated_at DESC, m.agent_id))[1] AS representative
    FROM m
    GROUP BY m.tenant_id, m.name
    ORDER BY max(m.score) DESC NULLS LAST, (m.tenant_id = $1) DESC, m.name, m.tenant_id
    LIMIT $6
)
SELECT coalesce(json_agg(json_build_object(
           'name', g.name,
           'description', a.description,
           'version', a.version,
           'tags', a.tags,
           'visibility', a.visibility,
           -- Counted for the chosen agents only, not for every match.
           'instance_count', (
               SELECT count(*)::integer FROM registry.agent_instances i
               WHERE i.tenant_id = g.tenant_id AND i.agent_id = ANY (g.agent_ids)
                 AND i.expires_at > now()
           ),
           'agent_ids', g.agent_ids,
           'capabilities', a.discovery,
           'score', g.score
       ) ORDER BY g.score DESC NULLS LAST, (g.tenant_id = $1) DESC, g.name, g.tenant_id),
       '[]')::text
FROM g
JOIN registry.agents a ON a.tenant_id = g.tenant_id AND a.agent_id = g.representative
"""


def _body() -> str:
    template = _TEMPLATE.replace("'", "''")
    return f"""
DECLARE
    tenant text := NULLIF(current_setting('disco.tenant_id', true), '');
    conditions text := '(a.tenant_id = $1 OR a.visibility = ''public'')';
    score text := 'NULL::real';
    terms text;
    matcher tsquery;
    answer text;
BEGIN
    IF tenant IS NULL THEN
        RETURN '[]';
    END IF;
    IF cardinality(capabilities) > 0 THEN
        conditions := conditions || ' AND a.capability_names @> $2';
    END IF;
    IF consumed_event IS NOT NULL THEN
        conditions := conditions || ' AND a.consumed_events @> ARRAY[$3]';
    END IF;
    IF produced_event IS NOT NULL THEN
        conditions := conditions || ' AND a.produced_events @> ARRAY[$4]';
    END IF;
    IF query IS NOT NULL THEN
        -- Any word, each also as a prefix ("forecast" finds "forecaster"), ranked
        -- by cover density: the more words, the closer together, the higher.
        SELECT string_agg(word || ':*', ' | ') INTO terms
        FROM regexp_split_to_table(lower(query), '[^[:alnum:]]+') AS word
        WHERE word <> '';
        IF terms IS NULL THEN
            RETURN '[]';
        END IF;
        matcher := to_tsquery('english', terms);
        conditions := conditions || ' AND a.search_vector @@ $5';
        score := 'ts_rank_cd(a.search_vector, $5)::real';
    END IF;
    EXECUTE format('{template}', score, conditions)
        INTO answer
        USING tenant, capabilities, consumed_event, produced_event, matcher, max_agents;
    RETURN answer;
END
"""


def upgrade() -> None:
    # Free text is matched with the full-text index only (prefix terms): the
    # trigram index cost every registration a write and no query uses it now.
    op.execute("DROP INDEX IF EXISTS registry.agents_search_trgm")
    for statement in system_function_statements(
        SCHEMA,
        "discover_agents",
        arguments=ARGUMENTS,
        returns="text",
        body=_body(),
        language="plpgsql",
        volatility="STABLE",
    ):
        op.execute(statement)


def downgrade() -> None:
    op.execute(
        "CREATE INDEX IF NOT EXISTS agents_search_trgm ON registry.agents "
        "USING gin (search_text gin_trgm_ops)"
    )
    op.execute(
        "DROP FUNCTION IF EXISTS registry.discover_agents(text[], text, text, text, integer)"
    )
