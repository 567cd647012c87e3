"""The gateway's end-to-end stack: real processes on the session's broker and a database of its own.

- registry and memory (``python -m disco_<svc>``), the agents of
  :mod:`tests.e2e.gateway.agents` and the ``hello`` example tool, all for
  tenant ``acme``;
- gateway instances (``python -m disco_gateway``) a test can start, kill and
  restart (:class:`GatewayProcess`); :func:`gateway` is the one shared by the
  tests, on its own port;
- a2a-sdk clients over any binding (:func:`a2a_client`), with a dev token.

Every test tells its traffic apart by the tasks it creates, so the processes
are started once for all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from disco._dev.ports import free_port
from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco.settings import BusSettings
from disco_common.auth import Role
from tests.e2e.conftest import AgentProcess, launch_agents, stop_agents
from tests.fixtures.infra import migrated_database
from tests.fixtures.processes import (
    STACK_BUS_ENV,
    ServiceProcess,
    start_services,
    stop_processes,
    stop_services,
    wait_until_serving,
)

ROOT = Path(__file__).resolve().parents[3]
TENANT = "acme"
OTHER_TENANT = "beta"
USER = "alice"
PUBLIC_AGENT = "hello"
CONFORMANCE_AGENT = "a2a-conformance"
BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")


def token(tenant: str = TENANT, user: str = USER) -> str:
    """A dev bearer token of ``tenant``/``user``."""
    return mint_dev_token(DEV_AUTH_SECRET, tenant, user, [Role.USER])


def bearer(tenant: str = TENANT, user: str = USER) -> dict[str, str]:
    """The Authorization header of :func:`token`."""
    return {"Authorization": f"Bearer {token(tenant, user)}"}


def _spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            args, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )


@dataclass
class GatewayProcess:
    """One gateway instance: started, killed (SIGKILL) and restarted on its port."""

    env: dict[str, str]
    logs: Path
    port: int = field(default_factory=free_port)
    grpc_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    behind: GatewayProcess | None = None
    """Another instance whose URLs this one's cards name (as two instances behind one
    balancer do)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def grpc_address(self) -> str:
        """Where its gRPC binding listens (``host:port``, as its cards name it)."""
        return f"127.0.0.1:{self.grpc_port}"

    def start(self) -> GatewayProcess:
        return self.launch().wait_serving()

    def launch(self) -> GatewayProcess:
        """Start the process without waiting for it (:meth:`wait_serving` waits)."""
        self.starts += 1
        env = {
            **self.env,
            "DISCO_GATEWAY_PORT": str(self.port),
            "DISCO_GATEWAY_PUBLIC_URL": self.url,
            "DISCO_GATEWAY_GRPC_PORT": str(self.grpc_port),
        }
        if self.behind is not None:
            env["DISCO_GATEWAY_PUBLIC_URL"] = self.behind.url
            env["DISCO_GATEWAY_GRPC_PUBLIC_ADDRESS"] = self.behind.grpc_address
        self.process = _spawn([sys.executable, "-m", "disco_gateway"], env, self._log)
        return self

    def wait_serving(self) -> GatewayProcess:
        assert self.process is not None, "launch() first"
        try:
            wait_until_serving(self.process, self.url, self._log, timeout=90)
        except (AssertionError, RuntimeError) as exc:
            tail = "\n".join(self._log.read_text(errors="replace").splitlines()[-30:])
            raise RuntimeError(f"{exc}\n{tail}") from None
        return self

    @property
    def _log(self) -> Path:
        return self.logs / f"gateway-{self.port}-{self.starts}.log"

    def kill(self) -> None:
        """As abrupt as a crash: SIGKILL, nothing cleaned up."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None:
            stop_processes([self.process])


@dataclass
class GatewayStack:
    """Where the stack is and how to start more gateways."""

    bootstrap: str
    prefix: str
    urls: dict[str, str]
    env: dict[str, str]
    """The agents' environment (:func:`tests.e2e.conftest.start_agents` reads it)."""
    gateway_env: dict[str, str]
    logs: Path
    database_admin: str
    """The stack's database as its owner (what a test may lock or look into)."""
    gateways: list[GatewayProcess] = field(default_factory=list)

    def bus_settings(self) -> BusSettings:
        return BusSettings(kafka_bootstrap=self.bootstrap, topic_prefix=self.prefix)

    def new_gateway(self, *, behind: GatewayProcess | None = None) -> GatewayProcess:
        gateway = GatewayProcess(self.gateway_env, self.logs, behind=behind)
        self.gateways.append(gateway)
        return gateway


