"""Agents: registration (one transaction with capabilities and owned events),
heartbeats, lookups, lists and deregistration."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import JsonValue
from sqlalchemy.ext.asyncio import AsyncSession

from disco_common.canonical import canonical_json, json_hash
from disco_common.pagination import Page
from disco_common.registry import (
    AgentListQuery,
    AgentRecord,
    AgentRegistration,
    AgentStatus,
    EventDefinition,
    HeartbeatAck,
    PayloadSchema,
)
from disco_common.system_events import AgentRegisteredData
from disco_registry.agents import events as announce
from disco_registry.agents.repository import (
    AgentFilters,
    AgentRepository,
    AgentRow,
    RegistrationWrite,
    register_alone,
)
from disco_registry.agents.repository import register as register_statement
from disco_registry.errors import AgentNotFound, ConflictingEventDefinition
from disco_registry.events.repository import EventRepository, OwnedEvent, owned_events_json
from disco_registry.payload_schemas.service import resolve_refs
from disco_service import Database, Paginator

__all__ = [
    "Beat",
    "CompiledRegistration",
    "compile_registration",
    "deregister",
    "get_agent",
    "heartbeat_batch",
    "list_agents",
    "register",
]

_WORD_SEPARATORS = re.compile(r"[._:/\-]+")


@dataclass
class CompiledRegistration:
    """What a registration becomes once its schemas are resolved."""

    discovery: list[dict[str, JsonValue]] = field(default_factory=list)
    events: list[OwnedEvent] = field(default_factory=list)
    capability_names: list[str] = field(default_factory=list)
    consumed_events: list[str] = field(default_factory=list)
    produced_events: list[str] = field(default_factory=list)
    search_text: str = ""
    definition_hash: str = ""


def _resolve(
    definition: EventDefinition, schemas: dict[tuple[str, str], PayloadSchema]
) -> OwnedEvent:
    json_schema = definition.json_schema
    ref = definition.schema_ref
    if ref is not None:
        json_schema = schemas[(ref.name, ref.version)].json_schema
    return OwnedEvent(
        event_type=definition.event_type,
        topic=definition.topic,
        description=definition.description,
        json_schema=json_schema,
        schema_name=ref.name if ref is not None else None,
        schema_version=ref.version if ref is not None else None,
    )


def _discovered(event: OwnedEvent) -> dict[str, JsonValue]:
    """``event`` as the JSON of a :class:`DiscoveredEvent` (its fields, in its order).

    Written directly rather than built as the model and dumped in JSON mode: every
    part comes from a validated registration or a stored schema version, and the
    dump walks each schema value through a Python call (a third of a registration's
    own CPU). ``test_discovery_json_is_the_models_dump`` holds the two equal.
    """
    return {
        "event_type": event.event_type,
        "topic": event.topic,
        "description": event.description,
        "json_schema": event.json_schema,
        "schema_ref": (
            None
            if event.schema_name is None
            else {"name": event.schema_name, "version": event.schema_version}
        ),
    }


def _search_text(registration: AgentRegistration) -> str:
    parts: list[str] = [registration.name, registration.description, *registration.tags]
    for capability in registration.capabilities:
        parts += [capability.task_name, capability.description]
        for event in (capability.consumed_event, *capability.produced_events):
            parts += [event.event_type, event.description]
    for event in registration.events:
        parts += [event.event_type, event.description]
    words = [part for part in parts if part]
    # Dotted names also as words, so `calc.add` is found by "calc" and by "add".
    split = [_WORD_SEPARATORS.sub(" ", word) for word in words if _WORD_SEPARATORS.search(word)]
    return " ".join([*words, *split])


def compile_registration(
    registration: AgentRegistration, schemas: dict[tuple[str, str], PayloadSchema]
) -> CompiledRegistration:
    """Resolve every schema and derive what discovery filters on and answers with.

    Raises:
        ConflictingEventDefinition: one event type is defined twice with a different
            topic or schema (every conflict is listed).
    """
    compiled = CompiledRegistration()
    owned: dict[str, OwnedEvent] = {}
    conflicts: list[JsonValue] = []

    def own(candidate: OwnedEvent) -> None:
        existing = owned.get(candidate.event_type)
        if existing is None:
            owned[candidate.event_type] = candidate
            return
        same = (
            existing.topic == candidate.topic
            and canonical_json(existing.json_schema) == canonical_json(candidate.json_schema)
            and (existing.schema_name, existing.schema_version)
            == (candidate.schema_name, candidate.schema_version)
        )
        if not same:
            conflicts.append(
                {"event_type": candidate.event_type, "topics": [existing.topic, candidate.topic]}
            )
        elif not existing.description and candidate.description:
            owned[candidate.event_type] = candidate

    for capability in registration.capabilities:
        consumed = _resolve(capability.consumed_event, schemas)
        produced = [_resolve(event, schemas) for event in capability.produced_events]
        # A DiscoveredCapability's JSON (see _discovered).
        compiled.discovery.append(
            {
                "task_name": capability.task_name,
                "description": capability.description,
                "consumed_event": _discovered(consumed),
                "produced_events": [_discovered(event) for event in produced],
            }
        )
        compiled.capability_names.append(capability.task_name)
        compiled.consumed_events.append(consumed.event_type)
        compiled.produced_events.extend(event.event_type for event in produced)
        own(consumed)
        for event in produced:
            own(event)
    for definition in registration.events:
        own(_resolve(definition, schemas))
    if conflicts:
        raise ConflictingEventDefinition(
            "an event type is defined more than once with a different topic or schema; "
            "give each event type one definition",
            details=conflicts,
        )
    compiled.events = sorted(owned.values(), key=lambda event: event.event_type)
    compiled.consumed_events = sorted(set(compiled.consumed_events))
    compiled.produced_events = sorted(set(compiled.produced_events))
    compiled.search_text = _search_text(registration)
    compiled.definition_hash = json_hash(
        {
            "visibility": registration.visibility.value,
            "events": [
                [
                    e.event_type,
                    e.topic,
                    e.description,
                    e.json_schema,
                    e.schema_name,
                    e.schema_version,
                ]
                for e in compiled.events
            ],
        }
    )
    return compiled


def _schema_refs(registration: AgentRegistration) -> list[Any]:
    refs = []
    for capability in registration.capabilities:
        for event in (capability.consumed_event, *capability.produced_events):
            if event.schema_ref is not None:
                refs.append(event.schema_ref)
    refs += [event.schema_ref for event in registration.events if event.schema_ref is not None]
    return refs


async def register(
    database: Database,
    *,
    tenant_id: str,
    user_id: str | None,
    registration: AgentRegistration,
    default_ttl_seconds: int,
) -> tuple[AgentRecord, bool]:
    """Register or update an agent instance for the caller ``tenant_id``/``user_id``;
    ``(record, created)``.

    One transaction: the agent row, its instance, its owned events and the
    ``agent.registered`` announcement commit together or not at all. Without
    schema references that is one statement (``registry.register_agent_as``)
    in its own implicit transaction; with some, the referenced versions are
    read first in the same transaction. Concurrent registrations of one
    ``agent_id`` queue on its row, so the last one wins whole (never a mix of
    two definitions).

    Raises:
        UnknownSchemaReference: a ``schema_ref`` names no registered version.
        ConflictingEventDefinition: one event type is defined twice, differently.
    """
    refs = _schema_refs(registration)
    if refs:
        async with database.unit_of_work(tenant_id, user_id) as session:
            schemas = await resolve_refs(session, tenant_id=tenant_id, refs=refs)
            write = _prepare(tenant_id, registration, schemas, default_ttl_seconds)
            outcome = await register_statement(session, write, user_id=user_id)
    else:
        write = _prepare(tenant_id, registration, {}, default_ttl_seconds)
        outcome = await register_alone(database.engine, write, user_id=user_id)
    database.notify_outbox_commit()
    return outcome


def _prepare(
    tenant_id: str,
    registration: AgentRegistration,
    schemas: dict[tuple[str, str], PayloadSchema],
    default_ttl_seconds: int,
) -> RegistrationWrite:
    """What the registration statement writes: the agent row, its owned events (JSON)
    and its ``agent.registered`` announcement."""
    compiled = compile_registration(registration, schemas)
    ttl = registration.ttl_seconds or default_ttl_seconds
    agent = AgentRow(
        tenant_id=tenant_id,
        agent_id=registration.agent_id,
        name=registration.name,
        version=registration.version,
        description=registration.description,
        tags=list(dict.fromkeys(registration.tags)),
        instance_id=registration.instance_id,
        visibility=registration.visibility.value,
        ttl_seconds=ttl,
        metadata=registration.metadata,
        discovery=compiled.discovery,
        capability_names=compiled.capability_names,
        consumed_events=compiled.consumed_events,
        produced_events=compiled.produced_events,
        search_text=compiled.search_text,
        definition_hash=compiled.definition_hash,
    )
    announcement = announce.registered_announcement(
        tenant_id=tenant_id,
        data=AgentRegisteredData(
            agent_id=registration.agent_id,
            name=registration.name,
            instance_id=registration.instance_id,
            version=registration.version,
            capabilities=compiled.capability_names,
            # A placeholder: the statement sets the registered record's expiry.
            expires_at=datetime.now(UTC) + timedelta(seconds=ttl),
        ),
    )
    return RegistrationWrite(
        agent=agent,
        owned_events=owned_events_json(compiled.events),
        announcement=announcement,
        capabilities=registration.capabilities,
        events=registration.events,
    )


@dataclass(frozen=True)
class Beat:
    """One heartbeat: which registration, which process, and an optional new TTL."""

    agent_id: str
    instance_id: str | None = None
    ttl_seconds: int | None = None


async def heartbeat_batch(
    session: AsyncSession, *, tenant_id: str, beats: list[Beat]
) -> list[HeartbeatAck | None]:
    """Refresh instances of the tenant's agents; per beat its ack, or None for an unknown
    agent (answered 404: the agent should register again).

    One statement for the whole batch. An agent announced as expired is live
    again and announced as registered; a beat asking for another TTL changes
    the agent's TTL. Beats for the same instance in one batch share one write.
    """
    unique: dict[tuple[str, str], Beat] = {}
    for beat in beats:
        # The last beat of an instance in the batch wins (its TTL, if it names one).
        unique[(beat.agent_id, beat.instance_id or "")] = beat
    agents = AgentRepository(session)
    rows = await agents.heartbeat_many(
        tenant_id=tenant_id,
        beats=[(b.agent_id, b.instance_id, b.ttl_seconds) for b in unique.values()],
    )
    for key, beat in unique.items():
        row = rows.get(key)
        if row is None:
            continue
        if beat.ttl_seconds is not None and beat.ttl_seconds != row.ttl_seconds:
            await agents.set_ttl(
                tenant_id=tenant_id, agent_id=beat.agent_id, ttl_seconds=beat.ttl_seconds
            )
        if row.status == AgentStatus.EXPIRED.value:
            revived = await agents.revive(tenant_id=tenant_id, agent_id=beat.agent_id)
            if revived is not None:
                await announce.announce_registered(
                    session,
                    tenant_id=tenant_id,
                    agent_id=beat.agent_id,
                    name=revived.name,
                    instance_id=beat.instance_id,
                    version=revived.version,
                    capabilities=list(revived.capability_names),
                    expires_at=row.expires_at,
                )
    acks: list[HeartbeatAck | None] = []
    for beat in beats:
        row = rows.get((beat.agent_id, beat.instance_id or ""))
        acks.append(
            None
            if row is None
            else HeartbeatAck(
                agent_id=beat.agent_id,
                status=AgentStatus.LIVE,
                last_heartbeat_at=row.last_heartbeat_at,
                expires_at=row.expires_at,
            )
        )
    return acks


async def get_agent(session: AsyncSession, *, tenant_id: str, agent_id: str) -> AgentRecord | None:
    """The tenant's agent ``agent_id``, else a public one of that id; or None."""
    return await AgentRepository(session).get_visible(tenant_id=tenant_id, agent_id=agent_id)


