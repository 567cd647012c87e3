"""The envelope every event travels in, and its mapping onto a Kafka record.

The envelope is a CloudEvents 1.0 event with disco's extension attributes. The
Python API names them in snake_case (``tenant_id``); on the wire they take the
names CloudEvents allows, lower-case letters and digits only (``tenantid``,
see :data:`WIRE_NAMES`). Readers accept both spellings. On Kafka:

- the value is the envelope as JSON (structured mode, what disco produces);
- the key is ``plan_id``, else ``correlation_id``, else ``id``, so that all events
  of one plan stay ordered on one partition;
- the headers repeat ``ce_type``, ``ce_id``, ``ce_tenantid`` and ``traceparent``
  so consumers route and trace without parsing the value, and carry the
  structured-mode ``content-type``.

Records in CloudEvents binary mode (attributes in ``ce_*`` headers, the value
is the data, a ``content-type`` header) are read as envelopes too, so clients
of the CloudEvents SDKs work in either mode: see :meth:`Envelope.from_kafka_record`.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, Self, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    ValidationError,
)
from pydantic_core import ErrorDetails

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
    "BINARY_HEADER_PREFIX",
    "CLOUDEVENTS_CONTENT_TYPE",
    "TENANT_HEADER",
    "WIRE_NAMES",
    "ActionRequest",
    "ActionResult",
    "BusinessFact",
    "Envelope",
    "EnvelopeError",
    "KafkaHeaders",
    "Notification",
    "SystemEvent",
    "binary_attributes",
    "envelope_class_for",
    "headers_dict",
    "is_binary_mode",
    "tenant_header",
    "wire_attribute",
]

CLOUDEVENTS_CONTENT_TYPE = "application/cloudevents+json; charset=utf-8"
_CONTENT_TYPE_HEADER = ("content-type", CLOUDEVENTS_CONTENT_TYPE.encode())

KafkaHeaders = list[tuple[str, bytes]]

# CloudEvents: extension attribute names are lower-case letters and digits. Checked by
# pydantic-core as the key type of the envelope's extra attributes (a Python validator
# per envelope cost a sixth of parsing one, measured); _describe words the failure.
_EXTENSION_PATTERN = r"^[a-z0-9]{1,64}$"
_EXTENSION_NAME = Annotated[str, StringConstraints(pattern=_EXTENSION_PATTERN)]
_BINARY_DATA = "data_base64"
WIRE_NAMES: Mapping[str, str] = {
    "correlation_id": "correlationid",
    "causation_id": "causationid",
    "tenant_id": "tenantid",
    "user_id": "userid",
    "session_id": "sessionid",
    "plan_id": "planid",
    "task_id": "taskid",
    "response_event": "responseevent",
    "response_topic": "responsetopic",
    "payload_schema": "payloadschema",
    "traceparent": "traceparent",
}
"""disco's extension attributes: Python name -> CloudEvents name on the wire.

The wire names are what structured-mode JSON, binary-mode ``ce_*`` headers
and the routing headers carry; readers accept the Python names as well (what
disco wrote before).
"""

_PYTHON_NAMES = {wire: python for python, wire in WIRE_NAMES.items()}

BINARY_HEADER_PREFIX = "ce_"
"""CloudEvents' Kafka binding: in binary mode every attribute is a ``ce_<name>`` header."""

TENANT_HEADER = BINARY_HEADER_PREFIX + WIRE_NAMES["tenant_id"]
"""The header repeating the tenant of a structured-mode record (``ce_tenantid``)."""

_LEGACY_TENANT_HEADER = "tenant_id"
_STRUCTURED_MEDIA_TYPE = "application/cloudevents"
_JSON_MEDIA_TYPE = "application/json"


