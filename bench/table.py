"""Benchmark: every hot path of issues 15 and 37 beside its raw baseline (and the tool
rows beside FastStream), in one run.

    uv run python bench/table.py [--quick] [--only bus,tool,idle,memory,registry]
                                 [--soak-seconds 600]
    make bench                   # the full table
    make bench-quick             # the same rows with small counts, a few minutes

Starts one embedded Tansu broker and one embedded PostgreSQL (pgvector) on free
loopback ports unless ``DISCO_KAFKA_BOOTSTRAP`` / ``DISCO_DATABASE_ADMIN_URL``
name existing ones; every row is measured on them, beside a raw baseline on
the same broker or database, with the settings printed first:

- tool round trip p50/p99, one request at a time, and tool invocations/s with
  at most ``--window`` (50) in flight for ``--tool-seconds`` (or
  ``--soak-seconds``; the rate of the first and the last tenth shows whether it
  holds as the topics grow), each with a responder process of its own: a
  :class:`disco.Tool` asked with ``bus.request(wait=...)`` (sent with
  ``bus.send``), FastStream (``bench/_faststream.py``: publish with
  ``reply_to`` and a reply subscriber, its tool returning the answer; a
  bench-only dependency, ``uv run --group bench``), and plain aiokafka (a raw
  responder in a group, a raw requester reading results group-less); each
  side's fetch waits are printed (FastStream and raw at disco's busy wait,
  ``--peer-wait``; FastStream's own default, 500 ms, is sampled too);
- the same two rows on a grown broker: each side's own topics holding
  ``--grown`` (100,000) envelopes in batches of ``--grown-batch`` (4) records,
  what traffic at 50 in flight leaves (the embedded broker's fetch walks every
  stored batch), the side's responder group committed after them; the batches
  each side's own traffic left are printed with its fresh throughput;
- an idle agent's CPU: a Tool process with nothing to do, CPU seconds over
  ``--idle-seconds`` (target: under 2% of a core), and the broker's meanwhile;
- bus produce and produce -> consume rates vs raw aiokafka (``bench/bus.py``);
- memory: semantic query by vector through the API vs the same SQL with asyncpg
  (binary vector codec, same tenant settings, same HNSW options), p50; and the same
  statement behind a bare ASGI app (the least HTTP a Python service adds);
- registry: register and discover-by-consumed-event at ``--concurrency`` (16)
  through the API vs the same SQL with asyncpg, at ``--agents`` registrations; and
  registering through the registry's own code behind a bare ASGI app (no FastAPI);
- the gateway's CPU per A2A task: ``bench/gateway.py`` (registry, the hello tool and
  a gateway, processes of their own) on the same broker and database, blocking
  ``SendMessage`` from 50 clients for ``--seconds``, and what A2A JSON-RPC adds to
  ``request(wait=)`` one at a time.

Rates are the best of ``--repeats`` alternating runs; latencies are over all
samples. CPU seconds of each part are printed where they matter: the machine's
cores are shared. Tests never assert on speed; this script only prints.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import agents as agents_bench
import asyncpg
import bus as bus_bench
import memory as memory_bench
import numpy as np
import pydantic_core
import registry as registry_bench
from _batches import Record, batch_counts, write_batches
from _common import (
    LeanHttp,
    LeanResponse,
    cpu_seconds,
    create_database,
    describe_fetch,
    percentile,
    raw_fetch_wait,
    wait_ready,
)
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from disco._dev.broker import EmbeddedBroker
from disco._dev.dburl import with_database, with_user
from disco._dev.migrate import upgrade
from disco._dev.ports import free_port
from disco._dev.postgres import EmbeddedPostgres
from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco.settings import BusSettings
from disco_common.auth import Role
from disco_common.topics import Topic

try:  # the bench dependency group (make bench installs it)
    import _faststream as faststream_peer
except ImportError:  # pragma: no cover - without it, the tool rows have no FastStream column
    faststream_peer = None  # type: ignore[assignment]

ANSWERED = "bench.tool.answered"
HERE = str(Path(__file__).resolve().parent)


@dataclass
class Row:
    """One line of the table."""

    path: str
    disco: str
    raw: str
    ratio: str
    target: str
    note: str = ""
    peer: str = "-"
    """The framework a developer would pick instead (FastStream), where there is one."""
    peer_ratio: str = "-"


@dataclass
class Table:
    rows: list[Row] = field(default_factory=list)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        peer = f" | FastStream {row.peer} | {row.peer_ratio}" if row.peer != "-" else ""
        print(f"  -> {row.path}: disco {row.disco}{peer} | raw {row.raw} | {row.ratio}", flush=True)

    def print(self) -> None:
        widths = [44, 22, 22, 22, 11, 11, 22]
        head = ("path", "disco", "FastStream", "raw baseline", "disco/peer", "disco/raw",
                "target")  # fmt: skip
        print()
        print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
        print("  ".join("-" * w for w in widths))
        for row in self.rows:
            cells = (row.path, row.disco, row.peer, row.raw, row.peer_ratio, row.ratio,
                     row.target)  # fmt: skip
            print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))
            if row.note:
                print(f"    {row.note}")


def ms(seconds: float) -> float:
    return seconds * 1000


# -- the raw responder (its own process, like the Tool) ------------------------------------


async def serve_raw_responder(bootstrap: str, prefix: str) -> None:
    """Plain aiokafka: answer every request on action-requests (parse, answer, send)."""
    settings = agents_bench.settings_for(bootstrap, prefix)
    await raw_fetch_wait(settings)
    requests = f"{prefix}{Topic.ACTION_REQUESTS}"
    results = f"{prefix}{Topic.ACTION_RESULTS}"
    consumer = AIOKafkaConsumer(
        requests, group_id=f"{prefix}raw-responder", **bus_bench._consumer_options(settings)
    )
    producer = AIOKafkaProducer(**bus_bench._producer_options(settings))
    await consumer.start()
    await producer.start()
    print("ready", flush=True)
    try:
        while True:
            batches = await consumer.getmany(timeout_ms=100)
            deliveries = []
            for records in batches.values():
                for record in records:
                    request = json.loads(record.value or b"{}")
                    answer = {
                        "specversion": "1.0",
                        "id": uuid.uuid4().hex,
                        "source": "raw",
                        "type": request["responseevent"],
                        "correlation_id": request["correlationid"],
                        "data": {"n": request["data"]["n"] + 1, "size": len(request["data"])},
                    }
                    deliveries.append(
                        await producer.send(
                            results,
                            json.dumps(answer).encode(),
                            key=request["correlationid"].encode(),
                            headers=[("ce_type", request["responseevent"].encode())],
                        )
                    )
            if deliveries:
                await asyncio.gather(*deliveries)
                await consumer.commit()
    finally:
        await producer.stop()
        await consumer.stop()


def service_command(module: str) -> list[str]:
    """``python -m module``; under cProfile when ``BENCH_PROFILE_DIR`` names a folder."""
    folder = os.environ.get("BENCH_PROFILE_DIR")
    if folder:
        profiled = str(Path(__file__).with_name("_profiled.py"))
        return [sys.executable, profiled, f"{folder}/{module}.prof", module]
    return [sys.executable, "-m", module]


async def migrated_database(admin_root: str, service: str) -> tuple[str, str]:
    """A new database migrated for ``service``: (owner URL, application URL)."""
    name = f"disco_bench_{uuid.uuid4().hex[:8]}"
    await create_database(admin_root, name)
    admin_url = with_database(admin_root, name)
    app_url = with_user(admin_url, "disco_app", "disco_app")
    await asyncio.to_thread(upgrade, admin_url, app_url, services=(service,))
    return admin_url, app_url


def start_service(
    service: str, app_url: str, bootstrap: str, extra: dict[str, str]
) -> tuple[subprocess.Popen[bytes], str, IO[bytes]]:
    """``python -m disco_<service>`` on a free port: (process, base URL, its log)."""
    port = free_port()
    env = {
        **os.environ,
        "DISCO_DATABASE_URL": app_url,
        "DISCO_KAFKA_BOOTSTRAP": bootstrap,
        "DISCO_TOPIC_PREFIX": f"{service[0]}{uuid.uuid4().hex[:6]}.",
        f"DISCO_{service.upper()}_PORT": str(port),
        "DISCO_LOG_LEVEL": "WARNING",
        **extra,
    }
    log = (Path(tempfile.gettempdir()) / f"disco-bench-{service}-{port}.log").open("wb")
    process = subprocess.Popen(service_command(f"disco_{service}"), env=env, stdout=log, stderr=log)
    return process, f"http://127.0.0.1:{port}", log


def stop_service(process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    process.terminate()
    process.wait(20)
    log.close()


def start_process(args: list[str]) -> subprocess.Popen[bytes]:
    stderr = subprocess.DEVNULL if not os.environ.get("BENCH_STDERR") else None
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr)
    assert process.stdout is not None
    for line in process.stdout:
        if line.strip() == b"ready":
            return process
    raise RuntimeError(f"{args} did not start")


# -- tool rows ---------------------------------------------------------------------------

SIDES = ("raw", "faststream", "disco")
LABELS = {"raw": "raw", "faststream": "FastStream", "disco": "disco"}


async def provisioned(bootstrap: str, partitions: int) -> BusSettings:
    settings = agents_bench.settings_for(bootstrap, f"t{uuid.uuid4().hex[:6]}.", partitions)
    await agents_bench.provision(settings)
    return settings


def responder_command(side: str, bootstrap: str, prefix: str, peer_wait: int) -> list[str]:
    """The answering process of ``side``: raw aiokafka, a FastStream tool or a disco Tool."""
    if side == "raw":
        return [sys.executable, __file__, "--serve-raw-responder", bootstrap, prefix]
    if side == "faststream":
        return [
            sys.executable,
            __file__,
            "--serve-faststream-tool",
            bootstrap,
            prefix,
            str(peer_wait),
        ]
    return [sys.executable, f"{HERE}/agents.py", "--serve-tool", bootstrap, prefix]


def raw_request(correlation_id: str) -> dict[str, Any]:
    """A request envelope as disco's bus writes it (CloudEvents wire names)."""
    return {
        "specversion": "1.0",
        "id": uuid.uuid4().hex,
        "source": "raw",
        "type": "bench.tool.requested",
        "correlationid": correlation_id,
        "responseevent": ANSWERED,
        "responsetopic": str(Topic.ACTION_RESULTS),
        "data": agents_bench.PAYLOAD,
    }