# Sort key: (name, tenant, agent id).
_AGENT_PAGES = Paginator("agents", tuple[str, str, str])


async def list_agents(
    session: AsyncSession, *, tenant_id: str, query: AgentListQuery
) -> Page[AgentRecord]:
    """A page of the agents visible to the tenant, in (name, tenant, agent id) order.

    Raises:
        InvalidCursor: the cursor was not issued for this list and these filters.
    """
    request = _AGENT_PAGES.open(query)
    rows = await AgentRepository(session).list(
        tenant_id=tenant_id,
        filters=AgentFilters(
            name=query.name,
            capability=query.capability,
            consumed_event=query.consumed_event,
            produced_event=query.produced_event,
            tag=query.tag,
            text=query.q,
            include_expired=query.include_expired,
        ),
        after=request.after,
        limit=request.fetch,
    )
    return request.page(rows, key=lambda agent: (agent.name, agent.tenant_id, agent.agent_id))


async def deregister(
    session: AsyncSession,
    *,
    tenant_id: str,
    agent_id: str,
    instance_id: str | None,
    remove_events: bool,
) -> str:
    """Remove an instance, or the whole agent, and announce ``agent.deregistered``; the
    agent's visibility (``tenant`` or ``public``).

    With ``instance_id`` only that instance leaves; the agent goes with its last
    live instance. Without it the agent and every instance go. The events the
    agent owns are removed with it unless ``remove_events`` is False.

    Raises:
        AgentNotFound: the tenant has no such agent.
    """
    agents = AgentRepository(session)
    locked = await agents.lock(tenant_id=tenant_id, agent_id=agent_id)
    if locked is None:
        raise AgentNotFound(f"your tenant has no agent {agent_id!r}")
    if instance_id is not None:
        remaining = await agents.delete_instance(
            tenant_id=tenant_id, agent_id=agent_id, instance_id=instance_id
        )
        if remaining > 0:
            await announce.announce_deregistered(
                session,
                tenant_id=tenant_id,
                agent_id=agent_id,
                name=locked.name,
                instance_id=instance_id,
                events_removed=0,
            )
            return locked.visibility
    await agents.delete(tenant_id=tenant_id, agent_id=agent_id)
    removed = 0
    if remove_events:
        removed = await EventRepository(session).delete_owned(
            tenant_id=tenant_id, owner_agent_id=agent_id
        )
    await announce.announce_deregistered(
        session,
        tenant_id=tenant_id,
        agent_id=agent_id,
        name=locked.name,
        instance_id=instance_id,
        events_removed=removed,
    )
    return locked.visibility
