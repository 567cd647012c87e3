"""An agent's life with the real registry: registered on start, deregistered on a clean stop;
requests it publishes are checked against the schemas registered by others."""

from __future__ import annotations

from typing import Any

from disco import TaskContext, Tool, Worker
from disco.bus import BusClient
from disco.clients import RegistryClient, ServiceClientSettings
from disco_common.registry import AgentStatus
from disco_common.tasks import ActionResultData
from tests.e2e.agents import Addition, Total
from tests.e2e.conftest import TENANT, AgentProcess, Stack


def client_settings(stack: Stack) -> ServiceClientSettings:
    return ServiceClientSettings(
        registry_url=stack.urls["registry"], memory_url=stack.urls["memory"], tenant_id=TENANT
    )


async def test_an_agent_registers_on_start_and_deregisters_on_a_clean_stop(
    e2e_stack: Stack,
) -> None:
    tool = Tool(
        "e2e-lifecycle",
        version="2.1.0",
        bus_settings=e2e_stack.bus_settings(),
        client_settings=client_settings(e2e_stack),
    )

    @tool.on_invoke("e2e.lifecycle.requested")
    async def add(request: Addition) -> Total:
        return Total(total=request.a + request.b)

    async with RegistryClient.from_settings(client_settings(e2e_stack)) as registry:
        async with tool:
            running = await registry.get_agent(tool.identity.agent_id)
        stopped = await registry.get_agent(tool.identity.agent_id)

    assert running is not None
    assert running.status is AgentStatus.LIVE
    assert running.version == "2.1.0"
    assert running.instance_id == tool.identity.instance_id
    assert [c.task_name for c in running.capabilities] == ["e2e.lifecycle"]
    assert stopped is None


async def test_a_delegation_that_breaks_the_registered_schema_fails_the_task_with_the_violations(
    fleet: dict[str, AgentProcess], e2e_stack: Stack, caller: BusClient
) -> None:
    worker = Worker(
        "e2e-careless",
        bus_settings=e2e_stack.bus_settings(),
        client_settings=client_settings(e2e_stack),
    )

    @worker.on_task("e2e.careless.requested")
    async def start(task: TaskContext[Any]) -> None:
        # e2e-tools registered e2e.add.requested with a and b required integers.
        await task.delegate("e2e.add.requested", {"a": "x"}, response_event="e2e.careless.step")

    async with worker:
        await worker.wait_ready(60)
        answer = await caller.request(
            "e2e.careless.requested",
            {},
            response_event="e2e.careless.done",
            tenant_id=TENANT,
            wait=60,
        )

    result = ActionResultData.model_validate(answer.data)
    assert result.success is False
    assert result.error is not None
    assert result.error.type == "PayloadValidationError"
    assert "'b' is a required property" in result.error.message