async def raw_round_trips(settings: BusSettings, rounds: int, pause: float = 0.0) -> list[float]:
    """Plain aiokafka, one request at a time (``pause`` seconds before each), to the raw
    responder process: produce the request, read action-results group-less (from its
    end) until the answer."""
    await raw_fetch_wait(settings)
    requests = f"{settings.topic_prefix}{Topic.ACTION_REQUESTS}"
    producer = AIOKafkaProducer(**bus_bench._producer_options(settings))
    await producer.start()
    reader = await agents_bench.results_reader(settings)
    try:
        latencies = []
        for index in range(rounds + 20):  # 20 to warm up
            correlation_id = uuid.uuid4().hex
            if pause and index >= 20:
                await asyncio.sleep(pause)
            started = time.perf_counter()
            await producer.send_and_wait(
                requests,
                json.dumps(raw_request(correlation_id)).encode(),
                key=correlation_id.encode(),
                headers=[("ce_type", b"bench.tool.requested")],
            )
            answered = False
            while not answered:
                batches = await asyncio.wait_for(reader.getmany(timeout_ms=1000), 30)
                answered = any(
                    json.loads(r.value or b"{}").get("correlation_id") == correlation_id
                    for records in batches.values()
                    for r in records
                )
            if index >= 20:
                latencies.append(time.perf_counter() - started)
        return latencies
    finally:
        await reader.stop()
        await producer.stop()


async def faststream_round_trips(
    settings: BusSettings, rounds: int, wait_ms: int, warm_up: int = 20, pause: float = 0.0
) -> list[float]:
    """FastStream, one request at a time: publish with ``reply_to``, await the reply."""
    requester = faststream_peer.Requester(settings.kafka_bootstrap, settings.topic_prefix, wait_ms)
    await requester.start()
    try:
        latencies = []
        for index in range(rounds + warm_up):
            if pause and index >= warm_up:
                await asyncio.sleep(pause)
            started = time.perf_counter()
            await requester.request(agents_bench.PAYLOAD, 30)
            if index >= warm_up:
                latencies.append(time.perf_counter() - started)
        return latencies
    finally:
        await requester.stop()


async def disco_round_trips(settings: BusSettings, rounds: int, pause: float = 0.0) -> list[float]:
    """``bus.request(wait=...)`` to the Tool process, one at a time (``pause`` seconds
    before each)."""
    async with BusClient(settings, name="bench-caller") as bus:
        latencies = []
        for index in range(rounds + 20):  # 20 to warm up
            if pause and index >= 20:
                await asyncio.sleep(pause)
            started = time.perf_counter()
            await bus.request(
                "bench.tool.requested", agents_bench.PAYLOAD, response_event=ANSWERED, wait=30
            )
            if index >= 20:
                latencies.append(time.perf_counter() - started)
        return latencies


async def round_trips(
    side: str, settings: BusSettings, rounds: int, peer_wait: int, pause: float = 0.0
) -> list[float]:
    if side == "raw":
        return await raw_round_trips(settings, rounds, pause)
    if side == "faststream":
        return await faststream_round_trips(settings, rounds, peer_wait, pause=pause)
    return await disco_round_trips(settings, rounds, pause)


@contextlib.asynccontextmanager
async def sender(
    side: str, settings: BusSettings, peer_wait: int
) -> AsyncIterator[Callable[[], Awaitable[Any]]]:
    """How ``side``'s own client sends one request without waiting for its ack: disco's
    ``bus.send`` (also for the raw responder, which answers disco's envelopes), or
    FastStream's ``publish(..., reply_to=..., no_confirm=True)``."""
    if side == "faststream":
        requester = faststream_peer.Requester(
            settings.kafka_bootstrap, settings.topic_prefix, peer_wait
        )
        await requester.start()
        try:
            yield functools.partial(requester.send, agents_bench.PAYLOAD)
        finally:
            await requester.stop()
        return
    async with BusClient(settings, name="bench-load") as bus:

        async def send() -> None:
            await bus.send(
                Topic.ACTION_REQUESTS,
                "bench.tool.requested",
                agents_bench.PAYLOAD,
                response_event=ANSWERED,
                correlation_id=uuid.uuid4().hex,
            )

        yield send