def _extension(wire: str, python: str, **field: Any) -> Any:
    """A field read by its wire name or its Python name, written by its wire name."""
    return Field(validation_alias=AliasChoices(wire, python), serialization_alias=wire, **field)


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
    correlation_id: Id | None = _extension(
        "correlationid",
        "correlation_id",
        default=None,
        description="Ties a response to its request.",
    )
    causation_id: Id | None = _extension(
        "causationid",
        "causation_id",
        default=None,
        description="The id of the event that caused this one.",
    )
    tenant_id: TenantId | None = _extension("tenantid", "tenant_id", default=None)
    user_id: Id | None = _extension("userid", "user_id", default=None)
    session_id: Id | None = _extension("sessionid", "session_id", default=None)
    plan_id: Id | None = _extension("planid", "plan_id", default=None)
    task_id: Id | None = _extension("taskid", "task_id", default=None)
    response_event: EventType | None = _extension(
        "responseevent",
        "response_event",
        default=None,
        description="The event type the responder must answer with.",
    )
    response_topic: TopicName | None = _extension(
        "responsetopic",
        "response_topic",
        default=None,
        description="Where the responder publishes (default action-results).",
    )
    payload_schema: str | None = _extension(
        "payloadschema",
        "payload_schema",
        default=None,
        max_length=300,
        description="`name` or `name@version` of the data's schema.",
    )
    traceparent: TraceParent | None = None

    topic_hint: ClassVar[Topic | None] = None

    # Unknown attributes are kept when their names are CloudEvents extension names;
    # any other name (``data_base64`` too: disco envelopes carry JSON data) is refused.
    __pydantic_extra__: dict[_EXTENSION_NAME, Any] = Field(init=False)

    # -- Kafka mapping -------------------------------------------------------

    def kafka_key(self) -> bytes:
        """The record key: ``plan_id``, else ``correlation_id``, else ``id``."""
        return (self.plan_id or self.correlation_id or self.id).encode()

    def kafka_headers(self) -> KafkaHeaders:
        """The record headers that let a consumer route and trace without parsing."""
        headers: KafkaHeaders = [
            _CONTENT_TYPE_HEADER,
            ("ce_id", self.id.encode()),
            ("ce_type", self.type.encode()),
        ]
        if self.tenant_id is not None:
            headers.append((TENANT_HEADER, self.tenant_id.encode()))
        if self.traceparent is not None:
            headers.append(("traceparent", self.traceparent.encode()))
        return headers

    def to_kafka_value(self) -> bytes:
        """The record value: the envelope as CloudEvents structured JSON (wire names)."""
        # The serializer's bytes as they are (model_dump_json decodes them to text).
        return self.__pydantic_serializer__.to_json(self, exclude_none=True, by_alias=True)

    def to_wire_dict(self) -> dict[str, Any]:
        """The envelope as the JSON object the wire carries (wire names, no nulls)."""
        return self.model_dump(mode="json", exclude_none=True, by_alias=True)

    @classmethod
    def from_kafka_record(
        cls, value: bytes | None, headers: Sequence[tuple[str, bytes | None]] | None
    ) -> Self:
        """Parse a record in either CloudEvents mode, or raise :class:`EnvelopeError`.

        A record whose ``content-type`` header is not a CloudEvents structured
        type and that carries a ``ce_specversion`` header is in binary mode:
        its attributes are the ``ce_*`` headers and its value is the data
        (JSON). Anything else is structured mode (:meth:`from_kafka_value`).
        """
        if not headers or not is_binary_mode(headers):
            return cls.from_kafka_value(value)
        return cls.from_dict(binary_attributes(value, headers))

    @classmethod
    def from_kafka_value(cls, value: bytes | None) -> Self:
        """Parse a record value, or raise :class:`EnvelopeError` with the reason."""
        if value is None:
            raise EnvelopeError("record has no value (tombstone)")
        try:
            # The validator itself: model_validate_json's wrapper costs a tenth of it.
            envelope: Self = cls.__pydantic_validator__.validate_json(value)
        except ValidationError as exc:
            raise EnvelopeError(_describe(exc)) from exc
        return envelope

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Self:
        """Build from a mapping, raising :class:`EnvelopeError` with the reason."""
        try:
            envelope: Self = cls.__pydantic_validator__.validate_python(value)
        except ValidationError as exc:
            raise EnvelopeError(_describe(exc)) from exc
        return envelope

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


def is_binary_mode(headers: Sequence[tuple[str, bytes | None]]) -> bool:
    """Whether a record with ``headers`` is a CloudEvents binary-mode record."""
    content_type: bytes | None = None
    specversion = False
    for name, value in headers:
        lowered = name.lower()
        if lowered == "content-type":
            content_type = value
        elif lowered == "ce_specversion":
            specversion = True
    if not specversion:
        return False
    if content_type is None:
        return True
    return (
        not content_type.decode("utf-8", "replace")
        .strip()
        .lower()
        .startswith(_STRUCTURED_MEDIA_TYPE)
    )


