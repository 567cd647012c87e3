"""End-to-end fixtures: the real services and agent processes, shared by the e2e tests.

- :func:`e2e_stack`: registry, memory and tracker as ``python -m disco_<svc>``
  processes on free loopback ports, against a database of their own and the
  session's broker, under one topic prefix.
- :func:`fleet`: three agent processes (tools, workers, planners) from
  :mod:`tests.e2e.agents`, registered with the registry, ready to consume.
- :func:`caller`: a started :class:`BusClient` in the test's loop, and
  :class:`Watcher`: reads topics group-less to see what the agents published.

Tests tell their traffic apart by event types and correlation ids, so the
processes are started once for all e2e tests (the suite stays lean on two cores)
and stopped when they are done.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from disco.bus import BusClient, TopicReader
from disco.settings import BusSettings
from disco_common.envelope import Envelope
from tests.fixtures.bus import group_caught_up, read_envelopes
from tests.fixtures.infra import migrated_database
from tests.fixtures.processes import (
    STACK_BUS_ENV,
    ServiceProcess,
    start_services,
    stop_services,
)

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("registry", "memory", "tracker")
TENANT = "acme"
USER = "alice"


@dataclass
class Stack:
    """Where the e2e services are, and the environment an agent process needs."""

    bootstrap: str
    prefix: str
    services: dict[str, ServiceProcess]
    env: dict[str, str]
    logs: Path
    database_url: str = ""
    """The application role's URL of the stack's database (for more service processes)."""

    @property
    def urls(self) -> dict[str, str]:
        return {name: service.url for name, service in self.services.items()}

    def bus_settings(self) -> BusSettings:
        return BusSettings(
            kafka_bootstrap=self.bootstrap,
            topic_prefix=self.prefix,
            kafka_session_timeout_ms=2000,
            kafka_heartbeat_interval_ms=300,
        )


def _provision(settings: BusSettings) -> None:
    async def provision() -> None:
        async with BusClient(settings) as bus:
            await bus.ensure_topics()

    asyncio.run(provision())


@pytest.fixture(scope="package")
def e2e_stack(
    postgres_admin_url: str,
    kafka_bootstrap: str,
    session_topic_prefix: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    """Registry, memory and tracker running as real processes, until the e2e tests end.

    They get a database of their own: their HITL, liveness and expiry sweepers
    claim every tenant's due rows, so on the session's database they took rows
    of the integration tests running later and announced them under the e2e
    topic prefix, where those tests never saw them.
    """
    database = migrated_database(postgres_admin_url)
    logs = tmp_path_factory.mktemp("e2e-logs")
    prefix = f"{session_topic_prefix}e2e."
    base = {
        "DISCO_ENV": "dev",
        "DISCO_HOST": "127.0.0.1",
        "DISCO_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "DISCO_TOPIC_PREFIX": prefix,
        **STACK_BUS_ENV,
        "DISCO_LOG_JSON": "true",
        "PYTHONPATH": str(ROOT),
    }
    _provision(BusSettings(kafka_bootstrap=kafka_bootstrap, topic_prefix=prefix))
    services = start_services(SERVICES, {**base, "DISCO_DATABASE_URL": database.app}, logs)
    try:
        yield Stack(
            bootstrap=kafka_bootstrap,
            prefix=prefix,
            services=services,
            env={
                **os.environ,
                **base,
                **{f"DISCO_{name.upper()}_URL": s.url for name, s in services.items()},
                # Agents register (and act) for the tests' tenant.
                "DISCO_TENANT_ID": TENANT,
            },
            logs=logs,
            database_url=database.app,
        )
    finally:
        stop_services(services.values())


@dataclass
class AgentProcess:
    """One agent process started from :mod:`tests.e2e.fleet`."""

    role: str
    process: subprocess.Popen[bytes]
    log: Path
    ready: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    def go(self) -> AgentProcess:
        """Start the agents of a process launched on standby (``launch_agents(standby=True)``)."""
        assert self.process.stdin is not None, "not launched on standby"
        self.process.stdin.write(b"go\n")
        self.process.stdin.flush()
        return self

    def wait_ready(self, timeout: float = 90.0) -> AgentProcess:
        """Wait for the process's ``ready`` line (every agent in it consumes)."""
        if not self.ready.wait(timeout):
            self.process.kill()
            self.process.wait(5)
            tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])
            raise RuntimeError(f"agents {self.role!r} were not ready within {timeout}s:\n{tail}")
        return self


