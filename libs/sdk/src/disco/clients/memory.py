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

from collections.abc import Mapping, Sequence
from urllib.parse import quote

from pydantic import JsonValue

from disco.clients._base import ServiceClient, ServiceNotFoundError
from disco.clients._settings import ServiceClientSettings
from disco_common.memory import (
    AgentStateSnapshot,
    AgentStateSnapshotPut,
    AgentStateSnapshotSummary,
    DedupMark,
    DedupMarkPut,
    DeleteResult,
    EmbeddingModelInfo,
    EpisodicHit,
    EpisodicRole,
    EpisodicSearchMode,
    EpisodicSearchQuery,
    EpisodicTurn,
    EpisodicTurnCreate,
    EpisodicTurnUpdate,
    ErasureResult,
    MemoryVisibility,
    PlanContextRecord,
    PlanContextStore,
    PlanCreate,
    PlanRecord,
    PlanStatusUpdate,
    Procedure,
    ProcedureCreate,
    ProcedureHit,
    ProcedureSearchQuery,
    ProcedureUpdate,
    SemanticHit,
    SemanticMemoryRecord,
    SemanticMemoryUpsert,
    SemanticQuery,
    SessionCreate,
    SessionRecord,
    TaskContextRecord,
    TaskContextStore,
    WorkingMemoryEntry,
    WorkingMemoryPut,
)
from disco_common.pagination import Page
from disco_common.plans import PlanContextData, PlanStatus
from disco_common.tasks import TaskContextData

__all__ = ["MemoryClient"]

_BASE = "/v1/memory"


def _seg(value: str) -> str:
    # Ids are already restricted to URL-safe characters; quoting keeps a bad one
    # from changing the path (it becomes a 404/422 instead).
    return quote(value, safe="")


