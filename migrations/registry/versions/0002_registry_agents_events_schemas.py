"""registry: agents, live instances, owned event definitions, payload schemas, TTL sweeper.

Tables (all tenant-scoped under row-level security; agents, their instances
and their events are also readable by every tenant when ``visibility`` is
``public``):

- ``agents``: one row per registration (``tenant_id``, ``agent_id``): the
  definition as registered, plus what discovery filters on (capability names,
  consumed/produced event types, tags, a search document) and what it answers
  with (``discovery``: capabilities with every schema resolved inline).
  ``status`` is the liveness last *announced* (``agent.expired``); the truth is
  whether a live instance exists.
- ``agent_instances``: one row per process behind a registration; heartbeats
  only touch this narrow table, so they never rewrite the heavily indexed agent.
- ``events``: event definitions owned by the agent that registered them.
- ``payload_schemas``: immutable versions of named JSON Schemas.

Functions (``SECURITY DEFINER``, for the application role, which has no
BYPASSRLS): ``expire_agents`` (the TTL sweeper: removes instances past their
TTL and marks agents left with none as expired, returning them so that the
caller writes ``agent.expired`` to the outbox in the same transaction) and
``purge_expired_agents`` (drops agents expired for longer than a retention).

Revision ID: registry_0002
Revises: registry_0001
Create Date: 2026-11-24
"""

from collections.abc import Sequence

from alembic import op

from disco_service.migration_helpers import system_function_statements, tenant_rls_statements

revision: str = "registry_0002"
down_revision: str | None = "registry_0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "registry"

_TABLES = [
    # pg_trgm: substring and fuzzy matching of free-text discovery queries.
    # Trusted extension (PG13+); shared by the database, never dropped here.
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    """
    CREATE TABLE registry.agents (
        tenant_id text NOT NULL,
        agent_id text NOT NULL,
        name text NOT NULL,
        version text NOT NULL,
        description text NOT NULL DEFAULT '',
        tags text[] NOT NULL DEFAULT '{}',
        instance_id text,
        visibility text NOT NULL CHECK (visibility IN ('tenant', 'public')),
        ttl_seconds integer NOT NULL CHECK (ttl_seconds > 0),
        metadata jsonb NOT NULL DEFAULT '{}',
        capabilities jsonb NOT NULL DEFAULT '[]',
        events jsonb NOT NULL DEFAULT '[]',
        discovery jsonb NOT NULL DEFAULT '[]',
        capability_names text[] NOT NULL DEFAULT '{}',
        consumed_events text[] NOT NULL DEFAULT '{}',
        produced_events text[] NOT NULL DEFAULT '{}',
        search_text text NOT NULL DEFAULT '',
        search_vector tsvector GENERATED ALWAYS AS
            (to_tsvector('english'::regconfig, search_text)) STORED,
        definition_hash text NOT NULL,
        status text NOT NULL DEFAULT 'live' CHECK (status IN ('live', 'expired')),
        registered_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        last_heartbeat_at timestamptz NOT NULL DEFAULT now(),
        expired_at timestamptz,
        PRIMARY KEY (tenant_id, agent_id)
    )
    """,
    "CREATE INDEX agents_by_name ON registry.agents (name, tenant_id, agent_id)",
    "CREATE INDEX agents_public_by_name ON registry.agents (name, tenant_id, agent_id) "
    "WHERE visibility = 'public'",
    "CREATE INDEX agents_capability_names ON registry.agents USING gin (capability_names)",
    "CREATE INDEX agents_consumed_events ON registry.agents USING gin (consumed_events)",
    "CREATE INDEX agents_produced_events ON registry.agents USING gin (produced_events)",
    "CREATE INDEX agents_tags ON registry.agents USING gin (tags)",
    "CREATE INDEX agents_search_vector ON registry.agents USING gin (search_vector)",
    "CREATE INDEX agents_search_trgm ON registry.agents USING gin (search_text gin_trgm_ops)",
    "CREATE INDEX agents_expired ON registry.agents (expired_at) WHERE status = 'expired'",
    """
    CREATE TABLE registry.agent_instances (
        tenant_id text NOT NULL,
        agent_id text NOT NULL,
        instance_key text NOT NULL,
        instance_id text,
        visibility text NOT NULL CHECK (visibility IN ('tenant', 'public')),
        registered_at timestamptz NOT NULL DEFAULT now(),
        last_heartbeat_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (tenant_id, agent_id, instance_key),
        FOREIGN KEY (tenant_id, agent_id) REFERENCES registry.agents (tenant_id, agent_id)
            ON DELETE CASCADE
    )
    """,
    "CREATE INDEX agent_instances_expiry ON registry.agent_instances (expires_at)",
    """
    CREATE TABLE registry.events (
        tenant_id text NOT NULL,
        owner_agent_id text NOT NULL,
        event_type text NOT NULL,
        topic text NOT NULL,
        description text NOT NULL DEFAULT '',
        json_schema jsonb,
        schema_name text,
        schema_version text,
        visibility text NOT NULL CHECK (visibility IN ('tenant', 'public')),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, owner_agent_id, event_type),
        CHECK ((schema_name IS NULL) = (schema_version IS NULL))
    )
    """,
    "CREATE INDEX events_by_type ON registry.events (event_type, tenant_id, owner_agent_id)",
    "CREATE INDEX events_by_topic ON registry.events (topic, event_type, tenant_id)",
    """
    CREATE TABLE registry.payload_schemas (
        tenant_id text NOT NULL,
        name text NOT NULL,
        version text NOT NULL,
        sort_key text COLLATE "C" NOT NULL,
        json_schema jsonb NOT NULL,
        description text NOT NULL DEFAULT '',
        content_hash text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, name, version)
    )
    """,
    "CREATE INDEX payload_schemas_by_precedence "
    "ON registry.payload_schemas (tenant_id, name, sort_key DESC, version DESC)",
]

