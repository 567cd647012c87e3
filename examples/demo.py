"""The end-to-end demo (`make demo`): the agent layers and an LLM agent against the running stack.

    make dev          # in one terminal: the whole stack
    make demo         # in another: this script

It starts the example agents in this process (they register with the
registry and keep their tasks, plans and sessions in the memory service), then
asks a Tool, a fan-out Worker and a Planner for work over Kafka, and prints what
came back with the plan's path through its state machine. Last, the LLM agent
(`assistant.py`, on its scripted model unless DISCO_LLM_* name a server) answers
a question with a tool, and books a trip with a tool that needs approval: the
demo plays the person who approves it in a UI.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Any

# Short consumer-group timings: the demo's agents join in about a second.
os.environ.setdefault("DISCO_KAFKA_SESSION_TIMEOUT_MS", "3000")
os.environ.setdefault("DISCO_KAFKA_HEARTBEAT_INTERVAL_MS", "500")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx

from disco.bus import BusClient, BusUnavailableError, TopicReader
from disco.clients import MemoryClient, ServiceClientSettings
from disco.settings import BusSettings
from disco_common.envelope import Envelope
from disco_common.notifications import (
    AgentUIEvent,
    AgentUIEventType,
    ToolApprovalRequestedPayload,
    ToolApprovedPayload,
)
from disco_common.topics import Topic

HOW_TO_START = (
    "No disco stack answers here. Start one in another terminal with\n\n"
    "    make dev          (or: uv run disco dev up)\n\n"
    "then run `make demo` again."
)


async def stack_is_up(bus: BusClient, services: ServiceClientSettings) -> bool:
    if not await bus.ping(timeout=3.0):
        return False
    async with httpx.AsyncClient(timeout=3.0) as http:
        for url in (services.registry_url, services.memory_url):
            try:
                if (await http.get(f"{url}/healthz")).status_code != 200:
                    return False
            except httpx.HTTPError:
                return False
    return True


def show(title: str, value: Any) -> None:
    print(f"\n== {title}")
    print(json.dumps(value, indent=2, ensure_ascii=False))


async def approval_request(reader: TopicReader, session_id: str) -> Envelope:
    """The next TOOL_APPROVAL_REQUESTED of ``session_id`` on notification-events."""
    while True:
        for record in await reader.read(timeout=0.5):
            envelope = record.envelope_or_none()
            if (
                envelope is not None
                and envelope.session_id == session_id
                and envelope.type == AgentUIEventType.TOOL_APPROVAL_REQUESTED.value
            ):
                return envelope


async def ask_the_assistant(caller: BusClient) -> None:
    weather = await caller.request(
        "assistant.requested",
        {"text": "What is the weather in Atlantis?"},
        response_event="assistant.answered",
        wait=60,
    )
    show("LLM agent (a tool call, then an answer): assistant.requested", weather.data)

    session_id = f"demo-{uuid.uuid4().hex[:8]}"
    async with TopicReader(caller.settings, [Topic.NOTIFICATION_EVENTS.value]) as reader:
        booking = asyncio.create_task(
            caller.request(
                "assistant.requested",
                {"text": "Book a trip to Lisbon on 2026-05-01"},
                response_event="assistant.answered",
                session_id=session_id,
                wait=120,
            )
        )
        requested = await asyncio.wait_for(approval_request(reader, session_id), 60)
    request = AgentUIEvent.model_validate(requested.data)
    payload = ToolApprovalRequestedPayload.model_validate(request.payload)
    print(f"\n   {payload.tool_name}({payload.arguments}) waits for approval: approving it")
    decision = AgentUIEvent.of(
        ToolApprovedPayload(tool_call_id=payload.tool_call_id, decided_by="demo-user"),
        session_id=session_id,
        execution_id=request.execution_id,
    )
    await caller.publish(
        Topic.NOTIFICATION_EVENTS,
        decision.type.value,
        decision.model_dump(mode="json"),
        session_id=session_id,
        correlation_id=session_id,
    )
    answer = await booking
    show("LLM agent (a tool that needs approval): assistant.requested", answer.data)


async def main() -> int:
    services = ServiceClientSettings()
    # aiokafka logs every refused connection; the message below says it better.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    caller = BusClient(BusSettings(), name="demo")
    try:
        await caller.start()
    except BusUnavailableError:
        print(HOW_TO_START, file=sys.stderr)
        return 1
    async with caller:
        if not await stack_is_up(caller, services):
            print(HOW_TO_START, file=sys.stderr)
            return 1

        import assistant
        import hello_tool
        import parallel_worker
        import travel_planner

        agents = [
            hello_tool.tool,
            *parallel_worker.AGENTS,
            *travel_planner.AGENTS,
            *assistant.AGENTS,
        ]
        print(f"starting {len(agents)} agents: {', '.join(a.name for a in agents)}")
        try:
            # Side by side: each start joins its agent's consumer group, which takes the
            # broker a while (half a session timeout on the embedded one).
            await asyncio.gather(*(agent.start() for agent in agents))
            await asyncio.gather(*(agent.wait_ready(60) for agent in agents))

            hello = await caller.request(
                "hello.requested",
                {"name": "Ada", "language": "fr"},
                response_event="hello.answered",
                wait=30,
            )
            show("Tool: hello.requested -> hello.answered", hello.data)

            quotes = await caller.request(
                "shipping.quote.requested", {"kg": 3.5}, response_event="shipping.quoted", wait=30
            )
            show("Worker (fan-out to 3 carriers, fan-in): shipping.quote.requested", quotes.data)

            trip = await caller.request(
                "trip.requested", {"city": "Lisbon"}, response_event="trip.planned", wait=60
            )
            show("Planner (state machine): trip.requested -> trip.planned", trip.data)
            if trip.plan_id:
                async with MemoryClient.from_settings(services) as memory:
                    record = await memory.get_plan_context(trip.plan_id)
                if record is not None:
                    print("\n   the plan's path:")
                    for step in record.context.history:
                        cause = f"  (on {step.event_type})" if step.event_type else ""
                        print(f"   {step.from_state or '·'} -> {step.to_state}{cause}")
                print(
                    f"\n   what the tracker saw: DISCO_TENANT_ID=default uv run disco plans show "
                    f"{trip.plan_id}"
                )

            await ask_the_assistant(caller)
        finally:
            await asyncio.gather(*(agent.stop(grace=5) for agent in agents))
    print("\nTry the HITL path too: see examples/README.md (travel_planner.py + disco answer).")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
