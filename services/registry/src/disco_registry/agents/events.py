"""What the registry announces on ``system-events``: ``agent.registered``,
``agent.expired`` and ``agent.deregistered`` (always through the outbox, so
only what committed is ever announced)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from disco_common.envelope import SystemEvent
from disco_common.system_events import (
    AgentDeregisteredData,
    AgentExpiredData,
    AgentRegisteredData,
    SystemEventData,
    SystemEventType,
)
from disco_common.topics import Topic
from disco_registry.agents.repository import Announcement
from disco_service import outbox_envelope, publish_after_commit

__all__ = [
    "SOURCE",
    "announce_deregistered",
    "announce_expired",
    "announce_registered",
    "registered_announcement",
]

SOURCE = "disco://service/registry"


def _envelope(
    event_type: SystemEventType, data: SystemEventData, *, agent_id: str, tenant_id: str | None
) -> SystemEvent:
    return SystemEvent(
        source=SOURCE,
        type=event_type.value,
        subject=agent_id,
        tenant_id=tenant_id,
        data=data.model_dump(mode="json", exclude_none=True),
    )


async def _announce(
    session: AsyncSession,
    event_type: SystemEventType,
    data: SystemEventData,
    *,
    agent_id: str,
    tenant_id: str | None,
) -> None:
    envelope = _envelope(event_type, data, agent_id=agent_id, tenant_id=tenant_id)
    await publish_after_commit(session, Topic.SYSTEM_EVENTS, envelope)


def registered_announcement(*, tenant_id: str, data: AgentRegisteredData) -> Announcement:
    """``agent.registered`` as the outbox row a registration statement writes itself
    (``registry.register_agent_as``, which sets ``data.expires_at`` from the record
    it registered: ``data.expires_at`` here is only a placeholder of the right type)."""
    envelope = _envelope(
        SystemEventType.AGENT_REGISTERED, data, agent_id=data.agent_id, tenant_id=tenant_id
    )
    return Announcement(
        topic=str(Topic.SYSTEM_EVENTS),
        envelope=outbox_envelope(envelope, tenant_id).model_dump_json(exclude_none=True),
    )


async def announce_registered(
    session: AsyncSession,
    *,
    tenant_id: str,
    agent_id: str,
    name: str,
    instance_id: str | None,
    version: str,
    capabilities: list[str],
    expires_at: datetime,
) -> None:
    """``agent.registered``: on every registration, and when an expired agent heartbeats again."""
    await _announce(
        session,
        SystemEventType.AGENT_REGISTERED,
        AgentRegisteredData(
            agent_id=agent_id,
            name=name,
            instance_id=instance_id,
            version=version,
            capabilities=capabilities,
            expires_at=expires_at,
        ),
        agent_id=agent_id,
        tenant_id=tenant_id,
    )


async def announce_expired(
    session: AsyncSession,
    *,
    tenant_id: str,
    agent_id: str,
    name: str,
    instance_id: str | None,
    last_heartbeat_at: datetime,
    expired_at: datetime,
) -> None:
    """``agent.expired``: the agent's last instance was not heard from within its TTL."""
    await _announce(
        session,
        SystemEventType.AGENT_EXPIRED,
        AgentExpiredData(
            agent_id=agent_id,
            name=name,
            instance_id=instance_id,
            last_heartbeat_at=last_heartbeat_at,
            expired_at=expired_at,
        ),
        agent_id=agent_id,
        tenant_id=tenant_id,
    )


async def announce_deregistered(
    session: AsyncSession,
    *,
    tenant_id: str,
    agent_id: str,
    name: str,
    instance_id: str | None,
    events_removed: int,
) -> None:
    """``agent.deregistered``: an instance (or the whole agent) left on a clean stop."""
    await _announce(
        session,
        SystemEventType.AGENT_DEREGISTERED,
        AgentDeregisteredData(
            agent_id=agent_id, name=name, instance_id=instance_id, events_removed=events_removed
        ),
        agent_id=agent_id,
        tenant_id=tenant_id,
    )
