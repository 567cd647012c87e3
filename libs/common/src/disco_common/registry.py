"""Registry contracts: agents, capabilities, event definitions, payload schemas, discovery.

Schema ownership (seed 004): the caller names the request and response *event
types*; the responder owns both *schemas* and publishes them here as the
``consumed_event`` and ``produced_events`` of a capability. Discovery answers
carry the full schemas so that a planner (or an LLM) can build a valid request
payload and read the response from the answer alone.

Routes (registry service): ``/v1/agents`` (upsert body :class:`AgentRegistration`,
records :class:`AgentRecord`, filters :class:`AgentListQuery`, heartbeats),
``/v1/discover`` (:class:`DiscoveryQuery` → :class:`DiscoveredAgent`),
``/v1/events`` (:class:`EventRecord`), ``/v1/schemas`` (:class:`PayloadSchemaCreate`,
:class:`PayloadSchema`, validation).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Self

from pydantic import Field, JsonValue, StringConstraints, model_validator

from disco_common._base import Body, Description, Metadata, Record
from disco_common._jsonschema import JsonSchemaDocument, check_json_schema, iter_violations
from disco_common.ids import AgentName, EventType, Id, SemVer, TenantId, TopicName, UtcDatetime
from disco_common.pagination import PageQuery
from disco_common.system_events import (
    AgentDeregisteredData,
    AgentExpiredData,
    AgentRegisteredData,
)

__all__ = [
    "AGENT_TTL_MAX_SECONDS",
    "AGENT_TTL_MIN_SECONDS",
    "MAX_CAPABILITIES",
    "MAX_VIOLATIONS",
    "NO_PARTITIONS_METADATA",
    "AgentCapability",
    "AgentDefinition",
    "AgentDeregisteredData",
    "AgentExpiredData",
    "AgentListQuery",
    "AgentRecord",
    "AgentRegisteredData",
    "AgentRegistration",
    "AgentStatus",
    "DiscoveredAgent",
    "DiscoveredCapability",
    "DiscoveredEvent",
    "DiscoveryQuery",
    "EventDefinition",
    "EventDirection",
    "EventListQuery",
    "EventRecord",
    "Heartbeat",
    "HeartbeatAck",
    "JsonSchemaDocument",
    "PayloadSchema",
    "PayloadSchemaCreate",
    "SchemaName",
    "SchemaRef",
    "SchemaValidationRequest",
    "SchemaValidationResult",
    "SchemaViolation",
    "Tag",
    "TaskName",
    "Visibility",
    "check_json_schema",
    "validate_payload",
]

NO_PARTITIONS_METADATA = "disco.no_partitions_since"
"""Registration metadata an agent instance sets (an ISO time) while its consumer has had no
partition for longer than its bound, and removes once it has some (``disco status`` shows it)."""

AGENT_TTL_MIN_SECONDS = 5
AGENT_TTL_MAX_SECONDS = 86_400
MAX_CAPABILITIES = 100
MAX_VIOLATIONS = 100

SchemaName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$"),
]
"""A payload schema's name: letters, digits and ``._-`` (it appears in URLs and in
an envelope's ``payload_schema`` as ``name@version``)."""

Tag = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=64, pattern=r"^[^\s].*$"),
]
"""A free-form tag, 1-64 characters (surrounding whitespace is stripped)."""

TaskName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$"),
]
"""A capability's name, e.g. ``calculate`` (letters, digits and ``._:/-``)."""


class Visibility(StrEnum):
    """Who can see an agent."""

    TENANT = "tenant"
    """Only the tenant that registered it."""
    PUBLIC = "public"
    """Every tenant (a platform agent)."""


class EventDirection(StrEnum):
    """Which way an agent's event (listed outside its capabilities) travels."""

    CONSUMED = "consumed"
    """The agent receives it (a handler for it)."""
    PRODUCED = "produced"
    """The agent sends it (announces it, or asks for it)."""


class AgentStatus(StrEnum):
    """Liveness of a registration."""

    LIVE = "live"
    """Heard from within its TTL; discoverable."""
    EXPIRED = "expired"
    """Not heard from within its TTL; hidden from discovery until it heartbeats again."""


# -- event definitions ------------------------------------------------------------


class SchemaRef(Body):
    """A reference to a registered payload schema version."""

    name: SchemaName = Field(description="The payload schema's name.")
    version: SemVer = Field(description="The exact version (schemas are immutable per version).")

    def __str__(self) -> str:
        return f"{self.name}@{self.version}"

    @classmethod
    def parse(cls, text: str) -> SchemaRef:
        """Read ``name@version`` (the form an envelope's ``payload_schema`` uses).

        Raises:
            ValueError: ``text`` has no ``@version`` part or either part is invalid.
        """
        name, sep, version = text.rpartition("@")
        if not sep:
            raise ValueError(f"schema reference {text!r} must be 'name@version'")
        return cls(name=name, version=version)


