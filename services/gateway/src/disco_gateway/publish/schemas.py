"""The HTTP publish bridge's request and answer."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from disco_common.ids import EventType, Id
from disco_common.topics import Topic

__all__ = ["PublishRequest", "Published"]


class Body(BaseModel):
    """A request body: unknown fields are refused (a typo is a 422, not an ignored option)."""

    model_config = ConfigDict(extra="forbid")


class Record(BaseModel):
    """An answer: unknown fields ignored by readers."""


class PublishRequest(Body):
    """An event to put on the bus for a client that cannot speak Kafka.

    The tenant and user are the token's; the envelope's id, time and source are
    the gateway's.
    """

    topic: Topic = Field(description="One of the five disco topics.")
    event_type: EventType = Field(description="The envelope's type, e.g. `hello.requested`.")
    data: JsonValue = Field(default=None, description="The payload (JSON).")
    correlation_id: Id | None = Field(
        default=None, description="Ties a response to this request (a new id if omitted)."
    )
    session_id: Id | None = Field(default=None, description="The session it belongs to.")
    response_event: EventType | None = Field(
        default=None,
        description="Required on `action-requests`: the event type the responder answers with.",
    )


class Published(Record):
    """What was published (and, with ``wait``, the answer)."""

    id: Id = Field(description="The published envelope's id.")
    topic: Topic
    event_type: EventType
    correlation_id: Id | None = None
    response: dict[str, JsonValue] | None = Field(
        default=None, description="With `wait`: the correlated response envelope."
    )
