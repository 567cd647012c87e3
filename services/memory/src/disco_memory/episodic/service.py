"""Episodic memory: append turns, read the recent ones, search by meaning and words."""

from __future__ import annotations

from disco_common.ids import new_id
from disco_common.memory import (
    METADATA_MAX_BYTES,
    EpisodicHit,
    EpisodicRecentQuery,
    EpisodicSearchMode,
    EpisodicSearchQuery,
    EpisodicTurn,
    EpisodicTurnCreate,
    EpisodicTurnUpdate,
)
from disco_memory._shared import limited_json
from disco_memory.episodic.repository import EpisodicRepository
from disco_memory.runtime import MemoryRuntime
from disco_memory.semantic.repository import set_search_options
from disco_memory.sessions.repository import SessionRepository
from disco_memory.sessions.service import touch_session

__all__ = [
    "append_turn",
    "delete_turn",
    "get_turn",
    "recent_turns",
    "search_turns",
    "update_turn",
]

_SEMANTIC_WEIGHT = 0.7
_CANDIDATE_FACTOR = 4


async def append_turn(
    repository: EpisodicRepository,
    sessions: SessionRepository,
    runtime: MemoryRuntime,
    body: EpisodicTurnCreate,
) -> EpisodicTurn:
    """Append a turn (embedded for search) and touch its session.

    Raises:
        PayloadTooLarge: the metadata is over 64 KiB encoded.
        EmbeddingUnavailable: the model could not embed the content.
    """
    metadata_json = limited_json(body.metadata, limit=METADATA_MAX_BYTES, what="the metadata")
    # An empty turn (a tool call with no text) still gets a vector: of its role.
    embedding = await runtime.embed_one(body.content or body.role.value)
    row = await repository.append(
        new_id(),
        session_id=body.session_id,
        agent_id=body.agent_id,
        role=body.role.value,
        content=body.content,
        plan_id=body.plan_id,
        task_id=body.task_id,
        metadata_json=metadata_json,
        embedding=embedding,
        model=runtime.embedder.model_name,
    )
    await touch_session(sessions, body.session_id)
    return EpisodicTurn.model_validate(dict(row))


async def get_turn(repository: EpisodicRepository, turn_id: str) -> EpisodicTurn | None:
    """One of the caller's turns, or None."""
    row = await repository.get(turn_id)
    return EpisodicTurn.model_validate(dict(row)) if row is not None else None


async def update_turn(
    repository: EpisodicRepository, runtime: MemoryRuntime, turn_id: str, body: EpisodicTurnUpdate
) -> EpisodicTurn | None:
    """Correct one of the caller's turns; None when it has no such turn.

    New content is embedded again (an empty one by the turn's role, as on
    append), so that search finds the turn by what it says now.

    Raises:
        PayloadTooLarge: the metadata is over 64 KiB encoded.
        EmbeddingUnavailable: the model could not embed the content.
    """
    metadata_json = (
        limited_json(body.metadata, limit=METADATA_MAX_BYTES, what="the metadata")
        if body.metadata is not None
        else None
    )
    embedding = None
    if body.content is not None:
        text = body.content
        if not text:
            current = await repository.get(turn_id)
            if current is None:
                return None
            text = str(current["role"])
        embedding = await runtime.embed_one(text)
    row = await repository.update(
        turn_id,
        content=body.content,
        embedding=embedding,
        model=runtime.embedder.model_name if embedding is not None else None,
        metadata_json=metadata_json,
    )
    return EpisodicTurn.model_validate(dict(row)) if row is not None else None


async def delete_turn(repository: EpisodicRepository, turn_id: str) -> bool:
    """Delete one of the caller's turns; whether it was there."""
    return await repository.delete(turn_id)


async def recent_turns(
    repository: EpisodicRepository, query: EpisodicRecentQuery
) -> list[EpisodicTurn]:
    """The last turns of a session, oldest first."""
    rows = await repository.recent(
        session_id=query.session_id,
        agent_id=query.agent_id,
        before=query.before_sequence,
        limit=query.limit,
    )
    return [EpisodicTurn.model_validate(dict(row)) for row in reversed(rows)]


def _word_score(rank: float) -> float:
    return rank / (1.0 + rank)


async def search_turns(
    repository: EpisodicRepository, runtime: MemoryRuntime, query: EpisodicSearchQuery
) -> list[EpisodicHit]:
    """Turns matching the query, best first, scored as ``query.mode`` says."""
    embedding = None
    if query.mode is not EpisodicSearchMode.TEXT:
        embedding = await runtime.embed_query(query.text)
    candidates = query.limit * _CANDIDATE_FACTOR
    if candidates > runtime.settings.hnsw_ef_search:
        await set_search_options(repository.session, ef_search=candidates)
    rows = await repository.search(
        text_query=query.text,
        embedding=embedding,
        session_id=query.session_id,
        agent_id=query.agent_id,
        role=query.role.value if query.role is not None else None,
        meaning_candidates=candidates,
        word_candidates=candidates if query.mode is not EpisodicSearchMode.SEMANTIC else 0,
    )
    hits: list[EpisodicHit] = []
    for row in rows:
        semantic = float(row["semantic"]) if row["semantic"] is not None else 0.0
        words = _word_score(float(row["word_rank"]))
        if query.mode is EpisodicSearchMode.SEMANTIC:
            score = semantic
        elif query.mode is EpisodicSearchMode.TEXT:
            score = words
        else:
            score = _SEMANTIC_WEIGHT * semantic + (1 - _SEMANTIC_WEIGHT) * words
        if query.threshold is not None and score < query.threshold:
            continue
        turn = EpisodicTurn.model_validate(dict(row))
        hits.append(EpisodicHit(turn=turn, score=score))
    hits.sort(key=lambda hit: (-hit.score, -hit.turn.sequence))
    return hits[: query.limit]
