"""memory: step records (``memory.step_records``), and a sweeper of every expired row.

A handler's ``disco.step(name, fn)`` records the step's result here before it
goes on, one row per (tenant, consumer group, envelope id, step name); a
redelivered envelope reads its steps back instead of running them again. The
first record of a step wins. Tenant-scoped with row-level security (a group's
journal is its tenant's, as its dedup marks are); erasure finds the table by
its ``tenant_id`` column (memory_0004), the user's rows with the user.

- ``memory.step_record_as``: record one step, one statement; answers whether it
  was new and the stored result (the first one, when it was there already).
- ``memory.step_journal_as``: the live steps of one envelope.
- ``memory.dedup_check_as`` answers, besides the envelopes a group handled, those
  it has step records of (``o_kind``: ``handled`` or ``stepped``), so a consumer
  that asks about a fetched batch knows which envelopes have no journal to read.
- ``memory.sweep_expired(batch_size)``: deletes expired working memory, task
  contexts, dedup marks and step records, at most ``batch_size`` rows of each per
  call, and says how many of each (the TTL sweeper's metric). It replaces
  ``memory.purge_expired`` of memory_0002, which knew the first two only.

Revision ID: memory_0009
Revises: memory_0008
Create Date: 2026-12-02
"""

from collections.abc import Sequence
from pathlib import Path

from alembic import op

from disco_service.migration_helpers import (
    create_system_function,
    create_tenant_call,
    disable_tenant_rls,
    drop_system_function,
    drop_tenant_call,
    enable_tenant_rls,
    load_migration,
)

revision: str = "memory_0009"
down_revision: str | None = "memory_0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "memory"

_LIVE = "(s.expires_at IS NULL OR s.expires_at > now())"
_MARK_LIVE = "(m.expires_at IS NULL OR m.expires_at > now())"
_SWEPT = ("working_memory", "task_contexts", "dedup_marks", "step_records")

# name -> (arguments after the tenant and user, returns, body)
CALLS: dict[str, tuple[str, str, str]] = {
    # A step recorded already (and live) is kept as it is and answered; an expired
    # one is recorded again.
    "step_record_as": (
        "p_group text, p_envelope_id text, p_name text, p_result text, p_expires_at timestamptz",
        "TABLE (o_created boolean, o_result text, o_expires_at timestamptz, "
        "o_created_at timestamptz)",
        f"""
    RETURN QUERY
    INSERT INTO memory.step_records AS s
        (tenant_id, consumer_group, envelope_id, name, user_id, result, expires_at)
    VALUES (p_tenant, p_group, p_envelope_id, p_name, p_user, p_result::jsonb, p_expires_at)
    ON CONFLICT (tenant_id, consumer_group, envelope_id, name) DO UPDATE SET
        user_id = EXCLUDED.user_id, result = EXCLUDED.result,
        expires_at = EXCLUDED.expires_at, created_at = now()
    WHERE NOT {_LIVE}
    RETURNING true, s.result::text, s.expires_at, s.created_at;
    IF NOT FOUND THEN
        RETURN QUERY
        SELECT false, s.result::text, s.expires_at, s.created_at FROM memory.step_records s
        WHERE s.tenant_id = p_tenant AND s.consumer_group = p_group
          AND s.envelope_id = p_envelope_id AND s.name = p_name;
    END IF;
""",  # noqa: S608
    ),
    "step_journal_as": (
        "p_group text, p_envelope_id text",
        "TABLE (o_name text, o_result text, o_expires_at timestamptz, o_created_at timestamptz)",
        f"""
    RETURN QUERY
    SELECT s.name, s.result::text, s.expires_at, s.created_at FROM memory.step_records s
    WHERE s.tenant_id = p_tenant AND s.consumer_group = p_group
      AND s.envelope_id = p_envelope_id AND {_LIVE}
    ORDER BY s.created_at, s.name;
""",  # noqa: S608
    ),
}

_CHECK_ARGUMENTS = "p_group text, p_ids text[]"
_CHECK_AFTER = (
    "TABLE (o_event_id text, o_kind text)",
    f"""
    RETURN QUERY
    SELECT m.event_id, 'handled'::text FROM memory.dedup_marks m
    WHERE m.tenant_id = p_tenant AND m.consumer_group = p_group
      AND m.event_id = ANY(p_ids) AND {_MARK_LIVE}
    UNION ALL
    SELECT DISTINCT s.envelope_id, 'stepped'::text FROM memory.step_records s
    WHERE s.tenant_id = p_tenant AND s.consumer_group = p_group
      AND s.envelope_id = ANY(p_ids) AND {_LIVE};
""",  # noqa: S608
)


