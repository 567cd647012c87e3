"""RegistryClient against the real service: every call typed, errors as ServiceErrors."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from disco.clients import (
    RegistryClient,
    ServiceConflictError,
    ServiceNotFoundError,
    ServiceValidationError,
)
from disco_common.registry import (
    AgentCapability,
    AgentRegistration,
    DiscoveryQuery,
    EventDefinition,
    PayloadSchemaCreate,
    SchemaRef,
)
from tests.integration.registry.support import OBJECT_SCHEMA, RESULT_SCHEMA, new_tenant, unique


def add_registration(*, name: str | None = None, ref: SchemaRef | None = None) -> AgentRegistration:
    return AgentRegistration(
        agent_id=unique("agent"),
        name=name or unique("calc"),
        instance_id=unique("host"),
        capabilities=[
            AgentCapability(
                task_name="add",
                description="adds two numbers",
                consumed_event=EventDefinition(
                    event_type="add.requested",
                    topic="action-requests",
                    json_schema=None if ref else OBJECT_SCHEMA,
                    schema_ref=ref,
                ),
                produced_events=[
                    EventDefinition(
                        event_type="add.completed",
                        topic="action-results",
                        json_schema=RESULT_SCHEMA,
                    )
                ],
            )
        ],
    )


async def test_an_agent_registered_through_the_client_is_read_listed_and_discovered(
    make_client: Callable[..., RegistryClient],
) -> None:
    async with make_client(new_tenant()) as client:
        record = await client.register(add_registration())

        fetched = await client.get_agent(record.agent_id)
        page = await client.list_agents(capability="add")
        found = await client.find("add")
        required = await client.discover(["add"])
        queried = await client.discover(DiscoveryQuery(consumed_event="add.requested"))

    assert fetched == record
    assert [a.agent_id for a in page.items] == [record.agent_id]
    assert [a.name for a in found] == [record.name]
    consumed = found[0].get_consumed_event_schema("add")
    assert consumed is not None
    assert consumed.json_schema == OBJECT_SCHEMA
    assert [a.name for a in required] == [a.name for a in queried] == [record.name]


async def test_the_client_iterates_over_every_page_of_agents(
    make_client: Callable[..., RegistryClient],
) -> None:
    async with make_client(new_tenant()) as client:
        registered = {(await client.register(add_registration())).agent_id for _ in range(5)}

        listed = [agent.agent_id async for agent in client.iter_agents(limit=2)]

    assert sorted(listed) == sorted(registered)


async def test_heartbeat_and_deregister_through_the_client(
    make_client: Callable[..., RegistryClient],
) -> None:
    async with make_client(new_tenant()) as client:
        record = await client.register(add_registration())

        ack = await client.heartbeat(record.agent_id, instance_id=record.instance_id)
        removed = await client.deregister(record.agent_id)
        removed_again = await client.deregister(record.agent_id)
        with pytest.raises(ServiceNotFoundError) as missing:
            await client.heartbeat(record.agent_id)
        gone = await client.get_agent(record.agent_id)

    assert ack.expires_at >= record.expires_at
    assert (removed, removed_again, gone) == (True, False, None)
    assert missing.value.code == "agent_not_found"


async def test_schemas_through_the_client_are_versioned_and_validate_payloads(
    make_client: Callable[..., RegistryClient],
) -> None:
    name = unique("add.request")
    async with make_client(new_tenant()) as client:
        v1 = await client.create_schema(
            PayloadSchemaCreate(name=name, version="1.0.0", json_schema=OBJECT_SCHEMA)
        )
        again = await client.create_schema(
            PayloadSchemaCreate(name=name, version="1.0.0", json_schema=OBJECT_SCHEMA)
        )
        await client.create_schema(
            PayloadSchemaCreate(name=name, version="1.1.0", json_schema={"type": "object"})
        )
        with pytest.raises(ServiceConflictError) as conflict:
            await client.create_schema(
                PayloadSchemaCreate(name=name, version="1.0.0", json_schema={"type": "array"})
            )
        latest = await client.get_schema(name)
        exact = await client.get_schema(name, "1.0.0")
        versions = [schema.version async for schema in client.iter_schema_versions(name)]
        result = await client.validate_payload(name, "1.0.0", {"a": "x"})
        unknown = await client.get_schema(unique("none"))

    assert again == v1
    assert conflict.value.code == "schema_version_conflict"
    assert latest is not None
    assert latest.version == "1.1.0"
    assert exact == v1
    assert versions == ["1.1.0", "1.0.0"]
    assert not result.valid
    assert {v.path for v in result.violations} == {"/a", ""}
    assert unknown is None


async def test_events_and_cards_through_the_client(
    make_client: Callable[..., RegistryClient],
) -> None:
    name = unique("add.request")
    async with make_client(new_tenant()) as client:
        await client.create_schema(
            PayloadSchemaCreate(name=name, version="2.0.0", json_schema=OBJECT_SCHEMA)
        )
        ref = SchemaRef(name=name, version="2.0.0")
        record = await client.register(add_registration(ref=ref))

        event = await client.get_event("add.requested")
        owned = [e.event_type async for e in client.iter_events(owner_agent_id=record.agent_id)]
        card = await client.get_card(record.agent_id)
        no_card = await client.get_card("nobody")

    assert event is not None
    assert event.schema_ref == ref
    assert event.json_schema == OBJECT_SCHEMA
    assert sorted(owned) == ["add.completed", "add.requested"]
    assert card is not None
    assert card["name"] == record.name
    assert no_card is None


async def test_an_unknown_schema_reference_raises_a_validation_error_with_the_code(
    make_client: Callable[..., RegistryClient],
) -> None:
    async with make_client(new_tenant()) as client:
        with pytest.raises(ServiceValidationError) as refused:
            await client.register(add_registration(ref=SchemaRef(name="nope", version="1.0.0")))

    assert refused.value.code == "unknown_schema_ref"
    assert refused.value.details == [{"name": "nope", "version": "1.0.0"}]
