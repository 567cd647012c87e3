"""SQL of the ingest: the timeline (and deduplication), the read-model upserts, the feed.

Each statement takes a batch at once as one JSON array (``jsonb_to_recordset``):
a round trip per table per batch, not per envelope. The ``ON CONFLICT`` clauses
merge a batch's patch into the stored row with the rules of
:mod:`disco_tracker.ingest.patches` (the SET expressions all read the old row).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pydantic_core
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_tracker.ingest.patches import PlanPatch, TaskPatch

__all__ = ["FEED_CHANNEL", "IngestRepository"]

FEED_CHANNEL = "disco_tracker_feed"
"""The LISTEN/NOTIFY channel woken when feed rows are committed (payload: the tenant)."""

_INSERT_EVENTS = text(
    """
    INSERT INTO tracker.events (
        tenant_id, event_id, topic, event_type, source, agent_name, at, plan_id, task_id,
        correlation_id, causation_id, summary, data)
    SELECT :tenant, r.event_id, r.topic, r.event_type, r.source, r.agent_name, r.at, r.plan_id,
           r.task_id, r.correlation_id, r.causation_id, r.summary, r.data
      FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
           event_id text, topic text, event_type text, source text, agent_name text,
           at timestamptz, plan_id text, task_id text, correlation_id text, causation_id text,
           summary text, data jsonb)
    ON CONFLICT (tenant_id, event_id) DO NOTHING
    RETURNING event_id
    """
)

# A live status replaces the stored one when stated later (ties: the greater name);
# a final one when reached earlier (ties: the greater name, i.e. 'failed').
_LATER_LIVE = (
    "(EXCLUDED.live_at IS NOT NULL AND (t.live_at IS NULL "
    "OR (EXCLUDED.live_at, EXCLUDED.live_status) > (t.live_at, t.live_status)))"
)
_EARLIER_FINAL = (
    "(EXCLUDED.final_at IS NOT NULL AND (t.final_at IS NULL OR EXCLUDED.final_at < t.final_at "
    "OR (EXCLUDED.final_at = t.final_at AND EXCLUDED.final_status > t.final_status)))"
)
_LATER_STATE = (
    "(EXCLUDED.state IS NOT NULL AND EXCLUDED.state_at IS NOT NULL AND (t.state IS NULL "
    "OR (EXCLUDED.state_step, EXCLUDED.state_at, EXCLUDED.state) "
    "> (t.state_step, t.state_at, t.state)))"
)


def _set_once(*columns: str) -> str:
    return ", ".join(f"{c} = COALESCE(t.{c}, EXCLUDED.{c})" for c in columns)


def _when(condition: str, *columns: str) -> str:
    return ", ".join(
        f"{c} = CASE WHEN {condition} THEN EXCLUDED.{c} ELSE t.{c} END" for c in columns
    )


_PLANS_INSERT = """
    INSERT INTO tracker.plans AS t (
        tenant_id, plan_id, plan_type, plan_type_version, goal_event, goal_task_id, session_id,
        parent_plan_id, agent_name, agent_id, initial_state, live_status, live_at, pause_reason,
        final_status, final_at, final_state, error, state, state_step, state_at, started_at,
        updated_at)
    SELECT :tenant, r.plan_id, r.plan_type, r.plan_type_version, r.goal_event, r.goal_task_id,
           r.session_id, r.parent_plan_id, r.agent_name, r.agent_id, r.initial_state,
           r.live_status, r.live_at, r.pause_reason, r.final_status, r.final_at, r.final_state,
           r.error, r.state, r.state_step, r.state_at, r.started_at, r.at
      FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
           plan_id text, plan_type text, plan_type_version text, goal_event text,
           goal_task_id text, session_id text, parent_plan_id text, agent_name text,
           agent_id text, initial_state text, live_status text, live_at timestamptz,
           pause_reason text, final_status text, final_at timestamptz, final_state text,
           error jsonb, state text, state_step integer, state_at timestamptz,
           started_at timestamptz, at timestamptz)
    ON CONFLICT (tenant_id, plan_id) DO UPDATE SET
