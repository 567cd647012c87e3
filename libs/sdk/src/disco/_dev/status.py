"""What ``disco status`` reports: each service's readiness, the broker, the database,
the lag of every consumer group on the broker, and the live agents of the tenant the
settings act for.

Works against any stack the ``DISCO_*`` settings point at: the local one
(``disco dev up``, ports from the dev settings) or another (``DISCO_<NAME>_URL``,
``DISCO_KAFKA_BOOTSTRAP``, ``DISCO_DATABASE_URL``).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from disco._dev.settings import DevSettings
from disco.bus import BusClient, BusError
from disco.clients import RegistryClient, ServiceClientSettings, ServiceError
from disco.settings import BusSettings
from disco_common.registry import NO_PARTITIONS_METADATA, AgentStatus
from disco_common.topics import Topic

__all__ = ["AgentLine", "GroupLag", "Health", "StackStatus", "collect_status"]

# The services disco ships, in start order, with their default ports: used when
# they are not installed here (an agent's machine checking a remote stack).
_KNOWN = {"registry": 8081, "memory": 8082, "tracker": 8083, "gateway": 8080}


@dataclass(frozen=True)
class Health:
    """One component's answer."""

    name: str
    ok: bool
    detail: str
    latency_ms: float | None = None


@dataclass(frozen=True)
class GroupLag:
    """A consumer group's lag: records published but not yet committed, per topic."""

    group: str
    lag_by_topic: dict[str, int]
    partitions: int

    @property
    def total(self) -> int:
        return sum(self.lag_by_topic.values())


@dataclass(frozen=True)
class AgentLine:
    """A live agent, by name: how many processes run it, and when one was last heard."""

    name: str
    instances: int
    last_heard: datetime
    without_partitions: int = 0
    """How many of its instances say their consumer has had no partition for too long."""
    no_partitions_since: datetime | None = None
    """Since when the first of those has had none."""


@dataclass
class StackStatus:
    """Everything ``disco status`` prints."""

    services: list[Health] = field(default_factory=list)
    broker: Health | None = None
    database: Health | None = None
    groups: list[GroupLag] = field(default_factory=list)
    groups_error: str | None = None
    agents: list[AgentLine] | None = None
    """The live agents of ``agents_tenant`` (None: the registry was not asked or failed)."""
    agents_tenant: str = ""
    agents_error: str | None = None

    @property
    def healthy(self) -> bool:
        parts = [*self.services, self.broker, self.database]
        return all(part is not None and part.ok for part in parts)


def service_urls(settings: DevSettings) -> dict[str, str]:
    """Each service's base URL: ``DISCO_<NAME>_URL``, else the dev stack's port."""
    from disco._dev.services import installed_services

    manifests = {service.name: service for service in installed_services()}
    urls: dict[str, str] = {}
    for name, default_port in _KNOWN.items():
        explicit = os.environ.get(f"DISCO_{name.upper()}_URL")
        if explicit:
            urls[name] = explicit.rstrip("/")
            continue
        manifest = manifests.get(name)
        port = settings.service_port(manifest) if manifest is not None else default_port
        urls[name] = f"http://127.0.0.1:{port}"
    return urls


async def _service_health(client: httpx.AsyncClient, name: str, url: str) -> Health:
    started = time.perf_counter()
    try:
        response = await client.get(f"{url}/readyz")
    except httpx.HTTPError as exc:
        return Health(name, False, f"{url}: no answer ({type(exc).__name__})")
    latency = round((time.perf_counter() - started) * 1000, 1)
    try:
        body = response.json()
    except ValueError:
        body = {}
    if response.status_code == 200:
        checks = body.get("checks", {}) if isinstance(body, dict) else {}
        names = ", ".join(f"{check} ok" for check in checks) or "ready"
        return Health(name, True, f"{url}: {names}", latency)
    failed = body.get("error", {}).get("message") if isinstance(body, dict) else None
    return Health(name, False, f"{url}: {failed or f'HTTP {response.status_code}'}", latency)


async def _broker_health(settings: BusSettings) -> Health:
    started = time.perf_counter()
    try:
        async with BusClient(settings, source="disco://status") as bus:
            ok = await bus.ping(timeout=3.0)
    except BusError as exc:
        return Health("kafka", False, f"{settings.kafka_bootstrap}: {exc}")
    latency = round((time.perf_counter() - started) * 1000, 1)
    detail = settings.kafka_bootstrap if ok else f"{settings.kafka_bootstrap}: no answer"
    return Health("kafka", ok, detail, latency)


async def _database_health(url: str, shown: str) -> Health:
    import asyncpg

    from disco._dev.migrate import asyncpg_url

    dsn = asyncpg_url(url).replace("postgresql+asyncpg://", "postgresql://", 1)
    started = time.perf_counter()
    try:
        connection = await asyncpg.connect(dsn, timeout=3)
        try:
            version = await connection.fetchval("SHOW server_version")
        finally:
            await connection.close()
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        return Health("postgres", False, f"{shown}: {type(exc).__name__}: {exc}")
    latency = round((time.perf_counter() - started) * 1000, 1)
    return Health("postgres", True, f"{shown} (PostgreSQL {version})", latency)


