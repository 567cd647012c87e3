"""What the agent layers need from the memory and registry services.

The typed service clients (:class:`disco.clients.MemoryClient`,
:class:`disco.clients.RegistryClient`) satisfy these; so do the in-memory
stand-ins of :mod:`disco.testing`, which is how a handler is unit-tested
without any service. A write with ``expected_version`` raises
:class:`disco.clients.ServiceConflictError` when the stored version differs
(``0``: only if absent). The signatures are the memory client's: a stand-in
that drifts from it fails ``mypy``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import JsonValue

from disco_common.memory import (
    PlanContextRecord,
    PlanRecord,
    TaskContextRecord,
    WorkingMemoryEntry,
)
from disco_common.plans import PlanContextData, PlanStatus
from disco_common.registry import AgentRegistration
from disco_common.tasks import TaskContextData

__all__ = [
    "AgentMemory",
    "ContextMemory",
    "PlanRecords",
    "Registrar",
    "RequestValidator",
    "WorkingMemory",
]


class ContextMemory(Protocol):
    """Task and plan context persistence (the memory service's task/plan-context families)."""

    async def store_task_context(
        self,
        task_id: str,
        context: TaskContextData,
        *,
        plan_id: str | None = None,
        ttl_seconds: int | None = None,
        expected_version: int | None = None,
    ) -> TaskContextRecord: ...

    async def get_task_context(self, task_id: str) -> TaskContextRecord | None: ...

    async def delete_task_context(self, task_id: str) -> bool: ...

    async def get_task_by_subtask(self, sub_task_id: str) -> TaskContextRecord | None: ...

    async def store_plan_context(
        self,
        plan_id: str,
        context: PlanContextData,
        *,
        session_id: str | None = None,
        expected_version: int | None = None,
    ) -> PlanContextRecord: ...

    async def get_plan_context(self, plan_id: str) -> PlanContextRecord | None: ...

    async def get_plan_by_correlation(self, correlation_id: str) -> PlanContextRecord | None: ...


class PlanRecords(Protocol):
    """The plans listing (by session and status) a Planner keeps up to date."""

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
    ) -> PlanRecord: ...

    async def update_plan_status(
        self,
        plan_id: str,
        status: PlanStatus,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> PlanRecord: ...


class WorkingMemory(Protocol):
    """A plan's working memory (key/value), for handlers."""

    async def put_working(
        self,
        plan_id: str,
        key: str,
        value: JsonValue,
        *,
        ttl_seconds: int | None = None,
        expected_version: int | None = None,
    ) -> WorkingMemoryEntry: ...

    async def get_working(self, plan_id: str, key: str) -> WorkingMemoryEntry | None: ...

    async def delete_working(self, plan_id: str, key: str) -> bool: ...

    async def store(self, key: str, value: JsonValue, plan_id: str) -> bool: ...

    async def retrieve(self, key: str, plan_id: str) -> JsonValue | None: ...


class AgentMemory(ContextMemory, PlanRecords, WorkingMemory, Protocol):
    """The memory every agent runs with: :class:`disco.clients.MemoryClient` in production,
    :class:`disco.testing.InMemoryMemory` under :mod:`disco.testing`.

    Task and plan contexts (Workers, Planners), the plans listing and working
    memory. The rest of the memory service's API (semantic, episodic,
    procedural memory, sessions, snapshots) is on the client: narrow
    ``context.memory`` with ``isinstance(..., MemoryClient)`` to reach it.
    """


class Registrar(Protocol):
    """Keeps an agent registered while it runs (:class:`disco.registry.AgentRegistrar`)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def update_metadata(self, **changes: str | None) -> None:
        """Register again with ``changes`` in the registration's metadata (None: removed)."""
        ...


class RequestValidator(Protocol):
    """Checks an ``action-requests`` payload against its registered schema.

    :class:`disco.registry.PayloadValidator` is one: it raises
    ``PayloadValidationError`` (a ``ValueError``) listing every violation and
    passes when no schema is registered.
    """

    async def validate(self, event_type: str, data: Any) -> None: ...


def registration_summary(registration: AgentRegistration) -> str:
    """One line naming what an agent registers (for logs)."""
    consumed = [c.consumed_event.event_type for c in registration.capabilities]
    return f"{registration.name} ({registration.agent_id}): consumes {consumed}"