async def sustained(
    send: Callable[[], Awaitable[Any]],
    settings: BusSettings,
    window: int,
    *,
    seconds: float,
    slices: int = 10,
) -> tuple[float, list[float], int]:
    """Answers/s with at most ``window`` requests unanswered, for ``seconds``; the rate of
    each of ``slices`` equal parts of the run; and the answers counted. Answers are
    counted by a raw group-less reader of action-results, unparsed, so the load
    generator costs little."""
    await raw_fetch_wait(settings)
    reader = await agents_bench.results_reader(settings)
    try:
        answered = 0
        stamps: list[float] = []
        progress = asyncio.Event()
        stop = False

        # Only answers written from now on: the embedded broker's end offset can lie
        # a batch short of the real end, so the reader may start a few records early.
        since_ms = int(time.time() * 1000)

        async def count() -> None:
            nonlocal answered
            while not stop:
                for records in (await reader.getmany(timeout_ms=50)).values():
                    new = sum(1 for record in records if record.timestamp >= since_ms)
                    answered += new
                    now = time.perf_counter()
                    stamps.extend(now for _ in range(new))
                progress.set()

        counter = asyncio.create_task(count())
        started = time.perf_counter()
        deadline = started + seconds
        sent = 0
        while time.perf_counter() < deadline:
            if sent - answered >= window:
                progress.clear()
                await progress.wait()
                continue
            await send()
            sent += 1
        elapsed = time.perf_counter() - started
        stop = True
        await counter
        width = elapsed / slices
        per_slice = [0] * slices
        for stamp in stamps:
            index = int((stamp - started) / width)
            if 0 <= index < slices:
                per_slice[index] += 1
        return sum(per_slice) / elapsed, [n / width for n in per_slice], answered
    finally:
        await reader.stop()


async def envelopes_in(settings: BusSettings) -> int:
    """Records on the side's action-requests and action-results topics (end offsets)."""
    consumer = AIOKafkaConsumer(**settings.kafka_connection_options())
    await consumer.start()
    try:
        await consumer.topics()
        partitions = [
            TopicPartition(name, partition)
            for name in (
                f"{settings.topic_prefix}{t}" for t in (Topic.ACTION_REQUESTS, Topic.ACTION_RESULTS)
            )
            for partition in consumer.partitions_for_topic(name) or ()
        ]
        return sum((await consumer.end_offsets(partitions)).values())
    finally:
        await consumer.stop()


@dataclass
class ToolRun:
    """What one side measured in one phase."""

    rt: list[float]
    paused_rt: list[float]
    rate: float
    slices: list[float]
    cores: float
    envelopes: int


async def tool_phase(
    side: str, settings: BusSettings, args: argparse.Namespace, seconds: float, paused: int
) -> ToolRun:
    """``side``'s responder process alone: round trips one at a time, then answers/s at
    ``args.window`` in flight for ``seconds``."""
    process = start_process(
        responder_command(side, settings.kafka_bootstrap, settings.topic_prefix, args.peer_wait)
    )
    try:
        await asyncio.sleep(2.5)  # the group settles after the join
        rt = await round_trips(side, settings, args.round_trips, args.peer_wait)
        paused_rt = await round_trips(side, settings, paused, args.peer_wait, 1.0) if paused else []
        cpu_before = cpu_seconds(process.pid)
        wall = time.perf_counter()
        async with sender(side, settings, args.peer_wait) as send:
            rate, slices, _ = await sustained(send, settings, args.window, seconds=seconds)
        cores = (cpu_seconds(process.pid) - cpu_before) / (time.perf_counter() - wall)
    finally:
        agents_bench.stop_tools([process])
    envelopes = await envelopes_in(settings)
    print(
        f"  {LABELS[side]}: round trip p50 {ms(statistics.median(rt)):.2f} ms, p99 "
        f"{ms(percentile(rt, 0.99)):.2f} ms; {rate:,.0f}/s, per tenth: "
        + ", ".join(f"{s:,.0f}" for s in slices)
        + f"; responder CPU {cores:.2f} cores; {envelopes:,} envelopes on its topics",
        flush=True,
    )
    return ToolRun(rt, paused_rt, rate, slices, cores, envelopes)


GROUPS = {"raw": "raw-responder", "faststream": "faststream-tool", "disco": "bench-tool"}
"""Each side's responder group, as its process names it (without the topic prefix)."""


async def grow(settings: BusSettings, side: str, target: int, per_batch: int) -> int:
    """Write ``target`` envelopes into the side's two topics (half requests, half
    answers, disco's ~400-byte envelopes) in batches of ``per_batch`` records, spread
    over the partitions, and commit the side's responder group at the end of
    action-requests (its responder starts after them, as after traffic it answered);
    the envelopes then on the topics.

    Every side gets the same stored log (what the embedded broker's fetch walks: its
    batches), written by a producer: grown through each side's own responder, the
    topics took minutes to reach 100,000 envelopes, the broker's fetches slowing as
    they filled, and each side's log would differ in its batches.
    """
    producer = AIOKafkaProducer(**bus_bench._producer_options(settings))
    await producer.start()
    try:
        value, headers = bus_bench._sample_record()

        def record() -> Record:
            return uuid.uuid4().bytes, value, headers

        written: dict[int, int] = {}  # action-requests: records per partition
        for topic in (Topic.ACTION_REQUESTS, Topic.ACTION_RESULTS):
            name = f"{settings.topic_prefix}{topic}"
            partitions = sorted(await producer.partitions_for(name))
            counts = await write_batches(
                producer, name, target // 2 // per_batch, per_batch, partitions, record
            )
            if topic == Topic.ACTION_REQUESTS:
                written = dict(counts)
    finally:
        await producer.stop()
    group = AIOKafkaConsumer(
        group_id=f"{settings.topic_prefix}{GROUPS[side]}",
        enable_auto_commit=False,
        **settings.kafka_connection_options(),
    )
    await group.start()
    try:
        # The topics are new: each partition's end is what was written to it. (Not the
        # end the embedded broker reports: its "latest" offset is the start of the
        # last batch plus one, so a batch of several records would be read again.)
        requests = f"{settings.topic_prefix}{Topic.ACTION_REQUESTS}"
        ends = {TopicPartition(requests, p): count for p, count in written.items()}
        group.assign(list(ends))
        await group.commit(ends)
    finally:
        await group.stop()
    have = await envelopes_in(settings)
    print(f"  {LABELS[side]}: {have:,} envelopes on its topics", flush=True)
    return have


async def stored_batches(settings: BusSettings) -> str:
    """How many record batches the side's two topics hold (what the embedded broker's
    fetch walks), and records per batch."""
    names = [f"{settings.topic_prefix}{t}" for t in (Topic.ACTION_REQUESTS, Topic.ACTION_RESULTS)]
    counts = await batch_counts(settings.kafka_bootstrap, names)
    batches = sum(b for b, _ in counts.values())
    records = sum(r for _, r in counts.values())
    return f"{batches:,} batches ({records / max(1, batches):.1f} records each)"


