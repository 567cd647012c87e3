"""At least once: nothing a consumer did not commit is lost when it dies."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from disco.bus import BusClient, BusConsumer
from disco.settings import BusSettings
from disco_common.topics import Topic
from tests.fixtures.waiting import eventually
from tests.integration.bus.conftest import Recorder, committed_total, start_killable_consumer


async def test_a_consumer_killed_before_committing_gets_every_uncommitted_envelope_again(
    bus_settings: BusSettings, recorder: Recorder, tmp_path: Path
) -> None:
    settings = bus_settings.model_copy(
        update={"kafka_partitions": 1, "bus_partition_concurrency": 1}
    )
    log = tmp_path / "handled.log"
    group = "mortal"
    async with BusClient(settings) as bus:
        await bus.ensure_topics([Topic.BUSINESS_FACTS])
        sent = [(await bus.announce("job.queued", {"n": n})).id for n in range(10)]

        process = start_killable_consumer(settings, group, log, block_at=4)
        try:
            await eventually(lambda: log.exists() and len(log.read_text().split()) >= 4, timeout=30)
        finally:
            process.send_signal(signal.SIGKILL)
            await asyncio.to_thread(process.wait, 10)
        first_run = log.read_text().split()
        committed = await committed_total(
            settings.kafka_bootstrap, bus.group_name(group), bus.topic_name(Topic.BUSINESS_FACTS)
        )

        consumer = BusConsumer(bus, group)
        consumer.add_handler(Topic.BUSINESS_FACTS, "*", recorder)
        async with consumer:
            await recorder.wait_for(len(sent) - committed, timeout=30)

    assert first_run == sent[:4]
    # The fourth envelope was being handled when the process died: never
    # committed, so it and everything after it come again; nothing is lost.
    assert committed <= 3
    assert recorder.ids == sent[committed:]
    assert set(first_run) | set(recorder.ids) == set(sent)
