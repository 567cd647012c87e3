"""Benchmark: where a round trip's fetch cost comes from (issue 37, part 3).

    uv run --group bench python bench/fetches.py [--quick] [--round-trips 200] [--grown 100000]

Starts an embedded Tansu broker on a free loopback port unless
DISCO_KAFKA_BOOTSTRAP names one. Prints two tables:

- **requests per round trip**: every request the Kafka clients of one process
  send while it runs sequential tool round trips, counted at
  ``AIOKafkaClient.send`` by kind (fetch, produce, commit, heartbeat, metadata,
  list-offsets, ...), with the partitions and topics each fetch names and how
  many clients fetched. Once for a disco :class:`~disco.Tool` answering
  ``BusClient.request(wait=...)``, once for the raw two-hop pair of
  ``bench/table.py`` (a group consumer answering, a group-less reader of
  action-results), both in this process, on the same broker.
- **one fetch by partitions and stored records**: a raw consumer positioned at
  the end of ``P`` partitions, fetching at the shortest wait with nothing new,
  on topics holding none and then ``--grown`` records (written 4 to a batch,
  as traffic at 50 in flight leaves them): the fetch's round trip and the
  client's CPU per fetch. This is the broker's cost per partition per fetch as
  the log grows, which every consumer of a busy topic pays.

Figures, not assertions: the tests never time anything.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import statistics
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import agents as agents_bench
import table as table_bench
from _batches import Record, write_batches
from _common import percentile, raw_fetch_wait, scratch_broker
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.client import AIOKafkaClient

from disco.settings import BusSettings
from disco_service import in_background

# -- counting the requests of every client in this process --------------------------------


@dataclass
class Requests:
    """What the clients of this process asked the broker while counting."""

    kinds: Counter[str] = field(default_factory=Counter)
    fetch_partitions: list[int] = field(default_factory=list)
    fetch_topics: list[int] = field(default_factory=list)
    fetch_seconds: list[float] = field(default_factory=list)
    fetchers: set[int] = field(default_factory=set)


@contextlib.contextmanager
def counted() -> Iterator[Requests]:
    """Count every request ``AIOKafkaClient.send`` sends inside the block."""
    seen = Requests()
    original = AIOKafkaClient.send

    async def send(self: AIOKafkaClient, node_id: int, request: Any, **kwargs: Any) -> Any:
        kind = type(request).__name__.removesuffix("Request")
        seen.kinds[kind] += 1
        if kind != "Fetch":
            return await original(self, node_id, request, **kwargs)
        topics = request.topics
        seen.fetch_topics.append(len(topics))
        seen.fetch_partitions.append(sum(len(partitions) for _, partitions in topics))
        seen.fetchers.add(id(self))
        started = time.perf_counter()
        try:
            return await original(self, node_id, request, **kwargs)
        finally:
            seen.fetch_seconds.append(time.perf_counter() - started)

    AIOKafkaClient.send = send
    try:
        yield seen
    finally:
        AIOKafkaClient.send = original


def describe(side: str, seen: Requests, rounds: int) -> list[str]:
    kinds = ", ".join(
        f"{kind} {count / rounds:.2f}" for kind, count in seen.kinds.most_common() if count
    )
    fetches = seen.kinds["Fetch"]
    lines = [f"  {side}: per round trip: {kinds}"]
    if fetches:
        lines.append(
            f"    {len(seen.fetchers)} fetching clients; per fetch: "
            f"{statistics.mean(seen.fetch_partitions):.1f} partitions of "
            f"{statistics.mean(seen.fetch_topics):.1f} topics; fetch round trip "
            f"p50 {percentile(seen.fetch_seconds, 0.5) * 1000:.2f} ms"
        )
    return lines


@contextlib.asynccontextmanager
async def disco_tool(settings: BusSettings) -> AsyncIterator[None]:
    tool = agents_bench.make_tool(settings)
    await tool.start()
    await tool.wait_ready(60)
    try:
        yield
    finally:
        await tool.stop()


def raw_responder(settings: BusSettings) -> contextlib.AbstractAsyncContextManager[None]:
    return in_background(
        table_bench.serve_raw_responder(settings.kafka_bootstrap, settings.topic_prefix),
        "raw-responder",
    )


async def per_round_trip(bootstrap: str, rounds: int) -> list[str]:
    lines = []
    for side in ("raw", "disco"):
        settings = await table_bench.provisioned(bootstrap, agents_bench.PARTITIONS)
        await raw_fetch_wait(settings)
        serving = raw_responder(settings) if side == "raw" else disco_tool(settings)
        async with serving:
            if side == "raw":
                await table_bench.raw_round_trips(settings, 10)  # its own 20 warm-up too
                with counted() as seen:
                    latencies = await table_bench.raw_round_trips(settings, rounds)
            else:
                await agents_bench.tool_round_trips(settings, 10)
                with counted() as seen:
                    latencies = await agents_bench.tool_round_trips(settings, rounds)
        lines += describe(side, seen, len(latencies) + 20)  # both warm up 20 more
        lines.append(
            f"    round trip p50 {percentile(latencies, 0.5) * 1000:.2f} ms over {len(latencies)}"
        )
    return lines


# -- one fetch, by partitions and stored records -------------------------------------------


async def topic_holding(bootstrap: str, partitions: int, records: int) -> str:
    """A new topic of ``partitions`` holding ``records`` records, 4 to a batch."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    name = f"fetches-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await producer.start()
    try:
        record: Record = (None, b"x" * 400, None)
        await write_batches(
            producer, name, -(-records // 4), 4, range(partitions), lambda: record, window=200
        )
    finally:
        await producer.stop()
    return name


async def idle_fetches(bootstrap: str, topic: str, wait_ms: int, seconds: float) -> list[str]:
    """Fetch round trip and client CPU per fetch of a reader at the end of ``topic``."""
    reader = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=wait_ms
    )
    await reader.start()
    try:
        await reader.topics()
        partitions = [TopicPartition(topic, p) for p in reader.partitions_for_topic(topic) or ()]
        reader.assign(partitions)
        await reader.seek_to_end()
        for tp in partitions:
            await reader.position(tp)
        with counted() as seen:
            cpu = time.process_time()
            ends = time.monotonic() + seconds
            while time.monotonic() < ends:
                await reader.getmany(timeout_ms=100)
            cpu = time.process_time() - cpu
    finally:
        await reader.stop()
    fetches = max(1, seen.kinds["Fetch"])
    return [
        f"{percentile(seen.fetch_seconds, 0.5) * 1000:.2f}",
        f"{percentile(seen.fetch_seconds, 0.99) * 1000:.2f}",
        f"{fetches / seconds:,.0f}",
        f"{cpu / fetches * 1e6:.0f}",
    ]


