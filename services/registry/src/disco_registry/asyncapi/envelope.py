"""The parts of the document every tenant's bus shares: servers, the CloudEvents
envelope as Kafka headers, record keys, correlation, dead letters, topic channels.

What an event looks like on Kafka (see :mod:`disco_common.envelope`):

- **structured mode** (what disco's own producers write): the record value is the
  whole envelope as JSON (``content-type: application/cloudevents+json``) with
  the payload under ``data``; the headers repeat ``ce_id``, ``ce_type``,
  ``ce_tenantid`` and ``traceparent``;
- **binary mode** (what CloudEvents SDKs may write, read by every disco
  consumer): the value is the payload itself (``content-type:
  application/json``) and every attribute is a ``ce_<name>`` header.

The document's messages describe the binary view (payload = the data, attributes
= headers) and say how the structured envelope wraps it.
"""

from __future__ import annotations

from typing import Any

from disco_common.asyncapi import AsyncApiExtension
from disco_common.auth import TENANT_CREDENTIAL_HEADER
from disco_common.envelope import BINARY_HEADER_PREFIX, CLOUDEVENTS_CONTENT_TYPE, Envelope
from disco_common.topics import Topic, dlq_topic, topic_name

__all__ = [
    "DEAD_LETTER_MESSAGE",
    "KAFKA_BINDING_VERSION",
    "SYSTEM_TOPIC_ORDER",
    "channel",
    "dead_letter_channel",
    "envelope_components",
    "example_headers",
    "info_description",
    "servers_and_security",
    "trait_for",
]

KAFKA_BINDING_VERSION = "0.5.0"
DEAD_LETTER_MESSAGE = "disco.dead-letter"
SYSTEM_TOPIC_ORDER = [topic.value for topic in Topic]

_KEY_SCHEMA = "disco.record-key"
_ENVELOPE_SCHEMA = "disco.cloudevents-envelope"
_HEADERS_SCHEMA = "disco.headers"
_CORRELATION = "disco.correlationid"
_GENERIC_TRAIT = "disco.envelope"

_TOPIC_DESCRIPTIONS = {
    Topic.ACTION_REQUESTS.value: (
        "Requests for work: tool invocations, tasks, goals. Every request names the event "
        "type its answer comes as (`responseevent`) and may name the topic (`responsetopic`, "
        "default `action-results`). Payloads are checked against the registered schema."
    ),
    Topic.ACTION_RESULTS.value: (
        "Answers, correlated to their request by `correlationid` (the request's "
        "`correlationid`, else its `id`)."
    ),
    Topic.BUSINESS_FACTS.value: "Domain facts; nobody is expected to answer.",
    Topic.SYSTEM_EVENTS.value: (
        "Lifecycle and progress: task.*, plan.*, agent.*, erasure.* (what the tracker reads)."
    ),
    Topic.NOTIFICATION_EVENTS.value: (
        "Human-facing traffic: questions to people and their answers, agent UI events, the "
        "tool approval lifecycle."
    ),
}

# (header, description, JSON Schema of its text) in the order a reader meets them.
_CORE_HEADERS: list[tuple[str, str, dict[str, Any]]] = [
    ("ce_id", "Unique per source; consumers deduplicate on it.", {"type": "string"}),
    ("ce_source", "Who produced the event (a URI-reference).", {"type": "string"}),
    ("ce_specversion", "The CloudEvents version.", {"type": "string", "const": "1.0"}),
    ("ce_type", "The event type (this message's name).", {"type": "string"}),
    ("ce_time", "When it happened (RFC 3339).", {"type": "string", "format": "date-time"}),
    ("ce_subject", "The subject of the event, if any.", {"type": "string"}),
]
_EXTENSION_FIELDS = [
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
]
_EXTENSION_TEXT = {
    "tenant_id": "The tenant the event belongs to (consumers act for it).",
    "user_id": "The user the event acts for.",
    "session_id": "The session (conversation) it belongs to.",
    "plan_id": "The plan it belongs to (also the record key).",
    "task_id": "The task it is about.",
    "traceparent": "W3C trace context: traces continue across the bus.",
}