"""
_PLANS_MERGE = ",\n".join(
    [
        _set_once(*PlanPatch.SET_ONCE),
        _when(_LATER_LIVE, "live_status", "live_at", *PlanPatch.WITH_LIVE),
        _when(_EARLIER_FINAL, "final_status", "final_at", *PlanPatch.WITH_FINAL),
        _when(_LATER_STATE, "state", "state_step", "state_at"),
        "started_at = LEAST(t.started_at, EXCLUDED.started_at)",
        "updated_at = GREATEST(t.updated_at, EXCLUDED.updated_at)",
    ]
)
_UPSERT_PLANS = text(_PLANS_INSERT + _PLANS_MERGE)

_TASKS_INSERT = """
    INSERT INTO tracker.tasks AS t (
        tenant_id, task_id, plan_id, parent_task_id, parallel_group_id, event_type,
        response_event, correlation_id, agent_name, agent_id, requested_by, live_status,
        live_at, progress, message, progress_at, final_status, final_at, error,
        reported_duration_ms, starts, requested_at, started_at, first_seen_at, updated_at)
    SELECT :tenant, r.task_id, r.plan_id, r.parent_task_id, r.parallel_group_id, r.event_type,
           r.response_event, r.correlation_id, r.agent_name, r.agent_id, r.requested_by,
           r.live_status, r.live_at, r.progress, r.message, r.progress_at, r.final_status,
           r.final_at, r.error, r.reported_duration_ms, r.starts, r.requested_at, r.started_at,
           r.first_seen_at, r.at
      FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
           task_id text, plan_id text, parent_task_id text, parallel_group_id text,
           event_type text, response_event text, correlation_id text, agent_name text,
           agent_id text, requested_by text, live_status text, live_at timestamptz,
           progress double precision, message text, progress_at timestamptz,
           final_status text, final_at timestamptz, error jsonb,
           reported_duration_ms double precision, starts integer, requested_at timestamptz,
           started_at timestamptz, first_seen_at timestamptz, at timestamptz)
    ON CONFLICT (tenant_id, task_id) DO UPDATE SET
