"""An agent instance that registered but has had no partition says so, and stops saying so.

Two instances of one agent on a topic of one partition, with the real registry
and broker: the group gives the partition to one, the other has none. Past the
bound (``DISCO_BUS_NO_PARTITIONS_WARNING_SECONDS``) the idle instance logs a
warning, its ``/readyz`` (the metrics port) answers 503 naming it, its
registration carries ``disco.no_partitions_since`` and ``disco status`` (its
report) counts it. Once the other instance stops, the idle one gets the
partition: the mark goes, ``/readyz`` is 200 again.
"""

from __future__ import annotations

import uuid

import httpx
from structlog.testing import capture_logs

from disco import Agent
from disco._dev.ports import free_port
from disco._dev.status import live_agents
from disco.clients import RegistryClient, ServiceClientSettings
from disco_common.envelope import Envelope
from disco_common.registry import NO_PARTITIONS_METADATA
from tests.e2e.conftest import TENANT, Stack
from tests.fixtures.waiting import eventually

BOUND_SECONDS = 1.0


def _agent(stack: Stack, name: str, topic: str, metrics_port: int) -> Agent:
    settings = stack.bus_settings().model_copy(
        update={
            "kafka_partitions": 1,
            "bus_no_partitions_warning_seconds": BOUND_SECONDS,
            "metrics_port": metrics_port,
        }
    )
    agent = Agent(
        name,
        bus_settings=settings,
        client_settings=ServiceClientSettings(
            registry_url=stack.urls["registry"], memory_url=stack.urls["memory"], tenant_id=TENANT
        ),
        validate_requests=False,
    )

    @agent.on_event(topic=topic, event_type="*")
    async def seen(envelope: Envelope) -> None:
        return None

    return agent


async def test_an_instance_without_partitions_says_so_in_its_log_readyz_and_status(
    e2e_stack: Stack,
) -> None:
    name = f"e2e-idle-{uuid.uuid4().hex[:6]}"
    topic = f"e2e-one-partition-{uuid.uuid4().hex[:6]}"
    port = free_port()
    first, second = _agent(e2e_stack, name, topic, port), _agent(e2e_stack, name, topic, port)
    clients = ServiceClientSettings(registry_url=e2e_stack.urls["registry"], tenant_id=TENANT)

    async def readyz() -> httpx.Response:
        async with httpx.AsyncClient(timeout=10) as http:
            return await http.get(f"http://127.0.0.1:{port}/readyz")

    async def marked(agent: Agent) -> bool:
        async with RegistryClient.from_settings(clients) as registry:
            record = await registry.get_agent(agent.identity.agent_id)
        return record is not None and NO_PARTITIONS_METADATA in record.metadata

    with capture_logs() as logs:
        await first.start()
        await second.start()
        try:
            # The group gives its one partition to one of them; the other has none.
            async def one_marked() -> bool:
                return (await marked(first)) != (await marked(second))

            await eventually(one_marked, timeout=90, what="the idle instance marked")
            idle, busy = (first, second) if await marked(first) else (second, first)
            refused = await readyz()
            report = {line.name: line for line in await live_agents(clients, timeout=10)}

            await busy.stop()

            async def cleared() -> bool:
                return not await marked(idle)

            await eventually(cleared, timeout=90, what="the mark cleared once it has the partition")
            ready = await readyz()
        finally:
            await first.stop()
            await second.stop()

    assert refused.status_code == 503
    check = refused.json()["checks"][idle.identity.agent_id]
    assert (check["ready"], check["agent"], check["partitions"]) == (False, name, "none")
    assert check["for_seconds"] >= BOUND_SECONDS
    line = report[name]
    assert (line.instances, line.without_partitions) == (2, 1)
    assert line.no_partitions_since is not None
    assert ready.status_code == 200
    assert ready.json()["checks"][idle.identity.agent_id]["partitions"] == "assigned"
    warnings = [
        entry
        for entry in logs
        if entry.get("agent_id") == idle.identity.agent_id and "no partition" in entry["event"]
    ]
    assert warnings
    assert warnings[0]["log_level"] == "warning"
