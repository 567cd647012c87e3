"""``/v1/agents``: register (upsert), read, list, heartbeat and deregister agents."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Request, Response, status

from disco_common.ids import Id
from disco_common.pagination import Page
from disco_common.registry import (
    AgentListQuery,
    AgentRecord,
    AgentRegistration,
    Heartbeat,
    HeartbeatAck,
    Visibility,
)
from disco_registry.agents import service
from disco_registry.deps import AgentIdPath, HeartbeatsDep
from disco_registry.errors import AgentNotFound
from disco_registry.state import RegistryState
from disco_service import IdentityDep, SessionDep, error_responses

__all__ = ["router"]

router = APIRouter(prefix="/v1/agents", tags=["agents"], responses=error_responses(401, 403))

_JSON = "application/json"


@router.post(
    "",
    response_model=AgentRecord,
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"model": AgentRecord, "description": "An existing registration was updated"},
        **error_responses(413, 422),
    },
    summary="Register or update an agent",
)
async def register_agent(
    registration: AgentRegistration, identity: IdentityDep, request: Request
) -> Response:
    """Upsert by ``agent_id`` (201 new, 200 updated), with its capabilities and events, in
    one transaction; announces ``agent.registered``. Schema references must name
    registered versions (422 ``unknown_schema_ref`` otherwise)."""
    # From the state rather than dependencies: each one FastAPI resolves costs. No
    # SessionDep either: the registration runs its own transaction (one statement).
    state = RegistryState.of(request)
    record, created = await service.register(
        state.require_database(),
        tenant_id=identity.tenant_id,
        user_id=identity.user_id,
        registration=registration,
        default_ttl_seconds=state.settings.default_ttl_seconds,
    )
    state.wrote(identity.tenant_id, public=record.visibility == Visibility.PUBLIC)
    # The record was validated when it was built from its row: serialised once here
    # (returning it would make FastAPI validate it again against response_model).
    return Response(
        content=record.model_dump_json(by_alias=True),
        status_code=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        media_type=_JSON,
    )


@router.get(
    "",
    response_model=Page[AgentRecord],
    responses=error_responses(400),
    summary="List agents",
)
async def list_agents(
    query: Annotated[AgentListQuery, Query()], session: SessionDep, identity: IdentityDep
) -> Page[AgentRecord]:
    """The caller's tenant's agents and public ones, filtered, by name; live ones only
    unless ``include_expired``."""
    return await service.list_agents(session, tenant_id=identity.tenant_id, query=query)


@router.get(
    "/{agent_id}",
    response_model=AgentRecord,
    responses=error_responses(404),
    summary="Get an agent",
)
async def get_agent(
    agent_id: AgentIdPath, session: SessionDep, identity: IdentityDep
) -> AgentRecord:
    """The caller's tenant's agent of that id, else a public one (live or expired)."""
    found = await service.get_agent(session, tenant_id=identity.tenant_id, agent_id=agent_id)
    if found is None:
        raise AgentNotFound(f"no agent {agent_id!r} is visible to you")
    return found


@router.post(
    "/{agent_id}/heartbeat",
    response_model=HeartbeatAck,
    responses=error_responses(404),
    summary="Heartbeat",
)
async def heartbeat(
    agent_id: AgentIdPath,
    identity: IdentityDep,
    heartbeats: HeartbeatsDep,
    beat: Annotated[Heartbeat | None, Body()] = None,
) -> HeartbeatAck:
    """Keep an instance live for another TTL. 404 means the registry does not know the
    agent (it was deregistered, purged, or the registry was reset): register again.

    Concurrent heartbeats of a tenant are committed together (group commit);
    the answer comes once this one's transaction committed."""
    beat = beat or Heartbeat()
    ack = await heartbeats.beat(
        identity.tenant_id,
        service.Beat(agent_id=agent_id, instance_id=beat.instance_id, ttl_seconds=beat.ttl_seconds),
    )
    if ack is None:
        raise AgentNotFound(f"your tenant has no agent {agent_id!r}; register it again")
    return ack


@router.delete(
    "/{agent_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404),
    summary="Deregister an agent or one of its instances",
)
async def deregister_agent(
    agent_id: AgentIdPath,
    request: Request,
    identity: IdentityDep,
    instance_id: Annotated[
        Id | None,
        Query(description="Only this instance leaves; the agent goes with its last live one."),
    ] = None,
    remove_events: Annotated[
        bool, Query(description="Also remove the event definitions the agent owns.")
    ] = True,
) -> Response:
    """Remove the agent (or one instance) and announce ``agent.deregistered``."""
    # Its own unit of work (not SessionDep): the answers this instance keeps (discovery,
    # documents) are dropped once it committed, before the response.
    state = RegistryState.of(request)
    async with state.require_database().unit_of_work(
        identity.tenant_id, identity.user_id
    ) as session:
        visibility = await service.deregister(
            session,
            tenant_id=identity.tenant_id,
            agent_id=agent_id,
            instance_id=instance_id,
            remove_events=remove_events,
        )
    state.wrote(identity.tenant_id, public=visibility == Visibility.PUBLIC)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
