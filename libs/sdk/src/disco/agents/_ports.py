"""What the agent layers need from the memory and registry services.

The typed service clients (:class:`disco.clients.MemoryClient`,
:class:`disco.clients.RegistryClient`) satisfy these; so do the in-memory
stand-ins of :mod:`disco.testing`, which is how a handler is unit-tested
without any service. A write with ``expected_version`` raises
:class:`disco.clients.ServiceConflictError` when the stored version differs
(``0``: only if absent).
"""

from __future__ import annotations

from typing import Any, Protocol

from disco_common.memory import PlanContextRecord, TaskContextRecord
from disco_common.plans import PlanContextData
from disco_common.registry import AgentRegistration
from disco_common.tasks import TaskContextData

__all__ = ["ContextMemory", "Registrar", "RequestValidator"]


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

    async def delete_task_context(self, task_id: str) -> Any: ...

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


class Registrar(Protocol):
    """Keeps an agent registered while it runs (:class:`disco.registry.AgentRegistrar`)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


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
