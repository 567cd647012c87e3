"""Planners register their plan types with the tracker on start; a tracker that is down
does not keep them from starting (they register once it is up)."""

from __future__ import annotations

import uuid
from typing import Any

from disco import Planner
from disco._dev.ports import free_port
from disco.bus import BusClient
from disco.clients import ServiceClientSettings, TrackerClient
from disco.settings import BusSettings
from disco.testing import InMemoryMemory
from disco_common.plans import PlanDefinition, StateAction, StateConfig, StateTransition
from tests.fixtures.infra import DatabaseUrls
from tests.integration.tracker.read_model_support import (
    eventually,
    running_tracker,
    tracker_settings,
)

REVIEW = PlanDefinition(
    plan_type="review",
    description="Ask a reviewer, then finish.",
    states=[
        StateConfig(
            state_name="start",
            action=StateAction(event_type="review.requested", response_event="review.done"),
            transitions=[StateTransition(on_event="review.done", to_state="done")],
        ),
        StateConfig(state_name="done", is_terminal=True),
    ],
)


async def test_a_planner_starts_without_the_tracker_and_registers_its_plan_once_it_is_up(
    database: DatabaseUrls, kafka_bootstrap: str, session_topic_prefix: str
) -> None:
    prefix = f"{session_topic_prefix}reg{uuid.uuid4().hex[:6]}."
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    port = free_port()
    bus_settings = BusSettings(
        kafka_bootstrap=kafka_bootstrap,
        topic_prefix=prefix,
        kafka_session_timeout_ms=2000,
        kafka_heartbeat_interval_ms=300,
    )
    clients = ServiceClientSettings(
        tracker_url=f"http://127.0.0.1:{port}", tenant_id=tenant, http_retries=0
    )
    planner = Planner(
        "review-planner",
        version="2.1.0",
        bus_settings=bus_settings,
        client_settings=clients,
        register=False,
        validate_requests=False,
        memory=InMemoryMemory(),
    )
    planner.add_plan("review.goal", REVIEW)

    async with BusClient(bus_settings) as bus:
        await bus.ensure_topics()
        await planner.start()  # nothing listens on the tracker's port yet
        try:
            await planner.wait_ready(30)
            settings = tracker_settings(database, kafka_bootstrap, prefix)
            async with running_tracker(settings, bus, port=port) as tracker:
                client = TrackerClient(tracker.url, token=clients.token_provider())
                async with client:

                    async def registered() -> Any:
                        return await client.get_plan_type("review")

                    record = await eventually(registered, lambda r: r is not None, timeout=60)
        finally:
            await planner.stop()

    assert record.version == "2.1.0"  # the planner's version
    assert record.definition == REVIEW
    assert planner.plan_type_version("review") == "2.1.0"