async def consumer_lag(settings: BusSettings) -> list[GroupLag]:
    """The lag of every consumer group whose name carries the topic prefix, on disco's topics.

    Committed offsets are read with a group-less consumer's ``committed()`` per
    group (an OffsetFetch at the coordinator; no join, nobody's partitions move):
    the admin client's ``list_consumer_group_offsets`` asks a protocol version
    the embedded broker answers in a form aiokafka cannot decode.
    """
    options = settings.kafka_connection_options()
    admin = AIOKafkaAdminClient(**options)
    await admin.start()
    try:
        listed = await admin.list_consumer_groups()
    finally:
        await admin.close()
    prefix = settings.topic_prefix
    groups = sorted(str(g) for g, *_ in listed if str(g).startswith(prefix))
    if not groups:
        return []
    reader = AIOKafkaConsumer(**options)
    await reader.start()
    try:
        names = {f"{prefix}{topic.value}" for topic in Topic}
        partitions = [
            TopicPartition(name, p)
            for name in sorted(names & await reader.topics())
            for p in sorted(reader.partitions_for_topic(name) or ())
        ]
        ends = await reader.end_offsets(partitions) if partitions else {}
    finally:
        await reader.stop()
    lags: list[GroupLag] = []
    for group in groups:
        committed = await _committed(options, group, partitions)
        by_topic: dict[str, int] = {}
        for tp, offset in committed.items():
            topic = tp.topic.removeprefix(prefix)
            by_topic[topic] = by_topic.get(topic, 0) + max(0, ends.get(tp, offset) - offset)
        lags.append(
            GroupLag(group.removeprefix(prefix), dict(sorted(by_topic.items())), len(committed))
        )
    return lags


async def _committed(
    options: dict[str, Any], group: str, partitions: list[TopicPartition]
) -> dict[TopicPartition, int]:
    consumer = AIOKafkaConsumer(group_id=group, enable_auto_commit=False, **options)
    await consumer.start()
    try:
        offsets = {tp: await consumer.committed(tp) for tp in partitions}
    finally:
        await consumer.stop()
    return {tp: offset for tp, offset in offsets.items() if offset is not None}


async def live_agents(settings: ServiceClientSettings, timeout: float) -> list[AgentLine]:  # noqa: ASYNC109
    """The live agents the registry lists for ``settings``' tenant, by name.

    Raises:
        ServiceError: the registry refused or could not be reached.
    """
    registry = RegistryClient(
        settings.registry_url, token=settings.token_provider(), timeout_seconds=timeout, retries=0
    )
    by_name: dict[str, AgentLine] = {}
    async with registry:
        async for agent in registry.iter_agents(limit=100):
            if agent.status != AgentStatus.LIVE:
                continue
            seen = by_name.get(agent.name)
            idle = _no_partitions_since(agent.metadata)
            earliest = seen.no_partitions_since if seen else None
            if idle is not None and (earliest is None or idle < earliest):
                earliest = idle
            by_name[agent.name] = AgentLine(
                agent.name,
                (seen.instances if seen else 0) + agent.live_instances,
                max(seen.last_heard, agent.last_heartbeat_at) if seen else agent.last_heartbeat_at,
                (seen.without_partitions if seen else 0) + (1 if idle is not None else 0),
                earliest,
            )
            if len(by_name) >= _AGENTS_SHOWN:
                break
    return sorted(by_name.values(), key=lambda line: line.name)


_AGENTS_SHOWN = 200


def _no_partitions_since(metadata: Mapping[str, object]) -> datetime | None:
    value = metadata.get(NO_PARTITIONS_METADATA)
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


async def collect_status(settings: DevSettings, *, timeout: float = 5.0) -> StackStatus:  # noqa: ASYNC109
    """Ask every component of the stack ``settings`` describe how it is."""
    from disco._dev.dburl import redact

    bus_settings = BusSettings(
        kafka_bootstrap=settings.bootstrap(),
        topic_prefix=settings.topic_prefix,
        kafka_request_timeout_ms=int(timeout * 1000),
    )
    status = StackStatus()
    async with httpx.AsyncClient(timeout=timeout) as client:
        status.services = list(
            await asyncio.gather(
                *(_service_health(client, n, u) for n, u in service_urls(settings).items())
            )
        )
    registry = next((h for h in status.services if h.name == "registry"), None)
    if registry is not None and registry.ok:
        clients = ServiceClientSettings(registry_url=service_urls(settings)["registry"])
        status.agents_tenant = clients.tenant_id
        try:
            status.agents = await live_agents(clients, timeout)
        except ServiceError as exc:
            status.agents_error = exc.message
    app_url = settings.app_url()
    broker, database = await asyncio.gather(
        _broker_health(bus_settings), _database_health(app_url, redact(app_url))
    )
    status.broker, status.database = broker, database
    if broker.ok:
        try:
            async with asyncio.timeout(timeout * 2):
                status.groups = await consumer_lag(bus_settings)
        except (KafkaError, OSError, TimeoutError) as exc:
            status.groups_error = f"{type(exc).__name__}: {exc}"
    return status
