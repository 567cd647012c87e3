"""Which agents a caller can reach: registrations read from the registry over HTTP, cached.

The gateway never reads the registry's tables: it asks the registry (the SDK's
:class:`~disco.clients.RegistryClient`, with the gateway's service token, on
behalf of the caller's tenant) and keeps the answers for a short while
(``DISCO_GATEWAY_REGISTRY_CACHE_SECONDS``). An agent is known by name; its
live instances share its capabilities. Schemas registered by reference are
resolved, so that a card and the payload check see the full JSON Schema.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from pydantic import JsonValue, TypeAdapter, ValidationError

from disco.clients import RegistryClient, acting_for
from disco_common.a2a_cards import A2ACardSource
from disco_common.ids import AgentName
from disco_common.registry import (
    AgentRecord,
    AgentStatus,
    DiscoveredCapability,
    DiscoveredEvent,
    EventDefinition,
    SchemaRef,
)

__all__ = ["AgentDirectory"]

T = TypeVar("T")

_CAPACITY = 2000
_AGENT_NAME: TypeAdapter[str] = TypeAdapter(AgentName)


class _Cache:
    """A small time-bound cache (oldest entries dropped past its capacity).

    Concurrent misses of one key share one load: when an entry expires under
    load, the registry is asked once, not once per waiting request.
    """

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._entries: OrderedDict[object, tuple[float, object]] = OrderedDict()
        self._loading: dict[object, asyncio.Task[Any]] = {}
        self._generation = 0

    def clear(self) -> None:
        """Forget every entry; a load under way when this is called is not kept."""
        self._entries.clear()
        self._loading.clear()
        self._generation += 1

    async def get(self, key: object, load: Callable[[], Awaitable[T]]) -> T:
        entry = self._entries.get(key)
        if entry is not None and entry[0] > time.monotonic():
            return entry[1]  # type: ignore[return-value]
        loading = self._loading.get(key)
        if loading is None:
            loading = asyncio.ensure_future(self._load(key, load, self._generation))
            self._loading[key] = loading
            loading.add_done_callback(partial(self._loaded, key))
        # A waiter that is cancelled does not cancel the load the others share.
        return await asyncio.shield(loading)

    def _loaded(self, key: object, done: asyncio.Future[Any]) -> None:
        if self._loading.get(key) is done:  # not a load begun after a clear()
            del self._loading[key]

    async def _load(self, key: object, load: Callable[[], Awaitable[T]], generation: int) -> T:
        started = time.monotonic()
        value = await load()
        if generation != self._generation:
            return value  # cleared meanwhile: what was read may be what changed
        self._entries[key] = (started + self._seconds, value)
        self._entries.move_to_end(key)
        while len(self._entries) > _CAPACITY:
            self._entries.popitem(last=False)
        return value


class AgentDirectory:
    """The agents visible to a tenant, as card sources (see the module docs).

    Args:
        registry: a started registry client whose token has the ``service`` role.
        cache_seconds: how long an answer of the registry is reused.
    """

    def __init__(self, registry: RegistryClient, *, cache_seconds: float) -> None:
        self._registry = registry
        self._agents = _Cache(cache_seconds)
        self._schemas = _Cache(max(cache_seconds, 60.0))

    def forget(self) -> None:
        """Read every agent from the registry again from now on (agents registered, left
        or expired); schemas, which a version never changes, are kept."""
        self._agents.clear()

    async def agent(self, tenant_id: str, name: str) -> A2ACardSource | None:
        """Agent ``name`` as ``tenant_id`` sees it (its own registration first, else a
        public one), or None when there is none (``name`` cannot even be an agent's)."""
        try:
            _AGENT_NAME.validate_python(name)
        except ValidationError:
            return None

        async def load() -> A2ACardSource | None:
            with acting_for(tenant_id):
                page = await self._registry.list_agents(name=name, include_expired=True)
                records = [record for record in page.items if record.name == name]
                return await self._source(tenant_id, records)

        return await self._agents.get((tenant_id, "agent", name), load)

    async def agents(self, tenant_id: str) -> list[A2ACardSource]:
        """Every agent ``tenant_id`` sees (live ones; its own and public ones), by name."""

        async def load() -> list[A2ACardSource]:
            with acting_for(tenant_id):
                by_name: dict[str, list[AgentRecord]] = {}
                async for record in self._registry.iter_agents():
                    by_name.setdefault(record.name, []).append(record)
                sources = [await self._source(tenant_id, records) for records in by_name.values()]
            return sorted((s for s in sources if s is not None), key=lambda s: s.name)

        return await self._agents.get((tenant_id, "all"), load)

    async def _source(self, tenant_id: str, records: list[AgentRecord]) -> A2ACardSource | None:
        if not records:
            return None
        # The tenant's own registration wins over a public one of another tenant;
        # live over expired; the latest registered instance speaks for the agent.
        records.sort(
            key=lambda r: (r.tenant_id == tenant_id, r.status is AgentStatus.LIVE, r.updated_at),
            reverse=True,
        )
        best = records[0]
        return A2ACardSource(
            name=best.name,
            description=best.description,
            version=best.version,
            tags=best.tags,
            visibility=best.visibility,
            tenant_id=best.tenant_id,
            updated_at=best.updated_at,
            capabilities=[
                DiscoveredCapability(
                    task_name=capability.task_name,
                    description=capability.description,
                    consumed_event=await self._event(tenant_id, capability.consumed_event),
                    produced_events=[
                        await self._event(tenant_id, event) for event in capability.produced_events
                    ],
                )
                for capability in best.capabilities
            ],
        )

    async def _event(self, tenant_id: str, definition: EventDefinition) -> DiscoveredEvent:
        schema = definition.json_schema
        if schema is None and definition.schema_ref is not None:
            schema = await self._schema(tenant_id, definition.schema_ref)
        return DiscoveredEvent(
            event_type=definition.event_type,
            topic=definition.topic,
            description=definition.description,
            json_schema=schema,
            schema_ref=definition.schema_ref,
        )

    async def _schema(self, tenant_id: str, ref: SchemaRef) -> dict[str, JsonValue] | None:
        async def load() -> dict[str, JsonValue] | None:
            found = await self._registry.get_schema(ref.name, ref.version)
            return found.json_schema if found is not None else None

        return await self._schemas.get((tenant_id, str(ref)), load)
