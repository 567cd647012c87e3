"""``/v1/memory/episodic``: conversation turns."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, status

from disco_common.ids import Id
from disco_common.memory import (
    EpisodicHit,
    EpisodicRecentQuery,
    EpisodicSearchQuery,
    EpisodicTurn,
    EpisodicTurnCreate,
    EpisodicTurnUpdate,
)
from disco_memory.deps import RuntimeDep
from disco_memory.episodic import service
from disco_memory.episodic.repository import EpisodicRepository
from disco_memory.sessions.repository import SessionRepository
from disco_service import IdentityDep, JSONRoute, NotFound, SessionDep, error_responses

router = APIRouter(prefix="/v1/memory/episodic", tags=["episodic memory"], route_class=JSONRoute)


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


@router.get("/{turn_id}", response_model=EpisodicTurn, responses=error_responses(404))
async def get_turn(turn_id: Id, repository: RepositoryDep) -> EpisodicTurn:
    """One of the caller's turns."""
    turn = await service.get_turn(repository, turn_id)
    if turn is None:
        raise NotFound(f"you have no episodic turn {turn_id!r}")
    return turn


@router.patch(
    "/{turn_id}", response_model=EpisodicTurn, responses=error_responses(404, 413, 422, 503)
)
async def update_turn(
    turn_id: Id, body: EpisodicTurnUpdate, repository: RepositoryDep, runtime: RuntimeDep
) -> EpisodicTurn:
    """Correct one of the caller's turns (its content, re-embedded, and/or its metadata)."""
    turn = await service.update_turn(repository, runtime, turn_id, body)
    if turn is None:
        raise NotFound(f"you have no episodic turn {turn_id!r}")
    return turn


@router.delete("/{turn_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404))
async def delete_turn(turn_id: Id, repository: RepositoryDep) -> None:
    """Delete one of the caller's turns."""
    if not await service.delete_turn(repository, turn_id):
        raise NotFound(f"you have no episodic turn {turn_id!r}")