class EventDefinition(Body):
    """An event an agent consumes or produces: its type, topic and payload schema.

    The schema is given inline (``json_schema``) or by reference (``schema_ref``)
    to a registered payload schema, never both; neither means "any JSON".
    """

    event_type: EventType = Field(
        description="The event type (CloudEvents `type`), e.g. `calculate.requested`."
    )
    topic: TopicName = Field(
        description="The topic the event travels on, e.g. `action-requests` (without prefix)."
    )
    description: Description = Field(
        default="", description="What the event means, for people and LLMs."
    )
    json_schema: JsonSchemaDocument | None = Field(
        default=None, description="The payload's JSON Schema, inline."
    )
    schema_ref: SchemaRef | None = Field(
        default=None, description="The payload's schema, as a registered schema version."
    )
    direction: EventDirection | None = Field(
        default=None,
        description=(
            "For an event of the agent's `events`: `consumed` (it handles it) or `produced` "
            "(it sends it). Absent means produced: the agent owns what it lists. Inside a "
            "capability the place says it (`consumed_event`, `produced_events`)."
        ),
    )

    @model_validator(mode="after")
    def _schema_xor_ref(self) -> Self:
        if self.json_schema is not None and self.schema_ref is not None:
            raise ValueError(
                "give the payload schema inline (json_schema) or by reference (schema_ref), "
                "not both"
            )
        return self


class AgentCapability(Body):
    """Something an agent can do: the event that asks for it and the events it answers with."""

    task_name: TaskName = Field(description="The capability's name, e.g. `calculate`.")
    description: Description = Field(
        default="", description="What the capability does, for people and LLMs."
    )
    consumed_event: EventDefinition = Field(
        description="The request event (usually on `action-requests`) and its payload schema."
    )
    produced_events: list[EventDefinition] = Field(
        default_factory=list,
        max_length=20,
        description=(
            "The response events and their schemas (the caller picks the response event's "
            "type; its payload follows these schemas). The first is the primary response."
        ),
    )

    @model_validator(mode="after")
    def _directions_agree(self) -> Self:
        if self.consumed_event.direction == EventDirection.PRODUCED:
            raise ValueError(
                f"capability {self.task_name!r}: its consumed_event cannot have direction "
                "'produced' (leave direction out inside a capability)"
            )
        for event in self.produced_events:
            if event.direction == EventDirection.CONSUMED:
                raise ValueError(
                    f"capability {self.task_name!r}: produced event {event.event_type!r} "
                    "cannot have direction 'consumed' (leave direction out inside a capability)"
                )
        return self


def _unique_task_names(capabilities: list[AgentCapability]) -> None:
    seen: set[str] = set()
    for capability in capabilities:
        if capability.task_name in seen:
            raise ValueError(f"capability {capability.task_name!r} is listed twice")
        seen.add(capability.task_name)


# -- agents -----------------------------------------------------------------------


class AgentRegistration(Body):
    """Register or update an agent instance (idempotent upsert by ``agent_id``).

    Several instances of one agent ``name`` may be live at once; each registers
    with its own ``agent_id``. The tenant comes from the caller's token.
    """

    agent_id: Id = Field(
        description="This registration's id, stable across re-registrations of one instance."
    )
    name: AgentName = Field(
        description="The agent's name; instances of one name share the load (one consumer group)."
    )
    version: SemVer = Field(default="0.1.0", description="The agent's version (semver).")
    description: Description = Field(default="", description="What the agent is for.")
    tags: list[Tag] = Field(default_factory=list, max_length=50, description="Search tags.")
    instance_id: Id | None = Field(
        default=None, description="The process behind this registration (e.g. `host:pid`)."
    )
    visibility: Visibility = Field(
        default=Visibility.TENANT, description="`tenant` (default) or `public` to every tenant."
    )
    capabilities: list[AgentCapability] = Field(
        default_factory=list,
        max_length=MAX_CAPABILITIES,
        description="What the agent can do; task names are unique within an agent.",
    )
    events: list[EventDefinition] = Field(
        default_factory=list,
        max_length=200,
        description=(
            "Event definitions the agent owns outside its capabilities (e.g. business facts "
            "it announces). Simple agents may list events here and no capabilities."
        ),
    )
    ttl_seconds: int | None = Field(
        default=None,
        ge=AGENT_TTL_MIN_SECONDS,
        le=AGENT_TTL_MAX_SECONDS,
        description=(
            "Expire the agent when not heard from for this long (registry default if absent)."
        ),
    )
    metadata: Metadata = Field(default_factory=dict, description="Free-form attributes.")

    @model_validator(mode="after")
    def _check_capabilities(self) -> Self:
        _unique_task_names(self.capabilities)
        return self


