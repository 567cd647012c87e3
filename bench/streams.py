"""Benchmark: session streams, bus -> websocket, beside a raw consumer on the same bus.

    uv run python bench/streams.py [--quick] [--rate 200] [--seconds 20]
                                   [--sockets 1,100,1000] [--sessions 100]

Starts an embedded PostgreSQL and Tansu broker on free loopback ports unless
``DISCO_DATABASE_ADMIN_URL`` / ``DISCO_KAFKA_BOOTSTRAP`` name existing ones (a
fresh database, migrated). For each socket count (1, 100, 1,000 by default), on
its own topic prefix, a registry and a gateway as real processes (the embedded
broker's fetch cost grows with what a topic holds, so a row measured on the
topics of the rows before it would pay for their events), and ``--clients`` (2) client
processes open that many websockets on ``/v1/sessions/{id}/stream`` spread over
``--sessions`` sessions (socket ``i`` watches session ``i mod sessions``), and
this process publishes ``TOOL_LOG``
UI events (:func:`disco.runtime.publish_ui_event`) round-robin over the
sessions at a steady ``--rate`` per second for ``--seconds``. Each event carries
its send time; the figures:

- bus -> websocket latency p50/p99: publish to the message parsed by a socket
  (every socket's copy counts), the events/s delivered to all sockets, the
  ``STREAM_GAP`` messages (sockets that fell behind: should be 0);
- raw consumer -> handler latency p50/p99 in the same run: a plain group-less
  aiokafka consumer in this process reading ``notification-events`` at disco's
  busy fetch wait (what the bus alone costs, without the gateway), and the same
  to disco's own :class:`disco.bus.TopicReader` (the reader the gateway's hub
  uses, with its adaptive fetch wait) in this process;
- the gateway's CPU (% of one core over the run) and RSS after it, and from its
  ``/metrics`` the mean publish -> hand-off lag and the mean Postgres store of a
  batch (events go to the sockets first and are stored behind them, in order,
  with the reader's positions, so a replay still finds every event).

The socket processes, the raw consumer and the publisher share the machine's
cores with the gateway, PostgreSQL and the broker. Target (issue
12): p99 <= 50 ms at 1,000 sockets. Tests never assert on speed; this prints.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx
import uvloop
import websockets
from _common import (
    BusyCores,
    cpu_seconds,
    describe_fetch,
    percentile,
    raw_fetch_wait,
    scratch_infra,
    stop_processes,
    wait_ready,
)
from aiokafka import AIOKafkaConsumer

from disco._dev.ports import free_port
from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient, TopicReader
from disco.runtime import publish_ui_event
from disco.settings import BusSettings
from disco_common.auth import Role
from disco_common.envelope import Envelope
from disco_common.topics import Topic, topic_name

TENANT = "bench"
ROOT = Path(__file__).resolve().parents[1]
_CONNECT_AT_ONCE = 50


_SUMS = ("disco_gateway_stream_store_seconds", "disco_gateway_stream_lag_seconds")


async def gateway_sums(url: str) -> dict[str, float]:
    """The ``_sum`` and ``_count`` of the gateway's stream histograms."""
    async with httpx.AsyncClient(timeout=30) as http:
        text = (await http.get(f"{url}/metrics")).text
    found: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name.removesuffix("_sum").removesuffix("_count") in _SUMS:
            found[name] = float(value)
    return found


def _mean_ms(before: dict[str, float], after: dict[str, float], metric: str) -> float:
    count = after.get(f"{metric}_count", 0.0) - before.get(f"{metric}_count", 0.0)
    total = after.get(f"{metric}_sum", 0.0) - before.get(f"{metric}_sum", 0.0)
    return total / count * 1000 if count else 0.0


def rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` (Linux ``/proc``; 0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class Level:
    """What one socket count measured."""

    sockets: int
    sessions: int
    published: int = 0
    expected: int = 0
    latencies: list[float] = field(default_factory=list)
    raw: list[float] = field(default_factory=list)
    reader: list[float] = field(default_factory=list)
    """Publish to disco's own group-less reader (:class:`disco.bus.TopicReader`, as the
    gateway's hub reads) in this process."""
    gaps: int = 0
    elapsed: float = 0.0
    cpu: float = 0.0
    rss: int = 0
    store_ms: float = 0.0
    """Mean time the gateway took to keep a batch in Postgres (its metrics)."""
    lag_ms: float = 0.0
    """Mean time from publish to the gateway's hand-off to its sockets (its metrics)."""
    client_cpu: float = 0.0
    """CPU seconds of the socket processes (all of them) over the run."""
    bench_cpu: float = 0.0
    """CPU seconds of this process (publisher and raw consumer) over the run."""
    busy_cores: float = 0.0
    """Cores of the machine busy over the run (everything on it, not only the bench)."""


class Sockets:
    """One websocket per entry of ``sessions``; each measured message's latency recorded."""

    def __init__(self, url: str, token: str, sessions: list[str]) -> None:
        self.url = url.replace("http://", "ws://", 1)
        self.token = token
        self.sessions = sessions
        self.connections: list[websockets.ClientConnection] = []
        self.readers: list[asyncio.Task[None]] = []
        self.recording = False
        self.latencies: list[float] = []
        self.gaps = 0
        self.seen: dict[str, int] = {}
        """Probe id -> sockets that received it (the warm-up)."""
        self.changed = asyncio.Event()
        self.cpu_started = 0.0

    async def open(self) -> None:
        limit = asyncio.Semaphore(_CONNECT_AT_ONCE)

        async def connect(session: str) -> websockets.ClientConnection:
            async with limit:
                return await websockets.connect(
                    f"{self.url}/v1/sessions/{session}/stream",
                    additional_headers={"Authorization": f"Bearer {self.token}"},
                    max_size=None,
                    open_timeout=120,
                )

        self.connections = list(await asyncio.gather(*(connect(s) for s in self.sessions)))
        self.readers = [asyncio.create_task(self._read(c)) for c in self.connections]

    async def _read(self, connection: websockets.ClientConnection) -> None:
        try:
            async for raw in connection:
                received = time.time()
                message = json.loads(raw)
                payload = message["payload"]
                if message["type"] == "STREAM_GAP":
                    self.gaps += 1
                elif "probe" in payload:
                    self.seen[payload["probe"]] = self.seen.get(payload["probe"], 0) + 1
                    self.changed.set()
                elif self.recording and "sent" in payload:
                    self.latencies.append(received - payload["sent"])
                    self.changed.set()
        except websockets.ConnectionClosed:
            pass

    async def warm(self, wanted: dict[str, int]) -> bool:
        """Whether every socket received its session's probe (within 120 s)."""
        return await until(
            lambda: all(self.seen.get(s, 0) >= n for s, n in wanted.items()), self.changed, 120
        )

    async def finish(self, expected: int) -> tuple[list[float], int, float]:
        """The latencies once ``expected`` arrived (or 30 s passed), the gaps, and the CPU
        seconds this process spent since ``start``."""
        await until(lambda: len(self.latencies) >= expected, self.changed, 30)
        return self.latencies, self.gaps, time.process_time() - self.cpu_started

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.connections), return_exceptions=True)
        for reader in self.readers:
            reader.cancel()
        await asyncio.gather(*self.readers, return_exceptions=True)


def client_process(conn: Connection) -> None:
    """A process of websocket clients, driven by the benchmark over ``conn`` (on uvloop, as
    the gateway's uvicorn runs: the clients take as little of the shared cores as they can)."""
    uvloop.run(_clients(conn))


async def _clients(conn: Connection) -> None:
    sockets: Sockets | None = None
    while True:
        command, *args = await asyncio.to_thread(conn.recv)
        if command == "exit":
            return
        if command == "open":
            sockets = Sockets(*args)
            await sockets.open()
            conn.send("opened")
            continue
        assert sockets is not None
        if command == "warm":
            conn.send(await sockets.warm(args[0]))
        elif command == "start":
            sockets.recording = True
            sockets.cpu_started = time.process_time()
            conn.send("started")
        elif command == "finish":
            conn.send(await sockets.finish(args[0]))
            await sockets.close()
            sockets = None


async def ask(conn: Connection, *message: object) -> Any:
    """Send a command to a client process; its reply."""
    conn.send(message)
    return await asyncio.to_thread(conn.recv)


async def until(predicate: Callable[[], bool], changed: asyncio.Event, seconds: float) -> bool:
    """Wait (on ``changed``) until ``predicate()`` holds, for at most ``seconds``."""
    try:
        async with asyncio.timeout(seconds):
            while not predicate():
                changed.clear()
                await changed.wait()
    except TimeoutError:
        return False
    return True


async def raw_consumer(settings: BusSettings, level_of: list[Level | None]) -> None:
    """The baseline: a plain group-less aiokafka consumer, latency to its handler."""
    consumer = AIOKafkaConsumer(
        topic_name(Topic.NOTIFICATION_EVENTS, settings.topic_prefix),
        bootstrap_servers=settings.kafka_bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="latest",
        fetch_max_wait_ms=await raw_fetch_wait(settings),
    )
    await consumer.start()
    try:
        async for record in consumer:
            received = time.time()
            level = level_of[0]
            if level is None or record.value is None:
                continue
            data = Envelope.from_kafka_value(record.value).data
            payload = data.get("payload") if isinstance(data, dict) else None
            if isinstance(payload, dict) and isinstance(payload.get("sent"), float):
                level.raw.append(received - float(payload["sent"]))  # type: ignore[arg-type]
    finally:
        await consumer.stop()


def _sent(envelope: Envelope | None) -> float | None:
    data = envelope.data if envelope is not None else None
    payload = data.get("payload") if isinstance(data, dict) else None
    sent = payload.get("sent") if isinstance(payload, dict) else None
    return sent if isinstance(sent, float) else None


async def disco_reader(settings: BusSettings, level_of: list[Level | None]) -> None:
    """disco's group-less reader, as the gateway's hub uses it: latency to its handler."""
    async with TopicReader(settings, [Topic.NOTIFICATION_EVENTS.value]) as reader:
        while True:
            records = await reader.read(timeout=0.5)
            received = time.time()
            level = level_of[0]
            if level is None:
                continue
            for record in records:
                if (sent := _sent(record.envelope_or_none())) is not None:
                    level.reader.append(received - sent)


async def measure(
    args: argparse.Namespace,
    bus: BusClient,
    gateway_url: str,
    gateway_pid: int,
    token: str,
    count: int,
    clients: list[Connection],
    level_of: list[Level | None],
) -> Level:
    sessions = [f"bench-{uuid.uuid4().hex[:8]}-{n}" for n in range(min(args.sessions, count))]
    per_socket = [sessions[i % len(sessions)] for i in range(count)]
    groups = [
        (conn, per_socket[w :: len(clients)])
        for w, conn in enumerate(clients)
        if per_socket[w :: len(clients)]
    ]
    await asyncio.gather(*(ask(c, "open", gateway_url, token, g) for c, g in groups))
    # Warm up: every socket is subscribed once it received its session's probe.
    for session in sessions:
        await publish_ui_event(
            bus, "TOOL_LOG", {"probe": session}, session_id=session, tenant_id=TENANT
        )
    wanted = [Counter(g) for _, g in groups]
    ready = await asyncio.gather(
        *(ask(c, "warm", dict(w)) for (c, _), w in zip(groups, wanted, strict=True))
    )
    if not all(ready):
        raise RuntimeError(f"not every one of {count} sockets received its probe")
    await asyncio.gather(*(ask(c, "start") for c, _ in groups))

    level = Level(sockets=count, sessions=len(sessions))
    level_of[0] = level
    expected = [0] * len(groups)
    interval = 1.0 / args.rate
    cpu_before = cpu_seconds(gateway_pid)
    bench_cpu_before = time.process_time()
    machine = BusyCores()
    machine.start()
    sums_before = await gateway_sums(gateway_url)
    started = time.perf_counter()
    deadline = started + args.seconds
    n = 0
    in_flight: set[asyncio.Task[object]] = set()
    # On schedule, not one after the other: a publish waits for the broker's ack.
    while (now := time.perf_counter()) < deadline:
        due = started + n * interval
        if due > now:
            await asyncio.sleep(due - now)
        session = sessions[n % len(sessions)]
        task = asyncio.create_task(
            publish_ui_event(
                bus,
                "TOOL_LOG",
                {"sent": time.time(), "n": n},
                session_id=session,
                tenant_id=TENANT,
            )
        )
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
        level.published += 1
        for index, counts in enumerate(wanted):
            expected[index] += counts[session]
        n += 1
    await asyncio.gather(*in_flight)
    level.expected = sum(expected)
    results = await asyncio.gather(
        *(ask(c, "finish", e) for (c, _), e in zip(groups, expected, strict=True))
    )
    level.elapsed = time.perf_counter() - started
    level.cpu = cpu_seconds(gateway_pid) - cpu_before
    level.bench_cpu = time.process_time() - bench_cpu_before
    level.busy_cores = machine.stop()
    level.rss = rss_bytes(gateway_pid)
    sums_after = await gateway_sums(gateway_url)
    level.store_ms = _mean_ms(sums_before, sums_after, _SUMS[0])
    level.lag_ms = _mean_ms(sums_before, sums_after, _SUMS[1])
    level_of[0] = None
    for latencies, gaps, client_cpu in results:
        level.latencies += latencies
        level.gaps += gaps
        level.client_cpu += client_cpu
    return level


def _ms(samples: list[float], fraction: float) -> str:
    return f"{percentile(samples, fraction) * 1000:.1f}" if samples else "-"


def print_table(levels: list[Level], rate: float) -> None:
    head = (
        f"{'sockets':>7} {'sessions':>8} {'events/s in':>11} {'delivered/s':>11} "
        f"{'lost':>5} {'gaps':>4} {'ws p50 ms':>9} {'ws p99 ms':>9} "
        f"{'raw p50 ms':>10} {'raw p99 ms':>10} {'rdr p50 ms':>10} {'rdr p99 ms':>10} "
        f"{'gw CPU %':>8} {'gw RSS MB':>9} "
        f"{'gw lag ms':>9} {'store ms':>8} {'clients CPU %':>13} {'bench CPU %':>11} "
        f"{'busy cores':>10}"
    )
    print()
    print(head)
    print("-" * len(head))
    for level in levels:
        print(
            f"{level.sockets:>7} {level.sessions:>8} {level.published / level.elapsed:>11.0f} "
            f"{len(level.latencies) / level.elapsed:>11.0f} "
            f"{level.expected - len(level.latencies):>5} {level.gaps:>4} "
            f"{_ms(level.latencies, 0.5):>9} {_ms(level.latencies, 0.99):>9} "
            f"{_ms(level.raw, 0.5):>10} {_ms(level.raw, 0.99):>10} "
            f"{_ms(level.reader, 0.5):>10} {_ms(level.reader, 0.99):>10} "
            f"{level.cpu / level.elapsed * 100:>8.0f} {level.rss / 2**20:>9.0f} "
            f"{level.lag_ms:>9.1f} {level.store_ms:>8.1f} "
            f"{level.client_cpu / level.elapsed * 100:>13.0f} "
            f"{level.bench_cpu / level.elapsed * 100:>11.0f} {level.busy_cores:>10.2f}"
        )
    print(
        f"\nsteady rate {rate:g} events/s round-robin over the sessions; ws = publish to the "
        "message parsed by a socket (every socket's copy); raw = publish to a plain aiokafka "
        "consumer's handler in the same run; rdr = the same to disco's TopicReader (what the "
        "gateway's hub reads with) in this process; gw lag = publish to the gateway handing the "
        "event to its sockets' queues (mean, its metrics), store = keeping a batch in Postgres "
        "behind the sockets (mean); clients CPU = the socket processes together, bench CPU = "
        "the publisher and raw consumer (% of one core); busy cores = the whole machine's "
        "(it is shared). Target: ws p99 <= 50 ms at 1,000 sockets."
    )


async def bench(
    args: argparse.Namespace, database_url: str, bootstrap: str, clients: list[Connection]
) -> None:
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    levels = [
        await measure_on_fresh_stack(args, database_url, bootstrap, clients, count)
        for count in args.sockets
    ]
    print_table(levels, args.rate)
    print(f"load average after: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")


async def measure_on_fresh_stack(
    args: argparse.Namespace,
    database_url: str,
    bootstrap: str,
    clients: list[Connection],
    count: int,
) -> Level:
    """One row on its own topics and gateway: the embedded broker's fetch cost grows with
    what a topic holds, so a row measured after the others would pay for their events."""
    prefix = f"bench{uuid.uuid4().hex[:6]}."
    registry_port, gateway_port = free_port(), free_port()
    registry_url = f"http://127.0.0.1:{registry_port}"
    gateway_url = f"http://127.0.0.1:{gateway_port}"
    env = {
        **os.environ,
        "DISCO_DATABASE_URL": database_url,
        "DISCO_KAFKA_BOOTSTRAP": bootstrap,
        "DISCO_TOPIC_PREFIX": prefix,
        "DISCO_KAFKA_PARTITIONS": "8",
        "DISCO_LOG_LEVEL": "WARNING",
        "DISCO_REGISTRY_URL": registry_url,
        "DISCO_TENANT_ID": TENANT,
        "DISCO_REGISTRY_PORT": str(registry_port),
        "DISCO_GATEWAY_PORT": str(gateway_port),
        "DISCO_GATEWAY_PUBLIC_URL": gateway_url,
        "PYTHONPATH": str(ROOT),
    }
    logs = Path(tempfile.mkdtemp(prefix="disco-bench-streams-"))
    processes: list[subprocess.Popen[bytes]] = []

    def spawn(name: str, module: str) -> subprocess.Popen[bytes]:
        log = (logs / f"{name}.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", module], env=env, cwd=ROOT, stdout=log, stderr=log
        )
        processes.append(process)
        return process

    settings = BusSettings(kafka_bootstrap=bootstrap, topic_prefix=prefix, kafka_partitions=8)
    level_of: list[Level | None] = [None]
    try:
        async with BusClient(settings, name="bench-streams") as bus:
            await bus.ensure_topics()
            registry = spawn("registry", "disco_registry")
            await wait_ready("registry", registry_url, registry, limit_seconds=90)
            gateway = spawn("gateway", "disco_gateway")
            await wait_ready("gateway", gateway_url, gateway, limit_seconds=90)
            await raw_fetch_wait(settings)
            print(
                f"{count} sockets on topics {prefix}*: gateway pid {gateway.pid}, logs in "
                f"{logs}; {describe_fetch(settings)}",
                flush=True,
            )
            token = mint_dev_token(DEV_AUTH_SECRET, TENANT, "bench", (Role.USER,), 3600)
            raw = asyncio.gather(raw_consumer(settings, level_of), disco_reader(settings, level_of))
            try:
                level = await measure(
                    args, bus, gateway_url, gateway.pid, token, count, clients, level_of
                )
            finally:
                raw.cancel()
                await asyncio.gather(raw, return_exceptions=True)
            print(
                f"  {count} sockets: {len(level.latencies)} messages, "
                f"p99 {_ms(level.latencies, 0.99)} ms",
                flush=True,
            )
            return level
    finally:
        stop_processes(processes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs: a couple of minutes")
    parser.add_argument("--rate", type=float, default=200.0, help="events/s published")
    parser.add_argument("--seconds", type=float, default=20.0, help="per socket count")
    parser.add_argument("--sockets", default="1,100,1000", help="socket counts, comma-separated")
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument(
        "--clients", type=int, default=2, help="processes the sockets are spread over"
    )
    args = parser.parse_args()
    args.sockets = [int(n) for n in args.sockets.split(",")]
    if args.quick:
        args.seconds = min(args.seconds, 6.0)
    spawn = multiprocessing.get_context("spawn")
    pipes = [spawn.Pipe() for _ in range(args.clients)]
    workers = [spawn.Process(target=client_process, args=(child,)) for _, child in pipes]
    for worker in workers:
        worker.start()
    try:
        with scratch_infra("streams") as infra:
            asyncio.run(bench(args, infra.database_url, infra.bootstrap, [p for p, _ in pipes]))
    finally:
        for parent, _ in pipes:
            parent.send(("exit",))
        for worker in workers:
            worker.join(30)


if __name__ == "__main__":
    main()
