"""SQL of episodic turns (``memory.episodic_turns``), private to their user."""

from __future__ import annotations

from pgvector import Vector
from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["EpisodicRepository"]

_COLUMNS = (
    "e.turn_id, e.session_id, e.agent_id, e.role, e.content, e.plan_id, e.task_id, "
    "e.metadata, e.user_id, e.sequence, e.created_at"
)
_FILTERS = (
    "e.tenant_id = :tenant_id AND e.user_id = :user_id "
    "AND (CAST(:session_id AS text) IS NULL OR e.session_id = :session_id) "
    "AND (CAST(:agent_id AS text) IS NULL OR e.agent_id = :agent_id) "
    "AND (CAST(:role AS text) IS NULL OR e.role = :role)"
)

_APPEND = text(
    "INSERT INTO memory.episodic_turns AS e (turn_id, tenant_id, user_id, session_id, agent_id, "  # noqa: S608
    "role, content, plan_id, task_id, metadata, embedding, embedding_model) "
    "VALUES (:turn_id, :tenant_id, :user_id, :session_id, :agent_id, :role, :content, "
    ":plan_id, :task_id, CAST(CAST(:metadata AS text) AS jsonb), "
    f"CAST(:embedding AS vector), :model) RETURNING {_COLUMNS}"
)
_RECENT = text(
    f"SELECT {_COLUMNS} FROM memory.episodic_turns e WHERE {_FILTERS} "  # noqa: S608
    "AND (CAST(:before AS bigint) IS NULL OR e.sequence < :before) "
    "ORDER BY e.sequence DESC LIMIT :limit"
)
# Candidates come from both the nearest vectors and the best word matches; each
# candidate gets both scores, and the service combines them per search mode.
_SEARCH = text(
    f"""
    WITH q AS (
        SELECT CAST(:embedding AS vector) AS v,
               websearch_to_tsquery('simple', :text) AS tsq
    ),
    by_meaning AS MATERIALIZED (
        SELECT e.sequence FROM memory.episodic_turns e, q WHERE {_FILTERS}
        ORDER BY e.embedding <=> q.v LIMIT :meaning_candidates
    ),
    by_words AS MATERIALIZED (
        SELECT e.sequence FROM memory.episodic_turns e, q
        WHERE {_FILTERS} AND e.search_text @@ q.tsq
        ORDER BY ts_rank_cd(e.search_text, q.tsq) DESC LIMIT :word_candidates
    )
    SELECT {_COLUMNS},
           1 - (e.embedding <=> q.v) AS semantic,
           CASE WHEN e.search_text @@ q.tsq THEN ts_rank_cd(e.search_text, q.tsq) ELSE 0 END
               AS word_rank
    FROM memory.episodic_turns e
    JOIN (SELECT sequence FROM by_meaning UNION SELECT sequence FROM by_words) c
        USING (sequence), q
    WHERE e.tenant_id = :tenant_id AND e.user_id = :user_id
    """  # noqa: S608
)

_ONE = "e.tenant_id = :tenant_id AND e.user_id = :user_id AND e.turn_id = :turn_id"
_GET = text(f"SELECT {_COLUMNS} FROM memory.episodic_turns e WHERE {_ONE}")  # noqa: S608
# Only the columns given change (a NULL parameter keeps the stored value).
_UPDATE = text(
    "UPDATE memory.episodic_turns AS e SET "  # noqa: S608
    "content = COALESCE(CAST(:content AS text), e.content), "
    "embedding = COALESCE(CAST(:embedding AS vector), e.embedding), "
    "embedding_model = COALESCE(CAST(:model AS text), e.embedding_model), "
    "metadata = COALESCE(CAST(CAST(:metadata AS text) AS jsonb), e.metadata) "
    f"WHERE {_ONE} RETURNING {_COLUMNS}"
)
_DELETE = text(f"DELETE FROM memory.episodic_turns e WHERE {_ONE}")  # noqa: S608


class EpisodicRepository:
    """Reads and appends one user's conversation turns."""

    def __init__(self, session: AsyncSession, tenant_id: str, user_id: str) -> None:
        self._session = session
        self._scope = {"tenant_id": tenant_id, "user_id": user_id}

    @property
    def session(self) -> AsyncSession:
        """The session it runs in."""
        return self._session

    async def append(
        self,
        turn_id: str,
        *,
        session_id: str,
        agent_id: str,
        role: str,
        content: str,
        plan_id: str | None,
        task_id: str | None,
        metadata_json: str,
        embedding: Vector,
        model: str,
    ) -> RowMapping:
        """Append one turn."""
        result = await self._session.execute(
            _APPEND,
            {
                **self._scope,
                "turn_id": turn_id,
                "session_id": session_id,
                "agent_id": agent_id,
                "role": role,
                "content": content,
                "plan_id": plan_id,
                "task_id": task_id,
                "metadata": metadata_json,
                "embedding": embedding,
                "model": model,
            },
        )
        return result.mappings().one()

    async def recent(
        self, *, session_id: str, agent_id: str | None, before: int | None, limit: int
    ) -> list[RowMapping]:
        """The last ``limit`` turns (newest first)."""
        result = await self._session.execute(
            _RECENT,
            {
                **self._scope,
                "session_id": session_id,
                "agent_id": agent_id,
                "role": None,
                "before": before,
                "limit": limit,
            },
        )
        return list(result.mappings().all())

    async def search(
        self,
        *,
        text_query: str,
        embedding: Vector | None,
        session_id: str | None,
        agent_id: str | None,
        role: str | None,
        meaning_candidates: int,
        word_candidates: int,
    ) -> list[RowMapping]:
        """Candidate turns with their ``semantic`` similarity and ``word_rank``."""
        result = await self._session.execute(
            _SEARCH,
            {
                **self._scope,
                "text": text_query,
                "embedding": embedding,
                "session_id": session_id,
                "agent_id": agent_id,
                "role": role,
                "meaning_candidates": meaning_candidates if embedding is not None else 0,
                "word_candidates": word_candidates,
            },
        )
        return list(result.mappings().all())

    async def get(self, turn_id: str) -> RowMapping | None:
        """One of the user's turns, or None."""
        result = await self._session.execute(_GET, {**self._scope, "turn_id": turn_id})
        return result.mappings().one_or_none()

    async def update(
        self,
        turn_id: str,
        *,
        content: str | None,
        embedding: Vector | None,
        model: str | None,
        metadata_json: str | None,
    ) -> RowMapping | None:
        """Change a turn's content (with its embedding) and/or metadata; None if not the user's."""
        result = await self._session.execute(
            _UPDATE,
            {
                **self._scope,
                "turn_id": turn_id,
                "content": content,
                "embedding": embedding,
                "model": model,
                "metadata": metadata_json,
            },
        )
        return result.mappings().one_or_none()

    async def delete(self, turn_id: str) -> bool:
        """Delete one of the user's turns; whether it was there."""
        result = await self._session.execute(_DELETE, {**self._scope, "turn_id": turn_id})
        return bool(getattr(result, "rowcount", 0))
