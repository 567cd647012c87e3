"""Tools end to end: real broker, real registry, agents in their own processes."""

from __future__ import annotations

import pytest

from disco.bus import BusClient
from disco.clients import RegistryClient, ServiceClientSettings
from disco.registry import PayloadValidationError, PayloadValidator
from disco_common.tasks import ActionResultData
from tests.e2e.conftest import TENANT, AgentProcess, Stack


async def test_a_tool_invocation_round_trip_answers_the_caller(
    fleet: dict[str, AgentProcess], caller: BusClient
) -> None:
    answer = await caller.request(
        "e2e.add.requested",
        {"a": 20, "b": 22},
        response_event="e2e.sum.ready",
        tenant_id=TENANT,
        wait=30,
    )

    assert answer.type == "e2e.sum.ready"
    assert ActionResultData.model_validate(answer.data) == ActionResultData.ok({"total": 42})


async def test_an_error_in_the_tool_reaches_the_caller_as_an_error_result(
    fleet: dict[str, AgentProcess], caller: BusClient
) -> None:
    answer = await caller.request(
        "e2e.fail.requested",
        {"why": "testing"},
        response_event="e2e.fail.answered",
        tenant_id=TENANT,
        wait=30,
    )

    result = ActionResultData.model_validate(answer.data)
    assert result.success is False
    assert result.error is not None
    assert result.error.type == "RuntimeError"
    assert result.error.message == "the tool refuses: testing"


async def test_the_tool_registered_its_capability_with_request_and_response_schemas(
    fleet: dict[str, AgentProcess], e2e_stack: Stack
) -> None:
    settings = ServiceClientSettings(registry_url=e2e_stack.urls["registry"], tenant_id=TENANT)
    async with RegistryClient.from_settings(settings) as registry:
        found = await registry.find("e2e.add")

    (agent,) = found
    assert agent.name == "e2e-tools"
    (capability,) = [c for c in agent.capabilities if c.task_name == "e2e.add"]
    assert capability.consumed_event.json_schema is not None
    assert capability.consumed_event.json_schema["required"] == ["a", "b"]
    assert capability.description == "Adds two integers."


async def test_a_request_that_breaks_the_registered_schema_fails_before_it_is_published(
    fleet: dict[str, AgentProcess], e2e_stack: Stack, caller: BusClient
) -> None:
    settings = ServiceClientSettings(registry_url=e2e_stack.urls["registry"], tenant_id=TENANT)
    async with RegistryClient.from_settings(settings) as registry:
        caller.set_request_validator(PayloadValidator(registry).validate)
        with pytest.raises(PayloadValidationError) as caught:
            await caller.request(
                "e2e.add.requested", {"a": "one"}, response_event="e2e.sum.ready", tenant_id=TENANT
            )

    message = str(caught.value)
    assert "e2e.add.requested" in message
    assert "'b' is a required property" in message
