"""registry: discovery reads that stay fast as agents register, and can be cached.

Measured at 10,000 agents (``bench/table.py --only registry``, EXPLAIN ANALYZE
of ``registry.discover_agents``), the discovery statement, not the service, was
what capped discovery: ~2.7 ms of PostgreSQL per call, of which

- **the GIN pending lists** (~0.6 ms): with ``fastupdate`` on, every new
  registration's array and text entries wait in a list that each query reads
  through, in full, until a vacuum moves them into the index. A registry is
  read far more than it is written, and its readers wait on the answer, so the
  entries now go into the index when they are written (a registration costs a
  few index inserts more) and the lists there are now are emptied;
- **turning ``discovery`` from jsonb into text** (~0.3 ms at 50 agents): the
  answer embeds each agent's resolved capabilities, which were stored as jsonb
  and printed again on every read. Stored as ``json`` (the text as written)
  they are copied into the answer as they are. Nothing queries inside them; the
  registration functions still take jsonb (assigned to json as its text).

What is left is the query itself, so the service keeps answers
(:mod:`disco_registry.discovery.cache`); two things here make that exact:

- ``registry.discover_agents`` (and ``..._as``) answer with ``fresh_seconds``
  too: how long until the first live instance among the matches expires, the
  only way an answer changes without a write (NULL: no live instance matched);
- triggers send ``NOTIFY registry_discovery`` (payload: the tenant, or ``*``
  when a public agent is involved) when a write changes what discovery reads:
  an agent added, removed or changed in a column discovery reads; an instance
  added, removed while live, revived, or given an earlier expiry; a table
  truncated. A heartbeat that only extends a live instance sends nothing, and
  neither does the sweeper removing instances already past their expiry. A
  notification is sent at commit, and not at all for a rollback.

Revision ID: registry_0007
Revises: registry_0006
Create Date: 2026-11-28
"""

# ruff: noqa: S608 - the SQL here is fixed text, nothing comes from input

from collections.abc import Sequence
from pathlib import Path

from alembic import op

from disco_service.migration_helpers import load_migration, system_function_statements

revision: str = "registry_0007"
down_revision: str | None = "registry_0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHANNEL = "registry_discovery"
GIN_INDEXES = (
    "agents_capability_names",
    "agents_consumed_events",
    "agents_produced_events",
    "agents_tags",
    "agents_search_vector",
)
ARGUMENTS = (
    "capabilities text[], consumed_event text, produced_event text, query text, max_agents integer"
)
AS_ARGUMENTS = (
    "p_tenant text, p_user text, capabilities text[], consumed_event text, "
    "produced_event text, query text, max_agents integer"
)
_OUT = ", OUT answer text, OUT fresh_seconds double precision"

# As registry_0003's, plus each match's soonest live expiry and, from them,
# fresh_seconds. %s slots: 1 the score expression, 2 the conditions. Parameters:
# $1 tenant, $2 capabilities, $3 consumed, $4 produced, $5 the text query
# (tsquery), $6 limit.
_TEMPLATE = """
WITH m AS (
    SELECT a.tenant_id, a.agent_id, a.name, a.updated_at, %s AS score, l.soonest
    FROM registry.agents a
    CROSS JOIN LATERAL (
        SELECT min(i.expires_at) AS soonest FROM registry.agent_instances i
        WHERE i.tenant_id = a.tenant_id AND i.agent_id = a.agent_id AND i.expires_at > now()
    ) l
    WHERE %s AND l.soonest IS NOT NULL
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
       '[]')::text,
       extract(epoch FROM (SELECT min(m.soonest) FROM m) - now())::double precision
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
BEGIN
    answer := '[]';
    IF tenant IS NULL THEN
        RETURN;
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
            RETURN;
        END IF;
        matcher := to_tsquery('english', terms);
        conditions := conditions || ' AND a.search_vector @@ $5';
        score := 'ts_rank_cd(a.search_vector, $5)::real';
    END IF;
    EXECUTE format('{template}', score, conditions)
        INTO answer, fresh_seconds
        USING tenant, capabilities, consumed_event, produced_event, matcher, max_agents;
END
"""


_AS_BODY = """
BEGIN
    PERFORM set_config('disco.tenant_id', coalesce(p_tenant, ''), true),
            set_config('disco.user_id', coalesce(p_user, ''), true);
    SELECT d.answer, d.fresh_seconds INTO answer, fresh_seconds
    FROM registry.discover_agents(
        capabilities, consumed_event, produced_event, query, max_agents) d;
END
"""

# The payload: the row's tenant, or '*' when a public row is involved (every
# tenant's answers may show it).
_NOTIFY_FUNCTION = f"""
CREATE FUNCTION registry.discovery_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $changed$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('{CHANNEL}', '*');
    ELSIF TG_OP = 'INSERT' THEN
        PERFORM pg_notify('{CHANNEL}',
            CASE WHEN NEW.visibility = 'public' THEN '*' ELSE NEW.tenant_id END);
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('{CHANNEL}',
            CASE WHEN OLD.visibility = 'public' THEN '*' ELSE OLD.tenant_id END);
    ELSE
        PERFORM pg_notify('{CHANNEL}',
            CASE WHEN OLD.visibility = 'public' OR NEW.visibility = 'public'
                      OR OLD.tenant_id <> NEW.tenant_id
                 THEN '*' ELSE NEW.tenant_id END);
    END IF;
    RETURN NULL;
END
$changed$
"""

