"""registry: what the AsyncAPI document of a tenant's bus is built from, in one statement.

``GET /v1/asyncapi`` describes the caller's bus from the live registrations
it can see (its own and public ones), their event definitions and the
tenant's payload schema versions. The service keeps each document until it
may have changed (:mod:`disco_registry.asyncapi.service`), so the read is
rare, but it is the cold path of the benchmark (1,000 agents, 3,000 event
types), so it is one round trip:

- ``registry.asyncapi_source_as(tenant, user)`` sets the transaction's tenant
  and user (as ``discover_agents_as`` does) and answers the JSON text of
  ``{"agents", "events", "schemas"}`` in a stable order: the live visible
  registrations with a slim view of their capabilities (task, request event,
  answer events) and of their listed events (type, direction), the event
  definitions they own with their resolved schemas, and the tenant's payload
  schema versions; with ``fresh_seconds``, how long until the first of those
  registrations loses its last live instance (the only way the document
  changes without a write; NULL: no live registration). It is ``SECURITY
  INVOKER``: row-level security applies.
- a trigger on ``registry.payload_schemas`` sends ``NOTIFY registry_discovery``
  with the payload ``schema:<tenant>`` (``schema:*`` for a truncate) at commit,
  so that every instance drops that tenant's documents when a schema version
  is added or removed. Discovery answers do not depend on schema versions and
  ignore these notifications.

Revision ID: registry_0008
Revises: registry_0007
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "registry_0008"
down_revision: str | None = "registry_0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHANNEL = "registry_discovery"
SCHEMA_CHANGE_PREFIX = "schema:"
ARGUMENTS = "p_tenant text, p_user text, OUT answer text, OUT fresh_seconds double precision"

_SOURCE_BODY = """
BEGIN
    PERFORM set_config('disco.tenant_id', coalesce(p_tenant, ''), true),
            set_config('disco.user_id', coalesce(p_user, ''), true);
    WITH live AS (
        SELECT a.tenant_id, a.agent_id, a.name, a.version, a.description, a.visibility,
               a.updated_at, a.capabilities, a.events, l.last_expiry
        FROM registry.agents a
        CROSS JOIN LATERAL (
            SELECT max(i.expires_at) AS last_expiry FROM registry.agent_instances i
            WHERE i.tenant_id = a.tenant_id AND i.agent_id = a.agent_id
              AND i.expires_at > now()
        ) l
        WHERE (a.tenant_id = p_tenant OR a.visibility = 'public')
          AND l.last_expiry IS NOT NULL
    )
    SELECT json_build_object(
        'agents', coalesce((
            SELECT json_agg(json_build_object(
                'tenant_id', v.tenant_id,
                'agent_id', v.agent_id,
                'name', v.name,
                'version', v.version,
                'description', v.description,
                'visibility', v.visibility,
                'capabilities', coalesce((
                    SELECT json_agg(json_build_object(
                        'task_name', c.value ->> 'task_name',
                        'description', coalesce(c.value ->> 'description', ''),
                        'consumed', c.value -> 'consumed_event' ->> 'event_type',
                        'produced', coalesce((
                            SELECT json_agg(p.value ->> 'event_type' ORDER BY p.ordinality)
                            FROM jsonb_array_elements(c.value -> 'produced_events')
                                 WITH ORDINALITY AS p
                        ), '[]'::json)
                    ) ORDER BY c.ordinality)
                    FROM jsonb_array_elements(v.capabilities) WITH ORDINALITY AS c
                ), '[]'::json),
                'events', coalesce((
                    SELECT json_agg(json_build_object(
                        'event_type', e.value ->> 'event_type',
                        'direction', e.value ->> 'direction'
                    ) ORDER BY e.ordinality)
                    FROM jsonb_array_elements(v.events) WITH ORDINALITY AS e
                ), '[]'::json)
            ) ORDER BY v.name, v.version, v.updated_at DESC, v.tenant_id, v.agent_id)
            FROM live v
        ), '[]'::json),
        'events', coalesce((
            SELECT json_agg(json_build_object(
                'tenant_id', e.tenant_id,
                'owner_agent_id', e.owner_agent_id,
                'event_type', e.event_type,
                'topic', e.topic,
                'description', e.description,
                'json_schema', e.json_schema,
                'schema_name', e.schema_name,
                'schema_version', e.schema_version,
                'updated_at', extract(epoch FROM e.updated_at)::double precision
            ) ORDER BY e.event_type, e.tenant_id, e.owner_agent_id)
            FROM registry.events e
            JOIN live v ON v.tenant_id = e.tenant_id AND v.agent_id = e.owner_agent_id
        ), '[]'::json),
        'schemas', coalesce((
            SELECT json_agg(json_build_object(
                'name', s.name,
                'version', s.version,
                'description', s.description,
                'json_schema', s.json_schema
            ) ORDER BY s.name, s.sort_key, s.version)
            FROM registry.payload_schemas s
            WHERE s.tenant_id = p_tenant
        ), '[]'::json)
    )::text,
    extract(epoch FROM (SELECT min(v.last_expiry) FROM live v) - now())::double precision
    INTO answer, fresh_seconds;
END
"""

_NOTIFY_FUNCTION = f"""
CREATE FUNCTION registry.payload_schemas_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $changed$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('{CHANNEL}', '{SCHEMA_CHANGE_PREFIX}*');
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('{CHANNEL}', '{SCHEMA_CHANGE_PREFIX}' || OLD.tenant_id);
    ELSE
        PERFORM pg_notify('{CHANNEL}', '{SCHEMA_CHANGE_PREFIX}' || NEW.tenant_id);
    END IF;
    RETURN NULL;
END
$changed$
"""

_TRIGGERS = {
    "payload_schemas_asyncapi_changed": (
        "AFTER INSERT OR UPDATE OR DELETE ON registry.payload_schemas FOR EACH ROW"
    ),
    "payload_schemas_asyncapi_truncated": (
        "AFTER TRUNCATE ON registry.payload_schemas FOR EACH STATEMENT"
    ),
}


def upgrade() -> None:
    op.execute(
        f"CREATE FUNCTION registry.asyncapi_source_as({ARGUMENTS}) "
        "RETURNS record LANGUAGE plpgsql VOLATILE SECURITY INVOKER "
        f"SET search_path = pg_catalog, pg_temp AS $source${_SOURCE_BODY}$source$"
    )
    op.execute(_NOTIFY_FUNCTION)
    for name, when in _TRIGGERS.items():
        op.execute(
            f"CREATE TRIGGER {name} {when} EXECUTE FUNCTION registry.payload_schemas_changed()"
        )


def downgrade() -> None:
    for name in _TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON registry.payload_schemas")
    op.execute("DROP FUNCTION IF EXISTS registry.payload_schemas_changed()")
    op.execute(f"DROP FUNCTION IF EXISTS registry.asyncapi_source_as({ARGUMENTS})")
