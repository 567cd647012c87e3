"""SQL for ``registry.agents`` and ``registry.agent_instances``.

An agent's liveness is the liveness of its instances: it is live while at
least one instance row has ``expires_at`` in the future. Heartbeats touch
only the narrow instance table; the agent row (wide, with GIN indexes) is
written on registration, expiry and deregistration only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pydantic_core
from pydantic import TypeAdapter
from sqlalchemy import Row, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from disco_common.registry import AgentCapability, AgentRecord, AgentStatus, EventDefinition
from disco_service import Keyset, driver_sql, on_driver

__all__ = [
    "AgentFilters",
    "AgentRepository",
    "AgentRow",
    "Announcement",
    "HeartbeatRow",
    "LockedAgent",
    "RegistrationWrite",
    "register",
]

_LIST_ORDER = Keyset("a.name", "a.tenant_id", "a.agent_id")

_RECORD_SELECT = """
SELECT a.tenant_id, a.agent_id, a.name, a.version, a.description, a.tags, a.instance_id,
       a.visibility, a.capabilities, a.events, a.ttl_seconds, a.metadata,
       a.registered_at, a.updated_at,
       greatest(a.last_heartbeat_at, li.last_heartbeat_at) AS last_heartbeat_at,
       coalesce(li.expires_at,
                a.last_heartbeat_at + make_interval(secs => a.ttl_seconds)) AS expires_at,
       li.live_instances
FROM registry.agents a
CROSS JOIN LATERAL (
    SELECT max(i.last_heartbeat_at) AS last_heartbeat_at,
           max(i.expires_at) AS expires_at,
           count(*) FILTER (WHERE i.expires_at > now()) AS live_instances
    FROM registry.agent_instances i
    WHERE i.tenant_id = a.tenant_id AND i.agent_id = a.agent_id
) li
"""

_GET_VISIBLE = text(
    _RECORD_SELECT
    + "WHERE a.agent_id = :agent AND (a.tenant_id = :tenant OR a.visibility = 'public') "
    # An id registered by the caller's own tenant wins over a public one of another.
    "ORDER BY (a.tenant_id = :tenant) DESC, a.tenant_id LIMIT 1"
)

_LOCK = text(
    "SELECT definition_hash, visibility, status, name FROM registry.agents "
    "WHERE tenant_id = :tenant AND agent_id = :agent FOR UPDATE"
)

# The whole registration and its announcement in one statement (migration
# registry_0006): tenant scope, lock, agent and instance upsert, instances'
# visibility, owned events, the outbox row, and the record read back.
_REGISTER = text(
    "SELECT * FROM registry.register_agent_as("
    ":tenant, :user, :agent, :name, :version, :description, CAST(:tags AS text[]), "
    ":instance_id, :key, :visibility, :ttl, CAST(:metadata AS jsonb), "
    "CAST(:capabilities AS jsonb), CAST(:events AS jsonb), CAST(:discovery AS jsonb), "
    "CAST(:capability_names AS text[]), CAST(:consumed_events AS text[]), "
    "CAST(:produced_events AS text[]), :search_text, :definition_hash, CAST(:owned AS jsonb), "
    ":topic, CAST(:envelope AS jsonb))"
)
_REGISTER_SQL, _REGISTER_NAMES = driver_sql(_REGISTER)

# One statement for a whole batch of heartbeats of one tenant (the service's hot
# path): unknown agents simply produce no row. Rows are written in key order so
# that two registry instances writing overlapping batches cannot deadlock.
_HEARTBEAT_MANY = text(
    """
WITH beat AS (
    SELECT * FROM unnest(
        CAST(:agents AS text[]), CAST(:keys AS text[]), CAST(:instances AS text[]),
        CAST(:ttls AS double precision[])
    ) AS b(agent_id, instance_key, instance_id, ttl)
), a AS (
    SELECT b.agent_id, b.instance_key, b.instance_id, b.ttl,
           ag.name, ag.status, ag.visibility, ag.ttl_seconds
    FROM beat b
    JOIN registry.agents ag ON ag.tenant_id = :tenant AND ag.agent_id = b.agent_id
), i AS (
    INSERT INTO registry.agent_instances AS x (
        tenant_id, agent_id, instance_key, instance_id, visibility, last_heartbeat_at, expires_at)
    SELECT :tenant, a.agent_id, a.instance_key, a.instance_id, a.visibility, now(),
           now() + make_interval(secs => coalesce(a.ttl, a.ttl_seconds))
    FROM a
    ORDER BY a.agent_id, a.instance_key
    ON CONFLICT (tenant_id, agent_id, instance_key) DO UPDATE SET
        instance_id = excluded.instance_id,
        last_heartbeat_at = excluded.last_heartbeat_at,
        expires_at = excluded.expires_at
    RETURNING x.agent_id, x.instance_key, x.last_heartbeat_at, x.expires_at
)
SELECT a.agent_id, a.instance_key, a.name, a.status, a.ttl_seconds,
       i.last_heartbeat_at, i.expires_at
