"""Benchmark: disco's bus against plain aiokafka on the same broker, in one run.

    uv run python bench/bus.py [--quick] [--messages 100000] [--round-trips 300] [--repeats 3]

Starts an embedded Tansu broker on a free loopback port unless
DISCO_KAFKA_BOOTSTRAP names one. Prints one table:

- produce rate: raw ``producer.send`` of N pre-serialised envelopes vs
  ``BusClient.send`` of N envelopes (building, validating and serialising each
  one), both gathering acks per window of 2000 records; plus ``publish()``
  awaited in one task per message, the way concurrent handlers publish;
- awaited publishes: ``AWAITING`` tasks, each sending one record and awaiting its
  acknowledgement before the next (raw: ``await (await producer.send(...))``;
  disco: ``await publish()``), the way concurrent handlers publish;
- produce -> consume rate: the same, with a consumer group reading while the
  producer writes (raw: ``getmany`` + commit per batch; disco: ``BusConsumer``
  calling a handler per envelope, commits after each);
- request/response round trip p50/p99, one request at a time: raw aiokafka on
  the same two-hop path (produce to action-requests; a raw responder in a group
  consumes and produces to action-results; the requester reads action-results
  without a group) vs ``BusClient.request(wait=...)`` answered by a handler;
- the cost of observability: disco's publish, publish -> handler and round trip
  again with tracing on (an OpenTelemetry SDK provider, 100% sampling, a batch
  processor feeding an exporter that drops the spans: everything but the
  network), then with tracing and Prometheus metrics on (``BusMetrics`` with its
  lag sampler), in the same run, beside the same phases with both off.

Rates are the best of ``--repeats`` alternating runs (the machine may be
shared). Both sides use the same fetch, linger and batch settings. The
raw side sends the very bytes disco would (a ~400-byte envelope with a 200-byte
payload and its headers, keyed by UUIDs made up front), so the difference is
disco's own work: building and validating each envelope, serialising it,
routing, parsing and validating on the way in, context, dedup and commits.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from _common import describe_fetch, known_fetch_wait, percentile, raw_fetch_wait
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased
from prometheus_client import CollectorRegistry

from disco._dev.broker import EmbeddedBroker
from disco._dev.ports import free_port
from disco.bus import BusClient, BusConsumer, BusMetrics
from disco.settings import BusSettings
from disco_common.envelope import ActionRequest, BusinessFact, Envelope
from disco_common.topics import Topic

PAYLOAD = {"blob": "x" * 189}  # 200 bytes as JSON
WINDOW = 2000  # records in flight before waiting for their acks (both sides)
AWAITING = 20  # concurrent publishers each awaiting its ack (the awaited-publish phase)
assert len(json.dumps(PAYLOAD, separators=(",", ":"))) == 200


def _producer_options(settings: BusSettings) -> dict[str, Any]:
    return {
        "acks": "all",
        "enable_idempotence": False,
        "linger_ms": settings.kafka_linger_ms,
        "max_batch_size": settings.kafka_max_batch_bytes,
        "max_request_size": settings.bus_max_message_bytes + 4096,
        **settings.kafka_connection_options(),
    }


def _consumer_options(settings: BusSettings) -> dict[str, Any]:
    return {
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": known_fetch_wait(settings),
        "session_timeout_ms": settings.kafka_session_timeout_ms,
        "heartbeat_interval_ms": settings.kafka_heartbeat_interval_ms,
        "max_poll_records": settings.kafka_max_poll_records,
        **settings.kafka_connection_options(),
    }


def _sample_record() -> tuple[bytes, list[tuple[str, bytes]]]:
    envelope = BusinessFact(source="disco://agent/bench", type="bench.happened", data=PAYLOAD)
    return envelope.to_kafka_value(), envelope.kafka_headers()


def _keys(n: int) -> list[bytes]:
    # disco keys a record by its envelope id (a UUID) when it has no plan or
    # correlation id; the raw side uses keys of the same length, made up front.
    return [str(uuid.uuid4()).encode() for _ in range(n)]


async def _wait_assigned(consumer: AIOKafkaConsumer, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not consumer.assignment():
        if time.monotonic() > deadline:
            raise TimeoutError("the raw consumer got no partitions")
        await asyncio.sleep(0.02)


# -- raw aiokafka --------------------------------------------------------------


Headers = list[tuple[str, bytes]]


async def _raw_timed(
    settings: BusSettings,
    topic: str,
    n: int,
    send_all: Callable[[AIOKafkaProducer, bytes, Headers, list[bytes]], Awaitable[None]],
) -> float:
    """Seconds ``send_all(producer, value, headers, keys)`` takes on a started, warmed
    producer, with ``n`` keys made up front."""
    value, headers = _sample_record()
    keys = _keys(n)
    producer = AIOKafkaProducer(**_producer_options(settings))
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=b"warm-up", headers=headers)
        started = time.perf_counter()
        await send_all(producer, value, headers, keys)
        return time.perf_counter() - started
    finally:
        await producer.stop()


async def raw_produce(settings: BusSettings, topic: str, n: int) -> float:
    async def windows(
        producer: AIOKafkaProducer, value: bytes, headers: Headers, keys: list[bytes]
    ) -> None:
        for start in range(0, n, WINDOW):
            deliveries = [
                await producer.send(topic, value, key=keys[i], headers=headers)
                for i in range(start, min(n, start + WINDOW))
            ]
            await asyncio.gather(*deliveries)

    return await _raw_timed(settings, topic, n, windows)


async def raw_produce_awaited(settings: BusSettings, topic: str, n: int) -> float:
    async def publishers(
        producer: AIOKafkaProducer, value: bytes, headers: Headers, keys: list[bytes]
    ) -> None:
        async def publisher(own: list[bytes]) -> None:
            for key in own:
                await (await producer.send(topic, value, key=key, headers=headers))

        await asyncio.gather(*(publisher(keys[i::AWAITING]) for i in range(AWAITING)))

    return await _raw_timed(settings, topic, n, publishers)


async def raw_produce_consume(
    settings: BusSettings, topic: str, n: int, *, decode: bool = False
) -> float:
    """Seconds to produce ``n`` records and consume them in one group; the consumer only
    counts them, or (``decode``) also decodes each value with ``json.loads``, the least
    any consumer of JSON envelopes does."""
    value, headers = _sample_record()
    keys = _keys(n)
    consumer = AIOKafkaConsumer(
        topic, group_id=f"raw-{uuid.uuid4().hex[:6]}", **_consumer_options(settings)
    )
    producer = AIOKafkaProducer(**_producer_options(settings))
    await consumer.start()
    await producer.start()
    try:
        await _wait_assigned(consumer)
        done = asyncio.Event()

        async def consume() -> None:
            seen = 0
            while seen < n:
                batches = await consumer.getmany(timeout_ms=100)
                for records in batches.values():
                    seen += len(records)
                    if decode:
                        for record in records:
                            json.loads(record.value)
                if batches:
                    await consumer.commit()
            done.set()

        started = time.perf_counter()
        reader = asyncio.create_task(consume())
        for start in range(0, n, WINDOW):
            deliveries = [
                await producer.send(topic, value, key=keys[i], headers=headers)
                for i in range(start, min(n, start + WINDOW))
            ]
            await asyncio.gather(*deliveries)
        await asyncio.wait_for(reader, 300)
        return time.perf_counter() - started
    finally:
        await producer.stop()
        await consumer.stop()


async def raw_round_trips(settings: BusSettings, rounds: int) -> list[float]:
    requests_topic = f"{settings.topic_prefix}{Topic.ACTION_REQUESTS}"
    results_topic = f"{settings.topic_prefix}{Topic.ACTION_RESULTS}"
    producer = AIOKafkaProducer(**_producer_options(settings))
    responder = AIOKafkaConsumer(
        requests_topic, group_id="raw-responder", **_consumer_options(settings)
    )
    listener = AIOKafkaConsumer(
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=known_fetch_wait(settings),
        **settings.kafka_connection_options(),
    )
    await producer.start()
    await responder.start()
    await listener.start()
    try:
        await _wait_assigned(responder)
        await listener.topics()
        partitions = [
            TopicPartition(results_topic, p)
            for p in listener.partitions_for_topic(results_topic) or ()
        ]
        listener.assign(partitions)
        for tp, offset in (await listener.end_offsets(partitions)).items():
            listener.seek(tp, offset)

        async def respond() -> None:
            while True:
                batches = await responder.getmany(timeout_ms=100)
                for records in batches.values():
                    for record in records:
                        request = json.loads(record.value)
                        answer = {
                            "specversion": "1.0",
                            "id": str(uuid.uuid4()),
                            "source": "raw",
                            "type": request["response_event"],
                            "correlation_id": request["correlation_id"],
                            "data": {"ok": True},
                        }
                        await producer.send_and_wait(
                            results_topic,
                            json.dumps(answer).encode(),
                            key=request["correlation_id"].encode(),
                            headers=[("ce_type", request["response_event"].encode())],
                        )
                if batches:
                    await responder.commit()

        responding = asyncio.create_task(respond())
        latencies = []
        for _ in range(rounds):
            correlation_id = str(uuid.uuid4())
            request = {
                "specversion": "1.0",
                "id": str(uuid.uuid4()),
                "source": "raw",
                "type": "bench.requested",
                "correlation_id": correlation_id,
                "response_event": "bench.completed",
                "data": PAYLOAD,
            }
            started = time.perf_counter()
            await producer.send_and_wait(
                requests_topic,
                json.dumps(request).encode(),
                key=correlation_id.encode(),
                headers=[("ce_type", b"bench.requested")],
            )
            answered = False
            while not answered:
                batches = await asyncio.wait_for(listener.getmany(timeout_ms=1000), 30)
                for records in batches.values():
                    answered = answered or any(
                        json.loads(r.value).get("correlation_id") == correlation_id for r in records
                    )
            latencies.append(time.perf_counter() - started)
        responding.cancel()
        return latencies
    finally:
        await listener.stop()
        await responder.stop()
        await producer.stop()


# -- disco ----------------------------------------------------------------------


class _CountingExporter(SpanExporter):
    """Takes every batch of spans and counts them (no network: its cost is the SDK's)."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


EXPORTED = _CountingExporter()


def _client(settings: BusSettings, observed: bool | str, sample_ratio: float = 1.0) -> BusClient:
    """A bus client with tracing (100% sampled, or parent-based at ``sample_ratio``) and
    metrics on (``True``), tracing only (``"trace"``), or both off."""
    if not observed:
        return BusClient(settings, name="bench")
    sampler = ALWAYS_ON if sample_ratio >= 1 else ParentBased(TraceIdRatioBased(sample_ratio))
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(BatchSpanProcessor(EXPORTED, max_queue_size=65536))
    return BusClient(
        settings,
        name="bench",
        tracer_provider=provider,
        metrics=None if observed == "trace" else BusMetrics(CollectorRegistry()),
    )


async def _publish_all(bus: BusClient, topic: str, n: int) -> None:
    # send() is publish() without waiting for the ack; the acks of each window
    # are gathered, exactly as the raw side gathers its delivery futures.
    for start in range(0, n, WINDOW):
        acks = [
            await bus.send(topic, "bench.happened", PAYLOAD)
            for _ in range(start, min(n, start + WINDOW))
        ]
        await asyncio.gather(*acks)


async def _publish_all_tasks(bus: BusClient, topic: str, n: int, window: int = WINDOW) -> None:
    # One awaited publish() per task, a window of tasks in flight.
    for start in range(0, n, window):
        await asyncio.gather(
            *(
                bus.publish(topic, "bench.happened", PAYLOAD)
                for _ in range(start, min(n, start + window))
            )
        )


async def disco_publish(
    settings: BusSettings,
    topic: str,
    n: int,
    *,
    observed: bool | str = False,
    sample_ratio: float = 1.0,
) -> float:
    async with _client(settings, observed, sample_ratio) as bus:
        await bus.publish(topic, "bench.happened", PAYLOAD)
        started = time.perf_counter()
        await _publish_all(bus, topic, n)
        return time.perf_counter() - started


async def disco_publish_tasks(settings: BusSettings, topic: str, n: int) -> float:
    async with BusClient(settings, name="bench") as bus:
        await bus.publish(topic, "bench.happened", PAYLOAD)
        started = time.perf_counter()
        await _publish_all_tasks(bus, topic, n)
        return time.perf_counter() - started


async def disco_publish_awaited(settings: BusSettings, topic: str, n: int) -> float:
    async with BusClient(settings, name="bench") as bus:
        await bus.publish(topic, "bench.happened", PAYLOAD)

        async def publisher(count: int) -> None:
            for _ in range(count):
                await bus.publish(topic, "bench.happened", PAYLOAD)

        started = time.perf_counter()
        await asyncio.gather(*(publisher(len(range(i, n, AWAITING))) for i in range(AWAITING)))
        return time.perf_counter() - started


async def disco_publish_handle(
    settings: BusSettings,
    topic: str,
    n: int,
    *,
    observed: bool | str = False,
    sample_ratio: float = 1.0,
) -> float:
    async with _client(settings, observed, sample_ratio) as bus:
        seen = 0
        done = asyncio.Event()

        async def handle(envelope: Envelope) -> None:
            nonlocal seen
            seen += 1
            if seen >= n:
                done.set()

        consumer = BusConsumer(bus, f"disco-{uuid.uuid4().hex[:6]}")
        consumer.add_handler(topic, "bench.happened", handle)
        async with consumer:
            await consumer.wait_assigned(30)
            started = time.perf_counter()
            await _publish_all(bus, topic, n)
            await asyncio.wait_for(done.wait(), 300)
            return time.perf_counter() - started


async def disco_round_trips(
    settings: BusSettings, rounds: int, *, observed: bool | str = False
) -> list[float]:
    async with _client(settings, observed) as bus:
        responder = BusConsumer(bus, "disco-responder")

        @responder.on(Topic.ACTION_REQUESTS, "bench.requested")
        async def answer(envelope: Envelope) -> None:
            assert isinstance(envelope, ActionRequest)
            await bus.respond(
                envelope.response_event,
                {"ok": True},
                correlation_id=envelope.correlation_id or envelope.id,
            )

        async with responder:
            await responder.wait_assigned(30)
            await bus.request("bench.requested", PAYLOAD, response_event="bench.completed", wait=30)
            latencies = []
            for _ in range(rounds):
                started = time.perf_counter()
                await bus.request(
                    "bench.requested", PAYLOAD, response_event="bench.completed", wait=30
                )
                latencies.append(time.perf_counter() - started)
            return latencies


# -- the run --------------------------------------------------------------------


async def main(bootstrap: str, messages: int, rounds: int, repeats: int) -> None:
    run = uuid.uuid4().hex[:6]
    phases = 0

    def fresh_settings() -> BusSettings:
        nonlocal phases
        phases += 1
        return BusSettings(
            kafka_bootstrap=bootstrap,
            topic_prefix=f"bench{run}.{phases}.",
            kafka_partitions=3,
            kafka_session_timeout_ms=2000,
            kafka_heartbeat_interval_ms=500,
        )

    async def provisioned(topics: list[str | Topic]) -> BusSettings:
        settings = fresh_settings()
        async with BusClient(settings) as bus:
            await bus.ensure_topics(topics)
        return settings

    async def rate(
        job: Callable[[BusSettings, str, int], Awaitable[float]], raw: bool
    ) -> tuple[float, float]:
        """Messages per second, and CPU microseconds of this process per message."""
        settings = await provisioned(["bench"])
        topic = f"{settings.topic_prefix}bench" if raw else "bench"
        cpu = time.process_time()
        elapsed = await job(settings, topic, messages)
        return messages / elapsed, (time.process_time() - cpu) / messages * 1e6

    value, _ = _sample_record()
    sample = fresh_settings()
    raw_wait = await raw_fetch_wait(sample)
    print(
        f"broker {bootstrap}; {messages:,} messages of {len(value)} bytes (200-byte payload), "
        f"best of {repeats}; {rounds} round trips; {describe_fetch(sample)}; raw clients at "
        f"{raw_wait} ms; linger_ms={sample.kafka_linger_ms}, 3 partitions",
        flush=True,
    )
    # The machine is shared: raw and disco alternate, and each keeps its best.
    best: dict[str, float] = {}
    cpu_us: dict[str, list[float]] = {}
    jobs: list[tuple[str, Callable[[BusSettings, str, int], Awaitable[float]], bool]] = [
        ("raw produce", raw_produce, True),
        ("disco publish", disco_publish, False),
        ("disco publish (task each)", disco_publish_tasks, False),
        ("raw produce, awaited", raw_produce_awaited, True),
        ("disco publish, awaited", disco_publish_awaited, False),
        ("raw produce->consume", raw_produce_consume, True),
        ("disco publish->handler", disco_publish_handle, False),
        ("disco publish +trace", functools.partial(disco_publish, observed="trace"), False),
        (
            "disco publish->handler +trace",
            functools.partial(disco_publish_handle, observed="trace"),
            False,
        ),
        ("disco publish +obs", functools.partial(disco_publish, observed=True), False),
        (
            "disco publish->handler +obs",
            functools.partial(disco_publish_handle, observed=True),
            False,
        ),
    ]
    for attempt in range(1, repeats + 1):
        for label, job, raw in jobs:
            measured, cpu = await rate(job, raw)
            best[label] = max(best.get(label, 0.0), measured)
            cpu_us.setdefault(label, []).append(cpu)
            print(f"  [{attempt}] {label}: {measured:,.0f} msg/s, {cpu:.1f} us CPU/msg", flush=True)

    raw_rt = await raw_round_trips(
        await provisioned([Topic.ACTION_REQUESTS, Topic.ACTION_RESULTS]), rounds
    )
    disco_rt = await disco_round_trips(
        await provisioned([Topic.ACTION_REQUESTS, Topic.ACTION_RESULTS]), rounds
    )
    traced_rt = await disco_round_trips(
        await provisioned([Topic.ACTION_REQUESTS, Topic.ACTION_RESULTS]), rounds, observed="trace"
    )
    observed_rt = await disco_round_trips(
        await provisioned([Topic.ACTION_REQUESTS, Topic.ACTION_RESULTS]), rounds, observed=True
    )

    def row(name: str, raw: float, disco: float, fmt: str, target: str) -> str:
        ratio = disco / raw
        return f"{name:30} {raw:>12{fmt}} {disco:>12{fmt}} {ratio:>10.2f} {target:>8}"

    ms = 1000.0
    print()
    print(f"{'':30} {'raw aiokafka':>12} {'disco':>12} {'disco/raw':>10} {'target':>8}")
    print(row("produce (msg/s)", best["raw produce"], best["disco publish"], ",.0f", ">= 0.80"))
    print(
        row(
            "  publish, one task each",
            best["raw produce"],
            best["disco publish (task each)"],
            ",.0f",
            "",
        )
    )
    print(
        row(
            f"  awaited, {AWAITING} publishers",
            best["raw produce, awaited"],
            best["disco publish, awaited"],
            ",.0f",
            "",
        )
    )
    print(
        row(
            "produce->consume (msg/s)",
            best["raw produce->consume"],
            best["disco publish->handler"],
            ",.0f",
            ">= 0.70",
        )
    )
    p50_raw, p50_disco = statistics.median(raw_rt) * ms, statistics.median(disco_rt) * ms
    print(row("round trip p50 (ms)", p50_raw, p50_disco, ".1f", "<= 1.50"))
    p99_raw, p99_disco = percentile(raw_rt, 0.99) * ms, percentile(disco_rt, 0.99) * ms
    print(row("round trip p99 (ms)", p99_raw, p99_disco, ".1f", ""))

    # Observability off vs on (tracing 100% sampled + metrics), same run.
    def obs_row(name: str, off: float, on: float, fmt: str, change: str, target: str) -> str:
        return f"{name:30} {off:>12{fmt}} {on:>12{fmt}} {change:>10} {target:>8}"

    for title, suffix, latencies in (
        ("tracing (100% sampled)", "+trace", traced_rt),
        ("tracing + metrics", "+obs", observed_rt),
    ):
        print()
        print(f"{title:30} {'off':>12} {'on':>12} {'change':>10} {'target':>8}")
        for name, label in (
            ("publish (msg/s)", "disco publish"),
            ("publish->handler (msg/s)", "disco publish->handler"),
        ):
            off, on = best[label], best[f"{label} {suffix}"]
            print(obs_row(name, off, on, ",.0f", f"{on / off - 1:+.1%}", ">= -10%"))
        p50_on, p99_on = statistics.median(latencies) * ms, percentile(latencies, 0.99) * ms
        print(
            obs_row(
                "round trip p50 (ms)",
                p50_disco,
                p50_on,
                ".2f",
                f"{p50_on - p50_disco:+.2f}",
                "<= +0.30",
            )
        )
        print(
            obs_row(
                "round trip p99 (ms)", p99_disco, p99_on, ".2f", f"{p99_on - p99_disco:+.2f}", ""
            )
        )
        # CPU per message (medians of the runs) moves less than rates on a shared machine.
        for name, label in (
            ("publish (us CPU/msg)", "disco publish"),
            ("publish->handler (us CPU/msg)", "disco publish->handler"),
        ):
            off_cpu = statistics.median(cpu_us[label])
            on_cpu = statistics.median(cpu_us[f"{label} {suffix}"])
            print(obs_row(name, off_cpu, on_cpu, ".1f", f"{on_cpu - off_cpu:+.1f}", ""))
    print(f"(spans exported while observed: {EXPORTED.spans:,})")
    # CPU per message (this process: client, producer, consumer; the broker is
    # another process) is steadier than rates on a shared machine.
    print()
    print(f"{'CPU per message (us, median)':30} {'value':>12}")
    for label, values in cpu_us.items():
        print(f"{label:30} {statistics.median(values):>12.1f}")


def cli() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, help="messages per throughput phase (100,000)")
    parser.add_argument("--round-trips", type=int, help="request/response round trips (300)")
    parser.add_argument("--repeats", type=int, help="runs of each throughput phase (3)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small counts: 10,000 messages, 200 round trips, 2 runs",
    )
    args = parser.parse_args()
    defaults = (10_000, 200, 2) if args.quick else (100_000, 300, 3)
    for name, default in zip(("messages", "round_trips", "repeats"), defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, default)
    bootstrap = os.environ.get("DISCO_KAFKA_BOOTSTRAP")
    broker: EmbeddedBroker | None = None
    if not bootstrap:
        broker = EmbeddedBroker(
            port=free_port(), log_path=Path(tempfile.mkdtemp(prefix="disco-bench-")) / "broker.log"
        )
        broker.start()
        bootstrap = broker.bootstrap
    try:
        asyncio.run(main(bootstrap, args.messages, args.round_trips, args.repeats))
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    sys.exit(cli())
