"""The ``disco`` command as a process: tail, and the whole local stack up and down.

(``disco token`` and ``disco new`` are unit-tested in-process, under libs/sdk/tests.)"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aiokafka import AIOKafkaProducer
from pydantic import BaseModel

from disco import Tool
from disco._dev.ports import free_port
from disco._dev.stack import STATE_FILE
from disco.bus import BusClient
from disco.settings import BusSettings
from disco.testing import InMemoryMemory
from disco_common.topics import Topic, topic_name
from tests.fixtures.waiting import wait_until

REPO = Path(__file__).resolve().parents[3]


def _disco(
    *args: str, env: dict[str, str], timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "disco._cli.main", *args],
        env={**os.environ, **env, "COLUMNS": "200", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


async def test_tail_prints_the_envelopes_on_a_topic_and_says_when_a_value_is_not_one(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    settings = BusSettings(kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix)
    async with BusClient(settings, source="test://tail") as bus:
        await bus.ensure_topics()
        await bus.announce("order.placed", {"order_id": "o-1"}, tenant_id="acme")
        await bus.request("price.requested", {"sku": "s-1"}, response_event="price.done")
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic_name(Topic.BUSINESS_FACTS, topic_prefix), b"garbage")
    finally:
        await producer.stop()

    result = _disco(
        "tail",
        "business-facts",
        "action-requests",
        "--from-beginning",
        "--limit",
        "3",
        "--seconds",
        "30",
        env={"DISCO_KAFKA_BOOTSTRAP": kafka_bootstrap, "DISCO_TOPIC_PREFIX": topic_prefix},
    )

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    assert any("order.placed" in line and "tenant=acme" in line for line in lines)
    assert any("price.requested" in line and "reply=price.done" in line for line in lines)
    assert any("not an envelope" in line for line in lines)


def test_tail_filters_by_event_type(kafka_bootstrap: str, topic_prefix: str) -> None:
    import asyncio

    async def publish() -> None:
        settings = BusSettings(kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix)
        async with BusClient(settings, source="test://tail") as bus:
            await bus.ensure_topics()
            # One plan: one partition, read in this order (a filter letting
            # plan.started through would show it second).
            for event_type in ("task.started", "plan.started", "task.completed"):
                await bus.publish(Topic.SYSTEM_EVENTS, event_type, {}, plan_id="plan-tail")

    asyncio.run(publish())
    result = _disco(
        "tail",
        "system-events",
        "-b",
        "--type",
        "task.*",
        "--limit",
        "2",
        "--seconds",
        "30",
        env={"DISCO_KAFKA_BOOTSTRAP": kafka_bootstrap, "DISCO_TOPIC_PREFIX": topic_prefix},
    )

    assert result.returncode == 0, result.stderr
    types = [line.split()[2] for line in result.stdout.splitlines()]
    assert sorted(types) == ["task.completed", "task.started"]


class _Pair(BaseModel):
    a: int
    b: int


class _Total(BaseModel):
    total: int


async def test_ask_prints_the_answer_of_the_agent_consuming_the_request(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    settings = BusSettings(kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix)
    tool = Tool("cli-adder", bus_settings=settings, register=False, memory=InMemoryMemory())

    @tool.on_invoke("cli.add.requested")
    async def add(pair: _Pair) -> _Total:
        return _Total(total=pair.a + pair.b)

    env = {"DISCO_KAFKA_BOOTSTRAP": kafka_bootstrap, "DISCO_TOPIC_PREFIX": topic_prefix}
    async with BusClient(settings) as bus:
        await bus.ensure_topics()
    async with tool:
        await tool.wait_ready(30)
        answered = await asyncio.to_thread(
            _disco, "ask", "cli.add.requested", '{"a": 2, "b": 3}', "--wait", "30", env=env
        )
    unanswered = await asyncio.to_thread(
        _disco, "ask", "cli.nobody.requested", "{}", "--wait", "1", env=env
    )
    not_json = await asyncio.to_thread(_disco, "ask", "cli.add.requested", "{a: 2}", env=env)

    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout) == {"success": True, "result": {"total": 5}}
    assert unanswered.returncode == 1
    assert "no cli.nobody.answered came within 1 s" in unanswered.stderr
    assert not_json.returncode == 2
    assert "not JSON" in not_json.stderr


def test_ask_says_so_when_the_broker_cannot_be_reached() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"

    result = _disco("ask", "cli.add.requested", env={"DISCO_KAFKA_BOOTSTRAP": bootstrap})

    assert result.returncode == 1
    assert f"cannot reach the Kafka broker at {bootstrap}" in result.stderr
    assert "Traceback" not in result.stderr
    assert "Unable connect" not in result.stderr


@pytest.fixture
def stack_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """Ports and a state folder of the test's own, so it never meets a developer's stack."""
    env = {
        "DISCO_STATE_DIR": str(tmp_path / "state"),
        "DISCO_POSTGRES_PORT": str(free_port()),
        "DISCO_KAFKA_PORT": str(free_port()),
        "DISCO_GATEWAY_PORT": str(free_port()),
        "DISCO_GATEWAY_GRPC_PORT": str(free_port()),
        "DISCO_REGISTRY_PORT": str(free_port()),
        "DISCO_MEMORY_PORT": str(free_port()),
        "DISCO_TRACKER_PORT": str(free_port()),
    }
    for name in ("DISCO_DATABASE_URL", "DISCO_DATABASE_ADMIN_URL", "DISCO_KAFKA_BOOTSTRAP"):
        env[name] = ""
    # The services inherit these: a consumer group joins in about half the session
    # timeout on Tansu (5 s with the default 10 s), as in the e2e stack.
    env["DISCO_KAFKA_SESSION_TIMEOUT_MS"] = "2000"
    env["DISCO_KAFKA_HEARTBEAT_INTERVAL_MS"] = "300"
    yield env
    if (tmp_path / "state" / STATE_FILE).exists():  # a stack the test left running
        _disco("dev", "down", env=_unset_empty(env))


def _unset_empty(env: dict[str, str]) -> dict[str, str]:
    """The environment with the empty variables removed (pydantic reads "" as a value)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DISCO_")}
    return {**base, **{k: v for k, v in env.items() if v}}