FROM a JOIN i ON i.agent_id = a.agent_id AND i.instance_key = a.instance_key
"""
)

_SET_TTL = text(
    "UPDATE registry.agents SET ttl_seconds = :ttl, updated_at = now() "
    "WHERE tenant_id = :tenant AND agent_id = :agent AND ttl_seconds <> :ttl"
)

_REVIVE = text(
    "UPDATE registry.agents SET status = 'live', expired_at = NULL, last_heartbeat_at = now() "
    "WHERE tenant_id = :tenant AND agent_id = :agent AND status = 'expired' "
    "RETURNING name, version, instance_id, capability_names"
)

_DELETE_INSTANCE = text(
    "DELETE FROM registry.agent_instances "
    "WHERE tenant_id = :tenant AND agent_id = :agent AND instance_key = :key"
)

_LIVE_INSTANCES = text(
    "SELECT count(*) FROM registry.agent_instances "
    "WHERE tenant_id = :tenant AND agent_id = :agent AND expires_at > now()"
)

_DELETE_AGENT = text(
    "DELETE FROM registry.agents WHERE tenant_id = :tenant AND agent_id = :agent "
    "RETURNING name, instance_id"
)


def instance_key(instance_id: str | None) -> str:
    """The key of an instance row: its id, or '' for a registration that names none."""
    return instance_id or ""


@dataclass(frozen=True)
class AgentRow:
    """What :meth:`AgentRepository.register` writes."""

    tenant_id: str
    agent_id: str
    name: str
    version: str
    description: str
    tags: list[str]
    instance_id: str | None
    visibility: str
    ttl_seconds: int
    metadata: dict[str, Any]
    discovery: list[Any]
    capability_names: list[str]
    consumed_events: list[str]
    produced_events: list[str]
    search_text: str
    definition_hash: str


@dataclass(frozen=True)
class Announcement:
    """The outbox row a registration writes: its topic and envelope JSON (whose
    ``data.expires_at`` the statement sets from the registered record)."""

    topic: str
    envelope: str


@dataclass(frozen=True)
class RegistrationWrite:
    """Everything one registration statement writes.

    ``owned_events`` is the JSON list of the agent's owned event definitions
    (:class:`OwnedEvent` fields). ``capabilities`` and ``events`` are the
    validated models, written as their JSON: the record carries them as they
    are rather than read back.
    """

    agent: AgentRow
    owned_events: str
    announcement: Announcement
    capabilities: list[AgentCapability]
    events: list[EventDefinition]


@dataclass(frozen=True)
class LockedAgent:
    """An agent row locked for update in this transaction."""

    definition_hash: str
    visibility: str
    status: str
    name: str


@dataclass(frozen=True)
class HeartbeatRow:
    """The outcome of a heartbeat."""

    name: str
    status: str
    ttl_seconds: int
    last_heartbeat_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class AgentFilters:
    """Filters of a list query (all given must match)."""

    name: str | None = None
    capability: str | None = None
    consumed_event: str | None = None
    produced_event: str | None = None
    tag: str | None = None
    text: str | None = None
    include_expired: bool = False


_CAPABILITIES = TypeAdapter(list[AgentCapability])
_EVENTS = TypeAdapter(list[EventDefinition])


def _json(value: Any) -> str:
    # For jsonb parameters: the database orders keys itself, so any order will do
    # (pydantic-core writes it several times faster than the standard library).
    return pydantic_core.to_json(value).decode()


def text_query_terms(query: str) -> str:
    """A ``to_tsquery`` text matching any word of ``query``, each also as a prefix.

    The same rule as discovery's (``registry.discover_agents``); '' when the
    query has no word.
    """
    return " | ".join(f"{word}:*" for word in re.findall(r"[^\W_]+", query.lower()))


def record_from_row(row: Row[Any]) -> AgentRecord:
    """An :class:`AgentRecord` from a row of the record select."""
    return _record(dict(row._mapping))


def _record(values: dict[str, Any]) -> AgentRecord:
    live = int(values.pop("live_instances") or 0)
    return AgentRecord.model_validate(
        {
            **values,
            "live_instances": live,
            "status": AgentStatus.LIVE if live > 0 else AgentStatus.EXPIRED,
        }
    )


def _register_values(write: RegistrationWrite, user_id: str | None) -> dict[str, Any]:
    agent = write.agent
    return {
        "tenant": agent.tenant_id,
        "user": user_id,
        "agent": agent.agent_id,
        "name": agent.name,
        "version": agent.version,
        "description": agent.description,
        "tags": agent.tags,
        "instance_id": agent.instance_id,
        "visibility": agent.visibility,
        "ttl": agent.ttl_seconds,
        "metadata": _json(agent.metadata),
        # Straight from the models to JSON (the same text as their JSON-mode dump
        # encoded again, in a quarter of the time).
        "capabilities": _CAPABILITIES.dump_json(write.capabilities).decode(),
        "events": _EVENTS.dump_json(write.events).decode(),
        "discovery": _json(agent.discovery),
        "capability_names": agent.capability_names,
        "consumed_events": agent.consumed_events,
        "produced_events": agent.produced_events,
        "search_text": agent.search_text,
        "definition_hash": agent.definition_hash,
        "key": instance_key(agent.instance_id),
        "owned": write.owned_events,
        "topic": write.announcement.topic,
        "envelope": write.announcement.envelope,
    }


def _registered(write: RegistrationWrite, values: dict[str, Any]) -> tuple[AgentRecord, bool]:
    created = bool(values.pop("created"))
    record = _record(values).model_copy(
        update={"capabilities": write.capabilities, "events": write.events}
    )
    return record, created


async def register(
    session: AsyncSession, write: RegistrationWrite, *, user_id: str | None
) -> tuple[AgentRecord, bool]:
    """Register ``write.agent`` and write its announcement in one statement, in the
    session's transaction; its record and whether it was created.

    The statement scopes its transaction to the agent's tenant and ``user_id``
    (the caller's verified identity), locks the agent row (concurrent
    registrations of one agent queue there, or for a new agent on the primary
    key), upserts the agent and its registering instance (heard from now,
    expiring after ``ttl_seconds``), gives the instances the agent's visibility,
    makes the agent's owned event definitions exactly ``write.owned_events``
    when the definition changed, and writes ``write.announcement`` to the
    outbox.
    """
    row = (await session.execute(_REGISTER, _register_values(write, user_id))).one()
    return _registered(write, dict(row._mapping))


async def register_alone(
    engine: AsyncEngine, write: RegistrationWrite, *, user_id: str | None
) -> tuple[AgentRecord, bool]:
    """:func:`register` as its own implicit transaction, on the driver directly (the
    common registration: no schema reference to read first).

    A repeat after a dropped connection is harmless: the registration is an
    upsert and its announcement keeps its envelope id (consumers deduplicate).
    """
    values = _register_values(write, user_id)
    arguments = [values[name] for name in _REGISTER_NAMES]
    row = await on_driver(
        engine, _REGISTER_SQL, lambda driver: driver.fetchrow(_REGISTER_SQL, *arguments)
    )
    assert row is not None  # the function answers the registered record, always
    return _registered(write, dict(row))


class AgentRepository:
    """Reads and writes agents and their instances for the session's tenant."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def get_visible(self, *, tenant_id: str, agent_id: str) -> AgentRecord | None:
        """The agent ``agent_id`` of the caller's tenant, else a public one; or None."""
        row = (
            await self._session.execute(_GET_VISIBLE, {"tenant": tenant_id, "agent": agent_id})
        ).first()
        return record_from_row(row) if row is not None else None

    async def lock(self, *, tenant_id: str, agent_id: str) -> LockedAgent | None:
        """Lock the tenant's agent row until the transaction ends; None if absent.

        Concurrent registrations of one agent queue here (or, for a new agent,
        on the primary key), so the agent row, its instances
        and its events are always written by one transaction at a time.
        """
        row = (await self._session.execute(_LOCK, {"tenant": tenant_id, "agent": agent_id})).first()
        if row is None:
            return None
        return LockedAgent(
            definition_hash=row.definition_hash,
            visibility=row.visibility,
            status=row.status,
            name=row.name,
        )

    async def heartbeat_many(
        self, *, tenant_id: str, beats: list[tuple[str, str | None, int | None]]
    ) -> dict[tuple[str, str], HeartbeatRow]:
        """Refresh (or add) the instances of ``(agent_id, instance_id, ttl_seconds)`` beats.

        Each ``(agent_id, instance_key)`` must appear once. Returns the outcome
        by ``(agent_id, instance_key)``; a beat for an agent the tenant does not
        have is absent from the answer.
        """
        rows = (
            await self._session.execute(
                _HEARTBEAT_MANY,
                {
                    "tenant": tenant_id,
                    "agents": [agent_id for agent_id, _, _ in beats],
                    "keys": [instance_key(instance_id) for _, instance_id, _ in beats],
                    "instances": [instance_id for _, instance_id, _ in beats],
                    "ttls": [float(ttl) if ttl is not None else None for _, _, ttl in beats],
                },
            )
        ).all()
        return {
            (row.agent_id, row.instance_key): HeartbeatRow(
                name=row.name,
                status=row.status,
                ttl_seconds=row.ttl_seconds,
                last_heartbeat_at=row.last_heartbeat_at,
                expires_at=row.expires_at,
            )
            for row in rows
        }

    async def set_ttl(self, *, tenant_id: str, agent_id: str, ttl_seconds: int) -> None:
        """Change the agent's TTL (a heartbeat asked for another one)."""
        await self._session.execute(
            _SET_TTL, {"tenant": tenant_id, "agent": agent_id, "ttl": ttl_seconds}
        )

    async def revive(self, *, tenant_id: str, agent_id: str) -> Row[Any] | None:
        """Mark an agent announced as expired live again; its row if it was expired."""
        return (
            await self._session.execute(_REVIVE, {"tenant": tenant_id, "agent": agent_id})
        ).first()

    async def delete_instance(
        self, *, tenant_id: str, agent_id: str, instance_id: str | None
    ) -> int:
        """Remove one instance; how many live instances the agent has left."""
        params = {"tenant": tenant_id, "agent": agent_id}
        await self._session.execute(_DELETE_INSTANCE, {**params, "key": instance_key(instance_id)})
        return int((await self._session.execute(_LIVE_INSTANCES, params)).scalar_one())

    async def delete(self, *, tenant_id: str, agent_id: str) -> bool:
        """Remove the agent and its instances; whether it existed."""
        row = (
            await self._session.execute(_DELETE_AGENT, {"tenant": tenant_id, "agent": agent_id})
        ).first()
        return row is not None

    async def list(
        self,
        *,
        tenant_id: str,
        filters: AgentFilters,
        after: tuple[str, str, str] | None,
        limit: int,
    ) -> list[AgentRecord]:
        """Visible agents matching ``filters`` in (name, tenant, agent id) order after ``after``."""
        seek, params = _LIST_ORDER.after(after)
        clauses = ["(a.tenant_id = :tenant OR a.visibility = 'public')", seek]
        params.update(tenant=tenant_id, limit=limit)
        if filters.name is not None:
            clauses.append("a.name = :name")
            params["name"] = filters.name
        if filters.capability is not None:
            clauses.append("a.capability_names @> ARRAY[CAST(:capability AS text)]")
            params["capability"] = filters.capability
        if filters.consumed_event is not None:
            clauses.append("a.consumed_events @> ARRAY[CAST(:consumed AS text)]")
            params["consumed"] = filters.consumed_event
        if filters.produced_event is not None:
            clauses.append("a.produced_events @> ARRAY[CAST(:produced AS text)]")
            params["produced"] = filters.produced_event
        if filters.tag is not None:
            clauses.append("a.tags @> ARRAY[CAST(:tag AS text)]")
            params["tag"] = filters.tag
        if filters.text is not None:
            terms = text_query_terms(filters.text)
            clauses.append("a.search_vector @@ to_tsquery('english', :terms)" if terms else "false")
            params["terms"] = terms
        if not filters.include_expired:
            clauses.append("li.live_instances > 0")
        statement = text(
            _RECORD_SELECT
            + "WHERE "
            + " AND ".join(clauses)
            + f" {_LIST_ORDER.order_by} LIMIT :limit"
        )
        rows = (await self._session.execute(statement, params)).all()
        return [record_from_row(row) for row in rows]