# The agent columns discovery reads (json has no equality: compared as text).
_AGENT_READ = (
    "tenant_id",
    "agent_id",
    "name",
    "version",
    "description",
    "tags",
    "visibility",
    "discovery::text",
    "capability_names",
    "consumed_events",
    "produced_events",
    "search_text",
    "updated_at",
)
_AGENT_CHANGED = " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in _AGENT_READ)
_INSTANCE_CHANGED = (
    "OLD.expires_at <= now() OR NEW.expires_at < OLD.expires_at "
    "OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id "
    "OR OLD.agent_id IS DISTINCT FROM NEW.agent_id "
    "OR OLD.visibility IS DISTINCT FROM NEW.visibility"
)
_TRIGGERS = {
    "agents_discovery_added": "AFTER INSERT OR DELETE ON registry.agents FOR EACH ROW",
    "agents_discovery_changed": (
        f"AFTER UPDATE ON registry.agents FOR EACH ROW WHEN ({_AGENT_CHANGED})"
    ),
    "agents_discovery_truncated": "AFTER TRUNCATE ON registry.agents FOR EACH STATEMENT",
    "instances_discovery_added": "AFTER INSERT ON registry.agent_instances FOR EACH ROW",
    "instances_discovery_removed": (
        "AFTER DELETE ON registry.agent_instances FOR EACH ROW WHEN (OLD.expires_at > now())"
    ),
    "instances_discovery_changed": (
        f"AFTER UPDATE ON registry.agent_instances FOR EACH ROW WHEN ({_INSTANCE_CHANGED})"
    ),
    "instances_discovery_truncated": (
        "AFTER TRUNCATE ON registry.agent_instances FOR EACH STATEMENT"
    ),
}


def _drop_discovery_functions() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS registry.discover_agents_as({AS_ARGUMENTS})")
    op.execute(f"DROP FUNCTION IF EXISTS registry.discover_agents({ARGUMENTS})")


def upgrade() -> None:
    for index in GIN_INDEXES:
        op.execute(f"ALTER INDEX registry.{index} SET (fastupdate = off)")
        op.execute(f"SELECT gin_clean_pending_list('registry.{index}'::regclass)")
    op.execute(
        "ALTER TABLE registry.agents ALTER COLUMN discovery TYPE json USING discovery::json, "
        "ALTER COLUMN discovery SET DEFAULT '[]'::json"
    )
    # New result columns: the functions are dropped and made again.
    _drop_discovery_functions()
    for statement in system_function_statements(
        "registry",
        "discover_agents",
        arguments=ARGUMENTS + _OUT,
        returns="record",
        body=_body(),
        language="plpgsql",
        volatility="STABLE",
    ):
        op.execute(statement)
    op.execute(
        f"CREATE FUNCTION registry.discover_agents_as({AS_ARGUMENTS}{_OUT}) "
        "RETURNS record LANGUAGE plpgsql VOLATILE SECURITY INVOKER "
        f"SET search_path = pg_catalog, pg_temp AS $discover${_AS_BODY}$discover$"
    )
    op.execute(_NOTIFY_FUNCTION)
    for name, when in _TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} {when} EXECUTE FUNCTION registry.discovery_changed()")


def downgrade() -> None:
    for name, when in _TRIGGERS.items():
        table = when.split(" ON ")[1].split(" ")[0]
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
    op.execute("DROP FUNCTION IF EXISTS registry.discovery_changed()")
    _drop_discovery_functions()
    # registry_0003's and registry_0005's discovery functions, as they made them.
    here = Path(__file__)
    first = load_migration(here.with_name("0003_registry_discovery_function.py"))
    one_round_trip = load_migration(here.with_name("0005_registry_one_round_trip.py"))
    for statement in system_function_statements(
        "registry",
        "discover_agents",
        arguments=first.ARGUMENTS,
        returns="text",
        body=first._body(),
        language="plpgsql",
        volatility="STABLE",
    ):
        op.execute(statement)
    op.execute(
        f"CREATE FUNCTION registry.discover_agents_as({one_round_trip.DISCOVER_ARGUMENTS}) "
        "RETURNS text LANGUAGE plpgsql VOLATILE SECURITY INVOKER "
        "SET search_path = pg_catalog, pg_temp "
        f"AS $discover${one_round_trip._DISCOVER_BODY}$discover$"
    )
    op.execute(
        "ALTER TABLE registry.agents ALTER COLUMN discovery TYPE jsonb USING discovery::jsonb, "
        "ALTER COLUMN discovery SET DEFAULT '[]'::jsonb"
    )
    for index in GIN_INDEXES:
        op.execute(f"ALTER INDEX registry.{index} RESET (fastupdate)")
