"""An agent killed and restarted in quick succession, ten times, with requests flowing: the
instance started last consumes every partition again, and says so on ``/readyz``.

The stuck group seen once by hand (a new instance registered but never consuming)
is what this run provokes: each kill leaves a member the broker only forgets once
its session is over, so every restart joins a group holding dead members (the
embedded broker counts them in the next generation until they expire). Asserted:
the last instance's ``/readyz`` turns ready (its consumer has partitions), and every
request published after that (keys spread over every partition) is answered; how
long the recovery took and how many requests went unanswered meanwhile are printed.
An instance without partitions past ``DISCO_BUS_NO_PARTITIONS_WARNING_SECONDS``
would answer 503 there, and log and mark its registration
(``tests/e2e/test_partition_watch.py``).
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections.abc import Callable

import httpx

from disco._dev.broker import EmbeddedBroker
from disco._dev.ports import free_port
from disco.bus import BusClient, BusError, RequestTimeout
from disco.settings import BusSettings
from tests.fixtures.waiting import eventually
from tests.integration.faults.conftest import ToolProcess

CYCLES = 10
REQUESTS_AFTER = 24
RECOVERY_BOUND = 120.0


async def _answered(bus: BusClient, n: int, wait: float) -> bool:
    try:
        await bus.request("echo.requested", {"n": n}, response_event="echo.done", wait=wait)
    except (RequestTimeout, BusError):
        return False
    return True


async def test_an_agent_killed_and_restarted_ten_times_consumes_every_partition_again(
    broker_factory: Callable[[], EmbeddedBroker],
    tool_process: ToolProcess,
    topic_prefix: str,
) -> None:
    broker = broker_factory()
    settings = BusSettings(
        kafka_bootstrap=broker.bootstrap,
        topic_prefix=topic_prefix,
        kafka_session_timeout_ms=2000,
        kafka_heartbeat_interval_ms=300,
    )
    unanswered = 0
    flowing = True

    async with BusClient(settings, name="group-recovery") as bus:
        await bus.ensure_topics()

        async def load() -> None:
            nonlocal unanswered
            n = 0
            while flowing:
                n += 1
                if not await _answered(bus, n, wait=2.0):
                    unanswered += 1
                await asyncio.sleep(0.05)

        loader = asyncio.create_task(load())
        try:
            for _ in range(CYCLES):
                process = tool_process(broker.bootstrap, topic_prefix)
                await asyncio.sleep(random.uniform(1.0, 3.0))
                process.send_signal(signal.SIGKILL)
                await asyncio.to_thread(process.wait, 10)
            port = free_port()
            last = tool_process(
                broker.bootstrap,
                topic_prefix,
                DISCO_METRICS_PORT=str(port),
                DISCO_BUS_NO_PARTITIONS_WARNING_SECONDS="30",
            )
            began = time.monotonic()

            async def ready() -> bool:
                try:
                    async with httpx.AsyncClient(timeout=5) as http:
                        answer = await http.get(f"http://127.0.0.1:{port}/readyz")
                except httpx.HTTPError:
                    return False
                checks = answer.json().get("checks", {}) if answer.status_code == 200 else {}
                return any(check.get("partitions") == "assigned" for check in checks.values())

            await eventually(ready, timeout=RECOVERY_BOUND, interval=0.5, what="/readyz ready")
            recovered_in = time.monotonic() - began
        finally:
            flowing = False
            await loader
        # Keys spread over every partition: each of them must be consumed again.
        after = [await _answered(bus, 10_000 + n, wait=20.0) for n in range(REQUESTS_AFTER)]
        last.send_signal(signal.SIGTERM)
        await asyncio.to_thread(last.wait, 30)

    print(
        f"\ngroup recovery: {CYCLES} kill -9/restart cycles; the last instance had partitions "
        f"{recovered_in:.1f} s after its start; {unanswered} requests unanswered meanwhile"
    )
    assert all(after), (
        f"{after.count(False)} of {REQUESTS_AFTER} requests after recovery unanswered"
    )
