"""The console's Bus page: the registry's AsyncAPI document of the person's bus, for people.

The document (``GET /v1/asyncapi`` with the person's token) is read with the
SDK's :class:`~disco.asyncapi.BusDocument`: topics, event types with their
payload fields as tables, who sends and receives each, the agents. Each
gateway instance keeps the last documents it read (per tenant and filter) with
their ETag and asks the registry whether they changed (``If-None-Match``): a
304 costs neither side a document.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from disco.asyncapi import BusDocument, FetchedDocument, SchemaRow
from disco_common.asyncapi import AsyncApiFormat
from disco_gateway.console.auth import ConsoleUser
from disco_gateway.console.clients import ConsoleClients, forwarding

__all__ = [
    "BusView",
    "EventTypeView",
    "TopicView",
    "bus_download",
    "bus_view",
]

_EXAMPLE_MAX_CHARS = 2000


@dataclass(frozen=True)
class TopicView:
    """A topic and its event types."""

    name: str
    address: str
    description: str
    event_types: list[str]
    dead_letters: str | None
    """The address of its ``.dlq`` topic, when the document lists it."""


@dataclass(frozen=True)
class EventTypeView:
    """An event type: what it carries, on which topics, who sends and receives it."""

    event_type: str
    anchor: str
    summary: str
    topics: list[str]
    schema_label: str
    schema_id: str
    rows: list[SchemaRow]
    senders: list[str]
    receivers: list[str]
    example: str | None
    platform: bool
    """disco's own event type (``task.*``, ``plan.*``...), listed apart."""


@dataclass(frozen=True)
class AgentView:
    """An agent (its live versions together) and the event types it receives and sends."""

    name: str
    anchor: str
    versions: list[str]
    description: str
    visibility: str
    receives: list[str]
    sends: list[str]


@dataclass(frozen=True)
class BusView:
    """Everything the Bus page shows."""

    tenant: str
    title: str
    servers: list[str]
    topic_prefix: str
    topics: list[TopicView]
    event_types: list[EventTypeView]
    agents: list[AgentView]
    agent_filter: str
    event_type_filter: str

    @property
    def registered(self) -> list[EventTypeView]:
        """The event types agents registered."""
        return [e for e in self.event_types if not e.platform]

    @property
    def platform(self) -> list[EventTypeView]:
        """disco's own system events."""
        return [e for e in self.event_types if e.platform]


def anchor(kind: str, name: str) -> str:
    """An HTML id for ``name`` (event types and agent names keep to URL-safe characters)."""
    return f"{kind}-{name}"


async def _document(
    clients: ConsoleClients, user: ConsoleUser, agent: str, event_type: str
) -> BusDocument:
    # The tenant comes from the verified token, and the ETag hashes a document that
    # names its tenant: a 304 is never another tenant's document.
    key = (user.tenant_id, agent, event_type)
    kept = clients.bus_documents.get(key)
    with forwarding(user.token):
        fetched = await clients.registry.asyncapi(
            agent=agent or None,
            event_type=event_type or None,
            if_none_match=kept[0] if kept is not None else None,
        )
    if fetched is None and kept is not None:
        return kept[1]
    assert fetched is not None  # no If-None-Match, no 304
    document = BusDocument(fetched.as_dict())
    clients.bus_documents.put(key, fetched.etag, document)
    return document


def _example(examples: list[Any]) -> str | None:
    if not examples:
        return None
    text = json.dumps(examples[0], indent=2, ensure_ascii=False)
    return text if len(text) <= _EXAMPLE_MAX_CHARS else text[:_EXAMPLE_MAX_CHARS] + "\n…"


async def bus_view(
    clients: ConsoleClients, user: ConsoleUser, *, agent: str = "", event_type: str = ""
) -> BusView:
    """The Bus page of the person's tenant, narrowed to ``agent``/``event_type`` if given.

    Raises:
        ServiceError: the registry refused (an unknown agent or event type: 404) or is down.
    """
    document = await _document(clients, user, agent, event_type)
    dead_letters = {t.dead_letters_of: t.address for t in document.topics if t.dead_letters_of}
    topics = [
        TopicView(
            name=topic.name,
            address=topic.address,
            description=topic.description,
            event_types=topic.event_types,
            dead_letters=dead_letters.get(topic.name),
        )
        for topic in document.topics
        if topic.dead_letters_of is None
    ]
    event_types = [
        EventTypeView(
            event_type=message.event_type,
            anchor=anchor("event", message.event_type),
            summary=message.summary,
            topics=message.topics,
            schema_label=message.schema_label,
            schema_id=str(message.schema.get("$id", "")),
            rows=document.schema_rows(message.payload) if message.payload is not None else [],
            senders=message.senders,
            receivers=message.receivers,
            example=_example(message.examples),
            platform=message.schema.get("source") == "platform",
        )
        for message in sorted(document.messages.values(), key=lambda m: m.event_type)
    ]
    agents: dict[str, AgentView] = {}
    # One row per agent name: its versions side by side, what any of them does.
    for found in sorted(document.agents, key=lambda a: (a.name, a.version)):
        seen = agents.get(found.name)
        if seen is None:
            agents[found.name] = AgentView(
                name=found.name,
                anchor=anchor("bus-agent", found.name),
                versions=[found.version],
                description=found.description,
                visibility=found.visibility,
                receives=list(found.receives),
                sends=list(found.sends),
            )
            continue
        seen.versions.append(found.version)
        seen.receives.extend(t for t in found.receives if t not in seen.receives)
        seen.sends.extend(t for t in found.sends if t not in seen.sends)
    return BusView(
        tenant=document.tenant or user.tenant_id,
        title=document.title,
        servers=document.servers,
        topic_prefix=document.topic_prefix,
        topics=topics,
        event_types=event_types,
        agents=list(agents.values()),
        agent_filter=agent,
        event_type_filter=event_type,
    )


async def bus_download(
    clients: ConsoleClients, user: ConsoleUser, form: AsyncApiFormat
) -> FetchedDocument:
    """The whole document of the person's bus, as the registry wrote it (to save and open
    in AsyncAPI tools).

    Raises:
        ServiceError: the registry refused or is down.
    """
    with forwarding(user.token):
        fetched = await clients.registry.asyncapi(format=form)
    assert fetched is not None  # no If-None-Match, no 304
    return fetched
