"""Fixtures for the bus's integration tests: settings, a started client, helpers."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from disco.bus import BusClient, ReadRecord
from disco.settings import BusSettings
from disco_common.envelope import Envelope
from tests.fixtures.bus import read_records

# Short enough that a group join (about half the session timeout on Tansu)
# stays around a second, long enough not to flap on a busy two-core machine.
SESSION_TIMEOUT_MS = 2000


@pytest.fixture
def bus_settings(kafka_bootstrap: str, topic_prefix: str) -> BusSettings:
    """Settings for this test: its own topic prefix, short timeouts and backoffs."""
    return BusSettings(
        kafka_bootstrap=kafka_bootstrap,
        topic_prefix=topic_prefix,
        kafka_session_timeout_ms=SESSION_TIMEOUT_MS,
        kafka_heartbeat_interval_ms=300,
        kafka_fetch_max_wait_ms=20,
        bus_retry_backoff_ms=10,
        bus_retry_backoff_max_ms=50,
    )


@pytest.fixture
async def bus(bus_settings: BusSettings) -> AsyncIterator[BusClient]:
    """A started client with the five topics (and their DLQs) provisioned."""
    async with BusClient(bus_settings, name="tester") as client:
        await client.ensure_topics()
        yield client


class Recorder:
    """A handler that remembers what it was called with."""

    def __init__(self) -> None:
        self.envelopes: list[Envelope] = []
        self._changed = asyncio.Event()

    async def __call__(self, envelope: Envelope) -> None:
        self.envelopes.append(envelope)
        self._changed.set()

    @property
    def ids(self) -> list[str]:
        return [envelope.id for envelope in self.envelopes]

    async def wait_for(self, count: int, timeout: float = 20.0) -> list[Envelope]:
        """Wait until ``count`` envelopes arrived; fail the test after ``timeout``."""
        async with asyncio.timeout(timeout):
            while len(self.envelopes) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.envelopes


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


async def read_topic(
    bootstrap: str, name: str, count: int, timeout: float = 20.0
) -> list[ReadRecord]:
    """Read ``name`` from the beginning, without a group, until ``count`` records came.

    Returns what came within ``timeout`` (perhaps fewer: some tests check absence).
    """
    return await read_records(
        bootstrap,
        name,
        lambda records: len(records) >= count,
        timeout=timeout,
        drain=False,
        fail_on_timeout=False,
    )


async def committed_total(bootstrap: str, group: str, topic: str) -> int:
    """The sum of ``group``'s committed offsets over the partitions of ``topic``."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        await consumer.topics()
        total = 0
        for partition in consumer.partitions_for_topic(topic) or set():
            total += await consumer.committed(TopicPartition(topic, partition)) or 0
        return total
    finally:
        await consumer.stop()


_KILLABLE = Path(__file__).with_name("_killable_consumer.py")


def start_killable_consumer(
    settings: BusSettings, group: str, log: Path, block_at: int, batch_size: int | None = None
) -> subprocess.Popen[bytes]:
    """A consumer process (``_killable_consumer.py``) that logs what it handles to ``log``
    and blocks on the ``block_at``-th envelope (or batch of up to ``batch_size``)."""
    return subprocess.Popen(
        [
            sys.executable,
            str(_KILLABLE),
            settings.kafka_bootstrap,
            settings.topic_prefix,
            group,
            str(log),
            str(block_at),
            *([str(batch_size)] if batch_size is not None else []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