"""
_TASKS_MERGE = ",\n".join(
    [
        _set_once(*TaskPatch.SET_ONCE),
        _when(_LATER_LIVE, "live_status", "live_at", *TaskPatch.WITH_LIVE),
        _when(
            "(EXCLUDED.progress_at IS NOT NULL AND (t.progress_at IS NULL "
            "OR EXCLUDED.progress_at > t.progress_at))",
            "progress",
            "message",
            "progress_at",
        ),
        _when(_EARLIER_FINAL, "final_status", "final_at", *TaskPatch.WITH_FINAL),
        "starts = t.starts + EXCLUDED.starts",
        "requested_at = LEAST(t.requested_at, EXCLUDED.requested_at)",
        "started_at = LEAST(t.started_at, EXCLUDED.started_at)",
        "first_seen_at = LEAST(t.first_seen_at, EXCLUDED.first_seen_at)",
        "updated_at = GREATEST(t.updated_at, EXCLUDED.updated_at)",
    ]
)
_UPSERT_TASKS = text(_TASKS_INSERT + _TASKS_MERGE)

_UPSERT_GROUPS = text(
    """
    INSERT INTO tracker.delegation_groups AS t (
        tenant_id, group_id, task_id, plan_id, agent_name, expected, created_at)
    SELECT :tenant, r.group_id, r.task_id, r.plan_id, r.agent_name, r.expected, r.created_at
      FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
           group_id text, task_id text, plan_id text, agent_name text, expected integer,
           created_at timestamptz)
    ON CONFLICT (tenant_id, group_id) DO UPDATE SET
        plan_id = COALESCE(t.plan_id, EXCLUDED.plan_id),
        agent_name = COALESCE(t.agent_name, EXCLUDED.agent_name),
        expected = GREATEST(t.expected, EXCLUDED.expected),
        created_at = LEAST(t.created_at, EXCLUDED.created_at)
    """
)

_ADD_COUNTS = text(
    """
    INSERT INTO tracker.event_counts AS t (tenant_id, minute, topic, event_type, count, errors)
    SELECT :tenant, r.minute, r.topic, r.event_type, r.count, r.errors
      FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
           minute timestamptz, topic text, event_type text, count bigint, errors bigint)
    ON CONFLICT (tenant_id, minute, topic, event_type) DO UPDATE SET
        count = t.count + EXCLUDED.count, errors = t.errors + EXCLUDED.errors
    """
)

_TASKS_BY_CORRELATION = text(
    """
    SELECT DISTINCT ON (correlation_id) correlation_id, task_id
      FROM tracker.tasks
     WHERE tenant_id = :tenant AND correlation_id = ANY(CAST(:ids AS text[]))
     ORDER BY correlation_id, requested_at DESC NULLS LAST, task_id
    """
)

_KEEP_PENDING = text(
    """
    INSERT INTO tracker.pending_answers (
        tenant_id, correlation_id, event_id, at, success, error, agent_name)
    SELECT :tenant, r.correlation_id, r.event_id, r.at, r.success, r.error, r.agent_name
      FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
           correlation_id text, event_id text, at timestamptz, success boolean, error jsonb,
           agent_name text)
    ON CONFLICT DO NOTHING
    """
)

_CLAIM_PENDING = text(
    """
    DELETE FROM tracker.pending_answers
     WHERE tenant_id = :tenant AND correlation_id = ANY(CAST(:ids AS text[]))
    RETURNING correlation_id, event_id, at, success, error, agent_name
    """
)

# Feed ids must commit in the order they are drawn, or a reader that saw id N
# could miss a smaller id committed after it: writers take this lock right
# before they append (held until their commit, which follows at once).
_LOCK_FEED = text(
    f"SELECT pg_advisory_xact_lock(hashtext('disco.tracker.feed')), "
    f"pg_notify('{FEED_CHANNEL}', :tenant)"
)

_APPEND_FEED = text(
    """
    INSERT INTO tracker.feed (
        tenant_id, kind, plan_id, task_id, status, current_state, event_type, agent_name, cause)
    SELECT :tenant, 'plan', p.plan_id, NULL, p.status, COALESCE(p.final_state, p.state),
           p.goal_event, p.agent_name, r.cause
      FROM jsonb_to_recordset(CAST(:plans AS jsonb)) AS r(id text, cause text)
      JOIN tracker.plans p ON p.tenant_id = :tenant AND p.plan_id = r.id
    UNION ALL
    SELECT :tenant, 'task', t.plan_id, t.task_id, t.status, NULL, t.event_type, t.agent_name,
           r.cause
      FROM jsonb_to_recordset(CAST(:tasks AS jsonb)) AS r(id text, cause text)
      JOIN tracker.tasks t ON t.tenant_id = :tenant AND t.task_id = r.id
    """
)


def _json(rows: Sequence[Any]) -> str:
    # Unset fields left out: jsonb_to_recordset reads a missing key as NULL, and most of a
    # patch's fields are unset (less to write here, less to parse there).
    return pydantic_core.to_json(rows, exclude_none=True).decode()


class IngestRepository:
    """The ingest's writes, in one tenant-scoped transaction.

    Rows are the ingest's dataclasses (timeline rows, patches, counts): their
    fields are the columns, sent as one JSON array per statement.
    """

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self.session = session
        self.tenant_id = tenant_id

    async def insert_events(self, rows: Sequence[Any]) -> set[str]:
        """Append timeline rows; the ids of those not seen before (the rest are duplicates)."""
        if not rows:
            return set()
        result = await self.session.execute(
            _INSERT_EVENTS, {"tenant": self.tenant_id, "rows": _json(rows)}
        )
        return {row[0] for row in result}

    async def upsert_plans(self, rows: Sequence[Any]) -> None:
        """Merge plan patches into their rows."""
        if rows:
            await self.session.execute(
                _UPSERT_PLANS, {"tenant": self.tenant_id, "rows": _json(rows)}
            )

    async def upsert_tasks(self, rows: Sequence[Any]) -> None:
        """Merge task patches into their rows."""
        if rows:
            await self.session.execute(
                _UPSERT_TASKS, {"tenant": self.tenant_id, "rows": _json(rows)}
            )

    async def upsert_groups(self, rows: Sequence[Any]) -> None:
        """Merge fan-out groups into their rows."""
        if rows:
            await self.session.execute(
                _UPSERT_GROUPS, {"tenant": self.tenant_id, "rows": _json(rows)}
            )

    async def add_counts(self, rows: Sequence[Any]) -> None:
        """Add per-minute envelope counts."""
        if rows:
            await self.session.execute(_ADD_COUNTS, {"tenant": self.tenant_id, "rows": _json(rows)})

    async def tasks_by_correlation(self, correlation_ids: Iterable[str]) -> dict[str, str]:
        """The task of each correlation id (the latest request's when several), where known."""
        ids = sorted(set(correlation_ids))
        if not ids:
            return {}
        result = await self.session.execute(
            _TASKS_BY_CORRELATION, {"tenant": self.tenant_id, "ids": ids}
        )
        return {row[0]: row[1] for row in result}

    async def keep_pending(self, rows: Sequence[Any]) -> None:
        """Keep answers whose request has not been seen yet."""
        if rows:
            await self.session.execute(
                _KEEP_PENDING, {"tenant": self.tenant_id, "rows": _json(rows)}
            )

    async def claim_pending(self, correlation_ids: Iterable[str]) -> list[dict[str, Any]]:
        """Take the kept answers to requests with these correlation ids."""
        ids = sorted(set(correlation_ids))
        if not ids:
            return []
        result = await self.session.execute(_CLAIM_PENDING, {"tenant": self.tenant_id, "ids": ids})
        return [dict(row) for row in result.mappings()]

    async def append_feed(
        self, plans: Sequence[tuple[str, str | None]], tasks: Sequence[tuple[str, str | None]]
    ) -> None:
        """Record the changed plans and tasks in the feed (ids in commit order) and wake readers.

        Call it last in the transaction: the feed lock is held until the commit.
        """
        if not plans and not tasks:
            return
        await self.session.execute(_LOCK_FEED, {"tenant": self.tenant_id})
        await self.session.execute(
            _APPEND_FEED,
            {
                "tenant": self.tenant_id,
                "plans": _json([{"id": i, "cause": c} for i, c in plans]),
                "tasks": _json([{"id": i, "cause": c} for i, c in tasks]),
            },
        )