def binary_attributes(
    value: bytes | None, headers: Sequence[tuple[str, bytes | None]]
) -> dict[str, Any]:
    """The envelope attributes of a binary-mode record (``ce_*`` headers + data).

    Raises:
        EnvelopeError: a header is not UTF-8, or the data is not JSON.
    """
    fields: dict[str, Any] = {}
    content_type: str | None = None
    for name, raw in headers:
        lowered = name.lower()
        try:
            text = (raw or b"").decode("utf-8")
        except UnicodeDecodeError:
            raise EnvelopeError(f"header {name!r} is not UTF-8") from None
        if lowered == "content-type":
            content_type = text
        elif lowered.startswith(BINARY_HEADER_PREFIX):
            fields[lowered[len(BINARY_HEADER_PREFIX) :]] = text
    if content_type is not None:
        media_type = content_type.split(";", 1)[0].strip().lower()
        if media_type != _JSON_MEDIA_TYPE and not media_type.endswith("+json"):
            raise EnvelopeError(
                f"binary-mode data of content type {content_type!r}: disco envelopes carry JSON "
                "data (application/json)"
            )
        fields["datacontenttype"] = _JSON_MEDIA_TYPE
    if value is not None:
        try:
            fields["data"] = json.loads(value)
        except ValueError as exc:
            raise EnvelopeError(f"binary-mode data is not JSON: {exc}") from None
    return fields


def wire_attribute(document: Mapping[str, Any], name: str) -> Any:
    """The attribute ``name`` (a Python name) of a raw envelope JSON object.

    Looks up the wire name first, then the Python name older producers wrote.
    """
    wire = WIRE_NAMES.get(name, name)
    value = document.get(wire)
    if value is None and wire != name:
        value = document.get(name)
    return value


def tenant_header(headers: Sequence[tuple[str, bytes | None]] | None) -> str | None:
    """The tenant a record's headers name (``ce_tenantid``, or the older ``tenant_id``)."""
    found: str | None = None
    for name, value in headers or ():
        if name == TENANT_HEADER or (name == _LEGACY_TENANT_HEADER and found is None):
            found = (value or b"").decode("utf-8", "replace")
    return found


def _is_extension_name_error(error: ErrorDetails) -> bool:
    """Whether ``error`` refuses the name of an extra attribute (not a field's value)."""
    return (
        error["type"] == "string_pattern_mismatch"
        and error.get("ctx", {}).get("pattern") == _EXTENSION_PATTERN
        and len(error["loc"]) == 1
        and error["input"] == error["loc"][0]
    )


def _unknown_attribute(name: str) -> str:
    if name == _BINARY_DATA:
        return "data_base64 is not supported: disco envelopes carry JSON data"
    return (
        f"unknown attribute {name!r}: CloudEvents extension names are lower-case letters and digits"
    )


def _describe(exc: ValidationError) -> str:
    problems: list[str] = []
    for error in exc.errors(include_url=False):
        if error["type"] == "json_invalid":
            return f"value is not JSON: {error['msg']}"
        if error["type"] in {"model_type", "model_attributes_type"}:
            return "value is JSON but not an object: a CloudEvents envelope is a JSON object"
        loc = error["loc"]
        if _is_extension_name_error(error):
            problems.append(_unknown_attribute(str(loc[0])))
            continue
        where = ".".join(str(_PYTHON_NAMES.get(str(part), part)) for part in loc)
        where = where or "envelope"
        problems.append(f"{where}: {error['msg']}")
    return "not a disco envelope: " + "; ".join(problems)


class ActionRequest(Envelope):
    """A request for work on ``action-requests``: it always names its response event."""

    topic_hint: ClassVar[Topic | None] = Topic.ACTION_REQUESTS

    response_event: EventType = _extension(
        "responseevent",
        "response_event",
        description="The event type the responder must answer with.",
    )
    response_topic: TopicName = _extension(
        "responsetopic",
        "response_topic",
        default=Topic.ACTION_RESULTS.value,
        description="Where the responder publishes.",
    )


class ActionResult(Envelope):
    """A response on ``action-results``: it always carries the request's correlation id."""

    topic_hint: ClassVar[Topic | None] = Topic.ACTION_RESULTS

    correlation_id: Id = _extension(
        "correlationid", "correlation_id", description="The correlation id of the request answered."
    )


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
