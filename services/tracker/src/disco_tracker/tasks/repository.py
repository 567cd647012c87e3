"""SQL reading tasks and fan-out groups (``tracker.tasks``, ``tracker.delegation_groups``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_service import Keyset

__all__ = ["TASK_COLUMNS", "TASK_STATUS", "TaskRepository"]

# A task that is not over and has an open question to a human is awaiting input.
_OPEN_WAIT = (
    "SELECT min(w.deadline) FROM tracker.hitl_waits w WHERE w.tenant_id = t.tenant_id "
    "AND w.task_id = t.task_id AND w.status = 'waiting'"
)
TASK_STATUS = (
    "CASE WHEN t.final_status IS NULL AND EXISTS (SELECT 1 FROM tracker.hitl_waits w "
    "WHERE w.tenant_id = t.tenant_id AND w.task_id = t.task_id AND w.status = 'waiting') "
    "THEN 'awaiting_input' ELSE t.status END"
)
"""A task's status as shown (``t`` is the tasks row)."""

TASK_COLUMNS = (
    "t.task_id, t.plan_id, t.parent_task_id, t.parallel_group_id, t.event_type, "
    "t.response_event, t.agent_name, t.agent_id, t.requested_by, "
    f"{TASK_STATUS} AS status, t.starts AS attempt, t.progress, t.message, t.correlation_id, "
    f"t.error, CASE WHEN t.final_status IS NULL THEN ({_OPEN_WAIT}) END AS hitl_deadline, "
    "t.requested_at, t.started_at, t.updated_at, t.final_at AS completed_at, t.duration_ms, "
    "t.first_seen_at"
)
"""The columns of a :class:`~disco_common.tracker.TaskProgress` (``t`` is the tasks row)."""

_PLAN_TASKS_ORDER = Keyset("t.first_seen_at", "t.task_id")

_GET = text(
    f"SELECT {TASK_COLUMNS} FROM tracker.tasks t "  # noqa: S608 - fixed fragments
    "WHERE t.tenant_id = :tenant AND t.task_id = :task_id"
)
_CHILDREN = text(
    f"SELECT {TASK_COLUMNS} FROM tracker.tasks t "  # noqa: S608 - fixed fragments
    "WHERE t.tenant_id = :tenant AND t.parent_task_id = :task_id "
    "ORDER BY t.first_seen_at, t.task_id LIMIT :limit"
)
_GROUP_IDS = text(
    "SELECT group_id FROM tracker.delegation_groups "
    "WHERE tenant_id = :tenant AND task_id = :task_id ORDER BY created_at, group_id"
)
_GROUP = text(
    "SELECT group_id, task_id, plan_id, agent_name, expected, created_at "
    "FROM tracker.delegation_groups WHERE tenant_id = :tenant AND group_id = :group_id"
)
_MEMBERS = text(
    f"SELECT {TASK_COLUMNS} FROM tracker.tasks t "  # noqa: S608 - fixed fragments
    "WHERE t.tenant_id = :tenant AND t.parent_task_id = :task_id "
    "AND t.parallel_group_id = :group_id ORDER BY t.first_seen_at, t.task_id"
)


class TaskRepository:
    """Reads tasks and fan-out groups of one tenant."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self.session = session
        self.tenant_id = tenant_id

    async def get(self, task_id: str) -> RowMapping | None:
        """One task, or None."""
        result = await self.session.execute(_GET, {"tenant": self.tenant_id, "task_id": task_id})
        return result.mappings().first()

    async def children(self, task_id: str, limit: int) -> Sequence[RowMapping]:
        """What ``task_id`` delegated, in the order it was delegated."""
        result = await self.session.execute(
            _CHILDREN, {"tenant": self.tenant_id, "task_id": task_id, "limit": limit}
        )
        return result.mappings().all()

    async def group_ids(self, task_id: str) -> list[str]:
        """The fan-out groups of ``task_id``."""
        result = await self.session.execute(
            _GROUP_IDS, {"tenant": self.tenant_id, "task_id": task_id}
        )
        return [row[0] for row in result]

    async def group(self, group_id: str) -> RowMapping | None:
        """One fan-out group, or None."""
        result = await self.session.execute(
            _GROUP, {"tenant": self.tenant_id, "group_id": group_id}
        )
        return result.mappings().first()

    async def members(self, task_id: str, group_id: str) -> Sequence[RowMapping]:
        """The sub-tasks of a fan-out group."""
        result = await self.session.execute(
            _MEMBERS, {"tenant": self.tenant_id, "task_id": task_id, "group_id": group_id}
        )
        return result.mappings().all()

    async def of_plan(
        self,
        plan_id: str,
        *,
        status: str | None,
        agent_name: str | None,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> Sequence[RowMapping]:
        """A plan's tasks in the order they were first seen, after the cursor position."""
        seek, params = _PLAN_TASKS_ORDER.after(after)
        clauses = ["t.tenant_id = :tenant", "t.plan_id = :plan_id", seek]
        params.update(tenant=self.tenant_id, plan_id=plan_id, limit=limit)
        if status is not None:
            clauses.append(f"{TASK_STATUS} = :status")
            params["status"] = status
        if agent_name is not None:
            clauses.append("t.agent_name = :agent_name")
            params["agent_name"] = agent_name
        statement = text(
            f"SELECT {TASK_COLUMNS} FROM tracker.tasks t "  # noqa: S608 - fixed fragments
            f"WHERE {' AND '.join(clauses)} {_PLAN_TASKS_ORDER.order_by} LIMIT :limit"
        )
        result = await self.session.execute(statement, params)
        return result.mappings().all()

    @staticmethod
    def key(row: RowMapping) -> tuple[datetime, str]:
        """The sort key of a task row in a plan's list."""
        return (row["first_seen_at"], row["task_id"])