class AgentRecord(Record):
    """A registered agent instance as the registry returns it."""

    agent_id: Id
    tenant_id: TenantId = Field(description="The tenant that registered the agent.")
    name: AgentName
    version: SemVer
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    instance_id: Id | None = None
    visibility: Visibility = Visibility.TENANT
    capabilities: list[AgentCapability] = Field(default_factory=list)
    events: list[EventDefinition] = Field(default_factory=list)
    ttl_seconds: int = Field(description="The TTL in force (the registration's or the default).")
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    status: AgentStatus = Field(description="`live` or `expired`.")
    registered_at: UtcDatetime = Field(description="First registration of this agent_id.")
    updated_at: UtcDatetime = Field(description="Last registration update.")
    last_heartbeat_at: UtcDatetime = Field(description="Last registration or heartbeat.")
    expires_at: UtcDatetime = Field(description="When it expires unless heard from again.")
    live_instances: int = Field(
        default=0,
        ge=0,
        description="How many processes behind this registration are live (heard from in TTL).",
    )


AgentDefinition = AgentRecord
"""Seed 004's name for a registered agent; the same model as :class:`AgentRecord`."""


class Heartbeat(Body):
    """A liveness signal for a registered agent (body of ``POST /v1/agents/{id}/heartbeat``)."""

    instance_id: Id | None = Field(default=None, description="The process sending it.")
    ttl_seconds: int | None = Field(
        default=None,
        ge=AGENT_TTL_MIN_SECONDS,
        le=AGENT_TTL_MAX_SECONDS,
        description="Change the TTL from now on (keep the current one if absent).",
    )


class HeartbeatAck(Record):
    """The registry's answer to a heartbeat.

    An unknown ``agent_id`` is answered with 404 instead: the agent should
    register again (the registry may have been reset).
    """

    agent_id: Id
    status: AgentStatus = Field(description="`live` after a heartbeat (an expired agent revives).")
    last_heartbeat_at: UtcDatetime
    expires_at: UtcDatetime


class AgentListQuery(PageQuery):
    """Filters for listing agents; all given filters must match."""

    name: AgentName | None = Field(default=None, description="Exact agent name.")
    capability: TaskName | None = Field(
        default=None, description="Has this capability (task name)."
    )
    consumed_event: EventType | None = Field(default=None, description="Consumes this event type.")
    produced_event: EventType | None = Field(default=None, description="Produces this event type.")
    tag: Tag | None = Field(default=None, description="Carries this tag.")
    q: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Free text over names, descriptions and capability descriptions.",
    )
    include_expired: bool = Field(default=False, description="Also list expired agents.")


# -- discovery --------------------------------------------------------------------


class DiscoveryQuery(Body):
    """A "who can do X?" question: at least one criterion; all given ones must match."""

    capability: TaskName | None = Field(default=None, description="A capability (task name).")
    capabilities: list[TaskName] = Field(
        default_factory=list,
        max_length=20,
        description="Agents that have every one of these capabilities (seed 004 `requirements`).",
    )
    consumed_event: EventType | None = Field(
        default=None, description="Agents that consume this event type."
    )
    produced_event: EventType | None = Field(
        default=None, description="Agents that produce this event type."
    )
    text: str | None = Field(
        default=None,
        min_length=1,
        max_length=500,
        description="Free text matched against names, descriptions and capabilities.",
    )
    limit: int = Field(default=20, ge=1, le=100, description="At most this many agents.")

    @model_validator(mode="after")
    def _needs_a_criterion(self) -> Self:
        if (
            self.capability is None
            and not self.capabilities
            and self.consumed_event is None
            and self.produced_event is None
            and self.text is None
        ):
            raise ValueError(
                "give at least one of capability, capabilities, consumed_event, produced_event "
                "or text "
                "(to list every agent, use GET /v1/agents)"
            )
        return self


class DiscoveredEvent(Record):
    """An event definition with its payload schema resolved (inline even if registered by ref)."""

    event_type: EventType
    topic: TopicName
    description: str = ""
    json_schema: dict[str, JsonValue] | None = Field(
        default=None,
        description="The payload's full JSON Schema; absent when the event declares none.",
    )
    schema_ref: SchemaRef | None = Field(
        default=None, description="The registered schema it was resolved from, if any."
    )


class DiscoveredCapability(Record):
    """A capability with the full request and response schemas."""

    task_name: str
    description: str = ""
    consumed_event: DiscoveredEvent = Field(description="How to ask: request event and schema.")
    produced_events: list[DiscoveredEvent] = Field(
        default_factory=list, description="What comes back: response events and schemas."
    )


