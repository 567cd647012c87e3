"""Graceful stop: running handlers finish, their offsets are committed, the group is left."""

from __future__ import annotations

import asyncio

import pytest

from disco.bus import BusClient, BusConsumer
from disco_common.envelope import Envelope
from disco_common.topics import Topic
from tests.integration.bus.conftest import Recorder, committed_total


async def test_stop_lets_the_running_handler_finish_and_commits_it(
    bus: BusClient, kafka_bootstrap: str
) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    finished: list[str] = []

    async def slow(envelope: Envelope) -> None:
        started.set()
        await release.wait()
        finished.append(envelope.id)

    sent = await bus.announce("report.requested", {})
    consumer = BusConsumer(bus, "slowpoke")
    consumer.add_handler(Topic.BUSINESS_FACTS, "report.requested", slow)
    await consumer.start()
    async with asyncio.timeout(20):
        await started.wait()

    stopping = asyncio.create_task(consumer.stop(grace=10))
    # Nothing signals "stop() is waiting": give it a moment in which a wrong stop()
    # (one not waiting for the handler) would return, and check it did not.
    done, _ = await asyncio.wait({stopping}, timeout=0.2)
    assert not done  # waiting for the handler in flight
    release.set()
    await asyncio.wait_for(stopping, 20)

    assert finished == [sent.id]
    committed = await committed_total(
        kafka_bootstrap, bus.group_name("slowpoke"), bus.topic_name(Topic.BUSINESS_FACTS)
    )
    assert committed == 1


async def test_a_handler_still_running_after_the_grace_period_is_redelivered_later(
    bus: BusClient, recorder: Recorder
) -> None:
    started = asyncio.Event()

    async def stuck(envelope: Envelope) -> None:
        started.set()
        await asyncio.Event().wait()

    sent = await bus.announce("export.requested", {})
    first = BusConsumer(bus, "exporter")
    first.add_handler(Topic.BUSINESS_FACTS, "export.requested", stuck)
    await first.start()
    async with asyncio.timeout(20):
        await started.wait()
    await asyncio.wait_for(first.stop(grace=0.2), 20)

    second = BusConsumer(bus, "exporter")
    second.add_handler(Topic.BUSINESS_FACTS, "export.requested", recorder)
    async with second:
        await recorder.wait_for(1)

    assert recorder.ids == [sent.id]


async def test_run_returns_after_stop_and_stop_twice_is_harmless(
    bus: BusClient, recorder: Recorder
) -> None:
    consumer = BusConsumer(bus, "runner")
    consumer.add_handler(Topic.BUSINESS_FACTS, "*", recorder)
    running = asyncio.create_task(consumer.run())
    await bus.announce("tick.happened", {})
    await recorder.wait_for(1)

    await consumer.stop()
    await consumer.stop()

    await asyncio.wait_for(running, 10)
    assert running.exception() is None


class Meltdown(BaseException):
    """Not an ordinary handler failure: nothing should retry or dead-letter it."""


async def test_run_raises_the_fatal_error_that_stopped_the_consumer(bus: BusClient) -> None:
    async def explode(envelope: Envelope) -> None:
        raise Meltdown("the reactor is gone")

    await bus.announce("reactor.checked", {})
    consumer = BusConsumer(bus, "doomed")
    consumer.add_handler(Topic.BUSINESS_FACTS, "reactor.checked", explode)

    with pytest.raises(Meltdown, match="the reactor is gone"):
        await asyncio.wait_for(consumer.run(), 30)
    assert isinstance(consumer.failure, Meltdown)
    assert consumer.assignment == set()