def _sweep_body() -> str:
    lines = ["BEGIN"]
    for table in _SWEPT:
        lines += [
            f"    DELETE FROM {SCHEMA}.{table} WHERE ctid IN (",  # noqa: S608
            f"        SELECT ctid FROM {SCHEMA}.{table}",  # noqa: S608
            "        WHERE expires_at IS NOT NULL AND expires_at <= now() LIMIT batch_size);",
            "    GET DIAGNOSTICS deleted = ROW_COUNT;",
            f"    table_name := '{table}'; RETURN NEXT;",
        ]
    lines += ["    RETURN;", "END"]
    return "\n".join(lines)


_PURGE_BODY = f"""
DECLARE
    removed integer := 0;
    n integer;
BEGIN
    DELETE FROM {SCHEMA}.working_memory WHERE ctid IN (
        SELECT ctid FROM {SCHEMA}.working_memory
        WHERE expires_at IS NOT NULL AND expires_at <= now() LIMIT batch_size);
    GET DIAGNOSTICS n = ROW_COUNT;
    removed := removed + n;
    DELETE FROM {SCHEMA}.task_contexts WHERE ctid IN (
        SELECT ctid FROM {SCHEMA}.task_contexts
        WHERE expires_at IS NOT NULL AND expires_at <= now() LIMIT batch_size);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN removed + n;
END
"""  # noqa: S608


def upgrade() -> None:
    op.execute(
        f"""CREATE TABLE {SCHEMA}.step_records (
            tenant_id text NOT NULL,
            consumer_group text NOT NULL,
            envelope_id text NOT NULL,
            name text NOT NULL,
            user_id text NOT NULL,
            result jsonb NOT NULL,
            expires_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, consumer_group, envelope_id, name))"""
    )
    op.execute(f"CREATE INDEX step_records_user ON {SCHEMA}.step_records (tenant_id, user_id)")
    # What the sweeper looks for, in these two tables that grow with every envelope.
    op.execute(
        f"CREATE INDEX step_records_expiry ON {SCHEMA}.step_records (expires_at) "
        "WHERE expires_at IS NOT NULL"
    )
    op.execute(
        f"CREATE INDEX dedup_marks_expiry ON {SCHEMA}.dedup_marks (expires_at) "
        "WHERE expires_at IS NOT NULL"
    )
    enable_tenant_rls(SCHEMA, "step_records")
    for name, (arguments, returns, body) in CALLS.items():
        create_tenant_call(SCHEMA, name, arguments=arguments, returns=returns, body=body)
    # A function's result type cannot be replaced in place.
    drop_tenant_call(SCHEMA, "dedup_check_as", arguments=_CHECK_ARGUMENTS)
    create_tenant_call(
        SCHEMA,
        "dedup_check_as",
        arguments=_CHECK_ARGUMENTS,
        returns=_CHECK_AFTER[0],
        body=_CHECK_AFTER[1],
    )
    drop_system_function(SCHEMA, "purge_expired", arguments="batch_size integer")
    create_system_function(
        SCHEMA,
        "sweep_expired",
        arguments="batch_size integer",
        returns="TABLE(table_name text, deleted bigint)",
        language="plpgsql",
        body=_sweep_body(),
    )


def downgrade() -> None:
    drop_system_function(SCHEMA, "sweep_expired", arguments="batch_size integer")
    create_system_function(
        SCHEMA,
        "purge_expired",
        arguments="batch_size integer",
        returns="integer",
        language="plpgsql",
        body=_PURGE_BODY,
    )
    # memory_0007's check, as it wrote it.
    one_statement = load_migration(Path(__file__).with_name("0007_memory_one_statement_calls.py"))
    _, returns, body, declare = one_statement.FUNCTIONS["dedup_check_as"]
    drop_tenant_call(SCHEMA, "dedup_check_as", arguments=_CHECK_ARGUMENTS)
    create_tenant_call(
        SCHEMA,
        "dedup_check_as",
        arguments=_CHECK_ARGUMENTS,
        returns=returns,
        body=body,
        declare=declare,
    )
    for name, (arguments, _, _) in CALLS.items():
        drop_tenant_call(SCHEMA, name, arguments=arguments)
    op.execute(f"DROP INDEX IF EXISTS {SCHEMA}.dedup_marks_expiry")
    disable_tenant_rls(SCHEMA, "step_records")
    op.execute(f"DROP TABLE IF EXISTS {SCHEMA}.step_records")