async def per_fetch(bootstrap: str, grown: int, seconds: float) -> list[str]:
    settings = BusSettings(kafka_bootstrap=bootstrap)
    wait_ms = await raw_fetch_wait(settings)
    rows = [
        "  stored  partitions  fetch p50 ms  fetch p99 ms  fetches/s  client CPU us/fetch",
    ]
    for records in (0, grown):
        for partitions in (1, 8, 16):
            topic = await topic_holding(bootstrap, partitions, records)
            cells = await idle_fetches(bootstrap, topic, wait_ms, seconds)
            rows.append(
                f"  {records:>6,}  {partitions:>10}  {cells[0]:>12}  {cells[1]:>12}  "
                f"{cells[2]:>9}  {cells[3]:>19}"
            )
    rows.append(f"  (each {seconds:g} s at the shortest fetch wait, {wait_ms} ms, nothing new)")
    return rows


async def main(args: argparse.Namespace) -> None:
    with scratch_broker("fetches") as bootstrap:
        print(f"broker {bootstrap}; {os.cpu_count()} cores", flush=True)
        print("== requests per round trip (one at a time, every client of the process)")
        with contextlib.redirect_stdout(io.StringIO()):  # the raw responder's "ready" line
            lines = await per_round_trip(bootstrap, args.round_trips)
        for line in lines:
            print(line, flush=True)
        print("== one fetch with nothing new, by partitions and stored records")
        for line in await per_fetch(bootstrap, args.grown, args.seconds):
            print(line, flush=True)


def cli() -> int:
    os.environ.setdefault("DISCO_LOG_LEVEL", "WARNING")  # the in-process Tool's start/stop lines
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="100 round trips, 20,000 stored")
    parser.add_argument("--round-trips", type=int)
    parser.add_argument("--grown", type=int)
    parser.add_argument("--seconds", type=float)
    args = parser.parse_args()
    args.round_trips = args.round_trips or (100 if args.quick else 200)
    args.grown = args.grown or (20_000 if args.quick else 100_000)
    args.seconds = args.seconds or (2.0 if args.quick else 3.0)
    asyncio.run(main(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
