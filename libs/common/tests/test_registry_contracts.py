"""Registry contracts: schema xor ref, JSON Schema checks, payload validation, discovery."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from disco_common.canonical import json_hash
from disco_common.registry import (
    AgentCapability,
    AgentListQuery,
    AgentRegistration,
    DiscoveredAgent,
    DiscoveredCapability,
    DiscoveredEvent,
    DiscoveryQuery,
    EventDefinition,
    EventDirection,
    Heartbeat,
    PayloadSchema,
    PayloadSchemaCreate,
    SchemaRef,
    validate_payload,
)

OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "expression": {"type": "string"},
        "precision": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["expression"],
    "additionalProperties": False,
}


def _event(**overrides: Any) -> EventDefinition:
    fields: dict[str, Any] = {"event_type": "calculate.requested", "topic": "action-requests"}
    return EventDefinition(**{**fields, **overrides})


def _capability(task_name: str = "calculate") -> AgentCapability:
    return AgentCapability(task_name=task_name, consumed_event=_event())


# -- EventDefinition: schema inline xor by reference ------------------------------


def test_an_event_definition_may_give_its_schema_inline() -> None:
    event = _event(json_schema=OBJECT_SCHEMA)

    assert event.json_schema == OBJECT_SCHEMA
    assert event.schema_ref is None


def test_an_event_definition_may_give_its_schema_by_reference() -> None:
    event = _event(schema_ref={"name": "calculate.request", "version": "2.0.1"})

    assert event.schema_ref == SchemaRef(name="calculate.request", version="2.0.1")


def test_an_event_definition_may_declare_no_schema() -> None:
    event = _event()

    assert event.json_schema is None
    assert event.schema_ref is None


def test_an_event_definition_with_both_inline_schema_and_reference_is_rejected() -> None:
    with pytest.raises(ValidationError, match="not both"):
        _event(json_schema=OBJECT_SCHEMA, schema_ref={"name": "x", "version": "1.0.0"})


def test_an_event_definition_names_its_direction() -> None:
    event = _event(topic="business-facts", direction="consumed")

    assert event.direction == EventDirection.CONSUMED
    assert _event().direction is None


def test_a_capability_whose_request_says_produced_is_rejected() -> None:
    with pytest.raises(ValidationError, match="consumed_event cannot have direction 'produced'"):
        AgentCapability(task_name="calculate", consumed_event=_event(direction="produced"))


def test_a_capability_whose_answer_says_consumed_is_rejected() -> None:
    answer = _event(event_type="calculate.completed", topic="action-results", direction="consumed")

    with pytest.raises(ValidationError, match=r"'calculate\.completed' cannot have direction"):
        AgentCapability(task_name="calculate", consumed_event=_event(), produced_events=[answer])


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "nonsense"},
        {"type": "object", "properties": {"a": {"minimum": "zero"}}},
        {"required": "expression"},
        {"$schema": 7},
    ],
    ids=["unknown-type", "minimum-not-a-number", "required-not-a-list", "schema-not-a-string"],
)
def test_an_invalid_json_schema_is_rejected(schema: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match=r"JSON Schema|\$schema"):
        _event(json_schema=schema)


def test_an_invalid_json_schema_error_says_where() -> None:
    with pytest.raises(ValidationError, match="/properties/a/minimum"):
        _event(json_schema={"type": "object", "properties": {"a": {"minimum": "zero"}}})


def test_an_unknown_metaschema_is_rejected_with_the_fix() -> None:
    with pytest.raises(ValidationError, match=r"unknown \$schema .*2020-12"):
        _event(json_schema={"$schema": "https://example.invalid/my-schema", "type": "object"})


def test_a_declared_older_draft_is_checked_by_that_draft() -> None:
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"}

    assert _event(json_schema=draft7).json_schema == draft7
    with pytest.raises(ValidationError):
        _event(json_schema={**draft7, "type": 5})


def test_a_schema_reference_parses_name_at_version() -> None:
    ref = SchemaRef.parse("calculate.request@1.0.0-beta.1")

    assert (ref.name, ref.version, str(ref)) == (
        "calculate.request",
        "1.0.0-beta.1",
        "calculate.request@1.0.0-beta.1",
    )


@pytest.mark.parametrize("text", ["calculate.request", "calculate@1", "@1.0.0", "a b@1.0.0"])
def test_a_malformed_schema_reference_is_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        SchemaRef.parse(text)


# -- payload validation -----------------------------------------------------------


def test_a_payload_that_fits_its_schema_is_valid() -> None:
    result = validate_payload(OBJECT_SCHEMA, {"expression": "2+2", "precision": 2})

    assert result.valid
    assert result.violations == []


def test_payload_validation_reports_every_violation_with_path_and_keyword() -> None:
    result = validate_payload(OBJECT_SCHEMA, {"precision": -1, "tags": ["ok", 3], "colour": "red"})

    found = {(v.path, v.validator) for v in result.violations}
    assert not result.valid
    assert found == {
        ("", "required"),
        ("", "additionalProperties"),
        ("/precision", "minimum"),
        ("/tags/1", "type"),
    }
    assert all(v.message for v in result.violations)


def test_payload_validation_bounds_the_violations_it_lists() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}

    result = validate_payload(schema, ["x"] * 10, max_violations=3)

    assert not result.valid
    assert len(result.violations) == 3
    assert result.truncated


def test_payload_validation_never_fetches_a_remote_reference() -> None:
    result = validate_payload({"$ref": "https://example.invalid/schema.json"}, {"a": 1})

    assert not result.valid
    assert result.violations[0].validator == "$ref"


def test_payload_validation_rejects_an_invalid_schema() -> None:
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        validate_payload({"type": "nonsense"}, {})


# -- payload schemas --------------------------------------------------------------


def test_a_payload_schema_version_must_be_semver() -> None:
    with pytest.raises(ValidationError, match="version"):
        PayloadSchemaCreate(name="calculate.request", version="1.0", json_schema=OBJECT_SCHEMA)


def test_a_payload_schema_create_checks_its_schema() -> None:
    with pytest.raises(ValidationError, match="JSON Schema"):
        PayloadSchemaCreate(name="calc", version="1.0.0", json_schema={"type": 1})


def test_equal_schema_content_has_an_equal_hash_whatever_the_key_order() -> None:
    reordered = dict(reversed(list(OBJECT_SCHEMA.items())))

    assert json_hash(reordered) == json_hash(OBJECT_SCHEMA)
    assert json_hash({**OBJECT_SCHEMA, "title": "x"}) != json_hash(OBJECT_SCHEMA)


def test_a_stored_payload_schema_names_its_reference() -> None:
    stored = PayloadSchema(
        name="calc",
        version="1.0.0",
        json_schema=OBJECT_SCHEMA,
        tenant_id="acme",
        content_hash=json_hash(OBJECT_SCHEMA),
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )

    assert stored.ref == SchemaRef(name="calc", version="1.0.0")


# -- agents -----------------------------------------------------------------------


def test_a_registration_rejects_unknown_fields() -> None:
    with pytest.raises(ValidationError, match="extra"):
        AgentRegistration.model_validate({"agent_id": "a-1", "name": "a", "capabilites": []})


def test_a_registration_rejects_a_capability_listed_twice() -> None:
    with pytest.raises(ValidationError, match="listed twice"):
        AgentRegistration(
            agent_id="a-1", name="a", capabilities=[_capability("x"), _capability("x")]
        )


def test_an_agent_name_must_be_usable_as_a_consumer_group() -> None:
    with pytest.raises(ValidationError, match="name"):
        AgentRegistration(agent_id="a-1", name="my agent")


@pytest.mark.parametrize("ttl", [0, 4, 86_401])
def test_a_ttl_outside_bounds_is_rejected(ttl: int) -> None:
    with pytest.raises(ValidationError, match="ttl_seconds"):
        Heartbeat(ttl_seconds=ttl)


def test_tags_are_stripped_and_must_not_be_blank() -> None:
    registration = AgentRegistration(agent_id="a-1", name="a", tags=["  math "])

    assert registration.tags == ["math"]
    with pytest.raises(ValidationError):
        AgentRegistration(agent_id="a-1", name="a", tags=["   "])


def test_an_agent_list_query_has_paging_defaults_and_bounds() -> None:
    assert AgentListQuery().limit == 50
    with pytest.raises(ValidationError, match="limit"):
        AgentListQuery(limit=201)


# -- discovery --------------------------------------------------------------------


def test_a_discovery_query_needs_a_criterion() -> None:
    with pytest.raises(ValidationError, match="at least one"):
        DiscoveryQuery()


def test_a_discovery_query_may_combine_criteria() -> None:
    query = DiscoveryQuery(capability="calculate", text="arithmetic")

    assert (query.capability, query.text) == ("calculate", "arithmetic")


def test_a_discovered_agent_gives_the_request_and_primary_response_schema() -> None:
    request = DiscoveredEvent(
        event_type="calculate.requested", topic="action-requests", json_schema=OBJECT_SCHEMA
    )
    response = DiscoveredEvent(
        event_type="calculate.completed", topic="action-results", json_schema={"type": "object"}
    )
    agent = DiscoveredAgent(
        name="calculator",
        version="1.0.0",
        instance_count=1,
        agent_ids=["calc-1"],
        capabilities=[
            DiscoveredCapability(
                task_name="calculate", consumed_event=request, produced_events=[response]
            ),
            DiscoveredCapability(task_name="noop", consumed_event=request),
        ],
    )

    assert agent.get_consumed_event_schema("calculate") == request
    assert agent.get_produced_event_schema("calculate") == response
    assert agent.get_produced_event_schema("noop") is None
    assert agent.get_consumed_event_schema("unknown") is None
