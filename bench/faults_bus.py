"""Benchmark: the bus's fault figures, in one run (``bench/faults.py`` runs this when present).

    uv run python bench/faults_bus.py [--messages 2000] [--repeats 2] [--restarts 3]

Starts an embedded Postgres (migrated), a Tansu broker and the memory service
on free loopback ports. Prints:

- consume rate through ``BusConsumer`` with the in-process dedup store (what a
  Tool uses by default) beside ``DurableDedupStore`` (the memory service's
  dedup marks: one question per fetched batch and tenant, the marks written
  after their handlers in background batches, each offset committed only once
  the marks of its records are stored; what Workers and Planners use by
  default), on the same broker, best of ``--repeats``: envelopes handled per
  second, and per second until the group's committed offsets reached the end;
- recovery after a kill -9 and restart of the broker: seconds until a
  ``BusClient.request(wait=...)`` answered by a handler in another group gets
  its first answer again (each try waits 2 s), over ``--restarts`` restarts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _common import scratch_infra, stop_processes, wait_ready
from aiokafka import AIOKafkaConsumer, TopicPartition

from disco._dev.broker import EmbeddedBroker
from disco._dev.ports import free_port
from disco.bus import (
    BusClient,
    BusConsumer,
    BusError,
    DedupStore,
    DurableDedupStore,
    InMemoryDedupStore,
    RequestTimeout,
)
from disco.clients import MemoryClient, ServiceClientSettings
from disco.settings import BusSettings
from disco_common.envelope import ActionRequest, Envelope
from disco_common.topics import Topic

TENANT = "bench-faults"
PAYLOAD = {"blob": "x" * 189}


def _settings(bootstrap: str) -> BusSettings:
    return BusSettings(
        kafka_bootstrap=bootstrap,
        topic_prefix=f"bf{uuid.uuid4().hex[:6]}.",
        kafka_session_timeout_ms=2000,
        kafka_heartbeat_interval_ms=300,
    )


async def _committed_to_end(consumer: BusConsumer, topic: str) -> None:
    """Return once ``consumer``'s group committed every record now on ``topic``."""
    probe = AIOKafkaConsumer(
        bootstrap_servers=consumer.client.settings.kafka_bootstrap,
        group_id=consumer.client.group_name(consumer.group),
        enable_auto_commit=False,
    )
    await probe.start()
    try:
        await probe.topics()
        partitions = [TopicPartition(topic, p) for p in probe.partitions_for_topic(topic) or ()]
        ends = await probe.end_offsets(partitions)
        while True:
            behind = [tp for tp, end in ends.items() if (await probe.committed(tp) or 0) < end]
            if not behind:
                return
            await asyncio.sleep(0.01)
    finally:
        await probe.stop()


async def consume_rate(settings: BusSettings, n: int, store: DedupStore) -> tuple[float, float]:
    """Envelopes per second a BusConsumer handles with ``store`` (published before), and
    per second until its group committed them all."""
    async with BusClient(settings, name="bench-producer") as bus:
        await bus.ensure_topics()
        futures = [
            await bus.send(Topic.BUSINESS_FACTS, "bench.fact", PAYLOAD, tenant_id=TENANT)
            for _ in range(n)
        ]
        await asyncio.gather(*futures)
        handled = 0
        done = asyncio.Event()

        async def handle(envelope: Envelope) -> None:
            nonlocal handled
            handled += 1
            if handled >= n:
                done.set()

        consumer = BusConsumer(bus, f"bench-{uuid.uuid4().hex[:6]}", dedup_store=store)
        consumer.add_handler(Topic.BUSINESS_FACTS, "bench.fact", handle)
        started = time.perf_counter()
        async with consumer:
            await asyncio.wait_for(done.wait(), 600)
            handled_in = time.perf_counter() - started
            await asyncio.wait_for(
                _committed_to_end(consumer, bus.topic_name(Topic.BUSINESS_FACTS)), 600
            )
            committed_in = time.perf_counter() - started
    return n / handled_in, n / committed_in


Rates = tuple[float, float]
"""Envelopes per second: handled, and committed."""


