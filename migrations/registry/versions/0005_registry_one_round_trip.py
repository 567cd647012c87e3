"""registry: registration and discovery in one statement each.

Measured on the shared two-core box (bench/table.py, py-spy on the service): a
request's cost was mostly its round trips to PostgreSQL (each one a write on
loopback and a wake-up of the backend), not the SQL. A registration took
eight (BEGIN, tenant scope, lock, upsert, owned events, read back, outbox,
COMMIT), a discovery four (BEGIN, tenant scope, the function, COMMIT).

- ``registry.register_agent(...)`` does the registration's writes and read
  back in one call: lock the agent row (concurrent registrations of one
  agent queue there, as before), upsert it with the registering instance,
  align the instances' visibility when it changed, replace the owned event
  definitions when the definition changed, and answer the agent's record
  with whether it was created. It is ``SECURITY INVOKER``: row-level
  security applies to it as to the statements it replaces.
- ``registry.discover_agents_as(tenant, user, ...)`` sets the transaction's
  tenant and user (what the kit's unit of work sets from the caller's
  verified token) and answers ``registry.discover_agents`` (registry_0003)
  for them, so that a discovery is one statement in its own implicit
  transaction. The application role may set those settings in any
  transaction anyway; the tenant still comes from the verified token only.

Revision ID: registry_0005
Revises: registry_0004
Create Date: 2026-11-24
"""

# ruff: noqa: S608 - the SQL here is fixed text, nothing comes from input

from collections.abc import Sequence

from alembic import op

revision: str = "registry_0005"
down_revision: str | None = "registry_0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REGISTER_ARGUMENTS = (
    "p_tenant text, p_agent text, p_name text, p_version text, p_description text, "
    "p_tags text[], p_instance_id text, p_instance_key text, p_visibility text, "
    "p_ttl integer, p_metadata jsonb, p_capabilities jsonb, p_events jsonb, "
    "p_discovery jsonb, p_capability_names text[], p_consumed_events text[], "
    "p_produced_events text[], p_search_text text, p_definition_hash text, p_owned jsonb"
)

DISCOVER_ARGUMENTS = (
    "p_tenant text, p_user text, capabilities text[], consumed_event text, "
    "produced_event text, query text, max_agents integer"
)

# The agent row and the registering instance's row in one statement (the instance
# row references the agent row the CTE writes).
UPSERT_SQL = """
WITH agent AS (
INSERT INTO registry.agents (
    tenant_id, agent_id, name, version, description, tags, instance_id, visibility,
    ttl_seconds, metadata, capabilities, events, discovery, capability_names,
    consumed_events, produced_events, search_text, definition_hash, status,
    last_heartbeat_at, expired_at)
VALUES (
    p_tenant, p_agent, p_name, p_version, p_description, p_tags, p_instance_id, p_visibility,
    p_ttl, p_metadata, p_capabilities, p_events, p_discovery, p_capability_names,
    p_consumed_events, p_produced_events, p_search_text, p_definition_hash, 'live', now(), NULL)
ON CONFLICT (tenant_id, agent_id) DO UPDATE SET
    name = excluded.name,
    version = excluded.version,
    description = excluded.description,
    tags = excluded.tags,
    instance_id = excluded.instance_id,
    visibility = excluded.visibility,
    ttl_seconds = excluded.ttl_seconds,
    metadata = excluded.metadata,
    capabilities = excluded.capabilities,
    events = excluded.events,
    discovery = excluded.discovery,
    capability_names = excluded.capability_names,
    consumed_events = excluded.consumed_events,
    produced_events = excluded.produced_events,
    search_text = excluded.search_text,
    definition_hash = excluded.definition_hash,
    status = 'live',
    last_heartbeat_at = now(),
    expired_at = NULL,
    updated_at = now()
RETURNING (xmax = 0) AS created
), instance AS (
INSERT INTO registry.agent_instances (
    tenant_id, agent_id, instance_key, instance_id, visibility, last_heartbeat_at, expires_at)
SELECT p_tenant, p_agent, p_instance_key, p_instance_id, p_visibility, now(),
       now() + make_interval(secs => p_ttl::double precision)
FROM agent
ON CONFLICT (tenant_id, agent_id, instance_key) DO UPDATE SET
    instance_id = excluded.instance_id,
    visibility = excluded.visibility,
    last_heartbeat_at = excluded.last_heartbeat_at,
    expires_at = excluded.expires_at
)
SELECT agent.created FROM agent
"""

