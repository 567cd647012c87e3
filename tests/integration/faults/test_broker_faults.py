"""Broker faults with real processes: a Tool process, a service process and a
requester survive a kill -9 of the embedded broker, a Tool survives a broker
that is down when it starts, and both stop on SIGTERM within the bound whatever
the broker's state.

Counts, not speed: the requests unanswered while the broker was away and the
times to recover are printed (``bench/faults_bus.py`` reports recovery times);
what is asserted is that /readyz is red while the broker is down and green
after, that answers come back after the restart and none is lost once they do,
and that the processes exit on SIGTERM.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import httpx

from disco._dev.broker import EmbeddedBroker
from disco._dev.ports import free_port
from disco.bus import BusClient, BusError, RequestTimeout
from disco.settings import BusSettings
from tests.fixtures.infra import migrated_database
from tests.fixtures.processes import ROOT, start_services, stop_services
from tests.fixtures.waiting import wait_for_status, wait_until

# Generous: answers come back within seconds of a restart; this only ends a
# broken run instead of hanging it.
RECOVERY_DEADLINE = 90.0
STOP_BOUND = 10.0  # BusSettings.bus_shutdown_timeout_seconds' default


def _settings(bootstrap: str, prefix: str) -> BusSettings:
    return BusSettings(
        kafka_bootstrap=bootstrap,
        topic_prefix=prefix,
        kafka_session_timeout_ms=2000,
        kafka_heartbeat_interval_ms=300,
        kafka_fetch_max_wait_ms=20,
    )


def kill_broker(broker: EmbeddedBroker) -> None:
    """kill -9 the broker process, as an operator (or the OOM killer) would."""
    pid = broker.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    broker.stop(grace=5.0)  # reaps the dead process and closes its log


async def echo(bus: BusClient, n: int, wait: float = 5.0) -> bool:
    """One request; whether its answer came (timeouts and refused publishes count as no)."""
    try:
        answer = await bus.request(
            "echo.requested", {"n": n}, response_event="echo.done", wait=wait
        )
    except (RequestTimeout, BusError):
        return False
    assert answer.data == {"success": True, "result": {"echo": {"n": n}}}
    return True


async def first_answer(bus: BusClient) -> int:
    """Ask until an answer comes; the number of requests that got none before it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RECOVERY_DEADLINE
    missed = 0
    while not await echo(bus, missed):
        missed += 1
        assert loop.time() < deadline, f"no answer within {RECOVERY_DEADLINE}s"
    return missed


async def stop_tool(process: subprocess.Popen[bytes]) -> int:
    """SIGTERM, and the exit status (a process that outlives the bound fails the test)."""
    process.send_signal(signal.SIGTERM)
    # The bound is the behaviour under test (a hang would be the bug); margin for a busy box.
    return await asyncio.to_thread(process.wait, STOP_BOUND + 10)


async def test_a_requester_a_tool_and_a_service_recover_after_the_broker_is_killed_and_restarted(
    broker_factory: Callable[[], EmbeddedBroker],
    postgres_admin_url: str,
    tool_process: Callable[[str, str], subprocess.Popen[bytes]],
    topic_prefix: str,
    tmp_path: Path,
) -> None:
    broker = broker_factory()
    # A long-lived service process gets a database of its own (its sweepers).
    database = await asyncio.to_thread(migrated_database, postgres_admin_url)
    env = {
        "DISCO_ENV": "dev",
        "DISCO_HOST": "127.0.0.1",
        "DISCO_KAFKA_BOOTSTRAP": broker.bootstrap,
        "DISCO_TOPIC_PREFIX": topic_prefix,
        "DISCO_DATABASE_URL": database.app,
        "PYTHONPATH": str(ROOT),
    }
    registry = (await asyncio.to_thread(start_services, ["registry"], env, tmp_path))["registry"]
    tool = tool_process(broker.bootstrap, topic_prefix)
    loop = asyncio.get_running_loop()
    try:
        async with (
            BusClient(_settings(broker.bootstrap, topic_prefix), name="requester") as bus,
            httpx.AsyncClient(base_url=registry.url, timeout=10.0) as http,
        ):
            await bus.ensure_topics()
            await first_answer(bus)
            # A steady stream before the kill moves every position on.
            assert all([await echo(bus, n) for n in range(20)])

            kill_broker(broker)
            killed = loop.time()
            await wait_for_status(http, "/readyz", 503)
            broker.start()
            restarted = loop.time()
            await wait_for_status(http, "/readyz", 200, timeout=RECOVERY_DEADLINE)
            ready_after = loop.time() - restarted
            missed = await first_answer(bus)
            answered_after = loop.time() - restarted
            # Once answers come again, none is lost.
            after = [await echo(bus, n, wait=15.0) for n in range(30)]
        print(
            f"broker down {restarted - killed:.1f} s; after its restart: /readyz green in "
            f"{ready_after:.1f} s, first answer in {answered_after:.1f} s "
            f"({missed} requests unanswered before it); lost after that: {after.count(False)}/30"
        )
        assert after.count(False) == 0
        tool_code, registry_code = await asyncio.gather(
            stop_tool(tool), stop_tool(registry.process)
        )
    finally:
        stop_services([registry])
    assert tool_code == 0
    # uvicorn shuts down, then dies of the signal it caught (so -SIGTERM is its clean exit).
    assert registry_code in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in registry.log.read_text()


async def test_a_tool_started_with_the_broker_down_serves_once_it_is_up_and_stops_without_it(
    tmp_path: Path,
    tool_process: Callable[[str, str], subprocess.Popen[bytes]],
    topic_prefix: str,
) -> None:
    broker = EmbeddedBroker(port=free_port(), log_path=tmp_path / "late-broker.log")
    tool = tool_process(broker.bootstrap, topic_prefix)  # nothing listens there yet
    try:
        await asyncio.to_thread(_wait_for_line, tmp_path / "tool-0.log", "broker unreachable")
        broker.start()
        async with BusClient(_settings(broker.bootstrap, topic_prefix), name="requester") as bus:
            await bus.ensure_topics()
            await first_answer(bus)
            assert all([await echo(bus, n, wait=15.0) for n in range(10)])
        kill_broker(broker)

        # Stopping with the broker gone: the final commit and leaving the group
        # cannot happen, and must not hold the process.
        code = await stop_tool(tool)
    finally:
        broker.stop(grace=1.0)

    assert tool.poll() is not None
    assert code in (0, 1)  # 1: a step abandoned at the bound; either way it stopped


def _wait_for_line(log: Path, text: str, timeout: float = 60.0) -> None:
    wait_until(
        lambda: log.exists() and text in log.read_text(errors="replace"),
        timeout=timeout,
        what=f"{text!r} in {log.name}",
    )