async def dedup_rates(bootstrap: str, memory_url: str, n: int, repeats: int) -> tuple[Rates, Rates]:
    client_settings = ServiceClientSettings(memory_url=memory_url, tenant_id=TENANT)
    in_memory: list[Rates] = []
    durable: list[Rates] = []
    async with MemoryClient.from_settings(client_settings) as memory:
        for _ in range(repeats):
            in_memory.append(await consume_rate(_settings(bootstrap), n, InMemoryDedupStore()))
            store = DurableDedupStore(memory, f"bench-{uuid.uuid4().hex[:6]}")
            durable.append(await consume_rate(_settings(bootstrap), n, store))

    def best(rates: list[Rates]) -> Rates:
        return max(rate[0] for rate in rates), max(rate[1] for rate in rates)

    return best(in_memory), best(durable)


async def restart_recovery(folder: Path, restarts: int) -> list[float]:
    """Seconds from a broker restart (after kill -9) to the first answer again."""
    broker = EmbeddedBroker(port=free_port(), log_path=folder / "restart-broker.log")
    broker.start()
    settings = _settings(broker.bootstrap)
    times: list[float] = []
    try:
        async with BusClient(settings, name="bench-requester") as bus:
            await bus.ensure_topics()
            responder = BusConsumer(BusClient(settings, name="bench-echo"), "bench-echo")

            @responder.on(Topic.ACTION_REQUESTS, "bench.echo.requested")
            async def echo(envelope: Envelope) -> None:
                assert isinstance(envelope, ActionRequest)
                await responder.client.respond(
                    envelope.response_event,
                    {"ok": True},
                    correlation_id=envelope.correlation_id or envelope.id,
                )

            async with responder:

                async def ask() -> bool:
                    try:
                        await bus.request(
                            "bench.echo.requested",
                            {},
                            response_event="bench.echo.done",
                            tenant_id=TENANT,
                            wait=2.0,
                        )
                    except (RequestTimeout, BusError):
                        return False
                    return True

                while not await ask():
                    pass
                for _ in range(restarts):
                    assert broker.pid is not None
                    os.kill(broker.pid, signal.SIGKILL)
                    broker.stop()
                    broker.start()
                    started = time.perf_counter()
                    while not await ask():
                        pass
                    times.append(time.perf_counter() - started)
    finally:
        broker.stop()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--restarts", type=int, default=3)
    args = parser.parse_args()

    with scratch_infra("faults-bus") as infra, tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        port = free_port()
        env = {
            **os.environ,
            "DISCO_ENV": "dev",
            "DISCO_DATABASE_URL": infra.database_url,
            "DISCO_KAFKA_BOOTSTRAP": infra.bootstrap,
            "DISCO_MEMORY_PORT": str(port),
            "DISCO_LOG_LEVEL": "WARNING",
        }
        with (folder / "memory.log").open("wb") as log:
            memory = subprocess.Popen(
                [sys.executable, "-m", "disco_memory"], env=env, stdout=log, stderr=log
            )
        memory_url = f"http://127.0.0.1:{port}"
        try:
            asyncio.run(wait_ready("memory service", memory_url, memory, limit_seconds=120))
            fast, durable = asyncio.run(
                dedup_rates(infra.bootstrap, memory_url, args.messages, args.repeats)
            )
        finally:
            stop_processes([memory])
        recovery = asyncio.run(restart_recovery(folder, args.restarts))

    print(f"bus faults ({args.messages} envelopes, best of {args.repeats}):")
    print(
        f"  consume, in-process dedup store       {fast[0]:8.0f} envelopes/s handled, "
        f"{fast[1]:8.0f} committed"
    )
    print(
        f"  consume, durable dedup store (memory) {durable[0]:8.0f} envelopes/s handled, "
        f"{durable[1]:8.0f} committed ({durable[0] / fast[0]:.0%} and {durable[1] / fast[1]:.0%} "
        "of in-process; one question per fetched batch and tenant, marks written in batches "
        "before their offsets are committed)"
    )
    if recovery:
        print(
            f"  broker kill -9 + restart -> first answer again: median "
            f"{statistics.median(recovery):.1f} s, max {max(recovery):.1f} s "
            f"over {len(recovery)} restarts (2 s per unanswered try)"
        )


if __name__ == "__main__":
    main()
