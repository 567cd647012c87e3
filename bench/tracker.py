"""Benchmark: the tracker — ingest rate and lag, plan list and plan view at 100k plans.

    uv run python bench/tracker.py [--rate 6000] [--seconds 20] [--backlog 60000]
                                   [--plans 100000] [--timeline-rows 1000000] [--queries 500]

Starts an embedded PostgreSQL and Tansu broker on free loopback ports unless
``DISCO_DATABASE_ADMIN_URL`` / ``DISCO_KAFKA_BOOTSTRAP`` name existing ones (a
fresh database is created and migrated either way), and runs the tracker as a
real ``python -m disco_tracker`` process. Everything shares the machine's cores.

Traffic: what ten agents publish while they run plans — 2 planners, 4 workers
that fan out, 4 tools — 19 envelopes per plan on ``system-events``,
``action-requests`` and ``action-results`` (plan.started/state_changed/
completed, task.started/delegated/completed, requests and answers), each plan's
envelopes keyed by its plan id as the SDK does. The load generator sends
records it prepares as JSON itself (pydantic would cost it more CPU than the
tracker spends).

Figures:

- backlog drain: ``--backlog`` envelopes published while the tracker is
  stopped, then the time the tracker takes to apply them all (its capacity);
- steady stream: ``--rate`` envelopes/s for ``--seconds``: envelopes applied per
  second, the lag (now minus the time of the newest envelope applied, sampled
  every 0.5 s: p50/p99/max) and the time to catch up after the stream ends;
- reads at size: ``--plans`` plans with ``--timeline-rows`` timeline rows (10 per
  plan, 4 tasks and a fan-out group each), built with SQL; then ``GET
  /v1/tracker/plans`` (a page of 50, and filtered by status) and ``GET
  /v1/tracker/plans/{id}`` one at a time, p50/p99.

Targets (issue 13): ingest >= 5,000 envelopes/s; plan view p99 <= 20 ms at
100k plans and 1M timeline rows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import httpx
from _common import BusyCores, LeanHttp, cpu_seconds, create_database, percentile, wait_ready
from aiokafka import AIOKafkaProducer

from disco._dev.broker import EmbeddedBroker
from disco._dev.dburl import with_database, with_user
from disco._dev.migrate import upgrade
from disco._dev.ports import free_port
from disco._dev.postgres import EmbeddedPostgres
from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco.settings import BusSettings
from disco_common.auth import Role
from disco_common.topics import Topic, topic_name

INGEST_TENANT = "bench-ingest"
READ_TENANT = "bench"
PLANNERS = ["planner-0", "planner-1"]
WORKERS = ["worker-0", "worker-1", "worker-2", "worker-3"]
TOOLS = ["tool-0", "tool-1", "tool-2", "tool-3"]
ENVELOPES_PER_PLAN = 19


# -- traffic -------------------------------------------------------------------------


class Traffic:
    """Records of plans run by ten agents, made as JSON directly (fast enough to keep up)."""

    def __init__(self, prefix: str) -> None:
        self.names = {topic: topic_name(topic, prefix) for topic in Topic}
        self.counter = 0

    def _record(
        self, topic: Topic, event_type: str, data: object, source: str, **attrs: str
    ) -> tuple[str, bytes, bytes, list[tuple[str, bytes]]]:
        self.counter += 1
        event_id = f"{uuid.uuid4().hex}"
        body = {
            "id": event_id,
            "source": f"disco://agent/{source}",
            "specversion": "1.0",
            "type": event_type,
            "time": datetime.now(UTC).isoformat(),
            "datacontenttype": "application/json",
            "data": data,
            "tenant_id": INGEST_TENANT,
            **attrs,
        }
        key = attrs.get("plan_id") or attrs.get("correlation_id") or event_id
        headers = [
            ("content-type", b"application/cloudevents+json"),
            ("ce_id", event_id.encode()),
            ("ce_type", event_type.encode()),
            ("tenant_id", INGEST_TENANT.encode()),
        ]
        return self.names[topic], key.encode(), json.dumps(body).encode(), headers

    def plan(self, n: int) -> list[tuple[str, bytes, bytes, list[tuple[str, bytes]]]]:
        """The 19 envelopes of one plan: an action to a worker that fans out to 3 tools."""
        planner = PLANNERS[n % len(PLANNERS)]
        worker = WORKERS[n % len(WORKERS)]
        tools = [TOOLS[(n + i) % len(TOOLS)] for i in range(3)]
        plan_id = f"p{n}-{uuid.uuid4().hex[:8]}"
        action = f"{plan_id}-a"
        corr = f"plan.m.{plan_id}.1"
        subs = [f"{plan_id}-s{i}" for i in range(3)]
        mine = {"plan_id": plan_id, "agent_name": planner}
        work = {"task_id": action, "plan_id": plan_id, "agent_name": worker}
        out = [
            self._record(
                Topic.SYSTEM_EVENTS,
                "plan.started",
                {**mine, "goal_event": "trip.requested", "plan_type": "trip", "initial_state": "s"},
                planner,
                plan_id=plan_id,
            ),
            self._record(
                Topic.SYSTEM_EVENTS,
                "plan.state_changed",
                {**mine, "step": 0, "to_state": "s"},
                planner,
                plan_id=plan_id,
            ),
            self._record(
                Topic.SYSTEM_EVENTS,
                "plan.state_changed",
                {**mine, "step": 1, "from_state": "s", "to_state": "q"},
                planner,
                plan_id=plan_id,
            ),
            self._record(
                Topic.ACTION_REQUESTS,
                "quote.requested",
                {"kg": n % 7},
                planner,
                plan_id=plan_id,
                correlation_id=corr,
                response_event="quoted",
                task_id=action,
            ),
            self._record(
                Topic.SYSTEM_EVENTS,
                "task.started",
                {**work, "event_type": "quote.requested", "correlation_id": corr},
                worker,
                plan_id=plan_id,
                task_id=action,
            ),
        ]
        for sub in subs:
            out.append(
                self._record(
                    Topic.ACTION_REQUESTS,
                    "carrier.requested",
                    {"kg": n % 7},
                    worker,
                    plan_id=plan_id,
                    correlation_id=sub,
                    task_id=sub,
                    response_event="carrier.quoted",
                )
            )
        out.append(
            self._record(
                Topic.SYSTEM_EVENTS,
                "task.delegated",
                {
                    **work,
                    "parallel_group_id": f"{plan_id}-g",
                    "sub_tasks": [
                        {
                            "sub_task_id": s,
                            "event_type": "carrier.requested",
                            "response_event": "carrier.quoted",
                        }
                        for s in subs
                    ],
                },
                worker,
                plan_id=plan_id,
                task_id=action,
            )
        )
        for sub, tool in zip(subs, tools, strict=True):
            out.append(
                self._record(
                    Topic.ACTION_RESULTS,
                    "carrier.quoted",
                    {"success": True, "result": {"price": 1.5}},
                    tool,
                    plan_id=plan_id,
                    correlation_id=sub,
                    task_id=sub,
                )
            )
            out.append(
                self._record(
                    Topic.SYSTEM_EVENTS,
                    "task.progress",
                    {**work, "progress": 0.3, "message": f"{tool} answered"},
                    worker,
                    plan_id=plan_id,
                    task_id=action,
                )
            )
        out += [
            self._record(
                Topic.SYSTEM_EVENTS,
                "task.completed",
                {**work, "duration_seconds": 0.01},
                worker,
                plan_id=plan_id,
                task_id=action,
            ),
            self._record(
                Topic.ACTION_RESULTS,
                "quoted",
                {"success": True, "result": {"price": 1.5}, "task_id": action},
                worker,
                plan_id=plan_id,
                correlation_id=corr,
                task_id=action,
            ),
            self._record(
                Topic.SYSTEM_EVENTS,
                "plan.state_changed",
                {**mine, "step": 2, "from_state": "q", "to_state": "d", "trigger_event": "quoted"},
                planner,
                plan_id=plan_id,
            ),
            self._record(
                Topic.SYSTEM_EVENTS,
                "plan.completed",
                {**mine, "final_state": "d"},
                planner,
                plan_id=plan_id,
            ),
        ]
        assert len(out) == ENVELOPES_PER_PLAN
        return out


async def publish(
    producer: AIOKafkaProducer, records: list[tuple[str, bytes, bytes, list]]
) -> None:
    futures = [
        await producer.send(topic, value, key=key, headers=headers)
        for topic, key, value, headers in records
    ]
    await asyncio.gather(*futures)


# -- the tracker process ---------------------------------------------------------------


class Tracker:
    def __init__(self, app_url: str, bootstrap: str, prefix: str, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DISCO_DATABASE_URL": app_url,
            "DISCO_KAFKA_BOOTSTRAP": bootstrap,
            "DISCO_TOPIC_PREFIX": prefix,
            "DISCO_TRACKER_PORT": str(self.port),
            "DISCO_LOG_LEVEL": "WARNING",
            "DISCO_KAFKA_SESSION_TIMEOUT_MS": "6000",
            "DISCO_KAFKA_HEARTBEAT_INTERVAL_MS": "1000",
        }
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(  # noqa: ASYNC220 - started before timing
                [sys.executable, "-m", "disco_tracker"], env=self.env, stdout=out, stderr=out
            )
        await wait_ready("tracker", self.url, self.process, limit_seconds=90)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process = None


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


class Cpu:
    """CPU seconds used by each part (tracker, Postgres, broker, this load generator)."""

    def __init__(self, parts: dict[str, Callable[[], list[int]]]) -> None:
        self.parts = parts
        self._start: dict[str, float] = {}

    def _now(self) -> dict[str, float]:
        return {name: sum(cpu_seconds(pid) for pid in pids()) for name, pids in self.parts.items()}

    def start(self) -> None:
        self._start = self._now()

    def report(self, envelopes: int) -> str:
        used = {name: value - self._start.get(name, 0.0) for name, value in self._now().items()}
        return (
            ", ".join(f"{name} {seconds / envelopes * 1e6:.0f}" for name, seconds in used.items())
            + " µs of CPU per envelope"
        )


class Scrape:
    """The tracker's own ingest counters, from its ``/metrics``.

    Each read renders the tracker's whole metrics page (every consumer group's bus
    metrics too), which costs the process measured a few milliseconds of CPU: so
    :meth:`progress` reads often only where the time of a moment is measured.
    """

    def __init__(self, url: str) -> None:
        self.client = httpx.AsyncClient(base_url=url, timeout=10)

    async def read(self) -> tuple[float, float]:
        """(envelopes applied so far, time of the newest envelope applied)."""
        text = (await self.client.get("/metrics")).text
        values = {}
        for row in text.splitlines():
            if row.startswith(
                ("disco_tracker_ingested_envelopes_total", "disco_tracker_ingest_last")
            ):
                name, _, value = row.partition(" ")
                values[name] = float(value)
        return (
            values.get("disco_tracker_ingested_envelopes_total", 0.0),
            values.get("disco_tracker_ingest_last_event_timestamp_seconds", 0.0),
        )

    async def progress(self, target: float) -> AsyncIterator[float]:
        """The envelopes applied so far, read until they reach ``target`` (the last one
        yielded does): every 0.1 s while none move and once less than about a second's
        work is left at the pace seen, every 0.5 s in between."""
        previous: tuple[float, float] | None = None
        while True:
            done = (await self.read())[0]
            now = time.perf_counter()
            yield done
            if done >= target:
                return
            pace = 0.0
            if previous is not None and now > previous[1]:
                pace = (done - previous[0]) / (now - previous[1])
            previous = (done, now)
            await asyncio.sleep(0.5 if pace > 0 and (target - done) / pace > 1.0 else 0.1)

    async def close(self) -> None:
        await self.client.aclose()


# -- ingest figures ----------------------------------------------------------------------


async def ingest(
    args: argparse.Namespace, tracker: Tracker, bootstrap: str, prefix: str, cpu: Cpu
) -> None:
    traffic = Traffic(prefix)
    async with BusClient(BusSettings(kafka_bootstrap=bootstrap, topic_prefix=prefix)) as bus:
        await bus.ensure_topics()
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=5, acks=1, max_batch_size=256 * 1024
    )
    await producer.start()
    scrape = Scrape(tracker.url)
    try:
        # 1. Backlog drain: the tracker's capacity.
        plans = args.backlog // ENVELOPES_PER_PLAN
        started = time.perf_counter()
        for n in range(0, plans, 50):
            batch = [r for i in range(n, min(n + 50, plans)) for r in traffic.plan(i)]
            await publish(producer, batch)
        total = plans * ENVELOPES_PER_PLAN
        print(
            f"published a backlog of {total:,} envelopes in {time.perf_counter() - started:.1f} s "
            "(tracker stopped)"
        )
        await tracker.start()
        cores = BusyCores()
        first_at: float | None = None
        done_at_first = 0
        async for done in scrape.progress(total):
            if 0 < done < total and first_at is None:
                first_at = time.perf_counter()
                done_at_first = int(done)
                cores.start()
                cpu.start()
        if first_at is None:
            first_at = time.perf_counter()
            cores.start()
            cpu.start()
        elapsed = time.perf_counter() - first_at
        busy = cores.stop()
        print(
            f"{'backlog drain':<34} {(total - done_at_first) / elapsed:>8,.0f} envelopes/s applied "
            f"({total:,}; {total - done_at_first:,} in {elapsed:.1f} s from the first batch "
            f"applied; {busy:.2f} cores busy)"
        )
        print(f"{'':<34} {cpu.report(total - done_at_first)}")

        # 2. A steady stream at --rate.
        base = (await scrape.read())[0]
        batch_plans = max(1, args.rate // ENVELOPES_PER_PLAN // 20)  # a send every 50 ms
        interval = batch_plans * ENVELOPES_PER_PLAN / args.rate
        lags: list[float] = []
        sent = 0
        stop = asyncio.Event()

        stream_start = time.time()

        async def sample() -> None:
            while not stop.is_set():
                _, newest = await scrape.read()
                if newest >= stream_start:  # not the backlog's last envelope
                    lags.append(max(0.0, time.time() - newest))
                await asyncio.sleep(0.5)

        sampler = asyncio.create_task(sample())
        cores.start()
        cpu.start()
        started = time.perf_counter()
        deadline = started + args.seconds
        next_send = started
        n = plans
        while time.perf_counter() < deadline:
            records = [r for i in range(n, n + batch_plans) for r in traffic.plan(i)]
            n += batch_plans
            await publish(producer, records)
            sent += len(records)
            next_send += interval
            await asyncio.sleep(max(0.0, next_send - time.perf_counter()))
        publish_end = time.perf_counter()
        in_window = (await scrape.read())[0] - base
        async for _ in scrape.progress(base + sent):
            pass
        caught_up = time.perf_counter() - publish_end
        stop.set()
        await sampler
        busy = cores.stop()
        stream_seconds = publish_end - started
        print(
            f"{'steady stream: offered':<34} {sent / stream_seconds:>8,.0f} envelopes/s "
            f"({sent:,} in {stream_seconds:.1f} s by 10 agents, {sent // ENVELOPES_PER_PLAN:,} "
            "plans)"
        )
        print(
            f"{'steady stream: applied':<34} {in_window / stream_seconds:>8,.0f} envelopes/s "
            f"during the stream; all applied {caught_up:.2f} s after the last was sent "
            f"({busy:.2f} cores busy, load generator included)"
        )
        print(f"{'':<34} {cpu.report(sent)}")
        if lags:
            print(
                f"{'steady stream: lag':<34} p50 {percentile(lags, 0.5) * 1000:6.0f} ms   "
                f"p99 {percentile(lags, 0.99) * 1000:6.0f} ms   max {max(lags) * 1000:6.0f} ms "
                f"({len(lags)} samples of now minus the newest envelope applied)"
            )
    finally:
        await scrape.close()
        await producer.stop()


# -- read figures ------------------------------------------------------------------------

SEED = [
    # 100k plans (1 in 20 a sub-plan, 1 in 100 failed, 1 in 10 still running), over 30 days.
    """
    INSERT INTO tracker.plans (
        tenant_id, plan_id, plan_type, plan_type_version, goal_event, goal_task_id, session_id,
        parent_plan_id, agent_name, agent_id, initial_state, live_status, live_at,
        final_status, final_at, final_state, error, state, state_step, state_at, started_at,
        updated_at)
    SELECT $1, 'plan-' || g, 'trip', '1.0.0', 'trip.requested', 'goal-' || g, 's-' || (g % 5000),
           CASE WHEN g % 20 = 0 THEN 'plan-' || (g - 1) END,
           'planner-' || (g % 2), 'planner-' || (g % 2) || '.1', 'start', 'running', t,
           CASE WHEN g % 10 = 0 THEN NULL WHEN g % 100 = 1 THEN 'failed' ELSE 'completed' END,
           CASE WHEN g % 10 = 0 THEN NULL ELSE t + interval '2 seconds' END,
           CASE WHEN g % 10 = 0 THEN NULL ELSE 'done' END,
           CASE WHEN g % 100 = 1 THEN '{"type": "Boom", "message": "it broke"}'::jsonb END,
           CASE WHEN g % 10 = 0 THEN 'quoting' ELSE 'done' END, 2, t, t,
           t + interval '2 seconds'
      FROM (SELECT g, now() - interval '30 days' + g * interval '25 seconds' AS t
              FROM generate_series(1, $2::int) g) s
    """,
    # 4 tasks per plan: the worker's action and its 3 fan-out sub-tasks.
    """
    INSERT INTO tracker.tasks (
        tenant_id, task_id, plan_id, parent_task_id, parallel_group_id, event_type,
        response_event, correlation_id, agent_name, requested_by, live_status, live_at,
        final_status, final_at, starts, requested_at, started_at, first_seen_at, updated_at)
    SELECT $1, 'task-' || g || '-' || k, 'plan-' || g,
           CASE WHEN k > 0 THEN 'task-' || g || '-0' END,
           CASE WHEN k > 0 THEN 'group-' || g END,
           CASE WHEN k = 0 THEN 'quote.requested' ELSE 'carrier.requested' END,
           CASE WHEN k = 0 THEN 'quoted' ELSE 'carrier.quoted' END,
           'corr-' || g || '-' || k,
           CASE WHEN k = 0 THEN 'worker-' || (g % 4) ELSE 'tool-' || ((g + k) % 4) END,
           CASE WHEN k = 0 THEN 'planner-' || (g % 2) ELSE 'worker-' || (g % 4) END,
           'running', t,
           CASE WHEN g % 10 = 0 AND k = 0 THEN NULL ELSE 'completed' END,
           CASE WHEN g % 10 = 0 AND k = 0 THEN NULL
                ELSE t + (k + 1) * interval '100 milliseconds' END,
           1, t, t, t + k * interval '1 millisecond', t + interval '1 second'
      FROM (SELECT g, now() - interval '30 days' + g * interval '25 seconds' AS t
              FROM generate_series(1, $2::int) g) s, generate_series(0, 3) k
    """,
    """
    INSERT INTO tracker.delegation_groups (
        tenant_id, group_id, task_id, plan_id, agent_name, expected, created_at)
    SELECT $1, 'group-' || g, 'task-' || g || '-0', 'plan-' || g, 'worker-' || (g % 4), 3,
           now() - interval '30 days' + g * interval '25 seconds'
      FROM generate_series(1, $2::int) g
    """,
    # The timeline: $3 rows per plan.
    """
    INSERT INTO tracker.events (
        tenant_id, event_id, topic, event_type, source, agent_name, at, plan_id, task_id,
        correlation_id, summary, data)
    SELECT $1, 'evt-' || g || '-' || k,
           CASE WHEN k IN (3, 5) THEN 'action-requests' WHEN k IN (6, 7) THEN 'action-results'
                ELSE 'system-events' END,
           CASE k WHEN 0 THEN 'plan.started' WHEN 1 THEN 'plan.state_changed'
                  WHEN 2 THEN 'plan.state_changed' WHEN 3 THEN 'quote.requested'
                  WHEN 4 THEN 'task.started' WHEN 5 THEN 'carrier.requested'
                  WHEN 6 THEN 'carrier.quoted' WHEN 7 THEN 'quoted'
                  WHEN 8 THEN 'plan.state_changed' ELSE 'plan.completed' END,
           'disco://agent/planner-' || (g % 2), 'planner-' || (g % 2),
           now() - interval '30 days' + g * interval '25 seconds' + k * interval '10 ms',
           'plan-' || g, 'task-' || g || '-0', 'corr-' || g, 'summary of step ' || k,
           CASE WHEN k IN (1, 2, 8) THEN jsonb_build_object(
                'plan_id', 'plan-' || g, 'step', CASE k WHEN 1 THEN 0 WHEN 2 THEN 1 ELSE 2 END,
                'from_state', CASE k WHEN 2 THEN 'start' WHEN 8 THEN 'quoting' END,
                'to_state', CASE k WHEN 1 THEN 'start' WHEN 2 THEN 'quoting' ELSE 'done' END)
           ELSE jsonb_build_object('step', k) END
      FROM generate_series(1, $2::int) g, generate_series(0, $3::int - 1) k
    """,
]


async def seed(admin: asyncpg.Connection, plans: int, rows: int) -> None:
    per_plan = max(1, rows // plans)
    started = time.perf_counter()
    await admin.execute("SET synchronous_commit = off")
    for statement in SEED:
        args = [READ_TENANT, plans] + ([per_plan] if "$3" in statement else [])
        await admin.execute(statement, *args)
    await admin.execute(
        "INSERT INTO tracker.plan_types (tenant_id, plan_type, version, sort_key, definition, "
        "content_hash) VALUES ($1, 'trip', '1.0.0', '1', $2::jsonb, 'x')",
        READ_TENANT,
        json.dumps(
            {
                "plan_type": "trip",
                "description": "",
                "initial_state": "start",
                "states": {
                    "start": {"state_name": "start", "default_next": "quoting"},
                    "quoting": {
                        "state_name": "quoting",
                        "transitions": [{"on_event": "quoted", "to_state": "done"}],
                    },
                    "done": {"state_name": "done", "is_terminal": True},
                },
            }
        ),
    )
    await admin.execute("VACUUM ANALYZE tracker.plans")
    await admin.execute("VACUUM ANALYZE tracker.tasks")
    await admin.execute("VACUUM ANALYZE tracker.events")
    counts = await admin.fetchrow(
        "SELECT (SELECT count(*) FROM tracker.plans WHERE tenant_id = $1) AS plans, "
        "(SELECT count(*) FROM tracker.tasks WHERE tenant_id = $1) AS tasks, "
        "(SELECT count(*) FROM tracker.events WHERE tenant_id = $1) AS events",
        READ_TENANT,
    )
    print(
        f"built {counts['plans']:,} plans, {counts['tasks']:,} tasks and {counts['events']:,} "
        f"timeline rows with SQL in {time.perf_counter() - started:.1f} s"
    )


def line(label: str, samples: list[float]) -> None:
    print(
        f"{label:<34} p50 {percentile(samples, 0.5) * 1000:7.2f} ms   "
        f"p99 {percentile(samples, 0.99) * 1000:7.2f} ms   "
        f"max {max(samples) * 1000:7.2f} ms   ({len(samples)} requests, one at a time)"
    )


async def reads(args: argparse.Namespace, tracker: Tracker) -> None:
    token = mint_dev_token(DEV_AUTH_SECRET, READ_TENANT, "bench", (Role.USER,), 3600)
    lean = LeanHttp([tracker.url], {"Authorization": f"Bearer {token}"}, connections=1)
    rng = random.Random(13)
    try:

        async def timed(path: str) -> float:
            started = time.perf_counter()
            response = await lean.request("GET", path)
            elapsed = time.perf_counter() - started
            if response.status_code != 200:
                raise RuntimeError(f"{path}: {response.status_code} {response.text[:300]}")
            return elapsed

        for _ in range(50):  # warm up
            await timed(f"/v1/tracker/plans/plan-{rng.randint(1, args.plans)}")
        views = [
            await timed(f"/v1/tracker/plans/plan-{rng.randint(1, args.plans)}")
            for _ in range(args.queries)
        ]
        lists = [await timed("/v1/tracker/plans?limit=50") for _ in range(args.queries // 2)]
        failed = [
            await timed("/v1/tracker/plans?limit=50&status=failed")
            for _ in range(args.queries // 4)
        ]
        tasks = [
            await timed(f"/v1/tracker/plans/plan-{rng.randint(1, args.plans)}/tasks")
            for _ in range(args.queries // 2)
        ]
        timeline = [
            await timed(f"/v1/tracker/plans/plan-{rng.randint(1, args.plans)}/timeline")
            for _ in range(args.queries // 2)
        ]
        print()
        print(
            f"reads at {args.plans:,} plans and {args.timeline_rows:,} timeline rows "
            "(HTTP, auth, RLS, JSON)"
        )
        line("plan view GET /plans/{id}", views)
        line("plan list GET /plans (50)", lists)
        line("plan list, status=failed (50)", failed)
        line("plan tasks GET /plans/{id}/tasks", tasks)
        line("plan timeline GET /plans/{id}/timeline", timeline)
    finally:
        await lean.close()


async def bench(
    args: argparse.Namespace,
    admin_url: str,
    app_url: str,
    bootstrap: str,
    folder: Path,
    pids: dict[str, Callable[[], list[int]]],
) -> None:
    prefix = f"bench{uuid.uuid4().hex[:6]}."
    tracker = Tracker(app_url, bootstrap, prefix, folder / "tracker.log")
    admin = await asyncpg.connect(admin_url)
    try:
        parts = {
            "tracker": lambda: [tracker.process.pid] if tracker.process is not None else [],
            **pids,
            "load generator": lambda: [os.getpid()],
        }
        await ingest(args, tracker, bootstrap, prefix, Cpu(parts))
        await seed(admin, args.plans, args.timeline_rows)
        await reads(args, tracker)
    finally:
        tracker.stop()
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=6000, help="Envelopes/s of the steady stream.")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--backlog", type=int, default=60_000)
    parser.add_argument("--plans", type=int, default=100_000)
    parser.add_argument("--timeline-rows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=500)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="disco-bench-tracker-") as name:
        folder = Path(name)
        postgres: EmbeddedPostgres | None = None
        broker: EmbeddedBroker | None = None
        try:
            server_url = os.environ.get("DISCO_DATABASE_ADMIN_URL")
            if not server_url:
                postgres = EmbeddedPostgres(
                    data_dir=folder / "pg",
                    port=free_port(),
                    log_path=folder / "postgres.log",
                    durable=False,
                )
                postgres.start()
                server_url = postgres.dsn("postgres")
            bootstrap = os.environ.get("DISCO_KAFKA_BOOTSTRAP")
            if not bootstrap:
                broker = EmbeddedBroker(port=free_port(), log_path=folder / "broker.log")
                broker.start()
                bootstrap = broker.bootstrap
            database = f"disco_bench_{uuid.uuid4().hex[:8]}"
            asyncio.run(create_database(server_url, database))
            admin_url = with_database(server_url, database)
            app_url = with_user(admin_url, "disco_app", "disco_app")
            upgrade(admin_url, app_url, services=("tracker",))
            pids: dict[str, Callable[[], list[int]]] = {}
            if postgres is not None:
                pg_dir = folder / "pg"

                def postgres_pids() -> list[int]:
                    head = int((pg_dir / "postmaster.pid").read_text().split()[0])
                    return [head, *_children(head)]

                pids["postgres"] = postgres_pids
            if broker is not None and broker.pid is not None:
                broker_pid = broker.pid
                pids["broker"] = lambda: [broker_pid]
            asyncio.run(bench(args, admin_url, app_url, bootstrap, folder, pids))
        finally:
            if broker is not None:
                broker.stop()
            if postgres is not None:
                postgres.destroy()


if __name__ == "__main__":
    main()