def rt_cell(rt: list[float]) -> str:
    return f"{ms(statistics.median(rt)):.2f} / {ms(percentile(rt, 0.99)):.1f} ms"


def rt_ratio(a: list[float], b: list[float]) -> str:
    return (
        f"{statistics.median(a) / statistics.median(b):.2f} / "
        f"{percentile(a, 0.99) / percentile(b, 0.99):.2f}"
    )


def rate_cell_tool(run: ToolRun) -> str:
    return f"{run.rate:,.0f}/s ({run.slices[0]:,.0f} -> {run.slices[-1]:,.0f})"


async def tool_rows(table: Table, bootstrap: str, args: argparse.Namespace) -> None:
    sample = agents_bench.settings_for(bootstrap, "x.")
    peer = (
        f"FastStream {args.peer_wait} ms fixed (fetch_max_wait_ms of both its subscribers; "
        f"its default is {faststream_peer.DEFAULT_FETCH_WAIT_MS} ms)"
        if faststream_peer is not None
        else "FastStream not installed (`uv run --group bench`): no peer column"
    )
    print(
        f"  fetch waits: disco {describe_fetch(sample)}; {peer}; raw "
        f"{await raw_fetch_wait(sample)} ms fixed; every side {agents_bench.PARTITIONS} "
        "partitions, its responder in a process of its own, one side at a time",
        flush=True,
    )
    seconds = args.soak_seconds or args.tool_seconds
    sides = [s for s in SIDES if s != "faststream" or faststream_peer is not None]
    # Each side's fresh rows and grown rows run on topics of their own: the grown ones
    # are filled to the same count for every side, whatever each side's fresh rate.
    fresh = {side: await provisioned(bootstrap, agents_bench.PARTITIONS) for side in sides}
    grown = {side: await provisioned(bootstrap, agents_bench.PARTITIONS) for side in sides}
    default_peer: list[float] = []
    for phase in ("fresh", "grown"):
        settings = fresh if phase == "fresh" else grown
        if phase == "grown":
            print(
                f"  growing each side's own topics to {args.grown:,} envelopes, "
                f"{args.grown_batch} records a batch",
                flush=True,
            )
            for side in sides:
                await grow(settings[side], side, args.grown, args.grown_batch)
        print(f"  -- {phase} broker", flush=True)
        paused = args.paused_round_trips if phase == "fresh" else 0
        runs: dict[str, ToolRun] = {}
        for side in sides:
            try:
                runs[side] = await tool_phase(side, settings[side], args, seconds, paused)
            except TimeoutError:
                if side != "faststream":
                    raise
                # The peer stalled (as it does on a grown topic): its cells say so, and
                # the table goes on.
                print(f"  FastStream ({phase}): no answer within 30 s, stalled", flush=True)
        if phase == "fresh" and "faststream" in runs and args.peer_default_samples:
            with contextlib.suppress(TimeoutError):
                default_peer = await faststream_default_sample(settings["faststream"], args)
        disco, raw = runs["disco"], runs["raw"]
        peer = runs.get("faststream")
        missing = "stalled (no answer in 30 s)" if "faststream" in sides and not peer else "-"
        # The grown topics' batches are known (written so); the fresh ones', each
        # side's own traffic's.
        batches = (
            {side: await stored_batches(settings[side]) for side in sides}
            if phase == "fresh"
            else {}
        )
        title = "" if phase == "fresh" else f", grown broker ({args.grown:,}+ envelopes)"
        table.add(
            Row(
                f"tool round trip, one at a time, p50 / p99{title}",
                rt_cell(disco.rt),
                rt_cell(raw.rt),
                rt_ratio(disco.rt, raw.rt),
                "<= FastStream; grown: <= 1.2x raw",
                f"{len(disco.rt)} round trips each"
                + (
                    f"; FastStream at its default {faststream_peer.DEFAULT_FETCH_WAIT_MS} ms "
                    f"fetch wait: p50 {ms(statistics.median(default_peer)):.0f} ms "
                    f"({len(default_peer)} round trips)"
                    if default_peer and phase == "fresh"
                    else ""
                )
                + (
                    ""
                    if phase == "fresh"
                    else f"; written in batches of {args.grown_batch} records; envelopes on "
                    "each side's topics after it: "
                    + ", ".join(f"{LABELS[s]} {r.envelopes:,}" for s, r in runs.items())
                ),
                peer=rt_cell(peer.rt) if peer else missing,
                peer_ratio=rt_ratio(disco.rt, peer.rt) if peer else "-",
            )
        )
        if phase == "fresh" and disco.paused_rt:
            table.add(
                Row(
                    "tool round trip after 1 s idle, p50 / p99",
                    rt_cell(disco.paused_rt),
                    rt_cell(raw.paused_rt),
                    rt_ratio(disco.paused_rt, raw.paused_rt),
                    "(fetch waits after idle)",
                    f"{len(disco.paused_rt)} requests, each after 1 s without traffic: "
                    "disco's consumers have backed off (its reply listener stopped "
                    "fetching), FastStream and raw poll at their fixed waits",
                    peer=rt_cell(peer.paused_rt) if peer else missing,
                    peer_ratio=rt_ratio(disco.paused_rt, peer.paused_rt) if peer else "-",
                )
            )
        table.add(
            Row(
                f"tool invocations/s, <= {args.window} in flight{title}",
                rate_cell_tool(disco),
                rate_cell_tool(raw),
                f"{disco.rate / raw.rate:.2f}",
                ">= 3,000/s; grown: >= 0.8x raw",
                f"{seconds:.0f} s each (first -> last tenth), 1 process, "
                f"{agents_bench.PARTITIONS} partitions; "
                + (
                    "each side's topics after its own traffic: "
                    + ", ".join(f"{LABELS[s]} {batches[s]}" for s in runs)
                    + "; "
                    if phase == "fresh"
                    else ""
                )
                + "responder CPU: disco "
                f"{disco.cores:.2f}, "
                + (f"FastStream {peer.cores:.2f}, " if peer else "")
                + f"raw {raw.cores:.2f} cores",
                peer=rate_cell_tool(peer) if peer else missing,
                peer_ratio=f"{disco.rate / peer.rate:.2f}" if peer else "-",
            )
        )


async def faststream_default_sample(settings: BusSettings, args: argparse.Namespace) -> list[float]:
    """A few FastStream round trips at its own default fetch wait, for the record."""
    wait = faststream_peer.DEFAULT_FETCH_WAIT_MS
    process = start_process(
        [
            sys.executable,
            __file__,
            "--serve-faststream-tool",
            settings.kafka_bootstrap,
            settings.topic_prefix,
            str(wait),
        ]
    )
    try:
        await asyncio.sleep(2.5)
        return await faststream_round_trips(settings, args.peer_default_samples, wait, warm_up=3)
    finally:
        agents_bench.stop_tools([process])


async def idle_cpu(
    command: list[str], broker_pid: int | None, seconds: float
) -> tuple[float, float, float]:
    """(CPU s of the process, CPU s of the broker, wall s) over ``seconds`` of nothing
    to do, once it is past its start, its join and its back-off ramp."""
    process = start_process(command)
    try:
        await asyncio.sleep(4)
        before, broker_before = cpu_seconds(process.pid), cpu_seconds(broker_pid or 0)
        wall = time.perf_counter()
        await asyncio.sleep(seconds)
        wall = time.perf_counter() - wall
        used = cpu_seconds(process.pid) - before
        broker = cpu_seconds(broker_pid or 0) - broker_before
    finally:
        agents_bench.stop_tools([process])
    return used, broker, wall


