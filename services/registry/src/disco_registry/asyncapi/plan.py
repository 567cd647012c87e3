"""What a tenant's bus holds, worked out from the registry's source before any of it
is written as AsyncAPI: the messages (one per event type), the topics that carry
them, and the operations of every agent (what it receives and sends).

Rules:

- **One message per event type.** When several live agents define one event type,
  the definition that counts is the one the registry validates requests against:
  the caller's own tenant's first, then one that gives a schema, then the most
  recently changed. disco's own system events (``task.*``, ``plan.*``,
  ``agent.*``, ``erasure.*``) always carry the platform's schema.
- **Operations per agent name and version**, described by its most recently
  registered live instance. A capability is a ``receive`` of its request whose
  ``reply`` is its answers; an event listed outside capabilities is a ``receive``
  when its direction is ``consumed``, else a ``send``; a ``send`` of a request
  another agent's capability takes gets that capability's answers as its
  ``reply``.
- **Filters** (``agent``, ``event_type``) keep the matching operations and the
  messages they use (an event type keeps the operations that send, receive or
  answer with it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import JsonValue

from disco_common.registry import EventDirection
from disco_common.system_events import SystemEventType
from disco_common.topics import Topic
from disco_registry.asyncapi.envelope import SYSTEM_TOPIC_ORDER
from disco_registry.asyncapi.repository import BusSource, SourceAgent, SourceCapability, SourceEvent
from disco_registry.errors import AgentNotFound, EventNotFound

__all__ = ["BusPlan", "Keys", "PlannedMessage", "PlannedOperation", "plan_bus"]

_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_PLATFORM_TYPES = {member.value: member for member in SystemEventType}
_NAMES_LISTED = 50


class Keys:
    """Component keys: AsyncAPI allows ``[A-Za-z0-9._-]``; each key is handed out once."""

    def __init__(self) -> None:
        self._taken: set[str] = set()

    def take(self, wanted: str) -> str:
        """``wanted`` made safe, with ``-2``, ``-3``... when already taken."""
        base = _KEY_UNSAFE.sub("_", wanted) or "_"
        key, n = base, 1
        while key in self._taken:
            n += 1
            key = f"{base}-{n}"
        self._taken.add(key)
        return key


@dataclass(slots=True)
class PlannedMessage:
    """The message of one event type."""

    key: str
    event_type: str
    topics: list[str]
    definition: SourceEvent | None
    """The definition that counts (None: a platform type nobody registered)."""
    platform: SystemEventType | None
    """Set when the payload is disco's own schema of a system event."""


@dataclass(slots=True)
class PlannedOperation:
    """One thing one agent (name and version) does on the bus."""

    key: str
    action: str  # "send" | "receive"
    topic: str
    event_type: str
    message: str
    agent: SourceAgent
    capability: SourceCapability | None
    reply: tuple[str, list[str]] | None = None
    """``(topic, message keys)`` of the answers, for a request/reply pair."""


@dataclass(slots=True)
class BusPlan:
    """What the document will say: messages by event type, topics, operations."""

    messages: dict[str, PlannedMessage] = field(default_factory=dict)
    topics: list[str] = field(default_factory=list)
    operations: list[PlannedOperation] = field(default_factory=list)
    filtered: bool = False


def _topic_order(topics: set[str]) -> list[str]:
    known = [topic for topic in SYSTEM_TOPIC_ORDER if topic in topics]
    return known + sorted(topics - set(SYSTEM_TOPIC_ORDER))


def _counting_definition(definitions: list[SourceEvent], tenant_id: str) -> SourceEvent:
    return min(
        definitions,
        key=lambda d: (
            d.tenant_id != tenant_id,
            d.json_schema is None,
            -d.updated_at,
            d.tenant_id,
            d.owner_agent_id,
        ),
    )


def _messages(source: BusSource, tenant_id: str, keys: Keys) -> dict[str, PlannedMessage]:
    by_type: dict[str, list[SourceEvent]] = {}
    for definition in source.events:
        by_type.setdefault(definition.event_type, []).append(definition)
    messages: dict[str, PlannedMessage] = {}
    for event_type in sorted(set(by_type) | set(_PLATFORM_TYPES)):
        definitions = by_type.get(event_type, [])
        topics = {d.topic for d in definitions}
        platform = _PLATFORM_TYPES.get(event_type)
        if platform is not None:
            topics.add(Topic.SYSTEM_EVENTS.value)
        messages[event_type] = PlannedMessage(
            key=keys.take(event_type),
            event_type=event_type,
            topics=_topic_order(topics),
            definition=_counting_definition(definitions, tenant_id) if definitions else None,
            platform=platform,
        )
    return messages


def _groups(agents: list[SourceAgent]) -> list[SourceAgent]:
    """One registration per (tenant, name, version): the most recently registered (the
    source lists them newest first within a name and version)."""
    seen: set[tuple[str, str, str]] = set()
    chosen: list[SourceAgent] = []
    for agent in agents:
        group = (agent.tenant_id, agent.name, agent.version)
        if group not in seen:
            seen.add(group)
            chosen.append(agent)
    return chosen