def _wire(field: str) -> str:
    info = Envelope.model_fields[field]
    return info.serialization_alias or field


def _extension_description(field: str) -> str:
    return Envelope.model_fields[field].description or _EXTENSION_TEXT.get(field, field)


def _header_properties() -> dict[str, Any]:
    properties: dict[str, Any] = {
        "content-type": {
            "type": "string",
            "description": (
                f"`{CLOUDEVENTS_CONTENT_TYPE}` in structured mode (the value is the envelope); "
                "`application/json` in binary mode (the value is the payload)."
            ),
        }
    }
    for name, description, schema in _CORE_HEADERS:
        properties[name] = {**schema, "description": description}
    for field in _EXTENSION_FIELDS:
        name = BINARY_HEADER_PREFIX + _wire(field)
        properties[name] = {"type": "string", "description": _extension_description(field)}
    properties["traceparent"] = {
        "type": "string",
        "description": "W3C trace context, repeated as a plain header in both modes.",
    }
    properties[TENANT_CREDENTIAL_HEADER] = {
        "type": "string",
        "description": (
            "A credential that vouches for `ce_tenantid` (a signed token of the tenant). "
            "Required where the deployment runs in production mode: consumers dead-letter "
            "envelopes whose tenant no credential vouches for."
        ),
    }
    return properties


def _required_in_binary_mode(topic: str | None) -> list[str]:
    required = ["ce_id", "ce_source", "ce_type"]
    if topic == Topic.ACTION_REQUESTS.value:
        required.append(BINARY_HEADER_PREFIX + _wire("response_event"))
    if topic == Topic.ACTION_RESULTS.value:
        required.append(BINARY_HEADER_PREFIX + _wire("correlation_id"))
    return required


def _headers_schema(topic: str | None) -> dict[str, Any]:
    return {
        "type": "object",
        "description": (
            "Kafka record headers. Binary mode (a `ce_specversion` header) carries every "
            "attribute here; structured mode carries them in the value and repeats `ce_id`, "
            "`ce_type`, `ce_tenantid` and `traceparent` here for routing."
        ),
        "properties": _header_properties(),
        "if": {"required": ["ce_specversion"]},
        "then": {"required": _required_in_binary_mode(topic)},
    }


def _envelope_schema() -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for name, description, schema in _CORE_HEADERS:
        properties[name.removeprefix(BINARY_HEADER_PREFIX)] = {**schema, "description": description}
    properties["datacontenttype"] = {"type": "string", "const": "application/json"}
    properties["data"] = {"description": "The payload: the message's payload schema."}
    for field in _EXTENSION_FIELDS:
        properties[_wire(field)] = {"type": "string", "description": _extension_description(field)}
    return {
        "type": "object",
        "title": "CloudEvents envelope (structured mode)",
        "description": (
            "The record value in structured mode: CloudEvents 1.0 attributes and disco's "
            "extensions, the payload under `data`. Other extension attributes (lower-case "
            "letters and digits) are kept and passed on."
        ),
        "properties": properties,
        "required": ["id", "source", "specversion", "type"],
    }


def _trait(topic: str | None) -> dict[str, Any]:
    key = _HEADERS_SCHEMA if topic is None else f"{_HEADERS_SCHEMA}.{topic}"
    return {
        "headers": {"$ref": f"#/components/schemas/{key}"},
        "correlationId": {"$ref": f"#/components/correlationIds/{_CORRELATION}"},
        "contentType": "application/json",
        "bindings": {
            "kafka": {
                "key": {"$ref": f"#/components/schemas/{_KEY_SCHEMA}"},
                "bindingVersion": KAFKA_BINDING_VERSION,
            }
        },
    }


def trait_for(topics: list[str]) -> str:
    """The message trait of a message carried on ``topics``: its topic's rules, or the
    generic envelope's when it travels on several or on a topic of its own."""
    if len(topics) == 1 and topics[0] in SYSTEM_TOPIC_ORDER:
        return topics[0]
    return _GENERIC_TRAIT