class DiscoveredAgent(Record):
    """A live agent (all its instances together) that matched a discovery query."""

    name: AgentName
    description: str = ""
    version: SemVer = Field(description="The version of its most recently registered instance.")
    tags: list[str] = Field(default_factory=list)
    visibility: Visibility = Visibility.TENANT
    instance_count: int = Field(ge=1, description="How many live instances share the load.")
    agent_ids: list[Id] = Field(description="The agent_id of each live instance.")
    capabilities: list[DiscoveredCapability] = Field(default_factory=list)
    score: float | None = Field(
        default=None, description="Text relevance, when the query had `text` (higher is better)."
    )

    def capability(self, task_name: str) -> DiscoveredCapability | None:
        """The capability called ``task_name``, or None."""
        return next((cap for cap in self.capabilities if cap.task_name == task_name), None)

    def get_consumed_event_schema(self, capability: str) -> DiscoveredEvent | None:
        """The request event (type, topic, schema) that invokes ``capability``, or None."""
        found = self.capability(capability)
        return found.consumed_event if found else None

    def get_produced_event_schema(self, capability: str) -> DiscoveredEvent | None:
        """The primary response event of ``capability`` (its first produced event), or None."""
        found = self.capability(capability)
        return found.produced_events[0] if found and found.produced_events else None


# -- event registry ---------------------------------------------------------------


class EventRecord(Record):
    """An event definition in the event registry, owned by the agent that registered it."""

    event_type: EventType
    topic: TopicName
    description: str = ""
    json_schema: dict[str, JsonValue] | None = None
    schema_ref: SchemaRef | None = None
    owner_agent_id: Id = Field(description="The agent_id that registered (owns) this event.")
    tenant_id: TenantId
    created_at: UtcDatetime
    updated_at: UtcDatetime


class EventListQuery(PageQuery):
    """Filters for listing registered events."""

    topic: TopicName | None = Field(default=None, description="Events on this topic.")
    owner_agent_id: Id | None = Field(default=None, description="Events owned by this agent.")
    event_type: EventType | None = Field(default=None, description="This event type.")


# -- payload schemas --------------------------------------------------------------


class PayloadSchemaCreate(Body):
    """Publish a payload schema version. Versions are immutable: re-posting the same
    content is a no-op, different content under an existing version is a conflict."""

    name: SchemaName = Field(description="The schema's name, e.g. `calculate.request`.")
    version: SemVer = Field(description="Semantic version of this content.")
    json_schema: JsonSchemaDocument = Field(description="The JSON Schema document.")
    description: Description = Field(default="", description="What the schema describes.")


class PayloadSchema(Record):
    """A stored payload schema version."""

    name: SchemaName
    version: SemVer
    json_schema: dict[str, JsonValue]
    description: str = ""
    tenant_id: TenantId
    content_hash: str = Field(
        description="SHA-256 of the canonical JSON of `json_schema` (`disco_common.canonical`)."
    )
    created_at: UtcDatetime

    @property
    def ref(self) -> SchemaRef:
        """This version as a :class:`SchemaRef`."""
        return SchemaRef(name=self.name, version=self.version)


class SchemaValidationRequest(Body):
    """A payload to check against a schema version."""

    payload: JsonValue = Field(description="The JSON payload to validate.")


class SchemaViolation(Record):
    """One way a payload breaks its schema."""

    path: str = Field(description="JSON Pointer to the offending value (`` for the root).")
    message: str = Field(description="What is wrong, for people.")
    validator: str = Field(description="The JSON Schema keyword that failed, e.g. `required`.")
    schema_path: str = Field(default="", description="JSON Pointer to that keyword in the schema.")


class SchemaValidationResult(Record):
    """Whether a payload fits a schema, with every violation (up to a bound)."""

    valid: bool
    violations: list[SchemaViolation] = Field(default_factory=list)
    truncated: bool = Field(default=False, description="More violations exist than are listed.")
    schema_ref: SchemaRef | None = Field(default=None, description="The schema version used.")


def validate_payload(
    json_schema: dict[str, JsonValue],
    payload: JsonValue,
    *,
    schema_ref: SchemaRef | None = None,
    max_violations: int = MAX_VIOLATIONS,
) -> SchemaValidationResult:
    """Check ``payload`` against ``json_schema`` and report every violation.

    Pure: remote ``$ref``s are never fetched (they are reported as violations).

    Raises:
        ValueError: ``json_schema`` is not a valid JSON Schema document.
    """
    found = iter_violations(json_schema, payload)
    violations = [
        SchemaViolation(path=path, message=message, validator=keyword, schema_path=schema_path)
        for path, message, keyword, schema_path in found[:max_violations]
    ]
    return SchemaValidationResult(
        valid=not found,
        violations=violations,
        truncated=len(found) > max_violations,
        schema_ref=schema_ref,
    )