# Every tenant may read public agents, their instances (for instance counts) and
# their events; only the owning tenant may write them (the FOR ALL tenant policy).
_PUBLIC_READ = [
    f"CREATE POLICY {table}_public_read ON registry.{table} "
    "AS PERMISSIVE FOR SELECT TO PUBLIC USING (visibility = 'public')"
    for table in ("agents", "agent_instances", "events")
]

_EXPIRE_AGENTS = """
WITH doomed AS (
    SELECT i.tenant_id, i.agent_id, i.instance_key
    FROM registry.agent_instances i
    WHERE i.expires_at <= now()
    ORDER BY i.expires_at
    LIMIT max_rows
    FOR UPDATE SKIP LOCKED
), dead AS (
    DELETE FROM registry.agent_instances i
    USING doomed d
    WHERE i.tenant_id = d.tenant_id AND i.agent_id = d.agent_id
      AND i.instance_key = d.instance_key
    RETURNING i.tenant_id, i.agent_id, i.instance_id, i.last_heartbeat_at
), per_agent AS (
    SELECT dead.tenant_id, dead.agent_id,
           max(dead.last_heartbeat_at) AS last_heartbeat_at,
           (array_agg(dead.instance_id ORDER BY dead.last_heartbeat_at DESC))[1] AS instance_id
    FROM dead
    GROUP BY dead.tenant_id, dead.agent_id
)
UPDATE registry.agents a
SET status = 'expired',
    expired_at = now(),
    last_heartbeat_at = greatest(a.last_heartbeat_at, p.last_heartbeat_at)
FROM per_agent p
WHERE a.tenant_id = p.tenant_id AND a.agent_id = p.agent_id AND a.status = 'live'
  -- Instances deleted above still show in this snapshot, but they are past
  -- their TTL, so only an instance that is really alive keeps the agent live.
  AND NOT EXISTS (
      SELECT 1 FROM registry.agent_instances i
      WHERE i.tenant_id = a.tenant_id AND i.agent_id = a.agent_id AND i.expires_at > now()
  )
RETURNING a.tenant_id, a.agent_id, a.name, p.instance_id, a.last_heartbeat_at, a.expired_at
"""

_PURGE_EXPIRED = """
WITH gone AS (
    DELETE FROM registry.agents a
    WHERE (a.tenant_id, a.agent_id) IN (
        SELECT x.tenant_id, x.agent_id FROM registry.agents x
        WHERE x.status = 'expired'
          AND x.expired_at < now() - make_interval(secs => retention_seconds)
          AND NOT EXISTS (
              SELECT 1 FROM registry.agent_instances i
              WHERE i.tenant_id = x.tenant_id AND i.agent_id = x.agent_id
          )
        ORDER BY x.expired_at
        LIMIT max_rows
        FOR UPDATE SKIP LOCKED
    )
    RETURNING a.tenant_id, a.agent_id
), owned AS (
    DELETE FROM registry.events e USING gone g
    WHERE e.tenant_id = g.tenant_id AND e.owner_agent_id = g.agent_id
)
SELECT count(*)::integer FROM gone
"""

_FUNCTIONS = [
    *system_function_statements(
        SCHEMA,
        "expire_agents",
        arguments="max_rows integer",
        returns=(
            "TABLE (tenant_id text, agent_id text, name text, instance_id text, "
            "last_heartbeat_at timestamptz, expired_at timestamptz)"
        ),
        body=_EXPIRE_AGENTS,
    ),
    *system_function_statements(
        SCHEMA,
        "purge_expired_agents",
        arguments="retention_seconds integer, max_rows integer",
        returns="integer",
        body=_PURGE_EXPIRED,
    ),
]


def upgrade() -> None:
    statements = [
        *_TABLES,
        *tenant_rls_statements(SCHEMA, "agents"),
        *tenant_rls_statements(SCHEMA, "agent_instances"),
        *tenant_rls_statements(SCHEMA, "events"),
        *tenant_rls_statements(SCHEMA, "payload_schemas"),
        *_PUBLIC_READ,
        *_FUNCTIONS,
    ]
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    for statement in (
        "DROP FUNCTION IF EXISTS registry.purge_expired_agents(integer, integer)",
        "DROP FUNCTION IF EXISTS registry.expire_agents(integer)",
        "DROP TABLE IF EXISTS registry.payload_schemas",
        "DROP TABLE IF EXISTS registry.events",
        "DROP TABLE IF EXISTS registry.agent_instances",
        "DROP TABLE IF EXISTS registry.agents",
    ):
        op.execute(statement)