def example_headers(event_type: str, topics: list[str]) -> dict[str, str]:
    """Binary-mode headers of an example of ``event_type`` (they fit its trait)."""
    headers = {
        "content-type": "application/json",
        "ce_specversion": "1.0",
        "ce_id": "example-1",
        "ce_source": "urn:example:producer",
        "ce_type": event_type,
    }
    if Topic.ACTION_REQUESTS.value in topics:
        headers["ce_responseevent"] = f"{event_type}.answered"
    if Topic.ACTION_RESULTS.value in topics:
        headers["ce_correlationid"] = "example-request-1"
    return headers


def _dead_letter_message() -> dict[str, Any]:
    dlq_headers = {
        "dlq_error_type": "Class name of the error; `EnvelopeError` for a value that is not "
        "an envelope.",
        "dlq_error_message": "The error text; for a malformed value, why it is not an envelope.",
        "dlq_original_topic": "The topic the record was read from (with the prefix).",
        "dlq_original_partition": "Its partition there.",
        "dlq_original_offset": "Its offset there.",
        "dlq_attempts": "How many times a handler was called (0: the value could not be read).",
        "dlq_consumer_group": "The consumer group that gave up.",
        "dlq_failed_at": "When it gave up, ISO 8601 in UTC.",
    }
    return {
        "name": "dead-letter",
        "title": "Dead letter",
        "summary": "A record a consumer gave up on, kept with the reason.",
        "description": (
            "The original record, key, value and headers unchanged (an envelope of the "
            "topic's messages, or a value that could not be read as one), with `dlq_*` "
            "headers saying why. Republish the value to the original topic once fixed."
        ),
        "headers": {
            "type": "object",
            "properties": {
                name: {"type": "string", "description": text} for name, text in dlq_headers.items()
            },
            "required": ["dlq_error_type", "dlq_error_message", "dlq_original_topic"],
        },
        "payload": {"description": "The original record's value, unchanged."},
        "bindings": {
            "kafka": {
                "key": {"$ref": f"#/components/schemas/{_KEY_SCHEMA}"},
                "bindingVersion": KAFKA_BINDING_VERSION,
            }
        },
    }


def envelope_components(topics: list[str]) -> dict[str, dict[str, Any]]:
    """The shared components: header schemas and traits (per topic in ``topics``, and the
    generic ones), the record key, the structured envelope, correlation, dead letters."""
    schemas: dict[str, Any] = {
        _KEY_SCHEMA: {
            "type": "string",
            "description": (
                "The record key: `planid`, else `correlationid`, else `id`, so that all "
                "events of one plan stay in order on one partition."
            ),
        },
        _ENVELOPE_SCHEMA: _envelope_schema(),
        _HEADERS_SCHEMA: _headers_schema(None),
    }
    traits: dict[str, Any] = {_GENERIC_TRAIT: _trait(None)}
    for topic in topics:
        if topic in SYSTEM_TOPIC_ORDER:
            schemas[f"{_HEADERS_SCHEMA}.{topic}"] = _headers_schema(topic)
            traits[topic] = _trait(topic)
    return {
        "schemas": schemas,
        "messageTraits": traits,
        "messages": {DEAD_LETTER_MESSAGE: _dead_letter_message()},
        "correlationIds": {
            _CORRELATION: {
                "description": (
                    "An answer carries its request's correlation id (the request's "
                    "`correlationid`, else its `id`); in structured mode it is the "
                    "envelope's `correlationid`."
                ),
                "location": f"$message.header#/{BINARY_HEADER_PREFIX}{_wire('correlation_id')}",
            }
        },
    }


def channel(topic: str, prefix: str, messages: list[str]) -> dict[str, Any]:
    """The channel of ``topic`` with ``messages`` (component keys)."""
    address = topic_name(topic, prefix)
    return {
        "address": address,
        "title": topic,
        "description": _TOPIC_DESCRIPTIONS.get(topic, "A topic agents registered events on."),
        "messages": {key: {"$ref": f"#/components/messages/{key}"} for key in messages},
        "bindings": {"kafka": {"topic": address, "bindingVersion": KAFKA_BINDING_VERSION}},
        AsyncApiExtension.TOPIC.value: topic,
    }


