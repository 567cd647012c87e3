"""``/v1/memory/sessions``: the caller's conversations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, status

from disco_common.ids import Id
from disco_common.memory import SessionCreate, SessionListQuery, SessionRecord
from disco_common.pagination import Page
from disco_memory.sessions import service
from disco_memory.sessions.repository import SessionRepository
from disco_service import IdentityDep, JSONRoute, NotFound, SessionDep, error_responses

router = APIRouter(prefix="/v1/memory/sessions", tags=["sessions"], route_class=JSONRoute)


async def _repository(session: SessionDep, identity: IdentityDep) -> SessionRepository:
    return SessionRepository(session, identity.tenant_id, identity.user_id)


RepositoryDep = Annotated[SessionRepository, Depends(_repository)]


@router.post(
    "",
    response_model=SessionRecord,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(409, 413),
)
async def create_session(body: SessionCreate, repository: RepositoryDep) -> SessionRecord:
    """Create a session. Creating a plan or a turn in an unknown session creates it too."""
    return await service.create_session(repository, body)


@router.get("", response_model=Page[SessionRecord], responses=error_responses(400))
async def list_sessions(
    repository: RepositoryDep, query: Annotated[SessionListQuery, Query()]
) -> Page[SessionRecord]:
    """The caller's sessions, most recently active first."""
    return await service.list_sessions(repository, query)


@router.get("/{session_id}", response_model=SessionRecord, responses=error_responses(404))
async def get_session(session_id: Id, repository: RepositoryDep) -> SessionRecord:
    """One of the caller's sessions, with its plan count and last activity."""
    record = await service.get_session(repository, session_id)
    if record is None:
        raise NotFound(f"you have no session {session_id!r}")
    return record