def _card_signing_key() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pem.decode()


def _wait_registered(registry_url: str, names: list[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    missing = names
    while time.monotonic() < deadline:
        missing = [
            name
            for name in names
            if not httpx.get(
                f"{registry_url}/v1/agents", params={"name": name}, headers=bearer(), timeout=5
            ).json()["items"]
        ]
        if not missing:
            return
        time.sleep(0.2)
    raise RuntimeError(f"agents {missing} did not register within {timeout}s")


@pytest.fixture(scope="package")
def gateway_stack(
    postgres_admin_url: str,
    kafka_bootstrap: str,
    session_topic_prefix: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayStack]:
    """Registry, memory, the test agents and the hello tool as processes; gateways on demand."""
    database = migrated_database(postgres_admin_url)
    logs = tmp_path_factory.mktemp("gateway-e2e-logs")
    prefix = f"{session_topic_prefix}gw."
    base = {
        **os.environ,
        "DISCO_ENV": "dev",
        "DISCO_HOST": "127.0.0.1",
        "DISCO_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "DISCO_TOPIC_PREFIX": prefix,
        **STACK_BUS_ENV,
        "DISCO_LOG_JSON": "true",
        "DISCO_DATABASE_URL": database.app,
        "DISCO_TENANT_ID": TENANT,
        # As in production: every consumer (agents, the gateway's readers and
        # group) refuses envelopes whose tenant no credential vouches for, so
        # every flow these tests drive proves it signs.
        "DISCO_BUS_REQUIRE_TENANT_CREDENTIAL": "true",
        "PYTHONPATH": str(ROOT),
    }

    async def provision() -> None:
        async with BusClient(
            BusSettings(kafka_bootstrap=kafka_bootstrap, topic_prefix=prefix)
        ) as bus:
            await bus.ensure_topics()

    asyncio.run(provision())
    services: dict[str, ServiceProcess] = start_services(["registry", "memory"], base, logs)
    urls = {name: service.url for name, service in services.items()}
    base["DISCO_REGISTRY_URL"] = urls["registry"]
    base["DISCO_MEMORY_URL"] = urls["memory"]
    processes: list[subprocess.Popen[bytes]] = []
    agents: list[AgentProcess] = []
    stack = GatewayStack(
        bootstrap=kafka_bootstrap,
        prefix=prefix,
        urls=urls,
        env=base,
        gateway_env={
            **base,
            "DISCO_GATEWAY_PUBLIC_AGENTS": PUBLIC_AGENT,
            "DISCO_GATEWAY_PUBLIC_TENANT": TENANT,
            "DISCO_GATEWAY_PUSH_ALLOW_LOOPBACK": "true",
            "DISCO_GATEWAY_PUSH_BACKOFF_SECONDS": "0.1",
            "DISCO_GATEWAY_PUSH_SWEEP_SECONDS": "0.2",
            # Every card these tests read is signed, as a production gateway's would be.
            "DISCO_GATEWAY_CARD_SIGNING_KEY": _card_signing_key(),
            "DISCO_GATEWAY_HANDOVER_SECONDS": "1",
            "DISCO_GATEWAY_REGISTRY_CACHE_SECONDS": "1",
        },
        logs=logs,
        database_admin=database.admin,
    )
    try:
        # The agents, the hello tool and the shared gateway start side by side.
        agents.append(launch_agents(stack, "gateway"))  # type: ignore[arg-type]
        processes.append(
            _spawn([sys.executable, "examples/hello_tool.py"], base, logs / "hello.log")
        )
        stack.new_gateway().launch()
        agents[0].wait_ready()
        _wait_registered(urls["registry"], [PUBLIC_AGENT])
        yield stack
    finally:
        for gateway in stack.gateways:
            gateway.stop()
        for agent in agents:
            stop_agents(agent)
        stop_processes(processes)
        stop_services(services.values())


@pytest.fixture(scope="package")
def gateway(gateway_stack: GatewayStack) -> GatewayProcess:
    """The gateway instance most tests share."""
    return gateway_stack.gateways[0].wait_serving()


@pytest.fixture(scope="package")
def twin_gateway(gateway_stack: GatewayStack, gateway: GatewayProcess) -> GatewayProcess:
    """A second instance beside :func:`gateway`, as behind one balancer: its cards name the
    same URLs."""
    return gateway_stack.new_gateway(behind=gateway).start()


@pytest.fixture(scope="package")
def conformance_agent(gateway_stack: GatewayStack) -> Iterator[str]:
    """``examples/a2a_conformance.py`` as a process (started for the tests that ask for it)."""
    process = _spawn(
        [sys.executable, "examples/a2a_conformance.py"],
        gateway_stack.env,
        gateway_stack.logs / "conformance.log",
    )
    try:
        _wait_registered(gateway_stack.urls["registry"], [CONFORMANCE_AGENT])
        yield CONFORMANCE_AGENT
    finally:
        stop_processes([process])


def _with_bearer(details: grpc.aio.ClientCallDetails, header: tuple[str, str]) -> Any:
    return details._replace(metadata=grpc.aio.Metadata(*(details.metadata or ()), header))


class _UnaryBearer(grpc.aio.UnaryUnaryClientInterceptor):
    """Adds ``authorization: Bearer <token>`` to a channel's unary calls."""

    def __init__(self, header: tuple[str, str]) -> None:
        self._header = header

    async def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
        return await continuation(_with_bearer(details, self._header), request)


class _StreamBearer(grpc.aio.UnaryStreamClientInterceptor):
    """The same for its streams (a channel takes each interceptor for one kind of call)."""

    def __init__(self, header: tuple[str, str]) -> None:
        self._header = header

    async def intercept_unary_stream(self, continuation, details, request):  # type: ignore[no-untyped-def]
        return await continuation(_with_bearer(details, self._header), request)


def grpc_channel(address: str, bearer_token: str | None) -> grpc.aio.Channel:
    """A channel to the gateway's gRPC binding, sending ``bearer_token`` (None: none)."""
    if bearer_token is None:
        return grpc.aio.insecure_channel(address)
    header = ("authorization", f"Bearer {bearer_token}")
    return grpc.aio.insecure_channel(
        address, interceptors=[_UnaryBearer(header), _StreamBearer(header)]
    )


@contextlib.asynccontextmanager
async def a2a_client(
    url: str,
    binding: str,
    *,
    tenant: str | None = TENANT,
    user: str = USER,
    agent: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AsyncIterator[Client]:
    """An a2a-sdk client of ``agent``'s card (the gateway's with None), over ``binding``.

    With ``tenant`` None, no token is sent; ``transport``: the HTTP client's (one that
    records what it receives, :class:`tests.e2e.gateway.wire.RecordingTransport`).
    """
    headers = bearer(tenant, user) if tenant is not None else {}
    http = httpx.AsyncClient(headers=headers, timeout=60, transport=transport)
    try:
        path = f"/a2a/{agent}" if agent else ""
        card = await A2ACardResolver(http, f"{url}{path}").get_agent_card()
        bearer_token = token(tenant, user) if tenant is not None else None
        factory = ClientFactory(
            ClientConfig(
                httpx_client=http,
                supported_protocol_bindings=[binding],
                streaming=True,
                grpc_channel_factory=lambda address: grpc_channel(address, bearer_token),
            )
        )
        client = factory.create(card)
        try:
            yield client
        finally:
            await client.close()
    finally:
        await http.aclose()
