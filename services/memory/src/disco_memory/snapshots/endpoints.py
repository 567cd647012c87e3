"""``/v1/memory/snapshots``: the latest state of each agent in a session."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response, status

from disco_common.auth import Role
from disco_common.ids import Id
from disco_common.memory import AgentStateSnapshot, AgentStateSnapshotPut, AgentStateSnapshotSummary
from disco_memory._shared import IfMatch, expected_version, set_etag
from disco_memory.snapshots import service
from disco_memory.snapshots.repository import SnapshotRepository
from disco_service import IdentityDep, JSONRoute, NotFound, SessionDep, error_responses

router = APIRouter(
    prefix="/v1/memory/snapshots", tags=["agent-state snapshots"], route_class=JSONRoute
)


_EVERY_USER = frozenset({Role.SERVICE, Role.OPERATOR, Role.ADMIN})


async def _repository(session: SessionDep, identity: IdentityDep) -> SnapshotRepository:
    # An agent (service role) resumes a session's state whoever's decision or answer it
    # handles; a person reads and writes only the sessions they own.
    return SnapshotRepository(
        session,
        identity.tenant_id,
        identity.user_id,
        any_user=not identity.roles.isdisjoint(_EVERY_USER),
    )


RepositoryDep = Annotated[SnapshotRepository, Depends(_repository)]


@router.put(
    "/{session_id}/{agent_id}",
    response_model=AgentStateSnapshotSummary,
    responses=error_responses(409, 413),
)
async def put_snapshot(
    session_id: Id,
    agent_id: Id,
    body: AgentStateSnapshotPut,
    repository: RepositoryDep,
    response: Response,
    if_match: Annotated[str | None, IfMatch] = None,
) -> AgentStateSnapshotSummary:
    """Replace the agent's latest snapshot in the session (full and slim state side by
    side; at most 8 MiB full, 512 KiB slim). Answers without the full state."""
    summary = await service.put_snapshot(
        repository,
        session_id,
        agent_id,
        body,
        expected=expected_version(body.expected_version, if_match),
    )
    set_etag(response, summary.version)
    return summary


@router.get("/{session_id}", response_model=list[AgentStateSnapshotSummary])
async def list_snapshots(
    session_id: Id, repository: RepositoryDep
) -> list[AgentStateSnapshotSummary]:
    """The latest snapshot of each agent in the session (slim state only)."""
    return await service.list_snapshots(repository, session_id)


@router.get(
    "/{session_id}/{agent_id}", response_model=AgentStateSnapshot, responses=error_responses(404)
)
async def get_snapshot(
    session_id: Id, agent_id: Id, repository: RepositoryDep, response: Response
) -> AgentStateSnapshot:
    """The agent's latest snapshot in the session, full state included."""
    snapshot = await service.get_snapshot(repository, session_id, agent_id)
    if snapshot is None:
        raise NotFound(f"no snapshot of agent {agent_id!r} in session {session_id!r}")
    set_etag(response, snapshot.version)
    return snapshot


@router.delete(
    "/{session_id}/{agent_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404),
)
async def delete_snapshot(session_id: Id, agent_id: Id, repository: RepositoryDep) -> None:
    """Delete the agent's snapshot in the session."""
    if not await service.delete_snapshot(repository, session_id, agent_id):
        raise NotFound(f"no snapshot of agent {agent_id!r} in session {session_id!r}")