async def idle_row(
    table: Table, bootstrap: str, broker_pid: int | None, args: argparse.Namespace
) -> None:
    seconds = args.idle_seconds
    settings = await provisioned(bootstrap, agents_bench.PARTITIONS)
    used, broker, wall = await idle_cpu(
        responder_command("disco", bootstrap, settings.topic_prefix, args.peer_wait),
        broker_pid,
        seconds,
    )
    peer = "-"
    peer_note = ""
    if faststream_peer is not None:
        settings = await provisioned(bootstrap, agents_bench.PARTITIONS)
        peer_used, peer_broker, peer_wall = await idle_cpu(
            responder_command("faststream", bootstrap, settings.topic_prefix, args.peer_wait),
            broker_pid,
            seconds,
        )
        peer = f"{100 * peer_used / peer_wall:.2f}% of a core"
        peer_note = (
            f"; FastStream (its tool at the {args.peer_wait} ms fetch wait of its rows): broker "
            + (f"{100 * peer_broker / peer_wall:.2f}%" if broker_pid else "not measured")
        )
    table.add(
        Row(
            "idle agent, CPU of its process",
            f"{100 * used / wall:.2f}% of a core",
            "-",
            "-",
            "< 2% of a core",
            f"{used:.2f} CPU s over {wall:.0f} s (a Tool, 1 consumer group, "
            f"{agents_bench.PARTITIONS} partitions); broker meanwhile "
            + (f"{100 * broker / wall:.2f}% of a core" if broker_pid else "not measured")
            + peer_note,
            peer=peer,
        )
    )


# -- bus rows ----------------------------------------------------------------------------


async def bus_rows(table: Table, bootstrap: str, args: argparse.Namespace) -> None:
    ratio = args.trace_ratio
    traced = f"traced {ratio:.0%}"
    jobs: list[tuple[str, Callable[[BusSettings, str, int], Awaitable[float]], bool]] = [
        ("raw produce", bus_bench.raw_produce, True),
        ("disco publish", bus_bench.disco_publish, False),
        ("raw produce->consume", bus_bench.raw_produce_consume, True),
        (
            "raw produce->consume, decoded",
            functools.partial(bus_bench.raw_produce_consume, decode=True),
            True,
        ),
        ("disco publish->handler", bus_bench.disco_publish_handle, False),
        (
            f"disco publish, {traced}",
            functools.partial(bus_bench.disco_publish, observed="trace", sample_ratio=ratio),
            False,
        ),
        (
            f"disco publish->handler, {traced}",
            functools.partial(bus_bench.disco_publish_handle, observed="trace", sample_ratio=ratio),
            False,
        ),
        (
            "disco publish, traced 100%",
            functools.partial(bus_bench.disco_publish, observed="trace"),
            False,
        ),
        (
            "disco publish->handler, traced 100%",
            functools.partial(bus_bench.disco_publish_handle, observed="trace"),
            False,
        ),
    ]
    best: dict[str, float] = {}
    cpu: dict[str, float] = {}  # least CPU seconds of this process per message
    for attempt in range(args.repeats):
        for label, job, raw in jobs:
            settings = agents_bench.settings_for(bootstrap, f"b{uuid.uuid4().hex[:6]}.", 3)
            async with BusClient(settings) as bus:
                await bus.ensure_topics(["bench"])
            topic = f"{settings.topic_prefix}bench" if raw else "bench"
            used = time.process_time()
            rate = args.messages / await job(settings, topic, args.messages)
            used = (time.process_time() - used) / args.messages
            best[label] = max(best.get(label, 0.0), rate)
            cpu[label] = min(cpu.get(label, used), used)
            print(
                f"  [{attempt + 1}] {label}: {rate:,.0f} msg/s, {used * 1e6:.0f} us CPU/msg",
                flush=True,
            )
    for name, raw_label, disco_label, target in (
        ("bus produce", "raw produce", "disco publish", ">= 0.8x"),
        ("bus produce -> consume", "raw produce->consume", "disco publish->handler", ">= 0.7x"),
    ):
        table.add(
            Row(
                f"{name} (msg/s)",
                f"{best[disco_label]:,.0f}/s",
                f"{best[raw_label]:,.0f}/s",
                f"{best[disco_label] / best[raw_label]:.2f}",
                target,
                f"{args.messages:,} envelopes of ~400 bytes, best of {args.repeats}; CPU of "
                f"this process per message: disco {cpu[disco_label] * 1e6:.0f} us, raw "
                f"{cpu[raw_label] * 1e6:.0f} us",
            )
        )
    for name, raw_label, disco_label, target in (
        ("CPU per message, publish", "raw produce", "disco publish", ""),
        (
            "CPU per message, publish -> handler",
            "raw produce->consume",
            "disco publish->handler",
            "<= 1.3x",
        ),
    ):
        decoded = cpu["raw produce->consume, decoded"]
        table.add(
            Row(
                f"{name} (us)",
                f"{cpu[disco_label] * 1e6:.1f} us",
                f"{cpu[raw_label] * 1e6:.1f} us",
                f"{cpu[disco_label] / cpu[raw_label]:.2f}",
                target,
                "the least CPU seconds of this process (producer, consumer, client) per "
                f"message over {args.repeats} run(s); the broker is another process"
                + (
                    f"; a raw consumer that also decodes each value (json.loads): "
                    f"{decoded * 1e6:.1f} us, disco/that {cpu[disco_label] / decoded:.2f}"
                    if target
                    else ""
                ),
            )
        )
    for sampled in (traced, "traced 100%"):
        changes = [
            best[f"{label}, {sampled}"] / best[label] - 1
            for label in ("disco publish", "disco publish->handler")
        ]
        table.add(
            Row(
                f"bus {sampled}: publish / publish->handler",
                " / ".join(f"{change:+.1%}" for change in changes),
                "untraced",
                "-",
                ">= -10%" if sampled == traced else "(documented)",
                "rate with an OpenTelemetry SDK provider (parent-based "
                + (f"TraceIdRatioBased({ratio})" if sampled == traced else "ALWAYS_ON")
                + ", a batch processor, an exporter that drops the spans) against the same "
                "client untraced, same run; CPU per message: "
                + ", ".join(
                    f"{cpu[f'{label}, {sampled}'] * 1e6:.1f} us (untraced {cpu[label] * 1e6:.1f})"
                    for label in ("disco publish", "disco publish->handler")
                ),
            )
        )


# -- memory ------------------------------------------------------------------------------