class _Operations:
    def __init__(self, source: BusSource, messages: dict[str, PlannedMessage]) -> None:
        self._messages = messages
        self._own = {(e.tenant_id, e.owner_agent_id, e.event_type): e for e in source.events}
        self._keys = Keys()
        self.planned: list[PlannedOperation] = []
        self._answers: dict[tuple[str, str], tuple[str, list[str]]] = {}

    def topic_of(self, agent: SourceAgent, event_type: str) -> str | None:
        own = self._own.get((agent.tenant_id, agent.agent_id, event_type))
        return own.topic if own is not None else None

    def add(
        self,
        agent: SourceAgent,
        action: str,
        event_type: str,
        topic: str,
        *,
        capability: SourceCapability | None = None,
        reply: tuple[str, list[str]] | None = None,
    ) -> PlannedOperation:
        key = self._keys.take(f"{agent.name}.v{agent.version}.{action}.{event_type}")
        planned = PlannedOperation(
            key=key,
            action=action,
            topic=topic,
            event_type=event_type,
            message=self._messages[event_type].key,
            agent=agent,
            capability=capability,
            reply=reply,
        )
        self.planned.append(planned)
        return planned

    def capability(self, agent: SourceAgent, capability: SourceCapability) -> None:
        topic = self.topic_of(agent, capability.consumed)
        if topic is None:
            return
        by_topic: dict[str, list[str]] = {}
        for event_type in capability.produced:
            answer_topic = self.topic_of(agent, event_type)
            if answer_topic is not None:
                by_topic.setdefault(answer_topic, []).append(self._messages[event_type].key)
        answers = list(by_topic.items())
        reply = answers[0] if answers else None
        self.add(agent, "receive", capability.consumed, topic, capability=capability, reply=reply)
        if reply is not None:
            self._answers.setdefault((topic, capability.consumed), reply)
        # Answers on a second topic cannot share the reply: they are sends of their own.
        for _answer_topic, keys in answers[1:]:
            for event_type in capability.produced:
                if self._messages[event_type].key in keys:
                    self.add(agent, "send", event_type, _answer_topic, capability=capability)

    def listed(self, agent: SourceAgent, event_type: str, direction: str | None) -> None:
        topic = self.topic_of(agent, event_type)
        if topic is None:
            return
        if direction == EventDirection.CONSUMED.value:
            self.add(agent, "receive", event_type, topic)
        else:
            planned = self.add(agent, "send", event_type, topic)
            planned.reply = self._answers.get((topic, event_type))


def plan_bus(
    source: BusSource, *, tenant_id: str, agent: str | None, event_type: str | None
) -> BusPlan:
    """The plan of ``tenant_id``'s document, narrowed by ``agent`` and ``event_type``.

    Raises:
        AgentNotFound: no live agent called ``agent`` is visible to the tenant.
        EventNotFound: no live agent defines ``event_type`` (and it is not disco's own).
    """
    messages = _messages(source, tenant_id, Keys())
    groups = _groups(source.agents)
    operations = _Operations(source, messages)
    # Capabilities first, so that every request's answers are known to its senders.
    for group in groups:
        for capability in group.capabilities:
            operations.capability(group, capability)
    for group in groups:
        covered = {c.consumed for c in group.capabilities}
        covered.update(e for c in group.capabilities for e in c.produced)
        for listed_type, direction in group.events:
            if listed_type not in covered:
                operations.listed(group, listed_type, direction)
    order = {id(group): index for index, group in enumerate(groups)}
    planned = sorted(operations.planned, key=lambda op: (order[id(op.agent)], op.key))
    if agent is None and event_type is None:
        carried = {topic for message in messages.values() for topic in message.topics}
        topics = _topic_order(set(SYSTEM_TOPIC_ORDER) | carried)
        return BusPlan(messages=messages, topics=topics, operations=planned)
    return _narrowed(messages, planned, groups, agent=agent, event_type=event_type)


def _narrowed(
    messages: dict[str, PlannedMessage],
    planned: list[PlannedOperation],
    groups: list[SourceAgent],
    *,
    agent: str | None,
    event_type: str | None,
) -> BusPlan:
    if agent is not None and not any(group.name == agent for group in groups):
        names = sorted({group.name for group in groups})[:_NAMES_LISTED]
        listed: list[JsonValue] = list(names)
        raise AgentNotFound(
            f"no live agent {agent!r} is visible to you"
            + (f"; live agents: {', '.join(names)}" if names else ""),
            details={"live_agents": listed},
        )
    if event_type is not None and event_type not in messages:
        raise EventNotFound(
            f"no live agent defines the event type {event_type!r}; see GET /v1/asyncapi "
            "for the event types on your bus",
        )
    wanted_key = messages[event_type].key if event_type is not None else None
    kept = [
        op
        for op in planned
        if (agent is None or op.agent.name == agent)
        and (
            wanted_key is None
            or op.message == wanted_key
            or (op.reply is not None and wanted_key in op.reply[1])
        )
    ]
    used = {op.message for op in kept}
    used.update(key for op in kept if op.reply is not None for key in op.reply[1])
    if wanted_key is not None:
        used.add(wanted_key)
    chosen = {name: m for name, m in messages.items() if m.key in used}
    topics = _topic_order({t for m in chosen.values() for t in m.topics})
    return BusPlan(messages=chosen, topics=topics, operations=kept, filtered=True)