_REGISTER_BODY = f"""
#variable_conflict use_column
DECLARE
    previous_hash text;
    previous_visibility text;
    was_created boolean;
BEGIN
    -- Concurrent registrations of one agent queue here (or, for a new agent, on
    -- the primary key below): one transaction at a time writes an agent, its
    -- instances and its events.
    SELECT a.definition_hash, a.visibility INTO previous_hash, previous_visibility
    FROM registry.agents a
    WHERE a.tenant_id = p_tenant AND a.agent_id = p_agent
    FOR UPDATE;

    {UPSERT_SQL.strip()}
    INTO was_created;

    IF previous_visibility IS NOT NULL AND previous_visibility <> p_visibility THEN
        -- The instances' copy of the visibility drives their row-level security read.
        UPDATE registry.agent_instances i SET visibility = p_visibility
        WHERE i.tenant_id = p_tenant AND i.agent_id = p_agent AND i.visibility <> p_visibility;
    END IF;

    -- Re-registering an unchanged definition (every restart does) skips the events.
    IF previous_hash IS DISTINCT FROM p_definition_hash THEN
        DELETE FROM registry.events e
        WHERE e.tenant_id = p_tenant AND e.owner_agent_id = p_agent
          AND NOT (e.event_type IN (
              SELECT x.event_type FROM jsonb_to_recordset(p_owned) AS x(event_type text)));
        INSERT INTO registry.events AS e (
            tenant_id, owner_agent_id, event_type, topic, description, json_schema,
            schema_name, schema_version, visibility)
        SELECT p_tenant, p_agent, x.event_type, x.topic, x.description, x.json_schema,
               x.schema_name, x.schema_version, p_visibility
        FROM jsonb_to_recordset(p_owned) AS x(
            event_type text, topic text, description text, json_schema jsonb,
            schema_name text, schema_version text)
        ON CONFLICT (tenant_id, owner_agent_id, event_type) DO UPDATE SET
            topic = excluded.topic,
            description = excluded.description,
            json_schema = excluded.json_schema,
            schema_name = excluded.schema_name,
            schema_version = excluded.schema_version,
            visibility = excluded.visibility,
            updated_at = now()
        WHERE (e.topic, e.description, e.json_schema, e.schema_name, e.schema_version,
               e.visibility)
            IS DISTINCT FROM (excluded.topic, excluded.description, excluded.json_schema,
                              excluded.schema_name, excluded.schema_version,
                              excluded.visibility);
    END IF;

    RETURN QUERY
    SELECT was_created, a.tenant_id, a.agent_id, a.name, a.version, a.description, a.tags,
           a.instance_id, a.visibility, a.capabilities, a.events, a.ttl_seconds, a.metadata,
           a.registered_at, a.updated_at,
           greatest(a.last_heartbeat_at, li.last_heartbeat_at),
           coalesce(li.expires_at, a.last_heartbeat_at + make_interval(secs => a.ttl_seconds)),
           li.live_instances
    FROM registry.agents a
    CROSS JOIN LATERAL (
        SELECT max(i.last_heartbeat_at) AS last_heartbeat_at,
               max(i.expires_at) AS expires_at,
               count(*) FILTER (WHERE i.expires_at > now()) AS live_instances
        FROM registry.agent_instances i
        WHERE i.tenant_id = a.tenant_id AND i.agent_id = a.agent_id
    ) li
    WHERE a.tenant_id = p_tenant AND a.agent_id = p_agent;
END
"""

_REGISTER_RETURNS = (
    "TABLE (created boolean, tenant_id text, agent_id text, name text, version text, "
    "description text, tags text[], instance_id text, visibility text, capabilities jsonb, "
    "events jsonb, ttl_seconds integer, metadata jsonb, registered_at timestamptz, "
    "updated_at timestamptz, last_heartbeat_at timestamptz, expires_at timestamptz, "
    "live_instances bigint)"
)

_DISCOVER_BODY = """
BEGIN
    PERFORM set_config('disco.tenant_id', coalesce(p_tenant, ''), true),
            set_config('disco.user_id', coalesce(p_user, ''), true);
    RETURN registry.discover_agents(
        capabilities, consumed_event, produced_event, query, max_agents);
END
"""


def upgrade() -> None:
    op.execute(
        f"CREATE OR REPLACE FUNCTION registry.register_agent({REGISTER_ARGUMENTS}) "
        f"RETURNS {_REGISTER_RETURNS} LANGUAGE plpgsql VOLATILE SECURITY INVOKER "
        f"SET search_path = pg_catalog, pg_temp AS $register${_REGISTER_BODY}$register$"
    )
    op.execute(
        f"CREATE OR REPLACE FUNCTION registry.discover_agents_as({DISCOVER_ARGUMENTS}) "
        "RETURNS text LANGUAGE plpgsql VOLATILE SECURITY INVOKER "
        f"SET search_path = pg_catalog, pg_temp AS $discover${_DISCOVER_BODY}$discover$"
    )


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS registry.discover_agents_as({DISCOVER_ARGUMENTS})")
    op.execute(f"DROP FUNCTION IF EXISTS registry.register_agent({REGISTER_ARGUMENTS})")