async def memory_rows(
    table: Table, admin_root: str, bootstrap: str, args: argparse.Namespace
) -> None:
    admin_url, app_url = await migrated_database(admin_root, "memory")
    rng = np.random.default_rng(11)
    centers = rng.normal(size=(memory_bench.TOPICS, memory_bench.DIMENSIONS)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    await memory_bench.seed(admin_url, args.memories, 16, 64, rng, centers)
    vectors = memory_bench.clustered_vectors(args.queries, rng, centers)
    # Recall of the HNSW walk (and a warm-up of the index for both sides).
    _, _, approximate, exact = await memory_bench.raw_queries(
        app_url, list(vectors), args.ef_search, 10
    )
    process, base_url, log = start_service(
        "memory", app_url, bootstrap, {"DISCO_MEMORY_HNSW_EF_SEARCH": str(args.ef_search)}
    )
    raw = await memory_bench.RawQuery.open(app_url, args.ef_search)
    bare_port = free_port()
    bare = start_process([sys.executable, str(Path(HERE) / "memory.py"), "--serve-bare",
                          app_url, str(args.ef_search), str(bare_port)])  # fmt: skip
    try:
        await wait_ready("memory service", base_url, process, limit_seconds=120)
        token = mint_dev_token(DEV_AUTH_SECRET, memory_bench.TENANT, memory_bench.USER,
                               (Role.USER,), 3600)  # fmt: skip
        lean = LeanHttp([base_url], {"Authorization": f"Bearer {token}"}, connections=4)
        bare_http = LeanHttp([f"http://127.0.0.1:{bare_port}"], {}, connections=1)
        try:
            bodies = [{"embedding": [float(x) for x in v], "limit": 10} for v in vectors]
            for body in bodies[:20]:
                await lean.json("POST", "/v1/memory/semantic/query", body)
                await bare_http.json("POST", "/", body)
            # Raw, API and floor queries alternate, so that all see the same load on a
            # shared machine (measured apart, minutes apart, their ratio was noise).
            # All sides query the same vector, and a later walk of its part of the
            # graph finds those pages in shared buffers (measured at 100k memories: the
            # second query about 1 ms faster than the first), so which goes first
            # rotates too.
            api: list[float] = []
            raw_tx: list[float] = []
            floor: list[float] = []
            service_cpu = 0.0

            async def raw_query(vector: np.ndarray) -> None:
                started = time.perf_counter()
                await raw.nearest(vector, 10)
                raw_tx.append(time.perf_counter() - started)

            async def api_query(body: dict[str, Any]) -> None:
                nonlocal service_cpu
                cpu_before = cpu_seconds(process.pid)
                started = time.perf_counter()
                # Encoded as the SDK's MemoryClient does (pydantic-core), in the timing.
                response = await lean.request(
                    "POST", "/v1/memory/semantic/query", pydantic_core.to_json(body)
                )
                api.append(time.perf_counter() - started)
                service_cpu += cpu_seconds(process.pid) - cpu_before
                if response.status_code != 200:
                    raise RuntimeError(f"{response.status_code}: {response.text[:300]}")

            async def floor_query(body: dict[str, Any]) -> None:
                started = time.perf_counter()
                response = await bare_http.request("POST", "/", pydantic_core.to_json(body))
                floor.append(time.perf_counter() - started)
                if response.status_code != 200:
                    raise RuntimeError(f"{response.status_code}: {response.text[:300]}")

            for index, (vector, body) in enumerate(zip(vectors, bodies, strict=True)):
                sides = [functools.partial(raw_query, vector), functools.partial(api_query, body),
                         functools.partial(floor_query, body)]  # fmt: skip
                # Each side goes first for a third of the vectors.
                for side in sides[index % 3 :] + sides[: index % 3]:
                    await side()
            service_cpu /= len(bodies)
        finally:
            await lean.close()
            await bare_http.close()
    finally:
        await raw.conn.close()
        bare.kill()
        bare.wait()
        stop_service(process, log)
    recall = statistics.fmean(
        len(set(a) & set(e)) / max(1, len(e)) for a, e in zip(approximate, exact, strict=False)
    )
    table.add(
        Row(
            f"memory query by vector, p50 ({args.memories:,} memories)",
            f"{ms(percentile(api, 0.5)):.2f} ms (p99 {ms(percentile(api, 0.99)):.1f})",
            f"{ms(percentile(raw_tx, 0.5)):.2f} ms (p99 {ms(percentile(raw_tx, 0.99)):.1f})",
            f"{percentile(api, 0.5) / percentile(raw_tx, 0.5):.2f}",
            "<= 1.3x",
            f"API: HTTP+auth+RLS+JSON (body encoded as the SDK does), one at a time, "
            f"alternating with raw and the floor below on the same vectors (each side first "
            f"for a third of them): the service's statement (one, its own transaction) with "
            f"asyncpg, prepared, binary vectors; "
            f"ef_search "
            f"{args.ef_search}, m 16, ef_construction 64; "
            f"recall@10 {recall:.3f}; memory service CPU {ms(service_cpu):.2f} ms/query; "
            f"the same statement behind a bare ASGI app (uvicorn, httptools, json, ids only, "
            f"no auth), the least HTTP a Python service adds: p50 "
            f"{ms(percentile(floor, 0.5)):.2f} ms, "
            f"{percentile(floor, 0.5) / percentile(raw_tx, 0.5):.2f}x raw",
        )
    )


# -- gateway -----------------------------------------------------------------------------

_GATEWAY_CPU = re.compile(r"CPU ms per task, less what the stack spends idle: gateway ([0-9.]+)")
_GATEWAY_RATE = re.compile(r"concurrent clients, [0-9]+ s: ([0-9,]+) tasks/s .*p50 ([0-9.]+) ms")
_A2A_ADDS = re.compile(r"A2A SendMessage, JSON-RPC .* p50 +([0-9.]+) ms.*A2A adds ([-+0-9.]+) ms")
_SDK_P50 = re.compile(r"SDK request\(wait=\) to the hello tool +p50 +([0-9.]+) ms")


async def gateway_rows(
    table: Table, admin_root: str, bootstrap: str, args: argparse.Namespace
) -> None:
    """The gateway's CPU per A2A task: ``bench/gateway.py`` (registry, the hello tool
    and a gateway as processes of their own) on this run's broker and database, its
    figures read from what it prints."""
    env = {**os.environ, "DISCO_KAFKA_BOOTSTRAP": bootstrap, "DISCO_DATABASE_ADMIN_URL": admin_root}
    command = [sys.executable, str(Path(HERE) / "gateway.py"), "--round-trips",
               str(args.gateway_round_trips), "--seconds", str(args.seconds),
               "--clients", "50", "--agents", "0"]  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        *command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    output, _ = await process.communicate()
    text = output.decode(errors="replace")
    cpu, rate, adds, sdk = (pattern.search(text) for pattern in
                            (_GATEWAY_CPU, _GATEWAY_RATE, _A2A_ADDS, _SDK_P50))  # fmt: skip
    if process.returncode != 0 or cpu is None or rate is None or adds is None or sdk is None:
        raise RuntimeError(f"bench/gateway.py failed ({process.returncode}):\n{text[-3000:]}")
    print("\n".join(f"  {line}" for line in text.splitlines() if "p50" in line or "CPU" in line))
    table.add(
        Row(
            "gateway CPU per A2A task (ms)",
            f"{float(cpu[1]):.2f} ms",
            "-",
            "-",
            "<= 1.0 ms",
            f"blocking SendMessage (HTTP+JSON) from 50 clients for {args.seconds:.0f} s: "
            f"{rate[1]} tasks/s, p50 {rate[2]} ms; the gateway process's CPU per task less "
            f"what it spends idle; one at a time, A2A JSON-RPC p50 {adds[1]} ms, "
            f"{adds[2]} ms over request(wait=)'s {sdk[1]} ms (bench/gateway.py)",
        )
    )


# -- registry ----------------------------------------------------------------------------


async def run_concurrently(
    concurrency: int, calls: list[Callable[[], Awaitable[Any]]]
) -> tuple[float, list[float]]:
    """Run ``calls`` with ``concurrency`` in flight; (elapsed, latencies)."""
    queue = iter(calls)
    latencies: list[float] = []

    async def worker() -> None:
        for call in queue:
            started = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started, latencies


async def run_for(
    concurrency: int, seconds: float, make_call: Callable[[], Awaitable[Any]]
) -> tuple[float, list[float]]:
    """Calls from ``concurrency`` workers for ``seconds``; (elapsed, latencies)."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await make_call()
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started, latencies


def rate_cell(elapsed: float, latencies: list[float]) -> str:
    return f"{len(latencies) / elapsed:,.0f}/s, p99 {ms(percentile(latencies, 0.99)):.1f} ms"


async def bare_register_rate(
    admin_root: str, args: argparse.Namespace, rng: random.Random
) -> float:
    """Registrations per second through ``bench/registry.py --serve-bare`` (the
    registry's own code for ``POST /v1/agents`` behind a bare ASGI app) into a
    database of its own, at ``--concurrency`` in flight."""
    _, floor_url = await migrated_database(admin_root, "registry")
    port = free_port()
    bare = start_process([sys.executable, str(Path(HERE) / "registry.py"), "--serve-bare",
                          floor_url, str(args.concurrency), str(port)])  # fmt: skip
    lean = LeanHttp([f"http://127.0.0.1:{port}"], {}, args.concurrency)
    try:
        bodies = [registry_bench.registration(i, rng) for i in range(args.agents)]

        def register(body: dict[str, Any]) -> Callable[[], Awaitable[None]]:
            async def call() -> None:
                response = await lean.json("POST", "/v1/agents", body)
                if response.status_code >= 400:
                    raise RuntimeError(f"{response.status_code}: {response.text[:300]}")

            return call

        elapsed, latencies = await run_concurrently(
            args.concurrency, [register(body) for body in bodies]
        )
        return len(latencies) / elapsed
    finally:
        await lean.close()
        bare.kill()
        bare.wait()


async def registry_rows(
    table: Table, admin_root: str, bootstrap: str, args: argparse.Namespace
) -> None:
    from disco_common.registry import AgentRegistration

    # The service's registration statement and the arguments it sends (private names:
    # the raw side sends exactly what the service sends, computed beforehand).
    from disco_registry.agents.repository import _REGISTER_NAMES, _REGISTER_SQL, _register_values
    from disco_registry.agents.service import _prepare
    from disco_registry.discovery.repository import DISCOVER

    _, app_url = await migrated_database(admin_root, "registry")
    # The raw registrations go to a database of their own: in the service's, its outbox
    # relay would publish their announcements, taking CPU from both sides meanwhile.
    _, raw_url = await migrated_database(admin_root, "registry")
    process, base_url, log = start_service(
        "registry", app_url, bootstrap, {"DISCO_DATABASE_POOL_SIZE": str(args.concurrency)}
    )
    rng = random.Random(7)
    bodies = [registry_bench.registration(i, rng) for i in range(args.agents)]
    raw_bodies = [registry_bench.registration(i, rng) for i in range(args.agents)]
    pool = await asyncpg.create_pool(app_url, min_size=args.concurrency,
                                     max_size=args.concurrency)  # fmt: skip
    raw_pool = await asyncpg.create_pool(raw_url, min_size=args.concurrency,
                                         max_size=args.concurrency)  # fmt: skip
    try:
        await wait_ready("registry", base_url, process, limit_seconds=60)
        token = mint_dev_token(DEV_AUTH_SECRET, registry_bench.TENANT, "bench", (Role.SERVICE,),
                               3600)  # fmt: skip
        lean = LeanHttp([base_url], {"Authorization": f"Bearer {token}"}, args.concurrency)

        async def check(response: LeanResponse) -> None:
            if response.status_code >= 400:
                raise RuntimeError(f"{response.status_code}: {response.text[:300]}")

        def api_register(body: dict[str, Any]) -> Callable[[], Awaitable[None]]:
            async def call() -> None:
                await check(await lean.json("POST", "/v1/agents", body))

            return call

        service_cpu = cpu_seconds(process.pid)
        api_elapsed, api_lat = await run_concurrently(
            args.concurrency, [api_register(body) for body in bodies]
        )
        register_cpu = (cpu_seconds(process.pid) - service_cpu) / len(api_lat)
        # Raw: the service's own statement (registry.register_agent_as: tenant scope, lock,
        # agent and instance upsert, owned events, the announcement's outbox row, the record
        # read back; one statement, its own transaction), with the arguments the service
        # would send for the same registration, computed beforehand (untimed).

        def raw_values(body: dict[str, Any]) -> list[Any]:
            registration = AgentRegistration.model_validate(body)
            write = _prepare(registry_bench.TENANT, registration, {}, 60)
            values = _register_values(write, "bench")
            return [values[name] for name in _REGISTER_NAMES]

        prepared = [raw_values(body) for body in raw_bodies]

        def raw_register(values: list[Any]) -> Callable[[], Awaitable[None]]:
            async def call() -> None:
                async with raw_pool.acquire() as conn:
                    await conn.fetchrow(_REGISTER_SQL, *values)

            return call

        raw_elapsed, raw_lat = await run_concurrently(
            args.concurrency, [raw_register(values) for values in prepared]
        )
        floor_rate = await bare_register_rate(admin_root, args, rng)
        raw_rate = len(raw_lat) / raw_elapsed
        table.add(
            Row(
                f"registry register, {args.concurrency} concurrent",
                rate_cell(api_elapsed, api_lat),
                rate_cell(raw_elapsed, raw_lat),
                f"{(len(api_lat) / api_elapsed) / raw_rate:.2f}",
                ">= 0.6x",
                f"{args.agents:,} registrations of 3 capabilities each, into an empty "
                "registry; raw: the service's statement (registry.register_agent_as, its own "
                "transaction) with asyncpg, the same arguments, a database of its own; "
                f"registry CPU {ms(register_cpu):.2f} ms/request; the service's own code "
                "(body check, preparation, statement, record as JSON) behind a bare ASGI app "
                "(uvicorn, httptools; no FastAPI, middleware, auth or outbox relay), a "
                f"database of its own: {floor_rate:,.0f}/s, {floor_rate / raw_rate:.2f}x raw",
            )
        )
        # Discovery by consumed event.

        def event_type() -> str:
            return f"task-{rng.randrange(registry_bench.CAPABILITY_POOL):03d}.requested"

        async def api_discover() -> None:
            await check(await lean.request("GET", f"/v1/discover?consumed_event={event_type()}"))

        async def raw_discover() -> None:
            # The service's statement as it sends it: one statement, its own transaction.
            async with pool.acquire() as conn:
                await conn.fetchval(DISCOVER, registry_bench.TENANT, "bench", [], event_type(),
                                    None, None, 50)  # fmt: skip

        async def answers() -> dict[str, float]:
            text = (await lean.request("GET", "/metrics")).text
            found = re.findall(r'^disco_registry_discovery_answers_total\{source="(\w+)"\} (\S+)$',
                               text, re.MULTILINE)  # fmt: skip
            return {source: float(value) for source, value in found}

        for _ in range(100):
            await api_discover()
            await raw_discover()
        service_cpu = cpu_seconds(process.pid)
        answers_before = await answers()
        api_elapsed, api_lat = await run_for(args.concurrency, args.seconds, api_discover)
        discover_cpu = (cpu_seconds(process.pid) - service_cpu) / len(api_lat)
        answers_after = await answers()
        cached = answers_after.get("cache", 0) - answers_before.get("cache", 0)
        raw_elapsed, raw_lat = await run_for(args.concurrency, args.seconds, raw_discover)
        table.add(
            Row(
                f"registry discover by consumed event, {args.concurrency} concurrent",
                rate_cell(api_elapsed, api_lat),
                rate_cell(raw_elapsed, raw_lat),
                f"{(len(api_lat) / api_elapsed) / (len(raw_lat) / raw_elapsed):.2f}",
                "p99<=20 ms, >=1,500/s",
                f"{args.agents:,} agents; {args.seconds:.0f} s each; raw: the service's "
                "discovery statement (tenant-scoping function) with asyncpg; registry "
                f"CPU {ms(discover_cpu):.2f} ms/request; {cached / len(api_lat):.0%} of "
                f"answers from the registry's cache ({registry_bench.CAPABILITY_POOL} "
                "event types asked at random)",
            )
        )
        await lean.close()
    finally:
        await pool.close()
        await raw_pool.close()
        stop_service(process, log)


# -- the run -----------------------------------------------------------------------------


async def main(args: argparse.Namespace, bootstrap: str, broker_pid: int | None,
               admin_root: str | None) -> None:  # fmt: skip
    only = set(args.only.split(",")) if args.only else {"bus", "tool", "idle", "memory",
                                                         "registry", "gateway"}  # fmt: skip
    sample = agents_bench.settings_for(bootstrap, "x.")
    raw_wait = await raw_fetch_wait(sample)
    if args.peer_wait is None:
        args.peer_wait = raw_wait
    print(
        f"broker {bootstrap}: {describe_fetch(sample)}; raw clients fetch at {raw_wait} ms; "
        f"linger {sample.kafka_linger_ms} ms; database {admin_root and admin_root.split('@')[-1]}; "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; "
        f"{'quick' if args.quick else 'full'} run",
        flush=True,
    )
    table = Table()
    started = time.perf_counter()
    if "tool" in only:
        print("== tool", flush=True)
        await tool_rows(table, bootstrap, args)
    if "idle" in only:
        print("== idle agent", flush=True)
        await idle_row(table, bootstrap, broker_pid, args)
    if "bus" in only:
        print("== bus", flush=True)
        await bus_rows(table, bootstrap, args)
    if admin_root is not None and "memory" in only:
        print("== memory", flush=True)
        await memory_rows(table, admin_root, bootstrap, args)
    if admin_root is not None and "registry" in only:
        print("== registry", flush=True)
        await registry_rows(table, admin_root, bootstrap, args)
    if admin_root is not None and "gateway" in only:
        print("== gateway", flush=True)
        await gateway_rows(table, admin_root, bootstrap, args)
    table.print()
    print(f"\n({time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.2f})")


def cli() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small counts, under 2 minutes")
    parser.add_argument(
        "--only", default="", help="comma list: bus,tool,idle,memory,registry,gateway"
    )
    parser.add_argument("--round-trips", type=int)
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument(
        "--paused-round-trips", type=int, help="round trips each after 1 s idle (10; 0: none)"
    )
    parser.add_argument("--tool-seconds", type=float)
    parser.add_argument("--soak-seconds", type=float, default=0.0)
    parser.add_argument("--idle-seconds", type=float)
    parser.add_argument("--messages", type=int)
    parser.add_argument(
        "--trace-ratio",
        type=float,
        default=0.1,
        help="the production sampling ratio the bus's tracing row uses (0.1)",
    )
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--memories", type=int)
    parser.add_argument("--queries", type=int)
    parser.add_argument("--ef-search", type=int, default=64)
    parser.add_argument("--agents", type=int)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--gateway-round-trips", type=int, default=100)
    parser.add_argument("--seconds", type=float)
    parser.add_argument(
        "--grown",
        type=int,
        help="envelopes on each side's tool topics for the grown-broker rows (100,000)",
    )
    parser.add_argument(
        "--grown-batch",
        type=int,
        default=4,
        help="records per stored batch of the grown topics (what <= 50 in flight writes: ~3-4)",
    )
    parser.add_argument(
        "--peer-wait", type=int, help="FastStream's fetch wait (ms; default: the raw clients')"
    )
    parser.add_argument(
        "--peer-default-samples",
        type=int,
        default=12,
        help="FastStream round trips at its default fetch wait (0: none)",
    )
    parser.add_argument(
        "--serve-raw-responder", nargs=2, metavar=("BOOTSTRAP", "PREFIX"), help=argparse.SUPPRESS
    )
    parser.add_argument("--serve-faststream-tool", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_raw_responder:
        asyncio.run(serve_raw_responder(*args.serve_raw_responder))
        return 0
    if args.serve_faststream_tool:
        bootstrap, prefix, wait = args.serve_faststream_tool
        asyncio.run(faststream_peer.serve_tool(bootstrap, prefix, int(wait)))
        return 0
    defaults = (
        {"round_trips": 200, "tool_seconds": 8.0, "idle_seconds": 5.0, "messages": 10_000,
         "repeats": 1, "memories": 10_000, "queries": 150, "agents": 1_000, "seconds": 3.0,
         "grown": 20_000, "paused_round_trips": 6}
        if args.quick else
        {"round_trips": 500, "tool_seconds": 60.0, "idle_seconds": 20.0, "messages": 100_000,
         "repeats": 3, "memories": 100_000, "queries": 300, "agents": 10_000, "seconds": 8.0,
         "grown": 100_000, "paused_round_trips": 15}
    )  # fmt: skip
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    with tempfile.TemporaryDirectory(prefix="disco-bench-") as scratch:
        folder = Path(scratch)
        broker: EmbeddedBroker | None = None
        postgres: EmbeddedPostgres | None = None
        try:
            bootstrap = os.environ.get("DISCO_KAFKA_BOOTSTRAP")
            if not bootstrap:
                broker = EmbeddedBroker(port=free_port(), log_path=folder / "broker.log")
                broker.start()
                bootstrap = broker.bootstrap
            admin_root = os.environ.get("DISCO_DATABASE_ADMIN_URL")
            if not admin_root and args.only != "bus" and args.only != "tool":
                postgres = EmbeddedPostgres(
                    data_dir=folder / "pg",
                    port=free_port(),
                    log_path=folder / "postgres.log",
                    durable=False,
                )
                postgres.start()
                admin_root = postgres.dsn("postgres")
            asyncio.run(main(args, bootstrap, broker.pid if broker else None, admin_root))
        finally:
            if broker is not None:
                broker.stop()
            if postgres is not None:
                postgres.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(cli())
