"""The long-term memory calls of :class:`~disco.clients.MemoryClient`: semantic,
episodic and procedural memory (``/v1/memory/{semantic,episodic,procedural}``).

Kept apart from the per-plan and per-session families (``memory.py``) so that each
module stays one concept; :class:`MemoryClient` inherits these unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import quote

from pydantic import JsonValue

from disco.clients._base import ServiceClient, ServiceNotFoundError
from disco_common.memory import (
    EmbeddingModelInfo,
    EpisodicHit,
    EpisodicRole,
    EpisodicSearchMode,
    EpisodicSearchQuery,
    EpisodicTurn,
    EpisodicTurnCreate,
    EpisodicTurnUpdate,
    MemoryVisibility,
    Procedure,
    ProcedureCreate,
    ProcedureHit,
    ProcedureSearchQuery,
    ProcedureUpdate,
    SemanticHit,
    SemanticMemoryRecord,
    SemanticMemoryUpsert,
    SemanticQuery,
)
from disco_common.pagination import Page

__all__ = ["BASE", "MemoryCalls", "segment"]

BASE = "/v1/memory"


def segment(value: str) -> str:
    """``value`` as one path segment."""
    # Ids are already restricted to URL-safe characters; quoting keeps a bad one
    # from changing the path (it becomes a 404/422 instead).
    return quote(value, safe="")


class MemoryCalls(ServiceClient):
    """What every family of the memory client shares, and the long-term memory calls."""

    async def _delete(self, path: str) -> bool:
        try:
            await self.request("DELETE", path)
        except ServiceNotFoundError:
            return False
        return True

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
        return await self.call("PUT", f"{BASE}/semantic", SemanticMemoryRecord, json=body)

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
        return await self.call("POST", f"{BASE}/semantic/query", list[SemanticHit], json=body)

    async def get_semantic(self, memory_id: str) -> SemanticMemoryRecord | None:
        """One memory the caller can read, or None."""
        return await self.call_or_none(
            "GET", f"{BASE}/semantic/{segment(memory_id)}", SemanticMemoryRecord
        )

    async def delete_semantic(self, memory_id: str) -> bool:
        """Delete one of the caller's memories; whether it was there."""
        return await self._delete(f"{BASE}/semantic/{segment(memory_id)}")

    async def embedding_model(self) -> EmbeddingModelInfo:
        """The model (and dimension) the deployment embeds with."""
        return await self.call("GET", f"{BASE}/semantic/model", EmbeddingModelInfo)

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
        return await self.call("POST", f"{BASE}/episodic", EpisodicTurn, json=body)

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
            f"{BASE}/episodic/recent",
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
        return await self.call("POST", f"{BASE}/episodic/search", list[EpisodicHit], json=body)

    async def get_turn(self, turn_id: str) -> EpisodicTurn | None:
        """One of the caller's turns, or None."""
        return await self.call_or_none("GET", f"{BASE}/episodic/{segment(turn_id)}", EpisodicTurn)

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
            f"{BASE}/episodic/{segment(turn_id)}",
            EpisodicTurn,
            json=body.model_dump(mode="json", exclude_unset=True),
        )

    async def delete_turn(self, turn_id: str) -> bool:
        """Delete one of the caller's turns; whether it was there."""
        return await self._delete(f"{BASE}/episodic/{segment(turn_id)}")

    # -- procedural memory --------------------------------------------------------------

    async def create_procedure(self, procedure: ProcedureCreate) -> Procedure:
        """Store a procedure (what to do in a situation)."""
        return await self.call("POST", f"{BASE}/procedural", Procedure, json=procedure)

    async def get_procedure(self, procedure_id: str) -> Procedure | None:
        """One procedure the caller can read, or None."""
        return await self.call_or_none(
            "GET", f"{BASE}/procedural/{segment(procedure_id)}", Procedure
        )

    async def update_procedure(self, procedure_id: str, changes: ProcedureUpdate) -> Procedure:
        """Change some fields of one of the caller's procedures."""
        return await self.call(
            "PATCH",
            f"{BASE}/procedural/{segment(procedure_id)}",
            Procedure,
            # Only what the caller set: the service leaves the other fields as they are.
            json=changes.model_dump(mode="json", exclude_unset=True),
        )

    async def delete_procedure(self, procedure_id: str) -> bool:
        """Delete one of the caller's procedures; whether it was there."""
        return await self._delete(f"{BASE}/procedural/{segment(procedure_id)}")

    async def list_procedures(
        self, *, agent_id: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> Page[Procedure]:
        """One page of the procedures the caller can read, newest first."""
        return await self.call(
            "GET",
            f"{BASE}/procedural",
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
        return await self.call("POST", f"{BASE}/procedural/search", list[ProcedureHit], json=body)
