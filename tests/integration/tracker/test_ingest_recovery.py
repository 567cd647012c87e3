"""A tracker killed mid-stream and started again catches up: nothing lost, nothing doubled.

The tracker runs as a real process (``python -m disco_tracker``) on a database
of its own; it is killed with SIGKILL while envelopes keep coming, so it dies
between a database commit and the offset commit or in the middle of a batch,
wherever it happens to be.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import asyncpg
import httpx
import pytest

from disco._dev.ports import free_port
from disco.bus import BusClient
from disco.settings import BusSettings
from disco_common.ids import utcnow
from tests.fixtures.infra import DatabaseUrls, migrated_database
from tests.integration.tracker.read_model_support import eventually
from tests.integration.tracker.scenario import Scenario, plan_scenario

ROOT = Path(__file__).resolve().parents[3]
PLANS = 60


@pytest.fixture(scope="module")
def own_database(postgres_admin_url: str) -> DatabaseUrls:
    # Its own database: a tracker process's sweepers claim every tenant's rows.
    return migrated_database(postgres_admin_url)


class TrackerProcess:
    def __init__(self, env: dict[str, str], url: str, log: Path) -> None:
        self.env, self.url, self.log = env, url, log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "disco_tracker"],
                env=self.env,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    async def ready(self) -> None:
        async with httpx.AsyncClient(base_url=self.url) as client:

            async def status() -> int:
                assert self.process is not None
                assert self.process.poll() is None, self.tail()
                try:
                    return (await client.get("/readyz")).status_code
                except httpx.TransportError:
                    return 0

            await eventually(status, lambda code: code == 200, timeout=60)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


@pytest.fixture
def tracker_process(
    own_database: DatabaseUrls, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> Iterator[TrackerProcess]:
    port = free_port()
    env = {
        **os.environ,
        "DISCO_ENV": "dev",
        "DISCO_HOST": "127.0.0.1",
        "DISCO_TRACKER_PORT": str(port),
        "DISCO_DATABASE_URL": own_database.app,
        "DISCO_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "DISCO_TOPIC_PREFIX": topic_prefix,
        "DISCO_KAFKA_SESSION_TIMEOUT_MS": "2000",
        "DISCO_KAFKA_HEARTBEAT_INTERVAL_MS": "300",
        # Small batches: many commits to die between.
        "DISCO_INGEST_BATCH_SIZE": "20",
        "DISCO_LOG_JSON": "true",
    }
    process = TrackerProcess(env, f"http://127.0.0.1:{port}", tmp_path / "tracker.log")
    try:
        yield process
    finally:
        process.stop()


async def _count(admin: str, sql: str, *args: object) -> int:
    conn = await asyncpg.connect(admin.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        return int(await conn.fetchval(sql, *args) or 0)
    finally:
        await conn.close()


async def test_a_tracker_killed_mid_stream_catches_up_with_nothing_lost_or_doubled(
    tracker_process: TrackerProcess,
    own_database: DatabaseUrls,
    kafka_bootstrap: str,
    topic_prefix: str,
) -> None:
    tenant = f"crash-{uuid.uuid4().hex[:8]}"
    start = utcnow() - timedelta(minutes=10)
    scenarios: list[Scenario] = [
        plan_scenario(tenant, start=start + timedelta(seconds=i)) for i in range(PLANS)
    ]
    total = sum(len(s.envelopes) for s in scenarios)
    admin = own_database.admin
    applied = "SELECT count(*) FROM tracker.events WHERE tenant_id = $1"
    tracker_process.start()
    await tracker_process.ready()

    async with BusClient(
        BusSettings(kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix)
    ) as bus:
        await bus.ensure_topics()

        async def publish_all() -> None:
            for scenario in scenarios:
                acks = [await bus.send_envelope(t, e) for t, e in scenario.envelopes]
                await asyncio.gather(*acks)
                await asyncio.sleep(0.03)  # a steady stream, not one burst

        publisher = asyncio.create_task(publish_all())
        at_kill = await eventually(
            lambda: _count(admin, applied, tenant), lambda n: n >= total // 4, timeout=60
        )
        tracker_process.kill()
        assert not publisher.done(), "the stream ended before the tracker was killed"
        await publisher

    tracker_process.start()
    await tracker_process.ready()
    await eventually(lambda: _count(admin, applied, tenant), lambda n: n >= total, timeout=90)

    assert at_kill < total
    assert await _count(admin, applied, tenant) == total
    counted = "SELECT sum(count) FROM tracker.event_counts WHERE tenant_id = $1"
    assert await _count(admin, counted, tenant) == total  # no envelope counted twice
    completed = (
        "SELECT count(*) FROM tracker.plans WHERE tenant_id = $1 AND status = 'completed' "
        "AND parent_plan_id IS NULL"
    )
    assert await _count(admin, completed, tenant) == PLANS
    started_once = (
        "SELECT count(*) FROM tracker.tasks WHERE tenant_id = $1 AND starts = 1 "
        "AND status = 'completed'"
    )
    assert await _count(admin, started_once, tenant) == PLANS  # each action started once
    tasks = "SELECT count(*) FROM tracker.tasks WHERE tenant_id = $1 AND status = 'completed'"
    assert await _count(admin, tasks, tenant) == PLANS * 5  # action, 3 carriers, goal
