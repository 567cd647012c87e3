"""registry: a registration is one statement, with its announcement.

After registry_0005 a registration still cost five round trips through the
unit of work: BEGIN, the tenant scope, ``registry.register_agent``, the
outbox insert of ``agent.registered``, COMMIT. The registry's CPU per request
went mostly to those (each one an asyncpg write, a wake-up and SQLAlchemy's
statement handling), not to the SQL.

``registry.register_agent_as(p_tenant, p_user, ..., p_topic, p_envelope)``
sets the transaction's tenant and user (what the kit's unit of work sets from
the caller's verified token, as ``registry.discover_agents_as`` does), runs
``registry.register_agent`` with the same arguments, and writes the
announcement to ``registry.outbox`` — the row the kit's
``publish_after_commit`` writes (topic, envelope, tenant), with the envelope's
``data.expires_at`` set from the registered record, formatted as pydantic
formats it (``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``) — and answers the record but
its capabilities and events (the arguments as given, which the caller has). Run
on its own it is its own implicit transaction: the agent, its instances, its
owned events and the outbox row commit together or not at all, and the relay
publishes the row after commit as before. It is ``SECURITY INVOKER``:
row-level security applies as to the statements it replaces.

Revision ID: registry_0006
Revises: registry_0005
Create Date: 2026-11-25
"""

# ruff: noqa: S608 - the SQL here is fixed text, nothing comes from input

import re
from collections.abc import Sequence

from alembic import op

revision: str = "registry_0006"
down_revision: str | None = "registry_0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# registry.register_agent's arguments (registry_0005), in its order.
_REGISTER_ARGUMENTS = (
    "p_tenant text, p_agent text, p_name text, p_version text, p_description text, "
    "p_tags text[], p_instance_id text, p_instance_key text, p_visibility text, "
    "p_ttl integer, p_metadata jsonb, p_capabilities jsonb, p_events jsonb, "
    "p_discovery jsonb, p_capability_names text[], p_consumed_events text[], "
    "p_produced_events text[], p_search_text text, p_definition_hash text, p_owned jsonb"
)
_REGISTER_NAMES = ", ".join(re.findall(r"\b(p_\w+) ", _REGISTER_ARGUMENTS))

ARGUMENTS = (
    "p_tenant text, p_user text, "
    + _REGISTER_ARGUMENTS.replace("p_tenant text, ", "", 1)
    + ", p_topic text, p_envelope jsonb"
)

# registry.register_agent's answer but capabilities and events: they are the
# arguments as given (the caller has them; decoding them back costs it CPU).
_COLUMNS = (
    "created boolean, tenant_id text, agent_id text, name text, version text, "
    "description text, tags text[], instance_id text, visibility text, "
    "ttl_seconds integer, metadata jsonb, registered_at timestamptz, "
    "updated_at timestamptz, last_heartbeat_at timestamptz, expires_at timestamptz, "
    "live_instances bigint"
)
_RETURNS = f"TABLE ({_COLUMNS})"
_COLUMN_NAMES = ", ".join(f"r.{column.split()[0]}" for column in _COLUMNS.split(", "))

# A timestamptz as pydantic writes a UTC datetime: microseconds only when not zero.
_EXPIRES_AT_JSON = """
to_jsonb(
    to_char(r.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
    || CASE WHEN extract(microseconds FROM r.expires_at)::bigint % 1000000 = 0 THEN ''
            ELSE to_char(r.expires_at AT TIME ZONE 'UTC', '.US') END
    || 'Z')
"""

_BODY = f"""
SELECT set_config('disco.tenant_id', coalesce(p_tenant, ''), true),
       set_config('disco.user_id', coalesce(p_user, ''), true);
WITH r AS (
    SELECT * FROM registry.register_agent({_REGISTER_NAMES})
), announced AS (
    INSERT INTO registry.outbox (topic, envelope, tenant_id)
    SELECT p_topic, jsonb_set(p_envelope, '{{data,expires_at}}', {_EXPIRES_AT_JSON.strip()}),
           p_envelope ->> 'tenant_id'
    FROM r
)
SELECT {_COLUMN_NAMES} FROM r;
"""


def upgrade() -> None:
    op.execute(
        f"CREATE OR REPLACE FUNCTION registry.register_agent_as({ARGUMENTS}) "
        f"RETURNS {_RETURNS} LANGUAGE sql VOLATILE SECURITY INVOKER "
        f"SET search_path = pg_catalog, pg_temp AS $register${_BODY}$register$"
    )


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS registry.register_agent_as({ARGUMENTS})")
