"""Reading a disco AsyncAPI document: who sends and receives each event type, payload
fields for people, and comparing two documents (no I/O)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

import disco.asyncapi
from disco.asyncapi import BusDocument, compare_documents, parse_document

QUOTE_REQUEST: dict[str, Any] = {
    "$id": "urn:disco:schema:quote.request@1.0.0",
    "type": "object",
    "properties": {
        "kg": {"type": "number", "exclusiveMinimum": 0, "description": "Weight."},
        "to": {
            "anyOf": [
                {"$ref": "#/components/schemas/quote.request_1.0.0/$defs/Address"},
                {"type": "null"},
            ]
        },
        "lines": {
            "type": "array",
            "items": {"$ref": "#/components/schemas/quote.request_1.0.0/$defs/Address"},
        },
    },
    "required": ["kg"],
    "$defs": {
        "Address": {
            "title": "Address",
            "type": "object",
            "properties": {"city": {"type": "string", "enum": ["Lisbon", "Porto"]}},
            "required": ["city"],
        }
    },
}


def message(event_type: str, schema_key: str | None) -> dict[str, Any]:
    found: dict[str, Any] = {"name": event_type, "x-disco-event-type": event_type}
    if schema_key is not None:
        found["payload"] = {"$ref": f"#/components/schemas/{schema_key}"}
        found["x-disco-schema"] = {"name": "quote.request", "version": "1.0.0"}
    return found


def operation(
    agent: str, action: str, topic: str, key: str, reply: str | None = None
) -> dict[str, Any]:
    found: dict[str, Any] = {
        "action": action,
        "channel": {"$ref": f"#/channels/{topic}"},
        "messages": [{"$ref": f"#/channels/{topic}/messages/{key}"}],
        "x-disco-agent": {"name": agent, "version": "1.0.0", "tenant": "acme"},
    }
    if reply is not None:
        found["reply"] = {
            "channel": {"$ref": "#/channels/action-results"},
            "messages": [{"$ref": f"#/channels/action-results/messages/{reply}"}],
        }
    return found


DOCUMENT: dict[str, Any] = {
    "asyncapi": "3.0.0",
    "info": {"title": "bus", "version": "1", "x-disco-tenant": "acme"},
    "channels": {
        "action-requests": {
            "address": "dev.action-requests",
            "messages": {"quote.requested": {"$ref": "#/components/messages/quote.requested"}},
            "x-disco-topic": "action-requests",
        },
        "action-results": {
            "address": "dev.action-results",
            "messages": {"quote.completed": {"$ref": "#/components/messages/quote.completed"}},
            "x-disco-topic": "action-results",
        },
        "action-requests.dlq": {
            "address": "dev.action-requests.dlq",
            "messages": {"disco.dead-letter": {"$ref": "#/components/messages/disco.dead-letter"}},
            "x-disco-topic": "action-requests.dlq",
            "x-disco-dead-letters-of": "action-requests",
        },
    },
    "operations": {
        "carriers.receive": operation(
            "carriers", "receive", "action-requests", "quote.requested", reply="quote.completed"
        ),
        "broker.send": operation(
            "broker", "send", "action-requests", "quote.requested", reply="quote.completed"
        ),
    },
    "components": {
        "schemas": {"quote.request_1.0.0": QUOTE_REQUEST},
        "messages": {
            "quote.requested": message("quote.requested", "quote.request_1.0.0"),
            "quote.completed": message("quote.completed", None),
            "disco.dead-letter": {"name": "dead-letter"},
        },
    },
}


def test_the_sdk_exports_of_disco_asyncapi_are_pinned() -> None:
    assert disco.asyncapi.__all__ == [
        "RECEIVERS",
        "SENDERS",
        "BusAgent",
        "BusDiff",
        "BusDocument",
        "BusMessage",
        "BusTopic",
        "FetchedDocument",
        "MessageChange",
        "SchemaChange",
        "SchemaRow",
        "compare_documents",
        "compare_schemas",
        "parse_document",
    ]


def test_senders_and_receivers_count_answers_on_both_sides_of_a_request() -> None:
    bus = BusDocument(DOCUMENT)

    request, answer = bus.messages["quote.requested"], bus.messages["quote.completed"]

    assert (request.senders, request.receivers) == (["broker"], ["carriers"])
    assert (answer.senders, answer.receivers) == (["carriers"], ["broker"])
    assert request.topics == ["action-requests"]
    assert request.schema_label == "quote.request@1.0.0"
    assert answer.payload is None
    assert answer.schema_label == "no schema"
    agents = {agent.name: agent for agent in bus.agents}
    assert agents["carriers"].receives == ["quote.requested"]
    assert agents["carriers"].sends == ["quote.completed"]
    dead = next(topic for topic in bus.topics if topic.dead_letters_of)
    assert (dead.name, dead.event_types) == ("action-requests.dlq", [])


def test_payload_fields_read_as_rows_with_nested_models_under_their_parent() -> None:
    bus = BusDocument(DOCUMENT)

    rows = bus.schema_rows(bus.messages["quote.requested"].payload)

    assert [(r.path, r.type, r.required) for r in rows] == [
        ("kg", "number", True),
        ("to", "Address | null", False),
        ("to.city", "string", True),
        ("lines", "array of Address", False),
        ("lines[].city", "string", True),
    ]
    assert rows[0].rules == "> 0"
    assert rows[2].rules == "one of Lisbon, Porto"


def test_a_document_reads_from_json_or_yaml_and_anything_else_is_refused() -> None:
    assert parse_document(json.dumps(DOCUMENT)) == DOCUMENT
    assert parse_document(yaml.safe_dump(DOCUMENT).encode()) == DOCUMENT
    for bad in ("[1, 2]", "{not: [valid", '{"info": {}}'):
        with pytest.raises(ValueError, match="not"):
            parse_document(bad)


def test_a_reference_outside_the_document_is_refused() -> None:
    bus = BusDocument(DOCUMENT)

    with pytest.raises(ValueError, match="outside the document"):
        bus.resolve({"$ref": "https://example.com/schema.json"})
    with pytest.raises(ValueError, match="points nowhere"):
        bus.resolve({"$ref": "#/components/schemas/missing"})


def test_documents_compare_by_event_type() -> None:
    live = copy.deepcopy(DOCUMENT)
    schema = live["components"]["schemas"]["quote.request_1.0.0"]
    schema["properties"]["insured"] = {"type": "boolean"}
    schema["required"] = ["kg", "insured"]
    del live["components"]["messages"]["quote.completed"]
    del live["channels"]["action-results"]["messages"]["quote.completed"]
    live["components"]["messages"]["quote.cancelled"] = message("quote.cancelled", None)
    live["channels"]["action-results"]["messages"]["quote.cancelled"] = {
        "$ref": "#/components/messages/quote.cancelled"
    }

    diff = compare_documents(BusDocument(DOCUMENT), BusDocument(live))

    assert [(m.event_type, m.kind, m.breaking) for m in diff.messages] == [
        ("quote.cancelled", "added", False),
        ("quote.completed", "removed", True),
        ("quote.requested", "changed", True),
    ]
    (required,) = diff.of("changed")[0].changes
    assert (required.path, required.breaks) == ("insured", "senders")
    assert compare_documents(BusDocument(DOCUMENT), BusDocument(DOCUMENT)).messages == []
