"""What a registration compiles to, without a database: the discovery entries it
stores are exactly the JSON of the public models discovery answers with."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import JsonValue

from disco_common.registry import (
    AgentRegistration,
    DiscoveredCapability,
    DiscoveredEvent,
    PayloadSchema,
)
from disco_registry.agents.service import compile_registration
from disco_registry.errors import ConflictingEventDefinition

REQUEST: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"a": {"type": "number"}},
    "required": ["a"],
}
RESULT: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"sum": {"type": "number", "minimum": 0}},
}


def registration(**extra: object) -> AgentRegistration:
    return AgentRegistration.model_validate(
        {
            "agent_id": "calc-1",
            "name": "calc",
            "version": "1.0.0",
            "instance_id": "host:1",
            "capabilities": [
                {
                    "task_name": "add",
                    "description": "adds",
                    "consumed_event": {
                        "event_type": "add.requested",
                        "topic": "action-requests",
                        "json_schema": REQUEST,
                    },
                    "produced_events": [
                        {
                            "event_type": "add.completed",
                            "topic": "action-results",
                            "description": "the sum",
                            "schema_ref": {"name": "sum", "version": "1.2.0"},
                        },
                        {"event_type": "add.failed", "topic": "action-results"},
                    ],
                }
            ],
            **extra,
        }
    )


def stored_schema() -> dict[tuple[str, str], PayloadSchema]:
    schema = PayloadSchema(
        tenant_id="t",
        name="sum",
        version="1.2.0",
        json_schema=RESULT,
        content_hash="0" * 64,
        created_at=datetime.now(UTC),
    )
    return {("sum", "1.2.0"): schema}


def test_discovery_json_is_the_models_dump() -> None:
    compiled = compile_registration(registration(), stored_schema())

    expected = [
        DiscoveredCapability(
            task_name="add",
            description="adds",
            consumed_event=DiscoveredEvent(
                event_type="add.requested", topic="action-requests", json_schema=REQUEST
            ),
            produced_events=[
                DiscoveredEvent(
                    event_type="add.completed",
                    topic="action-results",
                    description="the sum",
                    json_schema=RESULT,
                    schema_ref={"name": "sum", "version": "1.2.0"},  # type: ignore[arg-type]
                ),
                DiscoveredEvent(event_type="add.failed", topic="action-results"),
            ],
        ).model_dump(mode="json")
    ]
    assert compiled.discovery == expected
    # Read back as discovery does, it is the same model.
    assert [DiscoveredCapability.model_validate(entry) for entry in compiled.discovery] == [
        DiscoveredCapability.model_validate(entry) for entry in expected
    ]
    assert [e.event_type for e in compiled.events] == [
        "add.completed",
        "add.failed",
        "add.requested",
    ]
    assert (compiled.events[0].schema_name, compiled.events[0].schema_version) == ("sum", "1.2.0")
    assert compiled.events[0].json_schema == RESULT


def test_an_event_defined_twice_differently_is_refused_with_each_conflict() -> None:
    twice = registration(
        events=[{"event_type": "add.completed", "topic": "business-facts", "json_schema": RESULT}]
    )

    with pytest.raises(ConflictingEventDefinition) as refused:
        compile_registration(twice, stored_schema())

    assert refused.value.details == [
        {"event_type": "add.completed", "topics": ["action-results", "business-facts"]}
    ]
