"""memory: every memory family, under tenant (and user) row-level security.

Tables (schema ``memory``):

- tenant-scoped (shared by the agents working on one plan; ``user_id`` records
  who wrote the row, for user erasure): ``working_memory``, ``task_contexts``
  and their lookup ``task_context_refs``, ``plan_contexts`` and their lookup
  ``plan_context_refs``, ``plans``;
- private to a user within the tenant: ``sessions``, ``episodic_turns``,
  ``agent_snapshots``;
- private to a user, optionally readable by the whole tenant (``is_public``):
  ``semantic_memories``, ``procedures``.

Vectors: the embedding columns have a fixed dimension (HNSW indexes need one),
read from ``DISCO_MEMORY_EMBEDDING_DIMENSIONS`` when this migration runs
(default 384, the bundled model's). The service checks at start that its
embedding model produces vectors of the column's dimension and refuses to
start otherwise.

System functions (``SECURITY DEFINER``, see ``disco_service.migration_helpers``):
``purge_expired`` (the TTL sweeper, across tenants), ``erase_user`` and
``erase_tenant`` (one transaction, scoped to the calling transaction's tenant).

Revision ID: memory_0002
Revises: memory_0001
Create Date: 2026-11-23
"""

import os
from collections.abc import Sequence

from alembic import op

from disco_service.migration_helpers import (
    create_system_function,
    disable_tenant_rls,
    drop_system_function,
    enable_tenant_rls,
)

revision: str = "memory_0002"
down_revision: str | None = "memory_0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "memory"


def _dimensions() -> int:
    raw = os.environ.get("DISCO_MEMORY_EMBEDDING_DIMENSIONS", "384")
    value = int(raw)
    if not 1 <= value <= 2000:
        # 2000 is the largest dimension pgvector can index with HNSW (type vector).
        raise ValueError(f"DISCO_MEMORY_EMBEDDING_DIMENSIONS={raw} must be within 1..2000")
    return value


# Every table of the service that holds tenant data, children before parents:
# the erasure functions delete in this order.
ERASABLE = (
    "task_context_refs",
    "task_contexts",
    "plan_context_refs",
    "plan_contexts",
    "working_memory",
    "plans",
    "sessions",
    "semantic_memories",
    "episodic_turns",
    "procedures",
    "agent_snapshots",
)

HNSW = "WITH (m = 16, ef_construction = 64)"


