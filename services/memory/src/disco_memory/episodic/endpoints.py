"""``/v1/memory/episodic``: conversation turns."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, status

from disco_common.memory import (
    EpisodicHit,
    EpisodicRecentQuery,
    EpisodicSearchQuery,
    EpisodicTurn,
    EpisodicTurnCreate,
)
from disco_memory.deps import RuntimeDep
from disco_memory.episodic import service
from disco_memory.episodic.repository import EpisodicRepository
from disco_memory.sessions.repository import SessionRepository
from disco_service import IdentityDep, SessionDep, error_responses

router = APIRouter(prefix="/v1/memory/episodic", tags=["episodic memory"])


async def _repository(session: SessionDep, identity: IdentityDep) -> EpisodicRepository:
    return EpisodicRepository(session, identity.tenant_id, identity.user_id)


RepositoryDep = Annotated[EpisodicRepository, Depends(_repository)]


@router.post(
    "",
    response_model=EpisodicTurn,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(413, 503),
)
async def append_turn(
    body: EpisodicTurnCreate,
    repository: RepositoryDep,
    session: SessionDep,
    identity: IdentityDep,
    runtime: RuntimeDep,
) -> EpisodicTurn:
    """Append a turn to a conversation (its session is created or touched)."""
    sessions = SessionRepository(session, identity.tenant_id, identity.user_id)
    return await service.append_turn(repository, sessions, runtime, body)


@router.get("/recent", response_model=list[EpisodicTurn], responses=error_responses(422))
async def recent_turns(
    repository: RepositoryDep, query: Annotated[EpisodicRecentQuery, Query()]
) -> list[EpisodicTurn]:
    """The last turns of one of the caller's sessions, oldest first."""
    return await service.recent_turns(repository, query)


@router.post("/search", response_model=list[EpisodicHit], responses=error_responses(422, 503))
async def search_turns(
    body: EpisodicSearchQuery, repository: RepositoryDep, runtime: RuntimeDep
) -> list[EpisodicHit]:
    """The caller's turns that match a text by meaning and words, best first."""
    return await service.search_turns(repository, runtime, body)
