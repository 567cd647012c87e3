"""PayloadValidator: registered schemas checked before publishing, every violation listed,
answers cached with a short TTL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from starlette.types import ASGIApp

from disco._dev.ports import free_port
from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco.clients import RegistryClient, StaticToken
from disco.registry import PayloadValidationError, PayloadValidator
from disco.settings import BusSettings
from disco_common.auth import Role
from disco_common.registry import (
    AgentCapability,
    AgentRegistration,
    EventDefinition,
    PayloadSchemaCreate,
    SchemaRef,
)
from disco_common.topics import Topic
from tests.integration.registry.support import OBJECT_SCHEMA, new_tenant, unique, uvicorn_server


class FakeClock:
    """Monotonic seconds that move only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def consuming(
    event_type: str,
    *,
    schema: dict[str, Any] | None = None,
    ref: SchemaRef | None = None,
    agent_id: str | None = None,
) -> AgentRegistration:
    return AgentRegistration(
        agent_id=agent_id or unique("agent"),
        name=unique("calc"),
        capabilities=[
            AgentCapability(
                task_name="add",
                consumed_event=EventDefinition(
                    event_type=event_type,
                    topic="action-requests",
                    json_schema=schema,
                    schema_ref=ref,
                ),
            )
        ],
    )


async def test_a_payload_breaking_the_registered_schema_is_refused_with_every_violation(
    make_client: Callable[..., RegistryClient],
) -> None:
    event_type = unique("add.requested")
    async with make_client(new_tenant()) as client:
        record = await client.register(consuming(event_type, schema=OBJECT_SCHEMA))
        validator = PayloadValidator(client)

        with pytest.raises(PayloadValidationError) as refused:
            await validator.validate(event_type, {"a": "one", "c": 3})

    error = refused.value
    assert isinstance(error, ValueError)
    assert error.event_type == event_type
    assert error.owner_agent_id == record.agent_id
    assert {(v.path, v.validator) for v in error.violations} == {
        ("/a", "type"),
        ("", "required"),
        ("", "additionalProperties"),
    }
    assert event_type in str(error)
    assert "/a: 'one' is not of type 'number'" in str(error)


async def test_the_error_names_the_schema_version_an_event_references(
    make_client: Callable[..., RegistryClient],
) -> None:
    event_type, name = unique("add.requested"), unique("add.request")
    async with make_client(new_tenant()) as client:
        await client.create_schema(
            PayloadSchemaCreate(name=name, version="3.1.0", json_schema=OBJECT_SCHEMA)
        )
        await client.register(consuming(event_type, ref=SchemaRef(name=name, version="3.1.0")))

        with pytest.raises(PayloadValidationError) as refused:
            await PayloadValidator(client).validate(event_type, {"a": 1})

    assert refused.value.schema_ref == SchemaRef(name=name, version="3.1.0")
    assert f"{name}@3.1.0" in str(refused.value)


async def test_valid_payloads_and_events_without_a_schema_pass(
    make_client: Callable[..., RegistryClient],
) -> None:
    typed, untyped = unique("add.requested"), unique("free.requested")
    async with make_client(new_tenant()) as client:
        await client.register(consuming(typed, schema=OBJECT_SCHEMA))
        await client.register(consuming(untyped))
        validator = PayloadValidator(client)

        await validator.validate(typed, {"a": 1, "b": 2})
        await validator.validate(untyped, ["anything"])
        await validator.validate(unique("nobody.defines"), {"x": 1})
        typed_definition = await validator.definition(typed)
        untyped_definition = await validator.definition(untyped)
        with pytest.raises(PayloadValidationError):  # the schema is there, and used
            await validator.validate(typed, {"a": "one"})

    assert typed_definition is not None
    assert typed_definition.json_schema == OBJECT_SCHEMA
    assert untyped_definition is not None
    assert untyped_definition.json_schema is None


async def test_a_cached_schema_is_used_until_its_ttl_passes(
    make_client: Callable[..., RegistryClient],
) -> None:
    event_type, agent_id = unique("add.requested"), unique("agent")
    clock = FakeClock()
    async with make_client(new_tenant()) as client:
        await client.register(consuming(event_type, schema=OBJECT_SCHEMA, agent_id=agent_id))
        validator = PayloadValidator(client, cache_ttl_seconds=30, clock=clock)
        with pytest.raises(PayloadValidationError):
            await validator.validate(event_type, {})
        # The agent relaxes its schema; the validator keeps its answer for 30 s.
        await client.register(consuming(event_type, schema={"type": "object"}, agent_id=agent_id))

        clock.now += 29
        with pytest.raises(PayloadValidationError):
            await validator.validate(event_type, {})
        clock.now += 2
        await validator.validate(event_type, {})


async def test_no_schema_is_cached_too_until_its_ttl_passes(
    make_client: Callable[..., RegistryClient],
) -> None:
    event_type = unique("add.requested")
    clock = FakeClock()
    async with make_client(new_tenant()) as client:
        validator = PayloadValidator(client, cache_ttl_seconds=5, clock=clock)
        await validator.validate(event_type, {})
        await client.register(consuming(event_type, schema=OBJECT_SCHEMA))

        await validator.validate(event_type, {})  # still the cached "no schema"
        clock.now += 6
        with pytest.raises(PayloadValidationError):
            await validator.validate(event_type, {})


async def test_the_last_known_schema_is_used_while_the_registry_is_down(
    registry_app: ASGIApp,
) -> None:
    event_type = unique("add.requested")
    clock = FakeClock()
    port = free_port()
    tenant = new_tenant()
    token = StaticToken(mint_dev_token(DEV_AUTH_SECRET, tenant, "agent", (Role.USER,), 600))
    async with RegistryClient(f"http://127.0.0.1:{port}", token=token, retries=0) as client:
        validator = PayloadValidator(client, cache_ttl_seconds=1, clock=clock)
        async with uvicorn_server(registry_app, port):
            await client.register(consuming(event_type, schema=OBJECT_SCHEMA))
            await validator.validate(event_type, {"a": 1, "b": 2})
        clock.now += 10  # stale, and the registry is gone

        with pytest.raises(PayloadValidationError):
            await validator.validate(event_type, {"a": "x"})
        # Never heard of, registry down: not validated rather than blocking the agent.
        await validator.validate(unique("other.requested"), {"a": "x"})


async def test_a_bus_with_the_validator_refuses_a_bad_request_before_publishing(
    make_client: Callable[..., RegistryClient], kafka_bootstrap: str, topic_prefix: str
) -> None:
    event_type = unique("add.requested")
    async with make_client(new_tenant()) as client:
        await client.register(consuming(event_type, schema=OBJECT_SCHEMA))
        bus = BusClient(BusSettings(kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix))
        bus.set_request_validator(PayloadValidator(client).validate)
        async with bus:
            with pytest.raises(PayloadValidationError, match="required property"):
                await bus.publish(
                    Topic.ACTION_REQUESTS, event_type, {"a": 1}, response_event="add.done"
                )
            sent = await bus.publish(
                Topic.ACTION_REQUESTS, event_type, {"a": 1, "b": 2}, response_event="add.done"
            )

    assert sent.type == event_type