def upgrade() -> None:
    dims = _dimensions()
    s = SCHEMA
    statements = [
        # -- working memory ------------------------------------------------------
        f"""CREATE TABLE {s}.working_memory (
            tenant_id text NOT NULL,
            plan_id text NOT NULL,
            key text NOT NULL,
            user_id text NOT NULL,
            value jsonb NOT NULL,
            version integer NOT NULL CHECK (version >= 1),
            expires_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, plan_id, key))""",
        f"CREATE INDEX working_memory_expiry ON {s}.working_memory (expires_at) "
        "WHERE expires_at IS NOT NULL",
        f"CREATE INDEX working_memory_user ON {s}.working_memory (tenant_id, user_id)",
        # -- task context ----------------------------------------------------------
        f"""CREATE TABLE {s}.task_contexts (
            tenant_id text NOT NULL,
            task_id text NOT NULL,
            plan_id text,
            user_id text NOT NULL,
            sub_task_ids text[] NOT NULL DEFAULT '{{}}',
            context jsonb NOT NULL,
            version integer NOT NULL CHECK (version >= 1),
            expires_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, task_id))""",
        f"CREATE INDEX task_contexts_plan ON {s}.task_contexts (tenant_id, plan_id, created_at, task_id)",
        f"CREATE INDEX task_contexts_expiry ON {s}.task_contexts (expires_at) "
        "WHERE expires_at IS NOT NULL",
        f"CREATE INDEX task_contexts_user ON {s}.task_contexts (tenant_id, user_id)",
        # A sub-task id (or the correlation id of an outstanding question to a
        # human) -> the task waiting for it. One owner per id and tenant.
        f"""CREATE TABLE {s}.task_context_refs (
            tenant_id text NOT NULL,
            ref_id text NOT NULL,
            task_id text NOT NULL,
            PRIMARY KEY (tenant_id, ref_id),
            FOREIGN KEY (tenant_id, task_id) REFERENCES {s}.task_contexts (tenant_id, task_id)
                ON DELETE CASCADE)""",
        f"CREATE INDEX task_context_refs_task ON {s}.task_context_refs (tenant_id, task_id)",
        # -- plan context ----------------------------------------------------------
        f"""CREATE TABLE {s}.plan_contexts (
            tenant_id text NOT NULL,
            plan_id text NOT NULL,
            session_id text,
            user_id text NOT NULL,
            correlation_ids text[] NOT NULL DEFAULT '{{}}',
            context jsonb NOT NULL,
            version integer NOT NULL CHECK (version >= 1),
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, plan_id))""",
        f"CREATE INDEX plan_contexts_user ON {s}.plan_contexts (tenant_id, user_id)",
        f"""CREATE TABLE {s}.plan_context_refs (
            tenant_id text NOT NULL,
            correlation_id text NOT NULL,
            plan_id text NOT NULL,
            PRIMARY KEY (tenant_id, correlation_id),
            FOREIGN KEY (tenant_id, plan_id) REFERENCES {s}.plan_contexts (tenant_id, plan_id)
                ON DELETE CASCADE)""",
        f"CREATE INDEX plan_context_refs_plan ON {s}.plan_context_refs (tenant_id, plan_id)",
        # -- plans and sessions ----------------------------------------------------
        f"""CREATE TABLE {s}.plans (
            tenant_id text NOT NULL,
            plan_id text NOT NULL,
            user_id text NOT NULL,
            goal_event text NOT NULL,
            goal_data jsonb NOT NULL DEFAULT '{{}}',
            response_event text NOT NULL,
            plan_type text,
            status text NOT NULL,
            status_reason text,
            session_id text,
            parent_plan_id text,
            version integer NOT NULL CHECK (version >= 1),
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            completed_at timestamptz,
            PRIMARY KEY (tenant_id, plan_id))""",
        f"CREATE INDEX plans_listing ON {s}.plans (tenant_id, user_id, created_at DESC, plan_id DESC)",
        f"CREATE INDEX plans_session ON {s}.plans (tenant_id, session_id, created_at DESC) "
        "WHERE session_id IS NOT NULL",
        f"CREATE INDEX plans_parent ON {s}.plans (tenant_id, parent_plan_id) "
        "WHERE parent_plan_id IS NOT NULL",
        f"""CREATE TABLE {s}.sessions (
            tenant_id text NOT NULL,
            user_id text NOT NULL,
            session_id text NOT NULL,
            name text,
            metadata jsonb NOT NULL DEFAULT '{{}}',
            plan_count integer NOT NULL DEFAULT 0 CHECK (plan_count >= 0),
            created_at timestamptz NOT NULL DEFAULT now(),
            last_activity_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, user_id, session_id))""",
        f"CREATE INDEX sessions_activity ON {s}.sessions "
        "(tenant_id, user_id, last_activity_at DESC, session_id DESC)",
        # -- semantic memory -------------------------------------------------------
        f"""CREATE TABLE {s}.semantic_memories (
            memory_id text PRIMARY KEY,
            tenant_id text NOT NULL,
            user_id text NOT NULL,
            external_id text,
            content text NOT NULL,
            content_hash text NOT NULL,
            is_public boolean NOT NULL DEFAULT false,
            metadata jsonb NOT NULL DEFAULT '{{}}',
            embedding vector({dims}) NOT NULL,
            embedding_model text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now())""",
        f"CREATE UNIQUE INDEX semantic_by_external_id ON {s}.semantic_memories "
        "(tenant_id, user_id, external_id) WHERE external_id IS NOT NULL",
        f"CREATE UNIQUE INDEX semantic_by_content ON {s}.semantic_memories "
        "(tenant_id, user_id, content_hash) WHERE external_id IS NULL",
        f"CREATE INDEX semantic_owner ON {s}.semantic_memories (tenant_id, user_id)",
        f"CREATE INDEX semantic_metadata ON {s}.semantic_memories USING gin (metadata jsonb_path_ops)",
        f"CREATE INDEX semantic_embedding ON {s}.semantic_memories "
        f"USING hnsw (embedding vector_cosine_ops) {HNSW}",
        # -- episodic memory -------------------------------------------------------
        f"""CREATE TABLE {s}.episodic_turns (
            sequence bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            turn_id text NOT NULL UNIQUE,
            tenant_id text NOT NULL,
            user_id text NOT NULL,
            session_id text NOT NULL,
            agent_id text NOT NULL,
            role text NOT NULL,
            content text NOT NULL,
            plan_id text,
            task_id text,
            metadata jsonb NOT NULL DEFAULT '{{}}',
            embedding vector({dims}) NOT NULL,
            embedding_model text NOT NULL,
            search_text tsvector GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED,
            created_at timestamptz NOT NULL DEFAULT now())""",
        f"CREATE INDEX episodic_recent ON {s}.episodic_turns "
        "(tenant_id, user_id, session_id, sequence DESC)",
        f"CREATE INDEX episodic_text ON {s}.episodic_turns USING gin (search_text)",
        f"CREATE INDEX episodic_embedding ON {s}.episodic_turns "
        f"USING hnsw (embedding vector_cosine_ops) {HNSW}",
        # -- procedural memory -----------------------------------------------------
        f"""CREATE TABLE {s}.procedures (
            procedure_id text PRIMARY KEY,
            tenant_id text NOT NULL,
            user_id text NOT NULL,
            name text NOT NULL,
            trigger text NOT NULL,
            steps jsonb NOT NULL DEFAULT '[]',
            instructions text NOT NULL DEFAULT '',
            agent_id text,
            is_public boolean NOT NULL DEFAULT false,
            metadata jsonb NOT NULL DEFAULT '{{}}',
            embedding vector({dims}) NOT NULL,
            embedding_model text NOT NULL,
            version integer NOT NULL CHECK (version >= 1),
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now())""",
        f"CREATE INDEX procedures_listing ON {s}.procedures (tenant_id, created_at DESC, procedure_id DESC)",
        f"CREATE INDEX procedures_owner ON {s}.procedures (tenant_id, user_id)",
        f"CREATE INDEX procedures_embedding ON {s}.procedures "
        f"USING hnsw (embedding vector_cosine_ops) {HNSW}",
        # -- agent-state snapshots -------------------------------------------------
        f"""CREATE TABLE {s}.agent_snapshots (
            tenant_id text NOT NULL,
            user_id text NOT NULL,
            session_id text NOT NULL,
            agent_id text NOT NULL,
            execution_id text,
            status text,
            format_version integer NOT NULL DEFAULT 1,
            full_state jsonb NOT NULL,
            slim_state jsonb NOT NULL,
            full_bytes integer NOT NULL,
            slim_bytes integer NOT NULL,
            version integer NOT NULL CHECK (version >= 1),
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, user_id, session_id, agent_id))""",
    ]
    for statement in statements:
        op.execute(statement)

    for table in (
        "working_memory",
        "task_contexts",
        "task_context_refs",
        "plan_contexts",
        "plan_context_refs",
        "plans",
    ):
        enable_tenant_rls(SCHEMA, table)
    for table in ("sessions", "episodic_turns", "agent_snapshots"):
        enable_tenant_rls(SCHEMA, table, user_scoped=True)
    for table in ("semantic_memories", "procedures"):
        enable_tenant_rls(SCHEMA, table, user_scoped=True, public_read_column="is_public")

    create_system_function(
        SCHEMA,
        "purge_expired",
        arguments="batch_size integer",
        returns="integer",
        language="plpgsql",
        body=f"""
DECLARE
    removed integer := 0;
    n integer;
BEGIN
    DELETE FROM {s}.working_memory WHERE ctid IN (
        SELECT ctid FROM {s}.working_memory
        WHERE expires_at IS NOT NULL AND expires_at <= now() LIMIT batch_size);
    GET DIAGNOSTICS n = ROW_COUNT;
    removed := removed + n;
    DELETE FROM {s}.task_contexts WHERE ctid IN (
        SELECT ctid FROM {s}.task_contexts
        WHERE expires_at IS NOT NULL AND expires_at <= now() LIMIT batch_size);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN removed + n;
END
""",  # noqa: S608
    )

    def erase_body(user_filter: str) -> str:
        lines = [
            "DECLARE",
            "    tenant text := NULLIF(current_setting('disco.tenant_id', true), '');",
            "    n bigint;",
            "BEGIN",
            "    IF tenant IS NULL THEN",
            "        RAISE EXCEPTION 'erasure needs a tenant-scoped transaction';",
            "    END IF;",
        ]
        for table in ERASABLE:
            # Lookup rows have no user of their own: they go with their parent (cascade)
            # in a user erasure, and by tenant in a tenant erasure.
            if user_filter and table.endswith("_refs"):
                continue
            lines += [
                f"    DELETE FROM {s}.{table} WHERE tenant_id = tenant{user_filter};",  # noqa: S608
                "    GET DIAGNOSTICS n = ROW_COUNT;",
                f"    table_name := '{table}'; deleted := n; RETURN NEXT;",
            ]
        lines += ["    RETURN;", "END"]
        return "\n".join(lines)

    create_system_function(
        SCHEMA,
        "erase_user",
        arguments="target_user text",
        returns="TABLE(table_name text, deleted bigint)",
        language="plpgsql",
        body=erase_body(" AND user_id = target_user"),
    )
    create_system_function(
        SCHEMA,
        "erase_tenant",
        returns="TABLE(table_name text, deleted bigint)",
        language="plpgsql",
        body=erase_body(""),
    )


def downgrade() -> None:
    for name, arguments in (
        ("erase_tenant", ""),
        ("erase_user", "target_user text"),
        ("purge_expired", "batch_size integer"),
    ):
        drop_system_function(SCHEMA, name, arguments=arguments)
    for table in ERASABLE:
        disable_tenant_rls(SCHEMA, table)
        op.execute(f"DROP TABLE IF EXISTS {SCHEMA}.{table}")
