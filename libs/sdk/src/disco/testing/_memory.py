"""The memory service's agent-facing calls, in dicts: what :class:`AgentTestKit` runs on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, JsonValue

from disco._context import maybe_current_context
from disco.clients import ServiceConflictError, ServiceNotFoundError
from disco_common.memory import (
    PlanContextRecord,
    PlanRecord,
    TaskContextRecord,
    WorkingMemoryEntry,
)
from disco_common.plans import PlanContextData, PlanStatus
from disco_common.tasks import TaskContextData

__all__ = ["InMemoryMemory"]

ModelT = TypeVar("ModelT", bound=BaseModel)


def _now() -> datetime:
    return datetime.now(UTC)


def _caller() -> str:
    # The service takes the user from the token (or the envelope being handled).
    context = maybe_current_context()
    user_id = context.envelope.user_id if context is not None else None
    return user_id or "test"


def _over_the_wire(model: ModelT) -> ModelT:
    # What the service stores is what the client sends: the JSON dump, read
    # back from JSONB, which does not keep key order. Doing the same here keeps
    # the kit honest.
    dumped = json.dumps(model.model_dump(mode="json"), sort_keys=True)
    return type(model).model_validate_json(dumped)


class InMemoryMemory:
    """Task and plan contexts and working memory in dicts, with the memory service's rules.

    Versions start at 1 and grow by one per write; ``expected_version`` (0:
    only if absent) raises :class:`~disco.clients.ServiceConflictError` on a
    mismatch, as the service answers 409. A sub-task id or correlation id
    belongs to one task or plan. Values are copied in and out.
    """

    def __init__(self) -> None:
        self.tasks: dict[str, TaskContextRecord] = {}
        self.plans: dict[str, PlanContextRecord] = {}
        self.plan_records: dict[str, PlanRecord] = {}
        """The plans listing (what ``create_plan``/``update_plan_status`` keep), by plan id."""
        self.working: dict[tuple[str, str], WorkingMemoryEntry] = {}
        self._by_subtask: dict[str, str] = {}
        self._by_correlation: dict[str, str] = {}
        self.writes = 0

    @staticmethod
    def _check_version(kind: str, key: str, current: int | None, expected: int | None) -> None:
        if expected is None:
            return
        if (current or 0) != expected:
            raise ServiceConflictError(
                409,
                "version_conflict",
                f"{kind} {key!r} is at version {current or 0}, not {expected}",
            )

    @staticmethod
    def _check_claims(
        index: dict[str, str], ids: Iterable[str], owner: str, *, code: str, what: str, of: str
    ) -> None:
        # An id (sub-task, correlation) finds one context: another may not take it.
        for claimed in ids:
            holder = index.get(claimed)
            if holder is not None and holder != owner:
                raise ServiceConflictError(
                    409, code, f"{what} {claimed!r} belongs to {of} {holder!r}"
                )

    @staticmethod
    def _stamps(
        existing: TaskContextRecord | PlanContextRecord | WorkingMemoryEntry | None,
    ) -> dict[str, Any]:
        now = _now()
        return {
            "version": (existing.version if existing else 0) + 1,
            "created_at": existing.created_at if existing else now,
            "updated_at": now,
        }

    async def store_task_context(
        self,
        task_id: str,
        context: TaskContextData,
        *,
        plan_id: str | None = None,
        ttl_seconds: int | None = None,
        expected_version: int | None = None,
    ) -> TaskContextRecord:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        existing = self.tasks.get(task_id)
        self._check_version(
            "task", task_id, existing.version if existing else None, expected_version
        )
        self._check_claims(
            self._by_subtask,
            context.sub_tasks,
            task_id,
            code="sub_task_claimed",
            what="sub-task",
            of="task",
        )
        record = TaskContextRecord(
            **self._stamps(existing),
            task_id=task_id,
            plan_id=plan_id or context.plan_id,
            sub_task_ids=list(context.sub_task_ids),
            context=_over_the_wire(context),
        )
        self.tasks[task_id] = record
        for sub_task_id in context.sub_tasks:
            self._by_subtask[sub_task_id] = task_id
        self.writes += 1
        return record.model_copy(deep=True)

    async def get_task_context(self, task_id: str) -> TaskContextRecord | None:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        record = self.tasks.get(task_id)
        return record.model_copy(deep=True) if record else None

    async def delete_task_context(self, task_id: str) -> bool:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        record = self.tasks.pop(task_id, None)
        if record is None:
            return False
        for sub_task_id in record.sub_task_ids:
            self._by_subtask.pop(sub_task_id, None)
        return True

    async def get_task_by_subtask(self, sub_task_id: str) -> TaskContextRecord | None:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        task_id = self._by_subtask.get(sub_task_id)
        return await self.get_task_context(task_id) if task_id else None

    async def store_plan_context(
        self,
        plan_id: str,
        context: PlanContextData,
        *,
        session_id: str | None = None,
        expected_version: int | None = None,
    ) -> PlanContextRecord:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        existing = self.plans.get(plan_id)
        self._check_version(
            "plan", plan_id, existing.version if existing else None, expected_version
        )
        self._check_claims(
            self._by_correlation,
            context.correlation_ids,
            plan_id,
            code="correlation_claimed",
            what="correlation id",
            of="plan",
        )
        record = PlanContextRecord(
            **self._stamps(existing),
            plan_id=plan_id,
            session_id=session_id or context.session_id,
            correlation_ids=list(context.correlation_ids),
            context=_over_the_wire(context),
        )
        if existing is not None:
            for correlation_id in existing.correlation_ids:
                self._by_correlation.pop(correlation_id, None)
        self.plans[plan_id] = record
        for correlation_id in context.correlation_ids:
            self._by_correlation[correlation_id] = plan_id
        self.writes += 1
        return record.model_copy(deep=True)

    async def get_plan_context(self, plan_id: str) -> PlanContextRecord | None:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        record = self.plans.get(plan_id)
        return record.model_copy(deep=True) if record else None

    async def get_plan_by_correlation(self, correlation_id: str) -> PlanContextRecord | None:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        plan_id = self._by_correlation.get(correlation_id)
        return await self.get_plan_context(plan_id) if plan_id else None

    async def put_working(
        self,
        plan_id: str,
        key: str,
        value: JsonValue,
        *,
        ttl_seconds: int | None = None,
        expected_version: int | None = None,
    ) -> WorkingMemoryEntry:
        existing = self.working.get((plan_id, key))
        self._check_version(
            "key", f"{plan_id}/{key}", existing.version if existing else None, expected_version
        )
        entry = WorkingMemoryEntry(
            **self._stamps(existing),
            plan_id=plan_id,
            key=key,
            value=json.loads(json.dumps(value)),
        )
        self.working[(plan_id, key)] = entry
        return entry.model_copy(deep=True)

    async def get_working(self, plan_id: str, key: str) -> WorkingMemoryEntry | None:
        entry = self.working.get((plan_id, key))
        return entry.model_copy(deep=True) if entry else None

    async def delete_working(self, plan_id: str, key: str) -> bool:
        return self.working.pop((plan_id, key), None) is not None

    async def store(self, key: str, value: JsonValue, plan_id: str) -> bool:
        await self.put_working(plan_id, key, value)
        return True

    async def retrieve(self, key: str, plan_id: str) -> JsonValue | None:
        entry = await self.get_working(plan_id, key)
        return entry.value if entry is not None else None

    async def create_plan(
        self,
        goal_event: str,
        response_event: str,
        *,
        goal_data: Mapping[str, JsonValue] | None = None,
        plan_id: str | None = None,
        plan_type: str | None = None,
        session_id: str | None = None,
        parent_plan_id: str | None = None,
        status: PlanStatus = PlanStatus.PENDING,
    ) -> PlanRecord:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        key = plan_id or f"plan-{len(self.plan_records) + 1}"
        if key in self.plan_records:
            raise ServiceConflictError(409, "plan_exists", f"plan {key!r} exists already")
        now = _now()
        record = PlanRecord(
            version=1,
            plan_id=key,
            goal_event=goal_event,
            goal_data=dict(goal_data or {}),
            response_event=response_event,
            plan_type=plan_type,
            status=status,
            session_id=session_id,
            parent_plan_id=parent_plan_id,
            user_id=_caller(),
            created_at=now,
            updated_at=now,
            completed_at=now if status.is_final else None,
        )
        self.plan_records[key] = record
        return record.model_copy(deep=True)

    async def update_plan_status(
        self,
        plan_id: str,
        status: PlanStatus,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> PlanRecord:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        current = self.plan_records.get(plan_id)
        if current is None:
            raise ServiceNotFoundError(404, "not_found", f"no plan {plan_id!r}")
        self._check_version("plan", plan_id, current.version, expected_version)
        if current.status == status and current.status_reason == reason:
            return current.model_copy(deep=True)
        if current.status.is_final and current.status != status:
            raise ServiceConflictError(
                409,
                "plan_finished",
                f"plan {plan_id!r} is {current.status.value}; a finished plan cannot become "
                f"{status.value}",
            )
        now = _now()
        record = current.model_copy(
            update={
                "version": current.version + 1,
                "status": status,
                "status_reason": reason,
                "updated_at": now,
                "completed_at": now if status.is_final else None,
            }
        )
        self.plan_records[plan_id] = record
        return record.model_copy(deep=True)
