"""Adaptive polling: short fetch waits while records flow or a reply is awaited,
longer ones while idle, and nothing lost or doubled across the changes."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

from disco.bus import BusClient, BusConsumer, ReplyListener, TopicReader
from disco.bus._polling import broker_kind
from disco.settings import BusSettings
from disco_common.envelope import ActionRequest, Envelope
from disco_common.topics import Topic
from tests.fixtures.waiting import eventually
from tests.integration.bus.conftest import Recorder


def backing_off_fast(settings: BusSettings) -> BusSettings:
    """``settings`` with an idle wait reached within a fraction of a second."""
    return settings.model_copy(
        update={
            "kafka_fetch_min_wait_ms": 1,
            "kafka_fetch_max_wait_ms": 300,
            "kafka_fetch_backoff_ratio": 1.0,
        }
    )


@contextlib.asynccontextmanager
async def _asking(settings: BusSettings) -> AsyncIterator[tuple[BusClient, ReplyListener]]:
    """A client and a started reply listener on action-results (stopped afterwards)."""
    async with BusClient(settings, name="asker") as bus:
        await bus.ensure_topics([Topic.ACTION_RESULTS])
        listener = ReplyListener(settings, Topic.ACTION_RESULTS.value)
        await listener.start()
        try:
            yield bus, listener
        finally:
            await listener.stop()


async def test_bursts_between_idle_gaps_reach_the_handler_exactly_once(
    bus_settings: BusSettings, recorder: Recorder
) -> None:
    settings = backing_off_fast(bus_settings)
    async with BusClient(settings, name="bursts") as bus:
        consumer = BusConsumer(bus, "burst-reader")
        consumer.add_handler(Topic.BUSINESS_FACTS, "burst.happened", recorder)
        async with consumer:
            await consumer.wait_assigned(20)
            sent: list[str] = []
            for burst in range(4):
                # Idle first: the consumer backs off to its longest wait.
                await eventually(lambda: consumer.fetch_wait_ms == 300)
                acks = [
                    await bus.send(
                        Topic.BUSINESS_FACTS,
                        "burst.happened",
                        {"burst": burst, "n": n},
                        plan_id=f"plan-{n % 5}",
                    )
                    for n in range(40)
                ]
                sent += [envelope.id for envelope in await asyncio.gather(*acks)]
                await recorder.wait_for(len(sent))
                # While records flow the consumer fetches with its shortest wait.
                assert (consumer.fetch_wait_ms or 0) < 300

    assert sorted(recorder.ids) == sorted(sent)
    assert len(recorder.ids) == len(set(recorder.ids))


async def _echoing(bus: BusClient, answered: list[str]) -> BusConsumer:
    responder = BusConsumer(bus, "slow-to-wake")

    @responder.on(Topic.ACTION_REQUESTS, "echo.requested")
    async def echo(envelope: Envelope) -> None:
        request = envelope.as_(ActionRequest)
        answered.append(request.id)
        await bus.respond(
            request.response_event,
            request.data,
            correlation_id=request.correlation_id or request.id,
        )

    return responder


async def test_a_listener_nobody_waits_on_goes_quiet_and_a_request_after_gets_its_reply_once(
    bus_settings: BusSettings,
) -> None:
    settings = backing_off_fast(bus_settings)
    answered: list[str] = []
    async with BusClient(settings, name="asker") as bus:
        responder = await _echoing(bus, answered)
        await bus.ensure_topics([Topic.ACTION_REQUESTS, Topic.ACTION_RESULTS])
        listener = ReplyListener(settings, Topic.ACTION_RESULTS.value)
        async with responder:
            await responder.wait_assigned(20)
            await listener.start()
            try:
                replies = []
                for n in range(3):
                    # Nobody waits: the listener stops fetching (no fetch is held at
                    # the broker for the idle wait when the next request goes out).
                    await eventually(lambda: listener.quiet)
                    async with listener.expect(f"corr-{n}") as reply:
                        assert not listener.quiet
                        assert listener.fetch_wait_ms == 1  # awaited: short waits from now
                        await bus.request(
                            "echo.requested",
                            {"n": n},
                            response_event="echo.completed",
                            correlation_id=f"corr-{n}",
                        )
                        replies.append(await asyncio.wait_for(reply, 20))
            finally:
                await listener.stop()

    assert [(r.correlation_id, r.data) for r in replies] == [
        (f"corr-{n}", {"n": n}) for n in range(3)
    ]
    assert len(answered) == 3


async def test_what_was_written_while_the_listener_was_quiet_is_not_taken_for_a_reply(
    bus_settings: BusSettings,
) -> None:
    settings = backing_off_fast(bus_settings)
    async with _asking(settings) as (bus, listener):
        await eventually(lambda: listener.quiet)
        # An answer for a correlation id nobody waits on yet: for nobody here.
        await bus.respond("echo.completed", {"stale": True}, correlation_id="corr-late")
        async with listener.expect("corr-late") as reply:
            await bus.respond("echo.completed", {"stale": False}, correlation_id="corr-late")
            answer = await asyncio.wait_for(reply, 20)
        # Quiet again, and woken again by the next waiter.
        await eventually(lambda: listener.quiet)
        async with listener.expect("corr-next") as reply:
            await bus.respond("echo.completed", {"n": 2}, correlation_id="corr-next")
            following = await asyncio.wait_for(reply, 20)

    assert answer.data == {"stale": False}
    assert following.data == {"n": 2}


async def test_a_listener_on_a_long_polling_broker_never_goes_quiet(
    bus_settings: BusSettings,
) -> None:
    # Kafka answers a fetch as soon as a record arrives: one fixed wait, nothing to skip.
    settings = bus_settings.model_copy(update={"kafka_broker_kind": "kafka"})
    async with _asking(settings) as (bus, listener):
        async with listener.expect("corr-1") as reply:
            await bus.respond("echo.completed", {"n": 1}, correlation_id="corr-1")
            await asyncio.wait_for(reply, 20)
        await asyncio.sleep(0.3)  # well past when an adaptive listener goes quiet
        assert not listener.quiet


async def test_the_embedded_broker_is_recognised_and_gets_short_busy_waits(
    bus_settings: BusSettings,
) -> None:
    kind = await broker_kind(bus_settings.model_copy(update={"kafka_broker_kind": "auto"}))

    if os.environ.get("DISCO_KAFKA_BOOTSTRAP"):
        assert kind in {"embedded", "kafka"}  # whatever the external broker is
    else:
        assert kind == "embedded"
        assert BusSettings().fetch_waits(kind) == (1, 100)


async def test_a_consumer_with_a_wait_floor_never_fetches_faster_and_loses_nothing(
    bus_settings: BusSettings, recorder: Recorder
) -> None:
    settings = backing_off_fast(bus_settings)
    async with BusClient(settings, name="trailing") as bus:
        consumer = BusConsumer(bus, "trailing-reader", fetch_wait_floor_ms=200)
        consumer.add_handler(Topic.BUSINESS_FACTS, "trail.happened", recorder)
        async with consumer:
            await consumer.wait_assigned(20)
            sent: list[str] = []
            waits: set[int | None] = {consumer.fetch_wait_ms}
            for burst in range(3):
                acks = [
                    await bus.send(Topic.BUSINESS_FACTS, "trail.happened", {"burst": burst, "n": n})
                    for n in range(30)
                ]
                sent += [envelope.id for envelope in await asyncio.gather(*acks)]
                await recorder.wait_for(len(sent))
                waits.add(consumer.fetch_wait_ms)
                await eventually(lambda: consumer.fetch_wait_ms == 300)  # idle: the longest

    assert sorted(recorder.ids) == sorted(sent)
    assert len(recorder.ids) == len(set(recorder.ids))
    # While records flowed the wait stayed at the floor, never at the settings' 1 ms.
    assert min(wait or 0 for wait in waits) >= 200


async def test_a_batch_of_answers_written_while_the_listener_was_quiet_is_not_taken(
    bus_settings: BusSettings,
) -> None:
    # Several answers in one batch: the embedded broker's ListOffsets says the end is
    # the start of that batch plus one, so a listener positioned by it would read the
    # rest of the batch as if it were new.
    settings = backing_off_fast(bus_settings.model_copy(update={"kafka_partitions": 1}))
    async with _asking(settings) as (bus, listener):
        await eventually(lambda: listener.quiet)
        stale = [
            await bus.send(
                Topic.ACTION_RESULTS, "echo.completed", {"stale": n}, correlation_id="corr-1"
            )
            for n in range(5)
        ]
        await asyncio.gather(*stale)
        async with listener.expect("corr-1") as reply:
            await bus.respond("echo.completed", {"stale": None}, correlation_id="corr-1")
            answer = await asyncio.wait_for(reply, 20)

    assert answer.data == {"stale": None}


def _counting_fetches(listener: ReplyListener) -> list[int]:
    """A one-element list counting the fetch requests ``listener`` sends from now on."""
    client = listener._reader._consumer._client  # type: ignore[union-attr]
    sent = client.send
    fetches = [0]

    async def send(node_id: int, request: object, **kwargs: object) -> object:
        if getattr(request, "API_KEY", None) == 1:  # Fetch
            fetches[0] += 1
        return await sent(node_id, request, **kwargs)

    client.send = send
    return fetches


async def test_a_quiet_listener_sends_no_fetch_until_a_waiter_comes(
    bus_settings: BusSettings,
) -> None:
    settings = backing_off_fast(bus_settings)
    async with _asking(settings) as (bus, listener):
        await eventually(lambda: listener.quiet)
        # (A fetch sent just before the pause may still be at the broker: it was
        # sent already, and none follows it.)
        fetches = _counting_fetches(listener)
        # Longer than the idle wait (300 ms): a listener still fetching would have
        # sent at least one fetch meanwhile.
        await asyncio.sleep(1.0)
        assert listener.quiet
        assert fetches[0] == 0
        async with listener.expect("corr-1") as reply:
            await bus.respond("echo.completed", {"n": 1}, correlation_id="corr-1")
            await asyncio.wait_for(reply, 20)
        # Woken, it fetched again (the count sees the listener's fetches).
        assert fetches[0] > 0


async def test_answers_written_in_one_batch_to_waiters_that_woke_a_quiet_listener_all_arrive(
    bus_settings: BusSettings,
) -> None:
    settings = backing_off_fast(bus_settings.model_copy(update={"kafka_partitions": 1}))
    waiting = 8
    async with _asking(settings) as (bus, listener):
        for round_ in range(2):
            await eventually(lambda: listener.quiet)
            async with contextlib.AsyncExitStack() as stack:
                # Several waiters arrive together at a quiet listener.
                replies = await asyncio.gather(
                    *(
                        stack.enter_async_context(listener.expect(f"corr-{round_}-{n}"))
                        for n in range(waiting)
                    )
                )
                assert not listener.quiet
                # Their answers go out without a wait between them: one batch.
                acks = [
                    await bus.send(
                        Topic.ACTION_RESULTS,
                        "echo.completed",
                        {"n": n},
                        correlation_id=f"corr-{round_}-{n}",
                    )
                    for n in range(waiting)
                ]
                await asyncio.gather(*acks)
                answers = await asyncio.wait_for(asyncio.gather(*replies), 20)
            assert [answer.data for answer in answers] == [{"n": n} for n in range(waiting)]


def _fetches_in_flight(reader: TopicReader) -> list[int]:
    """A one-element list counting the fetch requests of ``reader`` not answered yet."""
    client = reader._require()._client
    sent = client.send
    in_flight = [0]

    async def send(node_id: int, request: object, **kwargs: object) -> object:
        fetch = getattr(request, "API_KEY", None) == 1
        in_flight[0] += fetch
        try:
            return await sent(node_id, request, **kwargs)
        finally:
            in_flight[0] -= fetch

    client.send = send
    return in_flight


async def test_a_reader_woken_at_the_end_of_a_grown_log_does_not_take_it_for_a_restart(
    bus_settings: BusSettings,
) -> None:
    # Woken past records written while it was paused, the reader's position lies beyond
    # the end its consumer last fetched; the restart check (every read here) must
    # compare with the end the wake found, or it reads the whole log again.
    settings = bus_settings.model_copy(update={"kafka_partitions": 1})
    async with BusClient(settings, name="writer") as bus:
        await bus.ensure_topics([Topic.ACTION_RESULTS])
        async with TopicReader(
            settings, [Topic.ACTION_RESULTS.value], realign_interval=0.0
        ) as reader:
            in_flight = _fetches_in_flight(reader)
            assert await reader.read(timeout=0.3) == []  # fetched once: an end is known
            reader.pause()
            # A fetch sent before the pause comes back with the end as it was then.
            await eventually(lambda: in_flight[0] == 0)
            written = [
                await bus.send(
                    Topic.ACTION_RESULTS, "echo.completed", {"n": n}, correlation_id="stale"
                )
                for n in range(5)
            ]
            await asyncio.gather(*written)
            await reader.resume_at_end()
            # Read at once, as a woken listener does: before any fetch of its own.
            reading = asyncio.create_task(reader.read(timeout=5.0))
            after = await bus.publish(
                Topic.ACTION_RESULTS, "echo.completed", {"n": "after"}, correlation_id="new"
            )
            read = await reading

    assert [record.envelope().id for record in read] == [after.id]
