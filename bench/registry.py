"""Benchmark: the registry with 10,000 registered agents — discovery and heartbeats.

    uv run python bench/registry.py [--agents 10000] [--seconds 8] [--instances N] ...
    uv run python bench/registry.py --part asyncapi [--asyncapi-agents 1000]

Starts an embedded PostgreSQL and Tansu broker on free loopback ports unless
``DISCO_DATABASE_ADMIN_URL`` / ``DISCO_KAFKA_BOOTSTRAP`` name existing ones
(a fresh database is created and migrated either way), then runs the registry
as real ``python -m disco_registry`` subprocesses (``--instances``, default 1:
a service is one uvicorn process and scales by running more, as behind a load
balancer) and drives them from this process over loopback
keep-alive connections spread across the instances. Seeding uses httpx; the
measured phases use a lean HTTP/1.1 client (``bench/_common.py``), because
httpx costs more CPU per request than the registry does and all of it shares
the machine's cores with PostgreSQL and the broker: the figures are for the
whole stack on one box, with the per-request CPU of each part printed.

Seeding: ``--agents`` registrations through the API (one tenant: the worst case
for a tenant-scoped query), 2,000 agent names with ``agents/2000`` instances
each, three capabilities per agent out of a pool of 500, descriptions drawn
from a small vocabulary, so that a capability matches ~60 registrations and a
word ~10 % of them.

Phases, each ``--seconds`` long, ``--concurrency`` requests in flight:

- discovery by capability (``GET /v1/discover?capability=...``),
- discovery by free text (``GET /v1/discover?text=...``),
- heartbeats (``POST /v1/agents/{id}/heartbeat``) of random registrations.

Prints requests/s and client-side p50/p99 latency for each (and the seeding
rate). Targets (issue 3): discovery p99 < 20 ms, heartbeats >= 1,000/s.

The AsyncAPI document (``GET /v1/asyncapi``, issue 35), for another tenant with
``--asyncapi-agents`` registrations (1,000) of three event types each (3,000: a
request with a nested schema and an example, its answer, and a business fact the
agent announces): cold (a second registry process that keeps no document:
every request builds it from the database) and served from the kept document,
the whole body read by the client each time, and a revalidation (``If-None-Match``:
304). Targets: p99 under 1 s cold and under 100 ms from the cache.
``--part asyncapi`` runs only this part (``--part discovery`` only the first).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

import asyncpg
import httpx
import uvloop
from _common import (
    LeanHttp,
    LeanResponse,
    children,
    cpu_seconds,
    percentile,
    scratch_infra,
    serve_bare,
    start_service,
    stop_processes,
    wait_ready,
)

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco_common.auth import Role

TENANT = "bench"
NAMES = 2000
CAPABILITY_POOL = 500
WORDS = [
    "weather", "invoice", "translate", "summarise", "forecast", "payment", "shipping",
    "search", "calendar", "email", "inventory", "pricing", "support", "review", "image",
    "audio", "report", "billing", "fraud", "routing",
]  # fmt: skip
REQUEST_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "maxLength": 1000}, "n": {"type": "integer"}},
    "required": ["text"],
}
RESULT_SCHEMA = {"type": "object", "properties": {"result": {"type": "string"}}}


def registration(index: int, rng: random.Random) -> dict[str, Any]:
    name = f"agent-{index % NAMES:04d}"
    tasks = rng.sample(range(CAPABILITY_POOL), 3)
    words = rng.sample(WORDS, 2)
    return {
        "agent_id": f"{name}-{index // NAMES}",
        "name": name,
        "version": "1.0.0",
        "description": f"{words[0]} and {words[1]} for the bench",
        "tags": [words[0]],
        "instance_id": f"host-{index}:1",
        "ttl_seconds": 3600,
        "capabilities": [
            {
                "task_name": f"task-{task:03d}",
                "description": f"does task {task}",
                "consumed_event": {
                    "event_type": f"task-{task:03d}.requested",
                    "topic": "action-requests",
                    "json_schema": REQUEST_SCHEMA,
                },
                "produced_events": [
                    {
                        "event_type": f"task-{task:03d}.completed",
                        "topic": "action-results",
                        "json_schema": RESULT_SCHEMA,
                    }
                ],
            }
            for task in tasks
        ],
    }


ASYNCAPI_TENANT = "bench-asyncapi"


def asyncapi_registration(index: int) -> dict[str, Any]:
    """An agent with three event types of its own: a request (a nested schema with an
    example), its answer and a business fact it announces."""
    base = f"e{index:04d}"
    request = {
        "type": "object",
        "title": f"Order{index}",
        "properties": {
            "sku": {"type": "string", "maxLength": 40, "description": "What to ship."},
            "qty": {"type": "integer", "minimum": 1},
            "to": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": None},
            "lines": {"type": "array", "items": {"$ref": "#/$defs/Address"}},
        },
        "required": ["sku", "qty"],
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                "required": ["city"],
            }
        },
        "examples": [{"sku": f"sku-{index}", "qty": 2, "to": {"city": "Lisbon"}}],
    }
    return {
        "agent_id": f"api-agent-{index:04d}",
        "name": f"api-agent-{index:04d}",
        "version": f"1.{index % 7}.0",
        "description": f"agent {index} of the AsyncAPI bench",
        "instance_id": f"host-{index}:1",
        "ttl_seconds": 3600,
        "capabilities": [
            {
                "task_name": base,
                "description": f"does {base}",
                "consumed_event": {
                    "event_type": f"{base}.requested",
                    "topic": "action-requests",
                    "json_schema": request,
                },
                "produced_events": [
                    {
                        "event_type": f"{base}.completed",
                        "topic": "action-results",
                        "json_schema": RESULT_SCHEMA,
                    }
                ],
            }
        ],
        "events": [
            {
                "event_type": f"{base}.happened",
                "topic": "business-facts",
                "direction": "produced",
                "json_schema": {"type": "object", "properties": {"at": {"type": "string"}}},
            }
        ],
    }


async def timed_calls(
    count: int, call: Callable[[], Awaitable[LeanResponse]]
) -> tuple[list[float], int, int]:
    """``count`` calls one after another: their latencies, errors and the last body size."""
    latencies: list[float] = []
    errors = size = 0
    for _ in range(count):
        started = time.perf_counter()
        response = await call()
        latencies.append(time.perf_counter() - started)
        errors += response.status_code not in (200, 304)
        size = len(response.content)
    return latencies, errors, size


def report_document(label: str, latencies: list[float], errors: int, size: int) -> None:
    print(
        f"{label:<44} p50 {percentile(latencies, 0.50) * 1000:8.1f} ms  "
        f"p99 {percentile(latencies, 0.99) * 1000:8.1f} ms  "
        f"({len(latencies)} requests, {errors} errors, {size / 1e6:.2f} MB each)"
    )


async def bench_asyncapi(
    args: argparse.Namespace,
    database_app_url: str,
    bootstrap: str,
    postmaster_pid: int | None,
    prefix: str,
) -> None:
    """The AsyncAPI document of a tenant with ``--asyncapi-agents`` agents: cold and kept."""
    kept_process, kept_url = start_service("registry", database_app_url, bootstrap, prefix)
    cold_process, cold_url = start_service(
        "registry",
        database_app_url,
        bootstrap,
        prefix,
        DISCO_REGISTRY_ASYNCAPI_CACHE_BYTES="0",
    )
    try:
        for url, process in ((kept_url, kept_process), (cold_url, cold_process)):
            await wait_ready("registry", url, process, limit_seconds=60)
        token = mint_dev_token(DEV_AUTH_SECRET, ASYNCAPI_TENANT, "bench", (Role.SERVICE,), 3600)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=kept_url, headers=headers, timeout=60) as client:
            bodies = iter([asyncapi_registration(i) for i in range(args.asyncapi_agents)])

            async def seeder() -> None:
                for body in bodies:
                    (await client.post("/v1/agents", json=body)).raise_for_status()

            started = time.perf_counter()
            await asyncio.gather(*(seeder() for _ in range(8)))
            print(
                f"\nAsyncAPI: seeded {args.asyncapi_agents:,} agents with "
                f"{3 * args.asyncapi_agents:,} event types in {time.perf_counter() - started:.1f} s"
            )
            print(f"load average before: {os.getloadavg()[0]:.2f}")
            first = await client.get("/v1/asyncapi")
            first.raise_for_status()
            etag = first.headers["etag"]
            doc = first.json()
            print(
                f"document: {len(first.content) / 1e6:.2f} MB JSON, "
                f"{len(doc['components']['messages']) - 1:,} messages, "
                f"{len(doc['operations']):,} operations, {len(doc['channels'])} channels"
            )
            started = time.perf_counter()
            as_yaml = await client.get("/v1/asyncapi", params={"format": "yaml"})
            as_yaml.raise_for_status()
            print(
                f"first YAML (made once from the kept JSON, then kept): "
                f"{(time.perf_counter() - started) * 1000:.0f} ms, "
                f"{len(as_yaml.content) / 1e6:.2f} MB"
            )
        cold = LeanHttp([cold_url], headers, connections=1)
        kept = LeanHttp([kept_url], headers, connections=args.concurrency)
        revalidate = LeanHttp([kept_url], {**headers, "If-None-Match": etag}, connections=1)

        def get(client: LeanHttp) -> Callable[[], Awaitable[LeanResponse]]:
            return lambda: client.request("GET", "/v1/asyncapi")

        # The first build after a start also checks every schema's examples once.
        latencies, errors, size = await timed_calls(1, get(cold))
        report_document("cold, first build after the registry started", latencies, errors, size)
        meter = CpuMeter([cold_process.pid], postmaster_pid)
        meter.start()
        latencies, errors, size = await timed_calls(args.asyncapi_cold_requests, get(cold))
        registry_cpu, postgres_cpu, _ = (s / len(latencies) * 1000 for s in meter.stop())
        report_document("cold (built for every request)", latencies, errors, size)
        postgres_text = f"{postgres_cpu:.0f} ms" if postmaster_pid is not None else "n/a"
        print(
            f"{'':<44} CPU per document: registry {registry_cpu:.0f} ms, postgres {postgres_text}"
        )
        latencies, errors, size = await timed_calls(args.asyncapi_kept_requests, get(kept))
        report_document("served from the kept document", latencies, errors, size)
        count, elapsed, latencies, errors = await run_phase(
            args.concurrency, args.seconds, get(kept)
        )
        report_document(
            f"kept, {args.concurrency} concurrent ({count / elapsed:,.0f} req/s)",
            latencies,
            errors,
            size,
        )
        latencies, errors, _ = await timed_calls(args.asyncapi_kept_requests, get(revalidate))
        report_document("revalidation (If-None-Match: 304)", latencies, errors, 0)
        for client in (cold, kept, revalidate):
            await client.close()
        load = os.getloadavg()[0]
        print(f"load average after: {load:.2f} (the machine has {os.cpu_count()} cores)")
    finally:
        stop_processes([kept_process, cold_process])


class CpuMeter:
    """CPU seconds used by the registry processes, PostgreSQL (postmaster and backends,
    when embedded) and this client process, between :meth:`start` and :meth:`stop`."""

    def __init__(self, registry_pids: list[int], postmaster_pid: int | None) -> None:
        self.registry_pids = registry_pids
        self.postmaster_pid = postmaster_pid

    def _sample(self) -> tuple[float, float, float]:
        postgres = 0.0
        if self.postmaster_pid is not None:
            pids = [self.postmaster_pid, *children(self.postmaster_pid)]
            postgres = sum(cpu_seconds(pid) for pid in pids)
        return sum(map(cpu_seconds, self.registry_pids)), postgres, time.process_time()

    def start(self) -> None:
        self._begin = self._sample()

    def stop(self) -> tuple[float, float, float]:
        end = self._sample()
        return tuple(b - a for a, b in zip(self._begin, end, strict=True))  # type: ignore[return-value]


async def run_phase(
    concurrency: int, seconds: float, make_call: Callable[[], Awaitable[LeanResponse]]
) -> tuple[int, float, list[float], int]:
    """Run calls from ``concurrency`` workers for ``seconds``.

    Returns (count, elapsed, latencies, errors).
    """
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal errors
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            response = await make_call()
            latencies.append(time.perf_counter() - started)
            if response.status_code >= 400:
                errors += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return len(latencies), time.perf_counter() - started, latencies, errors


def report(
    label: str,
    count: int,
    elapsed: float,
    latencies: list[float],
    errors: int,
    cpu: tuple[float, float, float],
) -> None:
    registry, postgres, client = (seconds / count * 1000 for seconds in cpu)
    postgres_text = f"{postgres:5.2f}" if postgres >= 0 else "  n/a"
    print(
        f"{label:<30} {count / elapsed:>7,.0f} req/s  "
        f"p50 {percentile(latencies, 0.50) * 1000:7.2f} ms  "
        f"p99 {percentile(latencies, 0.99) * 1000:7.2f} ms  "
        f"| CPU ms/req: registry {registry:5.2f}, postgres {postgres_text}, "
        f"client {client:5.2f}  ({count:,} req, {errors} errors)"
    )


async def bench(
    args: argparse.Namespace, database_app_url: str, bootstrap: str, postmaster_pid: int | None
) -> None:
    prefix = f"bench{uuid.uuid4().hex[:6]}."
    if args.part in ("all", "discovery"):
        await bench_discovery(args, database_app_url, bootstrap, postmaster_pid, prefix)
    if args.part in ("all", "asyncapi"):
        await bench_asyncapi(args, database_app_url, bootstrap, postmaster_pid, prefix)


async def bench_discovery(
    args: argparse.Namespace,
    database_app_url: str,
    bootstrap: str,
    postmaster_pid: int | None,
    prefix: str,
) -> None:
    processes: list[subprocess.Popen[bytes]] = []
    base_urls: list[str] = []
    for _ in range(args.instances):
        process, url = start_service(
            "registry",
            database_app_url,
            bootstrap,
            prefix,
            DISCO_DATABASE_POOL_SIZE=str(args.pool_size),
        )
        processes.append(process)
        base_urls.append(url)
    base_url = base_urls[0]
    try:
        for url, process in zip(base_urls, processes, strict=True):
            await wait_ready("registry", url, process, limit_seconds=60)
        token = mint_dev_token(DEV_AUTH_SECRET, TENANT, "bench", (Role.SERVICE,), 3600)
        limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=64)
        async with httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}"},
            limits=limits,
            timeout=30,
        ) as client:
            rng = random.Random(7)
            bodies = [registration(i, rng) for i in range(args.agents)]
            queue = iter(bodies)
            seeded = 0
            started = time.perf_counter()

            async def seeder() -> None:
                nonlocal seeded
                for body in queue:
                    response = await client.post("/v1/agents", json=body)
                    response.raise_for_status()
                    seeded += 1

            await asyncio.gather(*(seeder() for _ in range(args.concurrency)))
            elapsed = time.perf_counter() - started
            print(
                f"seeded {seeded:,} registrations in {elapsed:.1f} s "
                f"({seeded / elapsed:,.0f} registrations/s, 3 capabilities each)"
            )
            # Warm up connections, caches and plans.
            for _ in range(200):
                await client.get("/v1/discover", params={"capability": "task-001"})

            # Measured with the lean client: httpx would cost more CPU than the registry.
            lean = LeanHttp(
                base_urls, {"Authorization": f"Bearer {token}"}, connections=args.concurrency
            )

            def by_capability() -> Awaitable[LeanResponse]:
                query = urlencode({"capability": f"task-{rng.randrange(CAPABILITY_POOL):03d}"})
                return lean.request("GET", f"/v1/discover?{query}")

            def by_text() -> Awaitable[LeanResponse]:
                return lean.request(
                    "GET", f"/v1/discover?{urlencode({'text': rng.choice(WORDS), 'limit': 10})}"
                )

            def heartbeat() -> Awaitable[LeanResponse]:
                body = bodies[rng.randrange(len(bodies))]
                return lean.request(
                    "POST",
                    f"/v1/agents/{body['agent_id']}/heartbeat",
                    json.dumps({"instance_id": body["instance_id"]}).encode(),
                )

            sample = json.loads((await by_capability()).content)
            print(
                f"a capability query answers {len(sample)} agent names "
                f"({sum(a['instance_count'] for a in sample)} instances)"
            )
            load = os.getloadavg()[0]
            print(f"{args.seconds:.0f} s per phase; load average before: {load:.2f}")
            meter = CpuMeter([p.pid for p in processes], postmaster_pid)
            for label, concurrency, call in (
                ("discovery by capability", 1, by_capability),
                ("discovery by capability", args.concurrency, by_capability),
                ("discovery by text (limit 10)", 1, by_text),
                ("discovery by text (limit 10)", args.concurrency, by_text),
                ("heartbeats", 1, heartbeat),
                ("heartbeats", args.concurrency, heartbeat),
            ):
                meter.start()
                count, elapsed, latencies, errors = await run_phase(concurrency, args.seconds, call)
                report(f"{label} x{concurrency}", count, elapsed, latencies, errors, meter.stop())
            await lean.close()
            load = os.getloadavg()[0]
            print(f"load average after: {load:.2f} (the machine has {os.cpu_count()} cores)")
    finally:
        stop_processes(processes)


async def serve_floor(database_url: str, pool_size: int, port: int) -> None:
    """``POST /v1/agents``'s own domain code behind a bare ASGI app
    (:func:`_common.serve_bare`): the body checked as an ``AgentRegistration``, prepared,
    registered by the service's statement and its record answered as JSON, as the
    registry does, with no FastAPI, middleware or auth (the caller is tenant ``bench``,
    user ``bench``)."""
    from disco_common.registry import AgentRegistration
    from disco_registry.agents.repository import (
        _REGISTER_NAMES,
        _REGISTER_SQL,
        _register_values,
        _registered,
    )
    from disco_registry.agents.service import _prepare

    async def json_columns(conn: asyncpg.Connection) -> None:
        # JSON columns read as values, as the service's driver set-up does; the
        # statement's JSON arguments are written as text already.
        for name in ("json", "jsonb"):
            await conn.set_type_codec(
                name,
                encoder=lambda value: value if isinstance(value, str) else json.dumps(value),
                decoder=json.loads,
                schema="pg_catalog",
            )

    pool = await asyncpg.create_pool(
        database_url, min_size=pool_size, max_size=pool_size, init=json_columns
    )

    async def register(body: bytes) -> tuple[int, bytes]:
        write = _prepare(TENANT, AgentRegistration.model_validate_json(body), {}, 60)
        values = _register_values(write, "bench")
        async with pool.acquire() as conn:
            row = await conn.fetchrow(_REGISTER_SQL, *[values[name] for name in _REGISTER_NAMES])
        assert row is not None  # the function answers the registered record, always
        record, created = _registered(write, dict(row))
        return 201 if created else 200, record.model_dump_json(by_alias=True).encode()

    await serve_bare(port, register)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--pool-size", type=int, default=10)
    parser.add_argument(
        "--instances",
        type=int,
        default=1,
        help="registry processes, connections spread over them round robin",
    )
    parser.add_argument("--part", choices=["all", "discovery", "asyncapi"], default="all")
    parser.add_argument("--asyncapi-agents", type=int, default=1_000)
    parser.add_argument("--asyncapi-cold-requests", type=int, default=30)
    parser.add_argument("--asyncapi-kept-requests", type=int, default=200)
    parser.add_argument("--serve-bare", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_bare:
        database_url, pool_size, port = args.serve_bare
        uvloop.run(serve_floor(database_url, int(pool_size), int(port)))
        return

    with scratch_infra("registry") as infra:
        asyncio.run(bench(args, infra.database_url, infra.bootstrap, infra.postmaster_pid))


if __name__ == "__main__":
    main()