def _run_disco(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "disco._cli.main", *args],
        env={**_unset_empty(env), "COLUMNS": "200", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
    )


def test_dev_up_runs_every_service_and_dev_down_stops_them(stack_env: dict[str, str]) -> None:
    up = _run_disco("dev", "up", "--detach", env=stack_env)
    assert up.returncode == 0, up.stdout + up.stderr

    status = _run_disco("dev", "status", env=stack_env)
    health = _run_disco("status", env=stack_env)
    ready = {
        service: httpx.get(f"http://127.0.0.1:{stack_env[f'DISCO_{service.upper()}_PORT']}/readyz")
        for service in ("gateway", "registry", "memory", "tracker")
    }
    grpc_port = int(stack_env["DISCO_GATEWAY_GRPC_PORT"])
    with socket.create_connection(("127.0.0.1", grpc_port), timeout=5):
        pass  # the gateway's A2A gRPC binding listens
    down = _run_disco("dev", "down", env=stack_env)
    after = _run_disco("dev", "status", env=stack_env)
    health_after = _run_disco("status", "--timeout", "1", env=stack_env)

    assert "disco is up" in up.stdout
    assert f"127.0.0.1:{grpc_port}   A2A over gRPC" in up.stdout
    # Progress: each step says what it started and how long it took.
    for step in ("starting PostgreSQL", "starting the Kafka-protocol broker", "migrating"):
        assert re.search(rf"^✓ {step}.*\(\d+\.\ds\)$", up.stdout, re.MULTILINE), up.stdout
    for service in ("gateway", "registry", "memory", "tracker"):
        pattern = rf"^✓ starting {service} on http://127\.0\.0\.1:\d+ \("
        assert re.search(pattern, up.stdout, re.MULTILINE), up.stdout
    assert all(response.status_code == 200 for response in ready.values()), ready
    assert status.stdout.count("  up  ") == 6, status.stdout
    # `disco status`: every service ready, the broker, the database, the groups' lag.
    assert health.returncode == 0, health.stdout + health.stderr
    rows = {line.split()[1]: line for line in health.stdout.splitlines() if line.count("│") > 3}
    for component in ("gateway", "registry", "memory", "tracker", "kafka", "postgres"):
        assert " up " in rows[component], health.stdout
    assert "database ok, kafka ok" in rows["registry"]
    assert "consumer lag" in health.stdout
    assert "live agents of tenant default: none" in health.stdout  # the registry was asked
    assert health_after.returncode == 1
    assert " down " in health_after.stdout
    assert down.returncode == 0
    assert "no stack is running" in after.stdout
    for service in ("gateway", "registry", "memory", "tracker"):
        port = int(stack_env[f"DISCO_{service.upper()}_PORT"])
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, f"{service} still listens"


