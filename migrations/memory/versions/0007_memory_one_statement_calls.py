"""memory: plan contexts and dedup marks in one statement each (``memory.*_as`` functions).

Every step of a Planner reads its plan context, saves it, and (with durable
dedup, the default) asks which envelopes of a fetched batch its group handled
and marks those it handled. Each call was a unit of work: BEGIN, the tenant
scope, one to four statements, COMMIT; a plan context save was seven round trips
to PostgreSQL. On a loaded two-core box each round trip costs the service a
loopback write and a wake-up of the backend, so a plan step spent more on
them than on its work. These functions set the tenant and user of their own
implicit transaction (what the kit's unit of work sets from the caller's
verified token; the application role may set them in any transaction anyway)
and do the call's statements, so the service sends one statement and no
BEGIN/COMMIT (as ``memory.semantic_query_as`` of memory_0006 does for the
query by vector).

They are ``SECURITY INVOKER``: row-level security applies as to the
statements they replace. A plan context comes back as the JSON text of the
API's record (``PlanContextRecord``); a save answers what happened:
``stored`` with the record, ``claimed`` with the correlation ids another plan
holds (correlation id -> plan), or ``conflict`` with the stored version (null:
none) when ``p_expected`` did not match (null: any version; 0: only if absent).

Revision ID: memory_0007
Revises: memory_0006
Create Date: 2026-11-28
"""

from collections.abc import Sequence

from disco_service.migration_helpers import create_tenant_call, drop_tenant_call

revision: str = "memory_0007"
down_revision: str | None = "memory_0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_RECORD = """json_build_object(
        'plan_id', p.plan_id, 'session_id', p.session_id,
        'correlation_ids', to_jsonb(p.correlation_ids), 'context', p.context,
        'version', p.version, 'created_at', p.created_at, 'updated_at', p.updated_at)::text"""

_LIVE = "(m.expires_at IS NULL OR m.expires_at > now())"

# name -> (arguments after the tenant and user, returns, body, declare)
FUNCTIONS: dict[str, tuple[str, str, str, str]] = {
    "dedup_check_as": (
        "p_group text, p_ids text[]",
        "TABLE (o_event_id text)",
        f"""
    RETURN QUERY
    SELECT m.event_id FROM memory.dedup_marks m
    WHERE m.tenant_id = p_tenant AND m.consumer_group = p_group
      AND m.event_id = ANY(p_ids) AND {_LIVE};
""",  # noqa: S608
        "",
    ),
    # Rows in id order, so that two batches sharing ids cannot deadlock; an expired
    # mark is made again (created now), a live one is kept as it is.
    "dedup_mark_as": (
        "p_group text, p_ids text[], p_expires_at timestamptz",
        "TABLE (o_event_id text)",
        f"""
    RETURN QUERY
    INSERT INTO memory.dedup_marks AS m
        (tenant_id, consumer_group, event_id, user_id, expires_at)
    SELECT p_tenant, p_group, e.event_id, p_user, p_expires_at
    FROM unnest(p_ids) AS e(event_id)
    ORDER BY e.event_id
    ON CONFLICT (tenant_id, consumer_group, event_id) DO UPDATE SET
        user_id = EXCLUDED.user_id, expires_at = EXCLUDED.expires_at, created_at = now()
    WHERE NOT {_LIVE}
    RETURNING m.event_id;
""",  # noqa: S608
        "",
    ),
    # By plan id, or (p_plan_id null) the plan waiting for p_correlation_id.
    "plan_context_as": (
        "p_plan_id text, p_correlation_id text",
        "text",
        f"""
    IF p_plan_id IS NOT NULL THEN
        SELECT {_RECORD} INTO v_record FROM memory.plan_contexts p
        WHERE p.tenant_id = p_tenant AND p.plan_id = p_plan_id;
    ELSE
        SELECT {_RECORD} INTO v_record FROM memory.plan_context_refs r
        JOIN memory.plan_contexts p ON p.tenant_id = r.tenant_id AND p.plan_id = r.plan_id
        WHERE r.tenant_id = p_tenant AND r.correlation_id = p_correlation_id;
    END IF;
    RETURN v_record;
""",  # noqa: S608
        "v_record text;",
    ),
    "store_plan_context_as": (
        "p_plan_id text, p_session_id text, p_ids text[], p_context text, p_expected integer",
        "TABLE (o_outcome text, o_detail jsonb, o_record text)",
        f"""
    SELECT jsonb_object_agg(r.correlation_id, r.plan_id) INTO v_claimed
    FROM memory.plan_context_refs r
    WHERE r.tenant_id = p_tenant AND r.correlation_id = ANY(p_ids) AND r.plan_id <> p_plan_id;
    IF v_claimed IS NOT NULL THEN
        RETURN QUERY SELECT 'claimed'::text, v_claimed, NULL::text;
        RETURN;
    END IF;
    IF p_expected IS NOT NULL AND p_expected > 0 THEN
        UPDATE memory.plan_contexts p SET
            session_id = p_session_id, user_id = p_user, correlation_ids = p_ids,
            context = p_context::jsonb, version = p.version + 1, updated_at = now()
        WHERE p.tenant_id = p_tenant AND p.plan_id = p_plan_id AND p.version = p_expected;
        v_found := FOUND;
    ELSE
        INSERT INTO memory.plan_contexts AS p
            (tenant_id, plan_id, session_id, user_id, correlation_ids, context, version)
        VALUES (p_tenant, p_plan_id, p_session_id, p_user, p_ids, p_context::jsonb, 1)
        ON CONFLICT (tenant_id, plan_id) DO UPDATE SET
            session_id = EXCLUDED.session_id, user_id = EXCLUDED.user_id,
            correlation_ids = EXCLUDED.correlation_ids, context = EXCLUDED.context,
            version = p.version + 1, updated_at = now()
        WHERE p_expected IS NULL;
        v_found := FOUND;
    END IF;
    IF NOT v_found THEN
        SELECT p.version INTO v_current FROM memory.plan_contexts p
        WHERE p.tenant_id = p_tenant AND p.plan_id = p_plan_id;
        RETURN QUERY SELECT 'conflict'::text, jsonb_build_object('current_version', v_current),
            NULL::text;
        RETURN;
    END IF;
    DELETE FROM memory.plan_context_refs r
    WHERE r.tenant_id = p_tenant AND r.plan_id = p_plan_id;
    INSERT INTO memory.plan_context_refs (tenant_id, correlation_id, plan_id)
    SELECT p_tenant, e.correlation_id, p_plan_id FROM unnest(p_ids) AS e(correlation_id);
    RETURN QUERY SELECT 'stored'::text, NULL::jsonb, {_RECORD}
    FROM memory.plan_contexts p WHERE p.tenant_id = p_tenant AND p.plan_id = p_plan_id;
""",  # noqa: S608
        "v_claimed jsonb; v_current integer; v_found boolean;",
    ),
    "delete_plan_context_as": (
        "p_plan_id text",
        "boolean",
        """
    DELETE FROM memory.plan_contexts p WHERE p.tenant_id = p_tenant AND p.plan_id = p_plan_id;
    RETURN FOUND;
""",
        "",
    ),
}


def upgrade() -> None:
    for name, (arguments, returns, body, declare) in FUNCTIONS.items():
        create_tenant_call(
            "memory", name, arguments=arguments, returns=returns, body=body, declare=declare
        )


def downgrade() -> None:
    for name, (arguments, _, _, _) in FUNCTIONS.items():
        drop_tenant_call("memory", name, arguments=arguments)
