"""The end-to-end demo (`make demo`): three agent layers against the running stack.

    make dev          # in one terminal: the whole stack
    make demo         # in another: this script

It starts the example agents in this process (they register with the
registry and keep their tasks and plans in the memory service), then asks a
Tool, a fan-out Worker and a Planner for work over Kafka, and prints what came
back with the plan's path through its state machine.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

# Short consumer-group timings: the demo's agents join in about a second.
os.environ.setdefault("DISCO_KAFKA_SESSION_TIMEOUT_MS", "3000")
os.environ.setdefault("DISCO_KAFKA_HEARTBEAT_INTERVAL_MS", "500")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx

from disco.bus import BusClient, BusUnavailableError
from disco.clients import MemoryClient, ServiceClientSettings
from disco.settings import BusSettings

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
    print(json.dumps(value, indent=2))


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

        import hello_tool
        import parallel_worker
        import travel_planner

        agents = [hello_tool.tool, *parallel_worker.AGENTS, *travel_planner.AGENTS]
        print(f"starting {len(agents)} agents: {', '.join(a.name for a in agents)}")
        for agent in agents:
            await agent.start()
        try:
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
        finally:
            for agent in agents:
                await agent.stop(grace=5)
    print("\nTry the HITL path too: see examples/README.md (travel_planner.py + answer.py).")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
