"""memory: task contexts in one statement each (``memory.*task_context_as`` functions).

A Worker saves its task context when it delegates and restores it by sub-task
id for every result: as plan contexts (memory_0007), each call was a unit of
work (a save: BEGIN, the scope, releasing expired refs, the claim check, the
write, the refs twice, COMMIT). These functions set the tenant and user of
their own implicit transaction and do the call's statements; they are
``SECURITY INVOKER`` (row-level security applies as before). Only live contexts
count (an expired one reads as absent and its refs go to whoever claims them).

A context comes back as the JSON text of the API's record
(``TaskContextRecord``); a save answers ``stored`` with the record, ``claimed``
with the ids another live task holds (id -> task), or ``conflict`` with the
live version (null: none) when ``p_expected`` did not match (null: any
version; 0: only if absent or expired).

Revision ID: memory_0008
Revises: memory_0007
Create Date: 2026-11-28
"""

from collections.abc import Sequence

from disco_service.migration_helpers import create_tenant_call, drop_tenant_call

revision: str = "memory_0008"
down_revision: str | None = "memory_0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LIVE = "(t.expires_at IS NULL OR t.expires_at > now())"
_EXPIRED = "(t.expires_at IS NOT NULL AND t.expires_at <= now())"

_RECORD = """json_build_object(
        'task_id', t.task_id, 'plan_id', t.plan_id, 'sub_task_ids', to_jsonb(t.sub_task_ids),
        'context', t.context, 'version', t.version, 'expires_at', t.expires_at,
        'created_at', t.created_at, 'updated_at', t.updated_at)::text"""

# name -> (arguments after the tenant and user, returns, body, declare)
FUNCTIONS: dict[str, tuple[str, str, str, str]] = {
    # By task id, or (p_task_id null) the task waiting for p_ref_id.
    "task_context_as": (
        "p_task_id text, p_ref_id text",
        "text",
        f"""
    IF p_task_id IS NOT NULL THEN
        SELECT {_RECORD} INTO v_record FROM memory.task_contexts t
        WHERE t.tenant_id = p_tenant AND t.task_id = p_task_id AND {_LIVE};
    ELSE
        SELECT {_RECORD} INTO v_record FROM memory.task_context_refs r
        JOIN memory.task_contexts t ON t.tenant_id = r.tenant_id AND t.task_id = r.task_id
        WHERE r.tenant_id = p_tenant AND r.ref_id = p_ref_id AND {_LIVE};
    END IF;
    RETURN v_record;
""",  # noqa: S608
        "v_record text;",
    ),
    # p_ref_ids: what finds the task (its sub-task ids and its question's correlation id).
    "store_task_context_as": (
        "p_task_id text, p_plan_id text, p_sub_task_ids text[], "
        "p_ref_ids text[], p_context text, p_expires_at timestamptz, p_expected integer",
        "TABLE (o_outcome text, o_detail jsonb, o_record text)",
        f"""
    -- Refs of expired contexts no longer count: the new owner takes them over.
    DELETE FROM memory.task_context_refs r USING memory.task_contexts t
    WHERE t.tenant_id = r.tenant_id AND t.task_id = r.task_id
      AND r.tenant_id = p_tenant AND r.ref_id = ANY(p_ref_ids) AND r.task_id <> p_task_id
      AND {_EXPIRED};
    SELECT jsonb_object_agg(r.ref_id, r.task_id) INTO v_claimed
    FROM memory.task_context_refs r
    JOIN memory.task_contexts t ON t.tenant_id = r.tenant_id AND t.task_id = r.task_id
    WHERE r.tenant_id = p_tenant AND r.ref_id = ANY(p_ref_ids) AND r.task_id <> p_task_id
      AND {_LIVE};
    IF v_claimed IS NOT NULL THEN
        RETURN QUERY SELECT 'claimed'::text, v_claimed, NULL::text;
        RETURN;
    END IF;
    IF p_expected IS NOT NULL AND p_expected > 0 THEN
        UPDATE memory.task_contexts t SET
            plan_id = p_plan_id, user_id = p_user, sub_task_ids = p_sub_task_ids,
            context = p_context::jsonb, expires_at = p_expires_at,
            version = t.version + 1, updated_at = now()
        WHERE t.tenant_id = p_tenant AND t.task_id = p_task_id AND t.version = p_expected
          AND {_LIVE};
        v_found := FOUND;
    ELSE
        INSERT INTO memory.task_contexts AS t
            (tenant_id, task_id, plan_id, user_id, sub_task_ids, context, version, expires_at)
        VALUES (p_tenant, p_task_id, p_plan_id, p_user, p_sub_task_ids, p_context::jsonb, 1,
                p_expires_at)
        ON CONFLICT (tenant_id, task_id) DO UPDATE SET
            plan_id = EXCLUDED.plan_id, user_id = EXCLUDED.user_id,
            sub_task_ids = EXCLUDED.sub_task_ids, context = EXCLUDED.context,
            expires_at = EXCLUDED.expires_at,
            version = CASE WHEN {_EXPIRED} THEN 1 ELSE t.version + 1 END,
            created_at = CASE WHEN {_EXPIRED} THEN now() ELSE t.created_at END,
            updated_at = now()
        WHERE p_expected IS NULL OR {_EXPIRED};
        v_found := FOUND;
    END IF;
    IF NOT v_found THEN
        SELECT t.version INTO v_current FROM memory.task_contexts t
        WHERE t.tenant_id = p_tenant AND t.task_id = p_task_id AND {_LIVE};
        RETURN QUERY SELECT 'conflict'::text, jsonb_build_object('current_version', v_current),
            NULL::text;
        RETURN;
    END IF;
    DELETE FROM memory.task_context_refs r
    WHERE r.tenant_id = p_tenant AND r.task_id = p_task_id;
    INSERT INTO memory.task_context_refs (tenant_id, ref_id, task_id)
    SELECT p_tenant, e.ref_id, p_task_id FROM unnest(p_ref_ids) AS e(ref_id);
    RETURN QUERY SELECT 'stored'::text, NULL::jsonb, {_RECORD}
    FROM memory.task_contexts t WHERE t.tenant_id = p_tenant AND t.task_id = p_task_id;
""",  # noqa: S608
        "v_claimed jsonb; v_current integer; v_found boolean;",
    ),
    # Whether a live context was there (an expired one is deleted too).
    "delete_task_context_as": (
        "p_task_id text",
        "boolean",
        f"""
    DELETE FROM memory.task_contexts t WHERE t.tenant_id = p_tenant AND t.task_id = p_task_id
    RETURNING {_LIVE} INTO v_live;
    RETURN coalesce(v_live, false);
""",  # noqa: S608
        "v_live boolean;",
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
