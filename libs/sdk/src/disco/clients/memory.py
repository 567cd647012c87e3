"""``MemoryClient``: the typed client of the memory service (``/v1/memory/...``).

The tenant and user always come from the token (and, inside a bus handler,
from the envelope being handled, through the on-behalf-of headers): no method
takes them.

Reads of a single record return ``None`` when there is none; deletes return
whether something was deleted. A write with ``expected_version`` that finds
another version raises :class:`~disco.clients.ServiceConflictError` (code
``version_conflict``, ``details`` has ``current_version``); ``0`` means
"only if absent".
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

from pydantic import JsonValue

from disco.clients._base import acting_for
from disco.clients._memory_calls import BASE as _BASE
from disco.clients._memory_calls import MemoryCalls
from disco.clients._memory_calls import segment as _seg
from disco_common.dedup import (
    DedupCheck,
    DedupChecked,
    DedupMark,
    DedupMarkPut,
    DedupMarksMade,
    DedupMarksPut,
)
from disco_common.memory import (
    AgentStateSnapshot,
    AgentStateSnapshotPut,
    AgentStateSnapshotSummary,
    DeleteResult,
    ErasureResult,
    PlanContextRecord,
    PlanContextStore,
    PlanCreate,
    PlanRecord,
    PlanStatusUpdate,
    SessionCreate,
    SessionRecord,
    TaskContextRecord,
    TaskContextStore,
    WorkingMemoryEntry,
    WorkingMemoryPut,
)
from disco_common.pagination import Page
from disco_common.plans import PlanContextData, PlanStatus
from disco_common.steps import StepJournal, StepRecord, StepRecordPut
from disco_common.tasks import TaskContextData

__all__ = ["DedupAnswer", "MemoryClient"]


class DedupAnswer(list[str]):
    """The envelope ids a consumer group handled (a list, in the order asked), with
    :attr:`stepped`: the ids asked about that have step records."""

    stepped: frozenset[str]

    def __init__(self, handled: Sequence[str], stepped: Sequence[str] = ()) -> None:
        super().__init__(handled)
        self.stepped = frozenset(stepped)


class MemoryClient(MemoryCalls):
    """Client of the memory service.

    Use as ``async with MemoryClient.from_settings() as memory: ...`` or
    ``start()``/``stop()``. Every method raises a
    :class:`~disco.clients.ServiceError` subclass when the service answers
    with an error (validation 4xx, conflicts, unavailability).
    """

    service_name = "memory"

    # -- working memory -----------------------------------------------------------

    async def put_working(
        self,
        plan_id: str,
        key: str,
        value: JsonValue,
        *,
        ttl_seconds: int | None = None,
        expected_version: int | None = None,
    ) -> WorkingMemoryEntry:
        """Write one key of a plan's working memory.

        Raises:
            ServiceConflictError: ``expected_version`` is not the stored version.
            ServiceValidationError: the value is over 1 MiB, or the key is malformed.
        """
        body = WorkingMemoryPut(
            value=value, ttl_seconds=ttl_seconds, expected_version=expected_version
        )
        return await self.call(
            "PUT",
            f"{_BASE}/working/{_seg(plan_id)}/{_seg(key)}",
            WorkingMemoryEntry,
            json=body,
        )

    async def get_working(self, plan_id: str, key: str) -> WorkingMemoryEntry | None:
        """One key of a plan's working memory, or None (absent or expired)."""
        return await self.call_or_none(
            "GET", f"{_BASE}/working/{_seg(plan_id)}/{_seg(key)}", WorkingMemoryEntry
        )

    async def delete_working(self, plan_id: str, key: str) -> bool:
        """Forget one key; whether it was there."""
        return await self._delete(f"{_BASE}/working/{_seg(plan_id)}/{_seg(key)}")

    async def clear_working(self, plan_id: str) -> int:
        """Forget every key of a plan; how many there were."""
        result = await self.call("DELETE", f"{_BASE}/working/{_seg(plan_id)}", DeleteResult)
        return result.deleted

    async def list_working(
        self, plan_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[WorkingMemoryEntry]:
        """One page of a plan's keys, in key order."""
        return await self.call(
            "GET",
            f"{_BASE}/working/{_seg(plan_id)}",
            Page[WorkingMemoryEntry],
            params={"limit": limit, "cursor": cursor},
        )

    async def store(self, key: str, value: JsonValue, plan_id: str) -> bool:
        """Store ``value`` under ``key`` in the plan's working memory (last write wins)."""
        await self.put_working(plan_id, key, value)
        return True

    async def retrieve(self, key: str, plan_id: str) -> JsonValue | None:
        """The value under ``key`` in the plan's working memory, or None."""
        entry = await self.get_working(plan_id, key)
        return entry.value if entry is not None else None

    # -- task context ---------------------------------------------------------------

    async def get_dedup_mark(self, group: str, event_id: str) -> DedupMark | None:
        """Whether consumer group ``group`` handled the envelope ``event_id``: its mark,
        or None (never, or the mark expired)."""
        return await self.call_or_none(
            "GET", f"{_BASE}/dedup/{_seg(group)}/{_seg(event_id)}", DedupMark
        )

    async def put_dedup_mark(
        self, group: str, event_id: str, *, ttl_seconds: int | None = None
    ) -> DedupMark:
        """Remember that ``group`` handled ``event_id`` (a live mark is kept as it is)."""
        return await self.call(
            "PUT",
            f"{_BASE}/dedup/{_seg(group)}/{_seg(event_id)}",
            DedupMark,
            json=DedupMarkPut(ttl_seconds=ttl_seconds),
        )

    async def check_dedup_marks(
        self,
        group: str,
        event_ids: Sequence[str],
        *,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> DedupAnswer:
        """Which of ``event_ids`` (at most 500) consumer group ``group`` handled, in one call
        (and, as :attr:`DedupAnswer.stepped`, which of them it has step records of).

        ``tenant_id`` (and ``user_id``): whom the call acts for (the handler context's
        envelope, or this client's identity, when None).
        """
        with _acting(tenant_id, user_id):
            answer = await self.call(
                "POST",
                f"{_BASE}/dedup/{_seg(group)}/check",
                DedupChecked,
                json=DedupCheck(event_ids=list(event_ids)),
            )
        return DedupAnswer(answer.handled, answer.stepped)

    async def put_dedup_marks(
        self,
        group: str,
        event_ids: Sequence[str],
        *,
        ttl_seconds: int | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> int:
        """Remember that ``group`` handled ``event_ids`` (at most 500), in one call; how many
        marks are new (live ones are kept as they are)."""
        with _acting(tenant_id, user_id):
            made = await self.call(
                "POST",
                f"{_BASE}/dedup/{_seg(group)}/marks",
                DedupMarksMade,
                json=DedupMarksPut(event_ids=list(event_ids), ttl_seconds=ttl_seconds),
            )
        return made.created

    # -- step records -------------------------------------------------------------------

    async def step_journal(
        self,
        group: str,
        envelope_id: str,
        *,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, JsonValue]:
        """The results of the steps consumer group ``group`` recorded while handling
        ``envelope_id`` (live records only), by step name.

        ``tenant_id`` (and ``user_id``): whom the call acts for (the handler context's
        envelope, or this client's identity, when None).
        """
        with _acting(tenant_id, user_id):
            journal = await self.call(
                "GET", f"{_BASE}/steps/{_seg(group)}/{_seg(envelope_id)}", StepJournal
            )
        return {record.name: record.result for record in journal.steps}

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
        """Record the result of step ``name`` of ``group``'s handling of ``envelope_id``;
        the result stored (the first one recorded, when the step was recorded already).

        Raises:
            ServiceValidationError: the name is malformed, or the result is over 1 MiB or
                holds a NUL character.
        """
        with _acting(tenant_id, user_id):
            record = await self.call(
                "POST",
                f"{_BASE}/steps/{_seg(group)}/{_seg(envelope_id)}",
                StepRecord,
                json=StepRecordPut(name=name, result=result, ttl_seconds=ttl_seconds),
            )
        return record.result

    async def store_task_context(
        self,
        task_id: str,
        context: TaskContextData,
        *,
        plan_id: str | None = None,
        ttl_seconds: int | None = None,
        expected_version: int | None = None,
    ) -> TaskContextRecord:
        """Save a Worker's task context; each of its sub-task ids finds it once this returns.

        Args:
            task_id: the task (must equal ``context.task_id``).
            context: the task context.
            plan_id: the plan, when ``context.plan_id`` is not set.
            ttl_seconds: forget the context this long after the save.
            expected_version: save only over this version (0: only if absent).

        Raises:
            ValueError: ``plan_id`` contradicts ``context.plan_id``.
            ServiceConflictError: a stale ``expected_version``, or a sub-task id that
                already belongs to another task (code ``sub_task_claimed``).
        """
        if plan_id is not None and context.plan_id != plan_id:
            if context.plan_id is not None:
                raise ValueError(
                    f"plan_id {plan_id!r} contradicts context.plan_id {context.plan_id!r}"
                )
            context = context.model_copy(update={"plan_id": plan_id})
        body = TaskContextStore(
            context=context, ttl_seconds=ttl_seconds, expected_version=expected_version
        )
        return await self.call(
            "PUT", f"{_BASE}/task-context/{_seg(task_id)}", TaskContextRecord, json=body
        )

    async def get_task_context(self, task_id: str) -> TaskContextRecord | None:
        """A task's saved context, or None."""
        return await self.call_or_none(
            "GET", f"{_BASE}/task-context/{_seg(task_id)}", TaskContextRecord
        )

    async def delete_task_context(self, task_id: str) -> bool:
        """Forget a task's context; whether it was there."""
        return await self._delete(f"{_BASE}/task-context/{_seg(task_id)}")

    async def get_task_by_subtask(self, sub_task_id: str) -> TaskContextRecord | None:
        """The context of the task that delegated ``sub_task_id`` (or asked the human
        question with that correlation id), or None."""
        return await self.call_or_none(
            "GET", f"{_BASE}/task-context/by-subtask/{_seg(sub_task_id)}", TaskContextRecord
        )

    async def list_task_contexts(
        self, plan_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[TaskContextRecord]:
        """One page of a plan's task contexts, oldest first."""
        return await self.call(
            "GET",
            f"{_BASE}/task-context",
            Page[TaskContextRecord],
            params={"plan_id": plan_id, "limit": limit, "cursor": cursor},
        )

    # -- plan context ---------------------------------------------------------------

    async def store_plan_context(
        self,
        plan_id: str,
        context: PlanContextData,
        *,
        session_id: str | None = None,
        expected_version: int | None = None,
    ) -> PlanContextRecord:
        """Save a Planner's plan context; each of its ``correlation_ids`` finds it.

        Raises:
            ValueError: ``session_id`` contradicts ``context.session_id``.
            ServiceConflictError: a stale ``expected_version``, or a correlation id
                that already belongs to another plan (code ``correlation_claimed``).
        """
        if session_id is not None and context.session_id != session_id:
            if context.session_id is not None:
                raise ValueError(
                    f"session_id {session_id!r} contradicts context.session_id "
                    f"{context.session_id!r}"
                )
            context = context.model_copy(update={"session_id": session_id})
        body = PlanContextStore(context=context, expected_version=expected_version)
        return await self.call(
            "PUT", f"{_BASE}/plan-context/{_seg(plan_id)}", PlanContextRecord, json=body
        )

    async def get_plan_context(self, plan_id: str) -> PlanContextRecord | None:
        """A plan's saved context, or None."""
        return await self.call_or_none(
            "GET", f"{_BASE}/plan-context/{_seg(plan_id)}", PlanContextRecord
        )

    async def delete_plan_context(self, plan_id: str) -> bool:
        """Forget a plan's context; whether it was there."""
        return await self._delete(f"{_BASE}/plan-context/{_seg(plan_id)}")

    async def get_plan_by_correlation(self, correlation_id: str) -> PlanContextRecord | None:
        """The context of the plan waiting for an answer with ``correlation_id``, or None."""
        return await self.call_or_none(
            "GET", f"{_BASE}/plan-context/by-correlation/{_seg(correlation_id)}", PlanContextRecord
        )

    # -- plans ------------------------------------------------------------------------

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
        """Create a plan record (its session is created or touched too).

        Raises:
            ServiceConflictError: ``plan_id`` exists already.
            ServiceValidationError: ``parent_plan_id`` names no plan.
        """
        body = PlanCreate(
            plan_id=plan_id,
            goal_event=goal_event,
            goal_data=dict(goal_data or {}),
            response_event=response_event,
            plan_type=plan_type,
            session_id=session_id,
            parent_plan_id=parent_plan_id,
            status=status,
        )
        return await self.call("POST", f"{_BASE}/plans", PlanRecord, json=body)

    async def get_plan(self, plan_id: str) -> PlanRecord | None:
        """A plan record, or None."""
        return await self.call_or_none("GET", f"{_BASE}/plans/{_seg(plan_id)}", PlanRecord)

    async def update_plan_status(
        self,
        plan_id: str,
        status: PlanStatus,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> PlanRecord:
        """Move a plan to ``status`` (a finished plan cannot move: 409)."""
        body = PlanStatusUpdate(status=status, reason=reason, expected_version=expected_version)
        return await self.call("PATCH", f"{_BASE}/plans/{_seg(plan_id)}", PlanRecord, json=body)

    async def list_plans(
        self,
        *,
        status: PlanStatus | None = None,
        session_id: str | None = None,
        parent_plan_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[PlanRecord]:
        """One page of the caller's plans, newest first, filtered."""
        return await self.call(
            "GET",
            f"{_BASE}/plans",
            Page[PlanRecord],
            params={
                "status": status.value if status is not None else None,
                "session_id": session_id,
                "parent_plan_id": parent_plan_id,
                "limit": limit,
                "cursor": cursor,
            },
        )

    # -- sessions ---------------------------------------------------------------------

    async def create_session(
        self,
        *,
        session_id: str | None = None,
        name: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> SessionRecord:
        """Create a session (a conversation grouping plans); 409 if ``session_id`` exists."""
        body = SessionCreate(session_id=session_id, name=name, metadata=dict(metadata or {}))
        return await self.call("POST", f"{_BASE}/sessions", SessionRecord, json=body)

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """One of the caller's sessions, or None."""
        return await self.call_or_none("GET", f"{_BASE}/sessions/{_seg(session_id)}", SessionRecord)

    async def list_sessions(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[SessionRecord]:
        """One page of the caller's sessions, most recently active first."""
        return await self.call(
            "GET",
            f"{_BASE}/sessions",
            Page[SessionRecord],
            params={"limit": limit, "cursor": cursor},
        )

    # -- agent-state snapshots ------------------------------------------------------------

    async def put_snapshot(
        self,
        session_id: str,
        agent_id: str,
        *,
        full: Mapping[str, JsonValue],
        slim: Mapping[str, JsonValue],
        execution_id: str | None = None,
        status: str | None = None,
        format_version: int = 1,
        expected_version: int | None = None,
    ) -> AgentStateSnapshotSummary:
        """Replace the latest snapshot of an agent in a session (full and slim state)."""
        body = AgentStateSnapshotPut(
            full=dict(full),
            slim=dict(slim),
            execution_id=execution_id,
            status=status,
            format_version=format_version,
            expected_version=expected_version,
        )
        return await self.call(
            "PUT",
            f"{_BASE}/snapshots/{_seg(session_id)}/{_seg(agent_id)}",
            AgentStateSnapshotSummary,
            json=body,
        )

    async def get_snapshot(self, session_id: str, agent_id: str) -> AgentStateSnapshot | None:
        """The latest snapshot of an agent in a session (with its full state), or None."""
        return await self.call_or_none(
            "GET", f"{_BASE}/snapshots/{_seg(session_id)}/{_seg(agent_id)}", AgentStateSnapshot
        )

    async def list_snapshots(self, session_id: str) -> list[AgentStateSnapshotSummary]:
        """The latest snapshot of each agent in a session (slim state only)."""
        return await self.call(
            "GET", f"{_BASE}/snapshots/{_seg(session_id)}", list[AgentStateSnapshotSummary]
        )

    async def delete_snapshot(self, session_id: str, agent_id: str) -> bool:
        """Delete an agent's snapshot in a session; whether it was there."""
        return await self._delete(f"{_BASE}/snapshots/{_seg(session_id)}/{_seg(agent_id)}")

    # -- erasure ----------------------------------------------------------------------------

    async def erase_user(self, user_id: str) -> ErasureResult:
        """Delete everything of ``user_id`` in the caller's tenant, in one transaction.

        A user may erase themselves; erasing someone else needs the ``admin`` role.
        """
        return await self.call("DELETE", f"{_BASE}/erasure/users/{_seg(user_id)}", ErasureResult)

    async def erase_tenant(self) -> ErasureResult:
        """Delete everything of the caller's tenant, in one transaction (``admin`` only)."""
        return await self.call("DELETE", f"{_BASE}/erasure/tenant", ErasureResult)


@contextlib.contextmanager
def _acting(tenant_id: str | None, user_id: str | None) -> Iterator[None]:
    if tenant_id is None:
        yield
        return
    with acting_for(tenant_id, user_id):
        yield
