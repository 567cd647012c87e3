"""SQL reading plans, their timelines and their sub-plan trees."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_service import Keyset
from disco_tracker.tasks.repository import TASK_STATUS

__all__ = ["TREE_MAX_NODES", "PlanRepository"]

TREE_MAX_NODES = 1000
"""The most plans a tree holds (deeper or wider hierarchies are cut)."""
_TREE_MAX_DEPTH = 50

# Counts of the plan's tasks by the status shown, and its sub-plans (``p`` is the plan).
_TASK_COUNTS = " ".join(
    [
        "(SELECT jsonb_object_agg(c.status, c.n) FROM (SELECT",
        TASK_STATUS,
        "AS status, count(*) AS n FROM tracker.tasks t",
        "WHERE t.tenant_id = p.tenant_id AND t.plan_id = p.plan_id GROUP BY 1) c)",
    ]
)
_PLAN_COLUMNS = ", ".join(
    [
        "p.plan_id, p.plan_type, p.plan_type_version, p.goal_event, p.goal_task_id, p.status",
        "COALESCE(p.final_state, p.state) AS current_state, p.pause_reason, p.error",
        "p.session_id, p.parent_plan_id, p.agent_name, p.agent_id, p.started_at, p.updated_at",
        "p.final_at AS completed_at",
        "CASE WHEN p.final_at IS NOT NULL THEN "
        "GREATEST(0, EXTRACT(EPOCH FROM p.final_at - p.started_at) * 1000) END AS duration_ms",
        _TASK_COUNTS + " AS task_counts",
        "(SELECT count(*) FROM tracker.plans s WHERE s.tenant_id = p.tenant_id "
        "AND s.parent_plan_id = p.plan_id) AS sub_plan_count",
    ]
)

_LIST_ORDER = Keyset("p.started_at", "p.plan_id", descending=True)
_TIMELINE_ORDER = Keyset("at", "seq")

_GET = text(
    f"SELECT {_PLAN_COLUMNS} FROM tracker.plans p "  # noqa: S608 - fixed fragments
    "WHERE p.tenant_id = :tenant AND p.plan_id = :plan_id"
)
_EXISTS = text("SELECT 1 FROM tracker.plans WHERE tenant_id = :tenant AND plan_id = :plan_id")
# A plan's view in one round trip: the plan, its moves (its plan.state_changed
# envelopes, in order) and its registered definition (the version it started
# with, else the latest).
_VIEW = text(
    " ".join(
        [
            f"SELECT {_PLAN_COLUMNS},",
            "(SELECT jsonb_agg(jsonb_build_object('at', e.at, 'data', e.data)",
            "ORDER BY e.at, e.seq) FROM tracker.events e WHERE e.tenant_id = p.tenant_id",
            "AND e.plan_id = p.plan_id AND e.event_type = 'plan.state_changed') AS moves,",
            "(SELECT to_jsonb(d) FROM (SELECT t.plan_type, t.version, t.definition,",
            "t.content_hash, t.created_at FROM tracker.plan_types t",
            "WHERE t.tenant_id = p.tenant_id AND t.plan_type = p.plan_type",
            "ORDER BY t.version IS NOT DISTINCT FROM p.plan_type_version DESC,",
            "t.sort_key DESC, t.version DESC LIMIT 1) d) AS definition",
            "FROM tracker.plans p WHERE p.tenant_id = :tenant AND p.plan_id = :plan_id",
        ]
    )
)
_TREE = text(
    """
    WITH RECURSIVE tree AS (
        SELECT plan_id, 0 AS depth FROM tracker.plans
         WHERE tenant_id = :tenant AND plan_id = :plan_id
        UNION ALL
        SELECT c.plan_id, tree.depth + 1 FROM tracker.plans c
          JOIN tree ON c.tenant_id = :tenant AND c.parent_plan_id = tree.plan_id
         WHERE tree.depth < :max_depth
    )
    SELECT p.plan_id, p.parent_plan_id, p.status, p.plan_type, p.goal_event,
           COALESCE(p.final_state, p.state) AS current_state, p.agent_name, p.started_at,
           p.final_at AS completed_at, tree.depth
      FROM tree JOIN tracker.plans p ON p.tenant_id = :tenant AND p.plan_id = tree.plan_id
     ORDER BY tree.depth, p.started_at, p.plan_id
     LIMIT :max_nodes
    """
)
_TIMELINE_COLUMNS = (
    "seq AS sequence, at, event_id, event_type, topic, source, agent_name, plan_id, task_id, "
    "correlation_id, causation_id, summary, data"
)


class PlanRepository:
    """Reads plans of one tenant."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self.session = session
        self.tenant_id = tenant_id

    async def get(self, plan_id: str) -> RowMapping | None:
        """One plan with its task counts, or None."""
        result = await self.session.execute(_GET, {"tenant": self.tenant_id, "plan_id": plan_id})
        return result.mappings().first()

    async def exists(self, plan_id: str) -> bool:
        """Whether the plan is known."""
        result = await self.session.execute(_EXISTS, {"tenant": self.tenant_id, "plan_id": plan_id})
        return result.first() is not None

    async def list(
        self,
        *,
        status: str | None = None,
        plan_type: str | None = None,
        session_id: str | None = None,
        parent_plan_id: str | None = None,
        root_only: bool = False,
        agent_name: str | None = None,
        started_after: datetime | None = None,
        started_before: datetime | None = None,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> Sequence[RowMapping]:
        """Plans newest first, after the cursor position, filtered."""
        seek, params = _LIST_ORDER.after(after)
        clauses = ["p.tenant_id = :tenant", seek]
        params.update(tenant=self.tenant_id, limit=limit)
        for column, value in (
            ("status", status),
            ("plan_type", plan_type),
            ("session_id", session_id),
            ("parent_plan_id", parent_plan_id),
        ):
            if value is not None:
                clauses.append(f"p.{column} = :{column}")
                params[column] = value
        if root_only:
            clauses.append("p.parent_plan_id IS NULL")
        if agent_name is not None:
            clauses.append(
                "(p.agent_name = :agent_name OR EXISTS (SELECT 1 FROM tracker.tasks t "
                "WHERE t.tenant_id = p.tenant_id AND t.agent_name = :agent_name "
                "AND t.plan_id = p.plan_id))"
            )
            params["agent_name"] = agent_name
        if started_after is not None:
            clauses.append("p.started_at >= :started_after")
            params["started_after"] = started_after
        if started_before is not None:
            clauses.append("p.started_at < :started_before")
            params["started_before"] = started_before
        statement = text(
            f"SELECT {_PLAN_COLUMNS} FROM tracker.plans p "  # noqa: S608 - fixed fragments
            f"WHERE {' AND '.join(clauses)} {_LIST_ORDER.order_by} LIMIT :limit"
        )
        result = await self.session.execute(statement, params)
        return result.mappings().all()

    async def view(self, plan_id: str) -> RowMapping | None:
        """One plan with its task counts, its moves (``moves``: ``[{at, data}]``) and its
        registered definition (``definition``), or None."""
        result = await self.session.execute(_VIEW, {"tenant": self.tenant_id, "plan_id": plan_id})
        return result.mappings().first()

    async def tree(self, plan_id: str) -> Sequence[RowMapping]:
        """The plan and its sub-plans, level by level (at most ``TREE_MAX_NODES``)."""
        result = await self.session.execute(
            _TREE,
            {
                "tenant": self.tenant_id,
                "plan_id": plan_id,
                "max_depth": _TREE_MAX_DEPTH,
                "max_nodes": TREE_MAX_NODES,
            },
        )
        return result.mappings().all()

    async def timeline(
        self, plan_id: str, *, after: tuple[datetime, int] | None, limit: int
    ) -> Sequence[RowMapping]:
        """The plan's envelopes in the order they happened, after the cursor position."""
        seek, params = _TIMELINE_ORDER.after(after)
        params.update(tenant=self.tenant_id, plan_id=plan_id, limit=limit)
        statement = text(
            f"SELECT {_TIMELINE_COLUMNS} FROM tracker.events "  # noqa: S608 - fixed fragments
            f"WHERE tenant_id = :tenant AND plan_id = :plan_id AND {seek} "
            f"{_TIMELINE_ORDER.order_by} LIMIT :limit"
        )
        result = await self.session.execute(statement, params)
        return result.mappings().all()