class MemoryClient(ServiceClient):
    """Client of the memory service.

    Use as ``async with MemoryClient.from_settings() as memory: ...`` or
    ``start()``/``stop()``. Every method raises a
    :class:`~disco.clients.ServiceError` subclass when the service answers
    with an error (validation 4xx, conflicts, unavailability).
    """

    service_name = "memory"

    @classmethod
    def _url(cls, settings: ServiceClientSettings) -> str:
        return settings.memory_url  # DISCO_MEMORY_URL

    async def _delete(self, path: str) -> bool:
        try:
            await self.request("DELETE", path)
        except ServiceNotFoundError:
            return False
        return True

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

    # -- semantic memory ----------------------------------------------------------------

    async def upsert_semantic(
        self,
        content: str,
        *,
        external_id: str | None = None,
        visibility: MemoryVisibility = MemoryVisibility.PRIVATE,
        metadata: Mapping[str, JsonValue] | None = None,
        embedding: Sequence[float] | None = None,
    ) -> SemanticMemoryRecord:
        """Store a fact for similarity search; same ``external_id`` (or, without one,
        same content) updates the existing memory."""
        body = SemanticMemoryUpsert(
            content=content,
            external_id=external_id,
            visibility=visibility,
            metadata=dict(metadata or {}),
            embedding=list(embedding) if embedding is not None else None,
        )
        return await self.call("PUT", f"{_BASE}/semantic", SemanticMemoryRecord, json=body)

    async def query_semantic(
        self,
        text: str | None = None,
        *,
        embedding: Sequence[float] | None = None,
        limit: int = 10,
        threshold: float | None = None,
        filter: Mapping[str, str | int | float | bool | None] | None = None,
        include_public: bool = True,
    ) -> list[SemanticHit]:
        """The memories most similar to ``text`` (or ``embedding``), best first, with scores."""
        body = SemanticQuery(
            text=text,
            embedding=list(embedding) if embedding is not None else None,
            limit=limit,
            threshold=threshold,
            filter=dict(filter or {}),
            include_public=include_public,
        )
        return await self.call("POST", f"{_BASE}/semantic/query", list[SemanticHit], json=body)

    async def get_semantic(self, memory_id: str) -> SemanticMemoryRecord | None:
        """One memory the caller can read, or None."""
        return await self.call_or_none(
            "GET", f"{_BASE}/semantic/{_seg(memory_id)}", SemanticMemoryRecord
        )

    async def delete_semantic(self, memory_id: str) -> bool:
        """Delete one of the caller's memories; whether it was there."""
        return await self._delete(f"{_BASE}/semantic/{_seg(memory_id)}")

    async def embedding_model(self) -> EmbeddingModelInfo:
        """The model (and dimension) the deployment embeds with."""
        return await self.call("GET", f"{_BASE}/semantic/model", EmbeddingModelInfo)

    # -- episodic memory ----------------------------------------------------------------

    async def append_turn(
        self,
        session_id: str,
        agent_id: str,
        role: EpisodicRole,
        content: str,
        *,
        plan_id: str | None = None,
        task_id: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> EpisodicTurn:
        """Append a conversation turn (it touches the session's last activity)."""
        body = EpisodicTurnCreate(
            session_id=session_id,
            agent_id=agent_id,
            role=role,
            content=content,
            plan_id=plan_id,
            task_id=task_id,
            metadata=dict(metadata or {}),
        )
        return await self.call("POST", f"{_BASE}/episodic", EpisodicTurn, json=body)

    async def recent_turns(
        self,
        session_id: str,
        *,
        agent_id: str | None = None,
        limit: int = 20,
        before_sequence: int | None = None,
    ) -> list[EpisodicTurn]:
        """The last ``limit`` turns of a session, oldest first."""
        return await self.call(
            "GET",
            f"{_BASE}/episodic/recent",
            list[EpisodicTurn],
            params={
                "session_id": session_id,
                "agent_id": agent_id,
                "limit": limit,
                "before_sequence": before_sequence,
            },
        )

    async def search_turns(
        self,
        text: str,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        role: EpisodicRole | None = None,
        limit: int = 10,
        threshold: float | None = None,
        mode: EpisodicSearchMode = EpisodicSearchMode.HYBRID,
    ) -> list[EpisodicHit]:
        """Turns matching ``text`` by meaning and words, best first."""
        body = EpisodicSearchQuery(
            text=text,
            session_id=session_id,
            agent_id=agent_id,
            role=role,
            limit=limit,
            threshold=threshold,
            mode=mode,
        )
        return await self.call("POST", f"{_BASE}/episodic/search", list[EpisodicHit], json=body)

    async def get_turn(self, turn_id: str) -> EpisodicTurn | None:
        """One of the caller's turns, or None."""
        return await self.call_or_none("GET", f"{_BASE}/episodic/{_seg(turn_id)}", EpisodicTurn)

    async def update_turn(
        self,
        turn_id: str,
        *,
        content: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> EpisodicTurn:
        """Correct one of the caller's turns: its content (embedded again) and/or metadata.

        Raises:
            ValueError: neither ``content`` nor ``metadata`` was given.
            ServiceNotFoundError: the caller has no such turn.
        """
        changes: dict[str, object] = {}
        if content is not None:
            changes["content"] = content
        if metadata is not None:
            changes["metadata"] = dict(metadata)
        body = EpisodicTurnUpdate.model_validate(changes)
        return await self.call(
            "PATCH",
            f"{_BASE}/episodic/{_seg(turn_id)}",
            EpisodicTurn,
            json=body.model_dump(mode="json", exclude_unset=True),
        )

    async def delete_turn(self, turn_id: str) -> bool:
        """Delete one of the caller's turns; whether it was there."""
        return await self._delete(f"{_BASE}/episodic/{_seg(turn_id)}")

    # -- procedural memory --------------------------------------------------------------

    async def create_procedure(self, procedure: ProcedureCreate) -> Procedure:
        """Store a procedure (what to do in a situation)."""
        return await self.call("POST", f"{_BASE}/procedural", Procedure, json=procedure)

    async def get_procedure(self, procedure_id: str) -> Procedure | None:
        """One procedure the caller can read, or None."""
        return await self.call_or_none("GET", f"{_BASE}/procedural/{_seg(procedure_id)}", Procedure)

    async def update_procedure(self, procedure_id: str, changes: ProcedureUpdate) -> Procedure:
        """Change some fields of one of the caller's procedures."""
        return await self.call(
            "PATCH",
            f"{_BASE}/procedural/{_seg(procedure_id)}",
            Procedure,
            # Only what the caller set: the service leaves the other fields as they are.
            json=changes.model_dump(mode="json", exclude_unset=True),
        )

    async def delete_procedure(self, procedure_id: str) -> bool:
        """Delete one of the caller's procedures; whether it was there."""
        return await self._delete(f"{_BASE}/procedural/{_seg(procedure_id)}")

    async def list_procedures(
        self, *, agent_id: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> Page[Procedure]:
        """One page of the procedures the caller can read, newest first."""
        return await self.call(
            "GET",
            f"{_BASE}/procedural",
            Page[Procedure],
            params={"agent_id": agent_id, "limit": limit, "cursor": cursor},
        )

    async def search_procedures(
        self,
        situation: str,
        *,
        agent_id: str | None = None,
        limit: int = 5,
        threshold: float | None = None,
    ) -> list[ProcedureHit]:
        """The procedures most relevant to ``situation``, best first."""
        body = ProcedureSearchQuery(
            situation=situation, agent_id=agent_id, limit=limit, threshold=threshold
        )
        return await self.call("POST", f"{_BASE}/procedural/search", list[ProcedureHit], json=body)

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