def launch_agents(stack: Stack, role: str, *, standby: bool = False) -> AgentProcess:
    """Start ``python -m tests.e2e.fleet ROLE``; :meth:`AgentProcess.wait_ready` waits for it.

    With ``standby``, the process builds its agents and waits for :meth:`AgentProcess.go`.
    """
    log = stack.logs / f"agents-{role}-{time.monotonic_ns()}.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.fleet", role, *(["--standby"] if standby else [])],
        env=stack.env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=log.open("wb"),
        stdin=subprocess.PIPE if standby else subprocess.DEVNULL,
    )
    agent = AgentProcess(role, process, log)
    assert process.stdout is not None
    stdout: IO[bytes] = process.stdout

    def read() -> None:
        # The agents log to stdout (structlog's default): keep it with their stderr,
        # so that a failing test's agents can be read afterwards.
        with log.open("ab", buffering=0) as kept:
            for line in stdout:
                if line.strip() == b"ready":
                    agent.ready.set()
                else:
                    kept.write(line)

    threading.Thread(target=read, daemon=True).start()
    return agent


def start_agents(stack: Stack, role: str, *, timeout: float = 90.0) -> AgentProcess:
    """Start ``python -m tests.e2e.fleet ROLE`` and wait for its ``ready`` line."""
    return launch_agents(stack, role).wait_ready(timeout)


def stop_agents(*agents: AgentProcess) -> None:
    """SIGTERM every agent process (they stop side by side), then wait for each."""
    for agent in agents:
        if agent.process.poll() is None:
            agent.process.terminate()
    for agent in agents:
        try:
            agent.process.wait(20)
        except subprocess.TimeoutExpired:
            agent.process.kill()
            agent.process.wait(5)


@pytest.fixture(scope="package")
def fleet(e2e_stack: Stack) -> Iterator[dict[str, AgentProcess]]:
    """The tools, workers and planners processes (started side by side)."""
    started: dict[str, AgentProcess] = {}
    try:
        for role in ("tools", "workers", "planners"):
            started[role] = launch_agents(e2e_stack, role)
        for agent in started.values():
            agent.wait_ready()
        yield started
    finally:
        stop_agents(*started.values())


@pytest.fixture
async def caller(e2e_stack: Stack) -> AsyncIterator[BusClient]:
    """A started bus client in the test's loop (publishes as tenant ``acme``)."""
    async with BusClient(e2e_stack.bus_settings(), name="e2e-caller") as bus:
        yield bus


class Watcher:
    """Reads topics from the beginning without a group; collects envelopes."""

    def __init__(self, stack: Stack, topics: list[str]) -> None:
        self._stack = stack
        self._reader = TopicReader(stack.bus_settings(), topics, from_beginning=True)
        self.seen: list[tuple[str, Envelope]] = []
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._reader.start()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            records = await self._reader.read(timeout=0.1)
            for record in records:
                envelope = record.envelope_or_none()
                if envelope is not None:
                    self.seen.append((record.topic, envelope))
            if records:
                self._changed.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._reader.stop()

    def matching(self, predicate: Callable[[str, Envelope], bool]) -> list[Envelope]:
        return [envelope for topic, envelope in self.seen if predicate(topic, envelope)]

    async def wait_for(
        self, predicate: Callable[[str, Envelope], bool], count: int = 1, timeout: float = 30.0
    ) -> list[Envelope]:
        """Wait until ``count`` envelopes match ``predicate``; fail the test after ``timeout``."""
        try:
            async with asyncio.timeout(timeout):
                while len(found := self.matching(predicate)) < count:
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(
                f"only {len(self.matching(predicate))} of {count} expected envelopes within "
                f"{timeout}s"
            ) from None
        return found


@pytest.fixture
async def watcher(e2e_stack: Stack) -> AsyncIterator[Watcher]:
    """A :class:`Watcher` of every disco topic."""
    watcher = Watcher(
        e2e_stack,
        ["action-requests", "action-results", "system-events", "notification-events"],
    )
    await watcher.start()
    try:
        yield watcher
    finally:
        await watcher.stop()


def data_of(envelope: Envelope) -> Any:
    """An envelope's data (typed loosely for assertions)."""
    return envelope.data


async def handled(stack: Stack, agent: str, topic: str) -> None:
    """Return once agent ``agent`` has handled every record now on ``topic``.

    A handler's envelopes are published before its record is committed, so after
    this whatever the agent did about those records is on the topics: the way to
    check that something (a second completion) did NOT happen.
    """
    await group_caught_up(stack.bootstrap, f"{stack.prefix}{agent}", f"{stack.prefix}{topic}")


async def published(stack: Stack, topic: str) -> list[Envelope]:
    """Every envelope on ``topic`` (of the e2e prefix) up to its current end."""
    return await read_envelopes(stack.bootstrap, f"{stack.prefix}{topic}")