def dead_letter_channel(topic: str, prefix: str) -> dict[str, Any]:
    """The ``.dlq`` channel of ``topic``."""
    address = dlq_topic(topic_name(topic, prefix))
    return {
        "address": address,
        "title": dlq_topic(topic),
        "description": f"Records of `{topic}` a consumer gave up on, with the reason.",
        "messages": {DEAD_LETTER_MESSAGE: {"$ref": f"#/components/messages/{DEAD_LETTER_MESSAGE}"}},
        "bindings": {"kafka": {"topic": address, "bindingVersion": KAFKA_BINDING_VERSION}},
        AsyncApiExtension.TOPIC.value: dlq_topic(topic),
        AsyncApiExtension.DEAD_LETTERS_OF.value: topic,
    }


_SASL_SCHEMES = {"PLAIN": "plain", "SCRAM-SHA-256": "scramSha256", "SCRAM-SHA-512": "scramSha512"}


def servers_and_security(
    bootstrap: str, security_protocol: str, sasl_mechanism: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``servers`` (one per bootstrap address) and ``securitySchemes`` of the document."""
    secure = security_protocol in {"SSL", "SASL_SSL"}
    schemes: dict[str, Any] = {}
    security: list[dict[str, str]] = []
    if security_protocol.startswith("SASL") and sasl_mechanism in _SASL_SCHEMES:
        schemes["kafka-sasl"] = {
            "type": _SASL_SCHEMES[sasl_mechanism],
            "description": f"SASL {sasl_mechanism} (Kafka security protocol {security_protocol}).",
        }
        security.append({"$ref": "#/components/securitySchemes/kafka-sasl"})
    hosts = [host.strip() for host in bootstrap.split(",") if host.strip()]
    servers: dict[str, Any] = {}
    for index, host in enumerate(hosts, start=1):
        name = "kafka" if len(hosts) == 1 else f"kafka-{index}"
        server: dict[str, Any] = {
            "host": host,
            "protocol": "kafka-secure" if secure else "kafka",
            "description": (
                f"Kafka bootstrap server (security protocol {security_protocol})."
                if len(hosts) == 1
                else f"Kafka bootstrap server {index} of {len(hosts)} "
                f"(security protocol {security_protocol})."
            ),
        }
        if security:
            server["security"] = security
        servers[name] = server
    return servers, schemes


def info_description(tenant: str, prefix: str) -> str:
    """The document's description: how an event travels, for a team writing a producer."""
    where = f" with the topic prefix `{prefix}`" if prefix else ""
    return (
        f"The bus of tenant `{tenant}`{where}, as the disco registry knows it now: every "
        "topic, the event types registered on it with their payload schemas, and which "
        "agents send and receive each.\n\n"
        "**An event on Kafka** is a CloudEvents 1.0 event with disco's extension attributes "
        "(`correlationid`, `causationid`, `tenantid`, `userid`, `sessionid`, `planid`, "
        "`taskid`, `responseevent`, `responsetopic`, `payloadschema`, `traceparent`). "
        "Write it in either mode; every disco consumer reads both:\n\n"
        "- *structured mode* (what disco writes): the record value is the envelope as JSON, "
        f"`content-type: {CLOUDEVENTS_CONTENT_TYPE}`, the payload under `data` (schema "
        f"`{_ENVELOPE_SCHEMA}`);\n"
        "- *binary mode*: the value is the payload (`content-type: application/json`) and "
        "each attribute is a `ce_<name>` header (the messages' headers).\n\n"
        "The record key is `planid`, else `correlationid`, else `id`. A request on "
        "`action-requests` names `responseevent`; its answer comes on `action-results` (or "
        "`responsetopic`) as that event type, with the request's `correlationid` (else its "
        "`id`). Set `tenantid` to your tenant. A consumer that gives up on a record moves it "
        "to the topic's `.dlq` channel with the reason."
    )
