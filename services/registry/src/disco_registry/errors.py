"""The registry's domain errors: kit error classes with stable, specific codes."""

from __future__ import annotations

from disco_service import Conflict, NotFound, UnprocessableEntity

__all__ = [
    "AgentNotFound",
    "ConflictingEventDefinition",
    "EventNotFound",
    "SchemaNotFound",
    "SchemaVersionConflict",
    "UnknownSchemaReference",
]


class AgentNotFound(NotFound):
    """No agent with that id is visible to the caller."""

    code = "agent_not_found"


class EventNotFound(NotFound):
    """No definition of that event type is visible to the caller."""

    code = "event_not_found"


class SchemaNotFound(NotFound):
    """No payload schema (version) with that name is visible to the caller."""

    code = "schema_not_found"


class SchemaVersionConflict(Conflict):
    """A schema version exists with different content (versions are immutable)."""

    code = "schema_version_conflict"


class UnknownSchemaReference(UnprocessableEntity):
    """An event definition names a payload schema version that is not registered."""

    code = "unknown_schema_ref"


class ConflictingEventDefinition(UnprocessableEntity):
    """One registration defines the same event type twice, differently."""

    code = "conflicting_event_definition"
