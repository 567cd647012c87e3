"""The registry's typed client: agents, discovery, the event registry, payload schemas, cards."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from urllib.parse import quote

from pydantic import JsonValue

from disco.asyncapi._fetched import FetchedDocument
from disco.clients._base import ServiceClient, ServiceNotFoundError
from disco.clients._paging import pages, query_of, query_params, segment
from disco_common.asyncapi import AsyncApiFormat, AsyncApiQuery
from disco_common.pagination import Page
from disco_common.registry import (
    AgentListQuery,
    AgentRecord,
    AgentRegistration,
    AgentStatus,
    DiscoveredAgent,
    DiscoveryQuery,
    EventListQuery,
    EventRecord,
    Heartbeat,
    HeartbeatAck,
    PayloadSchema,
    PayloadSchemaCreate,
    SchemaValidationRequest,
    SchemaValidationResult,
)

__all__ = ["RegistryClient"]


class RegistryClient(ServiceClient):
    """Every registry endpoint, typed with the ``disco_common.registry`` DTOs.

    Build it with :meth:`from_settings` (``DISCO_REGISTRY_URL`` and the auth
    settings) or directly with a base URL and a token provider; use it as
    ``async with`` or call :meth:`start`/:meth:`stop`. Errors are
    :class:`~disco.clients.ServiceError` subclasses carrying the registry's
    ``code`` (e.g. ``schema_version_conflict``, ``unknown_schema_ref``).
    Lookups of one thing return None when it does not exist.
    """

    service_name = "registry"

    # -- agents -------------------------------------------------------------------

    async def register(self, registration: AgentRegistration) -> AgentRecord:
        """Register or update an agent (upsert by ``agent_id``) with its capabilities.

        Raises:
            ServiceValidationError: the registration is invalid, names an unknown schema
                version (``unknown_schema_ref``) or defines one event twice differently.
        """
        return await self.call("POST", "/v1/agents", AgentRecord, json=registration)

    async def get_agent(self, agent_id: str) -> AgentRecord | None:
        """The agent ``agent_id`` (own tenant first, else a public one), or None."""
        return await self.call_or_none("GET", f"/v1/agents/{segment(agent_id)}", AgentRecord)

    async def list_agents(
        self,
        query: AgentListQuery | None = None,
        *,
        name: str | None = None,
        capability: str | None = None,
        consumed_event: str | None = None,
        produced_event: str | None = None,
        tag: str | None = None,
        q: str | None = None,
        include_expired: bool | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[AgentRecord]:
        """One page of agents matching every filter given (or ``query``, the filters as a model).

        Args:
            query: the filters as one :class:`AgentListQuery` (the keywords are then ignored).
            name, capability, consumed_event, produced_event, tag, q, include_expired:
                the :class:`AgentListQuery` filters.
            limit: items per page (the registry's default when omitted).
            cursor: the ``next_cursor`` of the previous page.

        Raises:
            ServiceValidationError: a filter or the cursor is invalid.
        """
        if query is None:
            query = query_of(
                AgentListQuery,
                name=name,
                capability=capability,
                consumed_event=consumed_event,
                produced_event=produced_event,
                tag=tag,
                q=q,
                include_expired=include_expired,
                limit=limit,
                cursor=cursor,
            )
        return await self.call("GET", "/v1/agents", Page[AgentRecord], params=query_params(query))

    async def iter_agents(
        self,
        query: AgentListQuery | None = None,
        *,
        name: str | None = None,
        capability: str | None = None,
        consumed_event: str | None = None,
        produced_event: str | None = None,
        tag: str | None = None,
        q: str | None = None,
        include_expired: bool | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[AgentRecord]:
        """Every agent matching the filters (as for :meth:`list_agents`), page after page."""
        if query is None:
            query = query_of(
                AgentListQuery,
                name=name,
                capability=capability,
                consumed_event=consumed_event,
                produced_event=produced_event,
                tag=tag,
                q=q,
                include_expired=include_expired,
                limit=limit,
            )
        async for item in pages(query, self.list_agents):
            yield item

    async def live_agent_names(self, *, at_most: int = 1000) -> set[str] | None:
        """The names of the agents with a live registration, or None when the registry
        lists more than ``at_most`` registrations (it cannot be told in one look)."""
        names: set[str] = set()
        seen = 0
        async for agent in self.iter_agents(limit=100):
            seen += 1
            if seen > at_most:
                return None
            if agent.status == AgentStatus.LIVE:
                names.add(agent.name)
        return names

    async def heartbeat(
        self, agent_id: str, *, instance_id: str | None = None, ttl_seconds: int | None = None
    ) -> HeartbeatAck:
        """Tell the registry an instance is alive.

        Raises:
            ServiceNotFoundError: the registry does not know the agent: register again.
        """
        beat = Heartbeat(instance_id=instance_id, ttl_seconds=ttl_seconds)
        return await self.call(
            "POST", f"/v1/agents/{segment(agent_id)}/heartbeat", HeartbeatAck, json=beat
        )

    async def deregister(
        self, agent_id: str, *, instance_id: str | None = None, remove_events: bool = True
    ) -> bool:
        """Remove the agent (or only ``instance_id``); False when it was not registered."""
        try:
            await self.call(
                "DELETE",
                f"/v1/agents/{segment(agent_id)}",
                params={
                    "instance_id": instance_id,
                    "remove_events": "true" if remove_events else "false",
                },
            )
        except ServiceNotFoundError:
            return False
        return True

    async def get_card(self, agent_id: str) -> dict[str, JsonValue] | None:
        """The agent's A2A v1.0 AgentCard as JSON (camelCase), or None."""
        return await self.call_or_none(
            "GET", f"/v1/agents/{segment(agent_id)}/card", dict[str, JsonValue]
        )

    # -- discovery ----------------------------------------------------------------

    async def discover(
        self,
        requirements: Sequence[str] | DiscoveryQuery | None = None,
        *,
        capability: str | None = None,
        consumed_event: str | None = None,
        produced_event: str | None = None,
        text: str | None = None,
        limit: int = 20,
    ) -> list[DiscoveredAgent]:
        """Live agents that can do what is asked, each with its full request/response schemas.

        ``requirements`` is a list of capability names the agent must all have
        (seed 004's ``discover(requirements)``), or a whole :class:`DiscoveryQuery`.

        Raises:
            ServiceValidationError: no criterion was given.
        """
        if isinstance(requirements, DiscoveryQuery):
            query = requirements
        else:
            query = DiscoveryQuery(
                capabilities=list(requirements or []),
                capability=capability,
                consumed_event=consumed_event,
                produced_event=produced_event,
                text=text,
                limit=limit,
            )
        return await self.call("POST", "/v1/discover", list[DiscoveredAgent], json=query)

    async def find(self, capability: str) -> list[DiscoveredAgent]:
        """Live agents offering ``capability`` (seed 004's ``registry.find``)."""
        return await self.discover(capability=capability)

    # -- event registry -----------------------------------------------------------

    async def list_events(
        self,
        query: EventListQuery | None = None,
        *,
        topic: str | None = None,
        owner_agent_id: str | None = None,
        event_type: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[EventRecord]:
        """One page of event definitions matching every filter given (or ``query``).

        Raises:
            ServiceValidationError: a filter or the cursor is invalid.
        """
        if query is None:
            query = query_of(
                EventListQuery,
                topic=topic,
                owner_agent_id=owner_agent_id,
                event_type=event_type,
                limit=limit,
                cursor=cursor,
            )
        return await self.call("GET", "/v1/events", Page[EventRecord], params=query_params(query))

    async def iter_events(
        self,
        query: EventListQuery | None = None,
        *,
        topic: str | None = None,
        owner_agent_id: str | None = None,
        event_type: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[EventRecord]:
        """Every event definition matching the filters, page after page."""
        if query is None:
            query = query_of(
                EventListQuery,
                topic=topic,
                owner_agent_id=owner_agent_id,
                event_type=event_type,
                limit=limit,
            )
        async for item in pages(query, self.list_events):
            yield item

    async def get_event(self, event_type: str) -> EventRecord | None:
        """The definition of ``event_type`` that counts (schema resolved inline), or None."""
        return await self.call_or_none(
            "GET", f"/v1/events/{quote(event_type, safe='/:')}", EventRecord
        )

    # -- payload schemas ----------------------------------------------------------

    async def create_schema(self, schema: PayloadSchemaCreate) -> PayloadSchema:
        """Publish a schema version (idempotent for the same content).

        Raises:
            ServiceConflictError: the version exists with other content
                (``schema_version_conflict``): publish a new version.
        """
        return await self.call("POST", "/v1/schemas", PayloadSchema, json=schema)

    async def get_schema(self, name: str, version: str | None = None) -> PayloadSchema | None:
        """A version of ``name`` (the latest when ``version`` is None), or None."""
        path = f"/v1/schemas/{segment(name)}"
        if version is not None:
            path += f"/versions/{segment(version)}"
        return await self.call_or_none("GET", path, PayloadSchema)

    async def list_schema_versions(
        self, name: str, *, cursor: str | None = None, limit: int = 50
    ) -> Page[PayloadSchema]:
        """One page of ``name``'s versions, highest precedence first."""
        return await self.call(
            "GET",
            f"/v1/schemas/{segment(name)}/versions",
            Page[PayloadSchema],
            params={"cursor": cursor, "limit": limit},
        )

    async def iter_schema_versions(self, name: str) -> AsyncIterator[PayloadSchema]:
        """Every version of ``name``, highest precedence first."""
        cursor: str | None = None
        while True:
            page = await self.list_schema_versions(name, cursor=cursor)
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def validate_payload(
        self, name: str, version: str, payload: JsonValue
    ) -> SchemaValidationResult:
        """Check ``payload`` against a stored version; every violation is listed.

        Raises:
            ServiceNotFoundError: no such schema version.
        """
        return await self.call(
            "POST",
            f"/v1/schemas/{segment(name)}/versions/{segment(version)}/validate",
            SchemaValidationResult,
            json=SchemaValidationRequest(payload=payload),
        )

    # -- AsyncAPI -----------------------------------------------------------------

    async def asyncapi(
        self,
        *,
        agent: str | None = None,
        event_type: str | None = None,
        format: AsyncApiFormat = AsyncApiFormat.JSON,
        if_none_match: str | None = None,
    ) -> FetchedDocument | None:
        """The AsyncAPI 3.0 document of the caller's bus, as the registry sees it now.

        Args:
            agent: only this agent's operations and the messages and channels they use.
            event_type: only this event type's message, channels and operations.
            format: JSON (default) or YAML.
            if_none_match: the ETag of a document you hold: None comes back when it
                is still current (HTTP 304), at no cost to the registry.

        Returns:
            The document with its ETag, or None when ``if_none_match`` is current.

        Raises:
            ServiceNotFoundError: no live agent ``agent`` (``agent_not_found``: the
                message lists the live ones) or no such event type (``event_not_found``).
            ServiceValidationError: ``agent`` or ``event_type`` is not a valid name.
        """
        query = AsyncApiQuery(agent=agent, event_type=event_type, format=format)
        headers = {"If-None-Match": if_none_match} if if_none_match else None
        response = await self.request(
            "GET",
            "/v1/asyncapi",
            params=query.model_dump(mode="json", exclude_none=True),
            headers=headers,
        )
        if response.status_code == 304:
            return None
        return FetchedDocument(
            content=response.content,
            etag=response.headers.get("etag", ""),
            media_type=response.headers.get("content-type", ""),
        )
