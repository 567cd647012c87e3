"""The memory service's agent-facing calls, in dicts: what :class:`AgentTestKit` runs on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from pydantic import BaseModel, JsonValue

from disco._context import maybe_current_context
from disco.clients import ServiceConflictError, ServiceNotFoundError, ServiceValidationError
from disco_common.ids import new_id
from disco_common.memory import (
    PlanContextRecord,
    PlanRecord,
    TaskContextRecord,
    WorkingMemoryEntry,
)
from disco_common.plans import PlanContextData, PlanStatus
from disco_common.steps import STEP_RESULT_MAX_BYTES
from disco_common.tasks import TaskContextData

__all__ = ["InMemoryMemory"]

ModelT = TypeVar("ModelT", bound=BaseModel)

_TEST = "test"


def _now() -> datetime:
    return datetime.now(UTC)


def _over_the_wire(model: ModelT) -> ModelT:
    # What the service stores is what the client sends: the JSON dump, read
    # back from JSONB, which does not keep key order. Doing the same here keeps
    # the kit honest.
    dumped = json.dumps(model.model_dump(mode="json"), sort_keys=True)
    return type(model).model_validate_json(dumped)


def _filled(context: ModelT, name: str, value: str | None) -> ModelT:
    """``context`` with field ``name`` set to ``value`` (an argument of the save), as the
    client does; ``ValueError`` when the context says otherwise already."""
    current = getattr(context, name)
    if value is None or current == value:
        return context
    if current is not None:
        raise ValueError(f"{name} {value!r} contradicts context.{name} {current!r}")
    return context.model_copy(update={name: value})


class InMemoryMemory:
    """Task and plan contexts, working memory and plan records in dicts, with the
    memory service's rules (the suite runs the same scenarios against this and the
    service, so the two cannot drift).

    - Versions start at 1 and grow by one per write; ``expected_version`` (0: only
      if absent) raises :class:`~disco.clients.ServiceConflictError` (code
      ``version_conflict``, ``details`` naming both versions) as the service
      answers 409.
    - A sub-task id, or the correlation id of a task's question to a human, belongs
      to one live task (409 ``sub_task_claimed``); a correlation id to one plan
      (409 ``correlation_claimed``). A save replaces the ids a context is found by.
    - A context saved under another id than its own is refused
      (:class:`~disco.clients.ServiceValidationError`, 422), and a ``plan_id`` or
      ``session_id`` argument contradicting the context raises ``ValueError``, as
      the client does.
    - ``ttl_seconds`` sets ``expires_at``; once it passes, the entry is absent.
    - A plan id is created once (409 ``plan_exists``); a plan moves between statuses
      until it completes or fails (409 ``plan_finished``); an unknown plan is a
      :class:`~disco.clients.ServiceNotFoundError`.
    - A step (``disco.step``) is recorded once per tenant, group, envelope and name:
      recording it again answers the first result; a result over 1 MiB encoded is
      refused (413 ``payload_too_large``).

    Values are copied in and out.

    Args:
        user_id: whose plan records these are (the service takes it from the caller's token).
    """

    def __init__(self, *, user_id: str = _TEST) -> None:
        self.user_id = user_id
        self.tasks: dict[str, TaskContextRecord] = {}
        self.plans: dict[str, PlanContextRecord] = {}
        self.plan_records: dict[str, PlanRecord] = {}
        self.working: dict[tuple[str, str], WorkingMemoryEntry] = {}
        self.steps: dict[tuple[str, str, str, str], tuple[str, datetime | None]] = {}
        """Recorded steps: (tenant, group, envelope id, name) -> (result as JSON, expiry)."""
        self._by_subtask: dict[str, str] = {}
        self._by_correlation: dict[str, str] = {}
        self.writes = 0

    def _caller(self) -> str:
        # The service takes the user from the token (or the envelope being handled).
        context = maybe_current_context()
        user_id = context.envelope.user_id if context is not None else None
        return user_id or self.user_id

    @staticmethod
    def _check_version(kind: str, key: str, current: int | None, expected: int | None) -> None:
        if expected is None or (current or 0) == expected:
            return
        if current is None:
            message = f"{kind} {key!r} does not exist, so it cannot be at version {expected}"
        else:
            message = f"{kind} {key!r} is at version {current}, not {expected}"
        raise ServiceConflictError(
            409,
            "version_conflict",
            message,
            {"expected_version": expected, "current_version": current},
        )

    @staticmethod
    def _expires_at(ttl_seconds: int | None) -> datetime | None:
        return _now() + timedelta(seconds=ttl_seconds) if ttl_seconds is not None else None

    @staticmethod
    def _expired(expires_at: datetime | None) -> bool:
        return expires_at is not None and expires_at <= _now()

    def _live_task(self, task_id: str) -> TaskContextRecord | None:
        record = self.tasks.get(task_id)
        if record is not None and self._expired(record.expires_at):
            self._forget_task(task_id)
            return None
        return record

    def _forget_task(self, task_id: str) -> TaskContextRecord | None:
        record = self.tasks.pop(task_id, None)
        for ref, owner in list(self._by_subtask.items()):
            if owner == task_id:
                del self._by_subtask[ref]
        return record

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
        context = _filled(context, "plan_id", plan_id)
        if context.task_id != task_id:
            raise ServiceValidationError(
                422,
                "validation_failed",
                f"context.task_id is {context.task_id!r} but the task is {task_id!r}",
            )
        refs = list(context.sub_task_ids)
        if context.human_input is not None and context.human_input.correlation_id not in refs:
            refs.append(context.human_input.correlation_id)
        claimed = {
            ref: owner
            for ref in refs
            if (owner := self._by_subtask.get(ref)) is not None
            and owner != task_id
            and self._live_task(owner) is not None
        }
        if claimed:
            raise ServiceConflictError(
                409,
                "sub_task_claimed",
                f"these sub-task ids already belong to other tasks: {claimed}",
                {"claimed": dict(claimed)},
            )
        existing = self._live_task(task_id)
        self._check_version(
            "task context", task_id, existing.version if existing else None, expected_version
        )
        now = _now()
        record = TaskContextRecord(
            version=(existing.version if existing else 0) + 1,
            task_id=task_id,
            plan_id=context.plan_id,
            sub_task_ids=list(context.sub_task_ids),
            context=_over_the_wire(context),
            expires_at=self._expires_at(ttl_seconds),
            created_at=existing.created_at if existing else now,
            updated_at=now,
        )
        self._forget_task(task_id)
        self.tasks[task_id] = record
        for ref in refs:
            self._by_subtask[ref] = task_id
        self.writes += 1
        return record.model_copy(deep=True)

    async def get_task_context(self, task_id: str) -> TaskContextRecord | None:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        record = self._live_task(task_id)
        return record.model_copy(deep=True) if record else None

    async def delete_task_context(self, task_id: str) -> bool:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        if self._live_task(task_id) is None:
            return False
        self._forget_task(task_id)
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
        context = _filled(context, "session_id", session_id)
        if context.plan_id != plan_id:
            raise ServiceValidationError(
                422,
                "validation_failed",
                f"context.plan_id is {context.plan_id!r} but the plan is {plan_id!r}",
            )
        ids = list(dict.fromkeys(context.correlation_ids))
        claimed = {
            cid: owner
            for cid in ids
            if (owner := self._by_correlation.get(cid)) is not None and owner != plan_id
        }
        if claimed:
            raise ServiceConflictError(
                409,
                "correlation_claimed",
                f"these correlation ids already belong to other plans: {claimed}",
                {"claimed": dict(claimed)},
            )
        existing = self.plans.get(plan_id)
        self._check_version(
            "plan context", plan_id, existing.version if existing else None, expected_version
        )
        now = _now()
        record = PlanContextRecord(
            version=(existing.version if existing else 0) + 1,
            plan_id=plan_id,
            session_id=context.session_id,
            correlation_ids=ids,
            context=_over_the_wire(context),
            created_at=existing.created_at if existing else now,
            updated_at=now,
        )
        if existing is not None:
            for correlation_id in existing.correlation_ids:
                self._by_correlation.pop(correlation_id, None)
        self.plans[plan_id] = record
        for correlation_id in ids:
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

    def _live_entry(self, plan_id: str, key: str) -> WorkingMemoryEntry | None:
        entry = self.working.get((plan_id, key))
        if entry is not None and self._expired(entry.expires_at):
            del self.working[(plan_id, key)]
            return None
        return entry

    async def put_working(
        self,
        plan_id: str,
        key: str,
        value: JsonValue,
        *,
        ttl_seconds: int | None = None,
        expected_version: int | None = None,
    ) -> WorkingMemoryEntry:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        existing = self._live_entry(plan_id, key)
        self._check_version(
            "key", f"{plan_id}/{key}", existing.version if existing else None, expected_version
        )
        now = _now()
        entry = WorkingMemoryEntry(
            version=(existing.version if existing else 0) + 1,
            plan_id=plan_id,
            key=key,
            value=json.loads(json.dumps(value)),
            expires_at=self._expires_at(ttl_seconds),
            created_at=existing.created_at if existing else now,
            updated_at=now,
        )
        self.working[(plan_id, key)] = entry
        return entry.model_copy(deep=True)

    async def get_working(self, plan_id: str, key: str) -> WorkingMemoryEntry | None:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        entry = self._live_entry(plan_id, key)
        return entry.model_copy(deep=True) if entry else None

    async def delete_working(self, plan_id: str, key: str) -> bool:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        return self._live_entry(plan_id, key) is not None and bool(
            self.working.pop((plan_id, key), None)
        )

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
        if parent_plan_id is not None and parent_plan_id not in self.plan_records:
            raise ServiceValidationError(
                422, "unknown_parent_plan", f"parent_plan_id {parent_plan_id!r} names no plan"
            )
        key = plan_id or new_id()
        if key in self.plan_records:
            raise ServiceConflictError(409, "plan_exists", f"plan {key!r} exists already")
        now = _now()
        record = PlanRecord(
            version=1,
            plan_id=key,
            goal_event=goal_event,
            goal_data=json.loads(json.dumps(dict(goal_data or {}))),
            response_event=response_event,
            plan_type=plan_type,
            status=status,
            session_id=session_id,
            parent_plan_id=parent_plan_id,
            user_id=self._caller(),
            created_at=now,
            updated_at=now,
            completed_at=now if status.is_final else None,
        )
        self.plan_records[key] = record
        return record.model_copy(deep=True)

    async def get_plan(self, plan_id: str) -> PlanRecord | None:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        record = self.plan_records.get(plan_id)
        return record.model_copy(deep=True) if record else None

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
        if expected_version is not None:
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

    # -- step records ---------------------------------------------------------------------

    @staticmethod
    def _tenant(tenant_id: str | None) -> str:
        if tenant_id is not None:
            return tenant_id
        context = maybe_current_context()
        return (context.envelope.tenant_id if context is not None else None) or _TEST

    async def step_journal(
        self,
        group: str,
        envelope_id: str,
        *,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, JsonValue]:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        tenant = self._tenant(tenant_id)
        return {
            name: json.loads(result)
            for (t, g, e, name), (result, expires_at) in self.steps.items()
            if (t, g, e) == (tenant, group, envelope_id) and not self._expired(expires_at)
        }

    async def record_step(
        self,
        group: str,
        envelope_id: str,
        name: str,
        result: JsonValue,
        *,
        ttl_seconds: int | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> JsonValue:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        encoded = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
        if len(encoded.encode()) > STEP_RESULT_MAX_BYTES:
            raise ServiceValidationError(
                413,
                "payload_too_large",
                f"the step's result is {len(encoded.encode())} bytes encoded; the limit is "
                f"{STEP_RESULT_MAX_BYTES} bytes",
            )
        key = (self._tenant(tenant_id), group, envelope_id, name)
        stored = self.steps.get(key)
        if stored is None or self._expired(stored[1]):
            stored = self.steps[key] = (encoded, self._expires_at(ttl_seconds))
            self.writes += 1
        value: JsonValue = json.loads(stored[0])
        return value
