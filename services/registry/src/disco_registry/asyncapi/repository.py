"""What a tenant's AsyncAPI document is built from: ``registry.asyncapi_source_as``
(migration ``registry_0008``), one statement in its own implicit transaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pydantic_core
from sqlalchemy.ext.asyncio import AsyncEngine

from disco_service import on_driver

__all__ = [
    "AsyncApiRepository",
    "BusSource",
    "SourceAgent",
    "SourceCapability",
    "SourceEvent",
    "SourceSchema",
    "parse_source",
]

_SOURCE = "SELECT answer, fresh_seconds FROM registry.asyncapi_source_as($1, $2)"


@dataclass(frozen=True, slots=True)
class SourceCapability:
    """A capability as the document needs it: its request and answer event types."""

    task_name: str
    description: str
    consumed: str
    produced: list[str]


@dataclass(frozen=True, slots=True)
class SourceAgent:
    """A live registration the tenant sees (its own, or a public one)."""

    tenant_id: str
    agent_id: str
    name: str
    version: str
    description: str
    visibility: str
    capabilities: list[SourceCapability]
    events: list[tuple[str, str | None]]
    """``(event_type, direction)`` of each listed event, as registered."""


@dataclass(frozen=True, slots=True)
class SourceEvent:
    """An event definition a live registration owns, its schema resolved."""

    tenant_id: str
    owner_agent_id: str
    event_type: str
    topic: str
    description: str
    json_schema: dict[str, Any] | None
    schema_name: str | None
    schema_version: str | None
    updated_at: float
    """Seconds since the epoch."""


@dataclass(frozen=True, slots=True)
class SourceSchema:
    """A payload schema version of the tenant."""

    name: str
    version: str
    description: str
    json_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class BusSource:
    """Everything one document is built from, and how long it holds unless a write
    changes it (None: no live registration, nothing expires)."""

    agents: list[SourceAgent]
    events: list[SourceEvent]
    schemas: list[SourceSchema]
    fresh_seconds: float | None


def _agent(row: dict[str, Any]) -> SourceAgent:
    return SourceAgent(
        tenant_id=row["tenant_id"],
        agent_id=row["agent_id"],
        name=row["name"],
        version=row["version"],
        description=row["description"],
        visibility=row["visibility"],
        capabilities=[
            SourceCapability(
                task_name=cap["task_name"],
                description=cap["description"],
                consumed=cap["consumed"],
                produced=list(cap["produced"]),
            )
            for cap in row["capabilities"]
        ],
        events=[(event["event_type"], event["direction"]) for event in row["events"]],
    )


def parse_source(answer: str, fresh_seconds: float | None) -> BusSource:
    """The source from the JSON text the statement answered (CPU work: a large one is
    read in a worker thread)."""
    parsed = pydantic_core.from_json(answer)
    return BusSource(
        agents=[_agent(agent) for agent in parsed["agents"]],
        events=[SourceEvent(**event) for event in parsed["events"]],
        schemas=[SourceSchema(**schema) for schema in parsed["schemas"]],
        fresh_seconds=fresh_seconds,
    )


class AsyncApiRepository:
    """Reads document sources for a tenant."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def source_text(self, *, tenant_id: str, user_id: str) -> tuple[str, float | None]:
        """The live registrations ``tenant_id`` sees, their events and its schema versions,
        as the JSON text of ``{"agents", "events", "schemas"}`` (read it with
        :func:`parse_source`); and the seconds until the first of those registrations
        loses its last live instance (None: none is live).

        ``tenant_id`` and ``user_id`` must be the caller's verified identity's: the
        statement scopes its transaction to them.
        """
        row = await on_driver(
            self._engine, _SOURCE, lambda driver: driver.fetchrow(_SOURCE, tenant_id, user_id)
        )
        assert row is not None  # the function answers one row, always
        return str(row["answer"]), row["fresh_seconds"]
