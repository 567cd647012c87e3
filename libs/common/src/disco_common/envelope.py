"""The envelope every event travels in, and its mapping onto a Kafka record.

The envelope is a CloudEvents 1.0 event (structured JSON mode) with disco's
extension attributes. On Kafka:

- the value is the envelope as JSON;
- the key is ``plan_id``, else ``correlation_id``, else ``id``, so that all events
  of one plan stay ordered on one partition;
- the headers repeat ``ce_type``, ``ce_id``, ``tenant_id`` and ``traceparent``
  so consumers route and trace without parsing the value, and carry the
  structured-mode ``content-type``.

Any Kafka client in any language can produce such a record; see
:meth:`Envelope.from_kafka_value` for what a consumer accepts.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, Self, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    model_validator,
)

from disco_common.ids import (
    EventType,
    Id,
    TenantId,
    TopicName,
    TraceParent,
    UtcDatetime,
    new_id,
    utcnow,
)
from disco_common.topics import Topic

__all__ = [
    "CLOUDEVENTS_CONTENT_TYPE",
    "ActionRequest",
    "ActionResult",
    "BusinessFact",
    "Envelope",
    "EnvelopeError",
    "KafkaHeaders",
    "Notification",
    "SystemEvent",
    "envelope_class_for",
    "headers_dict",
]

CLOUDEVENTS_CONTENT_TYPE = "application/cloudevents+json; charset=utf-8"

KafkaHeaders = list[tuple[str, bytes]]

# CloudEvents: extension attribute names are lower-case letters and digits.
_EXTENSION_NAME = re.compile(r"^[a-z0-9]{1,64}$")
# Attributes disco uses that are not CloudEvents core attributes. (They contain
# underscores, which strict CloudEvents naming forbids; disco fixed these names
# before that mattered and every consumer here reads them as they are.)
_DISCO_EXTENSIONS = frozenset(
    {
        "correlation_id",
        "causation_id",
        "tenant_id",
        "user_id",
        "session_id",
        "plan_id",
        "task_id",
        "response_event",
        "response_topic",
        "payload_schema",
        "traceparent",
    }
)


EnvelopeT = TypeVar("EnvelopeT", bound="Envelope")


class EnvelopeError(ValueError):
    """A Kafka record's value is not a disco envelope. ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Envelope(BaseModel):
    """A CloudEvents 1.0 event with disco's extensions.

    Unknown CloudEvents extension attributes (lower-case alphanumeric names) are
    kept and passed on unchanged; anything else unknown is rejected.
    """

    model_config = ConfigDict(extra="allow", frozen=True, str_strip_whitespace=False)

    # CloudEvents core attributes
    id: Id = Field(
        default_factory=new_id, description="Unique per source; consumers deduplicate on it."
    )
    source: str = Field(
        min_length=1, max_length=1024, description="Who produced the event (URI-reference)."
    )
    specversion: Literal["1.0"] = "1.0"
    type: EventType = Field(description="The event type, e.g. `calculate.requested`.")
    time: UtcDatetime = Field(default_factory=utcnow)
    datacontenttype: Literal["application/json"] = "application/json"
    subject: str | None = Field(default=None, max_length=1024)
    data: JsonValue = None

    # disco extensions
    correlation_id: Id | None = Field(default=None, description="Ties a response to its request.")
    causation_id: Id | None = Field(
        default=None, description="The id of the event that caused this one."
    )
    tenant_id: TenantId | None = None
    user_id: Id | None = None
    session_id: Id | None = None
    plan_id: Id | None = None
    task_id: Id | None = None
    response_event: EventType | None = Field(
        default=None, description="The event type the responder must answer with."
    )
    response_topic: TopicName | None = Field(
        default=None, description="Where the responder publishes (default action-results)."
    )
    payload_schema: str | None = Field(
        default=None, max_length=300, description="`name` or `name@version` of the data's schema."
    )
    traceparent: TraceParent | None = None

    topic_hint: ClassVar[Topic | None] = None

    @model_validator(mode="before")
    @classmethod
    def _reject_binary_data(cls, value: Any) -> Any:
        if isinstance(value, Mapping) and "data_base64" in value:
            raise ValueError("data_base64 is not supported: disco envelopes carry JSON data")
        return value

    @model_validator(mode="after")
    def _check_extensions(self) -> Self:
        for name in self.model_extra or {}:
            if not _EXTENSION_NAME.fullmatch(name):
                raise ValueError(
                    f"unknown attribute {name!r}: CloudEvents extension names are "
                    "lower-case letters and digits"
                )
        return self

    # -- Kafka mapping -------------------------------------------------------

    def kafka_key(self) -> bytes:
        """The record key: ``plan_id``, else ``correlation_id``, else ``id``."""
        return (self.plan_id or self.correlation_id or self.id).encode()

    def kafka_headers(self) -> KafkaHeaders:
        """The record headers that let a consumer route and trace without parsing."""
        headers: KafkaHeaders = [
            ("content-type", CLOUDEVENTS_CONTENT_TYPE.encode()),
            ("ce_id", self.id.encode()),
            ("ce_type", self.type.encode()),
        ]
        if self.tenant_id is not None:
            headers.append(("tenant_id", self.tenant_id.encode()))
        if self.traceparent is not None:
            headers.append(("traceparent", self.traceparent.encode()))
        return headers

    def to_kafka_value(self) -> bytes:
        """The record value: the envelope as CloudEvents structured JSON."""
        return self.model_dump_json(exclude_none=True).encode()

    @classmethod
    def from_kafka_value(cls, value: bytes | None) -> Self:
        """Parse a record value, or raise :class:`EnvelopeError` with the reason."""
        if value is None:
            raise EnvelopeError("record has no value (tombstone)")
        try:
            return cls.model_validate_json(value)
        except ValidationError as exc:
            raise EnvelopeError(_describe(exc)) from exc

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Self:
        """Build from a mapping, raising :class:`EnvelopeError` with the reason."""
        try:
            return cls.model_validate(value)
        except ValidationError as exc:
            raise EnvelopeError(_describe(exc)) from exc

    # `builtins.type`: inside this class `type` names the CloudEvents attribute.
    def as_(self, kind: builtins.type[EnvelopeT]) -> EnvelopeT:
        """This envelope as one of the specialisations, validated by its rules."""
        return kind.from_dict(self.model_dump(exclude_none=True))

    @property
    def extensions(self) -> dict[str, Any]:
        """Extension attributes this envelope carries beyond disco's own."""
        return dict(self.model_extra or {})

    def with_changes(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied and validated."""
        return type(self).model_validate({**self.model_dump(exclude_none=True), **changes})


def _describe(exc: ValidationError) -> str:
    problems: list[str] = []
    for error in exc.errors(include_url=False):
        if error["type"] == "json_invalid":
            return f"value is not JSON: {error['msg']}"
        if error["type"] in {"model_type", "model_attributes_type"}:
            return "value is JSON but not an object: a CloudEvents envelope is a JSON object"
        where = ".".join(str(part) for part in error["loc"]) or "envelope"
        problems.append(f"{where}: {error['msg']}")
    return "not a disco envelope: " + "; ".join(problems)


class ActionRequest(Envelope):
    """A request for work on ``action-requests``: it always names its response event."""

    topic_hint: ClassVar[Topic | None] = Topic.ACTION_REQUESTS

    response_event: EventType = Field(description="The event type the responder must answer with.")
    response_topic: TopicName = Field(
        default=Topic.ACTION_RESULTS.value, description="Where the responder publishes."
    )


class ActionResult(Envelope):
    """A response on ``action-results``: it always carries the request's correlation id."""

    topic_hint: ClassVar[Topic | None] = Topic.ACTION_RESULTS

    correlation_id: Id = Field(description="The correlation id of the request answered.")


class BusinessFact(Envelope):
    """A domain fact on ``business-facts``; nobody is expected to answer."""

    topic_hint: ClassVar[Topic | None] = Topic.BUSINESS_FACTS


class SystemEvent(Envelope):
    """Lifecycle and progress on ``system-events`` (plan.*, task.*, agent.*)."""

    topic_hint: ClassVar[Topic | None] = Topic.SYSTEM_EVENTS


class Notification(Envelope):
    """Human-facing traffic on ``notification-events``."""

    topic_hint: ClassVar[Topic | None] = Topic.NOTIFICATION_EVENTS


_BY_TOPIC: dict[str, type[Envelope]] = {
    kind.topic_hint.value: kind
    for kind in (ActionRequest, ActionResult, BusinessFact, SystemEvent, Notification)
    if kind.topic_hint is not None
}


def envelope_class_for(topic: str | Topic) -> type[Envelope]:
    """The specialisation whose rules apply on ``topic`` (the base class for others)."""
    return _BY_TOPIC.get(str(topic), Envelope)


def headers_dict(headers: Sequence[tuple[str, bytes | None]] | None) -> dict[str, str]:
    """Kafka headers as a dict of text (last value wins, undecodable bytes replaced)."""
    result: dict[str, str] = {}
    for key, value in headers or ():
        result[key] = (value or b"").decode("utf-8", errors="replace")
    return result
