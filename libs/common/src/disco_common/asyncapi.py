"""The AsyncAPI document of a tenant's bus (``GET /v1/asyncapi`` on the registry).

The registry builds an AsyncAPI 3.0 document from what is registered now; the
SDK's CLI (``disco asyncapi``) and the gateway's console read it. The document
is plain AsyncAPI: any AsyncAPI tool reads it. What disco adds lives in
``x-disco-*`` extensions, named here (:class:`AsyncApiExtension`) because the
readers depend on them.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from disco_common._base import Body
from disco_common.ids import AgentName, EventType

__all__ = [
    "ASYNCAPI_JSON_MEDIA_TYPE",
    "ASYNCAPI_VERSION",
    "ASYNCAPI_YAML_MEDIA_TYPE",
    "AsyncApiExtension",
    "AsyncApiFormat",
    "AsyncApiQuery",
]

ASYNCAPI_VERSION = "3.0.0"
"""The AsyncAPI version of the documents the registry writes."""

ASYNCAPI_JSON_MEDIA_TYPE = "application/json"
ASYNCAPI_YAML_MEDIA_TYPE = "application/yaml"
"""The media types of the two forms of the document (``Accept``, ``Content-Type``)."""


class AsyncApiFormat(StrEnum):
    """The form of the document."""

    JSON = "json"
    YAML = "yaml"


class AsyncApiQuery(Body):
    """What ``GET /v1/asyncapi`` narrows the document to (all given must match)."""

    agent: AgentName | None = Field(
        default=None,
        description="Only this agent's operations and the messages and channels they use.",
    )
    event_type: EventType | None = Field(
        default=None,
        description="Only this event type's message, its channels and the operations using it.",
    )
    format: AsyncApiFormat | None = Field(
        default=None,
        description=(
            "`json` or `yaml`; without it, `Accept: application/yaml` asks for YAML and "
            "anything else gets JSON."
        ),
    )


class AsyncApiExtension(StrEnum):
    """The ``x-disco-*`` extensions of the document, where they sit and what they hold."""

    TENANT = "x-disco-tenant"
    """On ``info``: the tenant the document describes."""
    TOPIC_PREFIX = "x-disco-topic-prefix"
    """On ``info``: the environment's topic prefix (channel addresses carry it)."""
    FILTER = "x-disco-filter"
    """On ``info``: ``{"agent": ..., "event_type": ...}`` the document was narrowed to."""
    TOPIC = "x-disco-topic"
    """On a channel: its topic without the prefix (``action-requests``)."""
    DEAD_LETTERS_OF = "x-disco-dead-letters-of"
    """On a ``.dlq`` channel: the channel whose records it keeps."""
    EVENT_TYPE = "x-disco-event-type"
    """On a message: its CloudEvents ``type``."""
    SCHEMA = "x-disco-schema"
    """On a message: where its payload schema comes from, ``{"$id", "version", "source",
    "name"?, "owner"?}``; ``source`` is ``registered`` (a payload schema version),
    ``inline`` (given by the owning agent's registration) or ``platform`` (disco's own)."""
    AGENT = "x-disco-agent"
    """On an operation: ``{"name", "version", "description", "visibility", "tenant"}``."""
    CAPABILITY = "x-disco-capability"
    """On an operation: the capability (task name) it serves, when it serves one."""