def test_dev_up_says_which_port_is_taken_and_how_to_move_it(stack_env: dict[str, str]) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", int(stack_env["DISCO_REGISTRY_PORT"])))
        squatter.listen()
        up = _run_disco("dev", "up", "--detach", env=stack_env)

    assert up.returncode == 1
    assert "registry" in up.stderr
    assert "already in use" in up.stderr
    assert "DISCO_REGISTRY_PORT" in up.stderr


def test_dev_up_says_which_service_died_at_start_and_shows_its_log(
    stack_env: dict[str, str],
) -> None:
    # Production refuses the dev secret: the service exits at start.
    up = _run_disco(
        "dev",
        "up",
        "--detach",
        "--service",
        "registry",
        env={**stack_env, "DISCO_ENV": "production"},
    )
    after = _run_disco("dev", "status", env=stack_env)

    assert up.returncode == 1
    assert "The registry service failed to start" in up.stderr
    assert "registry.log" in up.stderr
    assert "DISCO_AUTH" in up.stderr  # the service's own words, from its log
    assert "no stack is running" in after.stdout  # what had started was stopped again


def test_dev_up_restarts_a_broker_that_died_and_keeps_the_stack_running(
    stack_env: dict[str, str], tmp_path: Path
) -> None:
    output = tmp_path / "up.out"
    with output.open("w") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "disco._cli.main", "dev", "up"],
            env={**_unset_empty(stack_env), "COLUMNS": "200", "NO_COLOR": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    try:
        wait_until(
            lambda: "disco is up" in output.read_text() or up.poll() is not None,
            timeout=240,
            interval=0.2,
            what="disco dev up to be up",
        )
        assert up.poll() is None, output.read_text()
        state_file = Path(stack_env["DISCO_STATE_DIR"]) / STATE_FILE
        first = json.loads(state_file.read_text())["broker_pid"]

        os.kill(first, signal.SIGKILL)
        wait_until(
            lambda: (
                "✓ restarting the Kafka-protocol broker" in output.read_text()
                or up.poll() is not None
            ),
            timeout=60,
            interval=0.2,
            what="the broker restarted",
        )
        assert up.poll() is None, output.read_text()
        second = json.loads(state_file.read_text())["broker_pid"]
        bootstrap = f"127.0.0.1:{stack_env['DISCO_KAFKA_PORT']}"

        async def publish() -> None:
            async with BusClient(BusSettings(kafka_bootstrap=bootstrap)) as bus:
                await bus.announce("dev.survived", {"ok": True})

        asyncio.run(publish())
        gateway = f"http://127.0.0.1:{stack_env['DISCO_GATEWAY_PORT']}/readyz"
        wait_until(
            lambda: httpx.get(gateway).status_code == 200,
            timeout=60,
            interval=0.5,
            what="the gateway ready again on the new broker",
        )
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGINT)
        code = up.wait(60)

    text = output.read_text()
    assert second != first
    assert "the broker died (exit code -9); restarting it on " + bootstrap in text
    assert "stopping the stack" in text
    assert code == 0, text
