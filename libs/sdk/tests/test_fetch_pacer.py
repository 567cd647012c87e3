"""``FetchPacer``: how long each fetch may wait, from the consumer's recent traffic."""

from __future__ import annotations

import asyncio
import inspect
from types import SimpleNamespace

import pytest
from aiokafka import TopicPartition
from aiokafka.consumer.fetcher import Fetcher
from pydantic import ValidationError

from disco.bus import BusClient, BusConsumer
from disco.bus._commits import OffsetCommitter
from disco.bus._polling import FetchPacer, fetch_options
from disco.settings import BusSettings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeFetcher:
    _fetch_max_wait_ms = 500


class FakeConsumer:
    def __init__(self) -> None:
        self._fetcher = FakeFetcher()


def test_the_wait_is_short_after_records_and_grows_with_idle_time_up_to_the_max() -> None:
    clock = Clock()
    pacer = FetchPacer(1, 100, 0.05, clock=clock)
    pacer.saw_records()

    waits = []
    for idle in (0.0, 0.1, 1.0, 1.5, 60.0):
        clock.now = 1000.0 + idle
        waits.append(pacer.wait_ms())

    assert waits == [1, 5, 50, 75, 100]


def test_a_record_resets_the_back_off() -> None:
    clock = Clock()
    pacer = FetchPacer(1, 100, 0.05, clock=clock)
    clock.now += 30
    assert pacer.wait_ms() == 100

    pacer.saw_records()

    assert pacer.wait_ms() == 1


def test_while_something_is_awaited_the_wait_stays_short() -> None:
    clock = Clock()
    pacer = FetchPacer(1, 100, 0.05, clock=clock)
    consumer = FakeConsumer()
    clock.now += 30
    pacer.attach(consumer)  # type: ignore[arg-type]
    assert consumer._fetcher._fetch_max_wait_ms == 100

    with pacer.urgent():
        clock.now += 30
        assert consumer._fetcher._fetch_max_wait_ms == 1
        pacer.apply()
        assert consumer._fetcher._fetch_max_wait_ms == 1

    # Once the answer came, the consumer backs off from then on.
    assert pacer.wait_ms() == 1
    clock.now += 30
    pacer.apply()
    assert consumer._fetcher._fetch_max_wait_ms == 100


def test_on_a_long_polling_broker_the_wait_never_changes() -> None:
    pacer = FetchPacer(500, 500, 0.05)

    assert not pacer.adaptive
    with pacer.urgent():
        assert pacer.wait_ms() == 500


def test_an_idle_consumer_looks_again_rarely() -> None:
    clock = Clock()
    pacer = FetchPacer(1, 100, 0.05, clock=clock)
    busy = pacer.apply()
    clock.now += 60

    assert (busy, pacer.apply()) == (0.05, 0.2)


def test_aiokafka_still_builds_each_fetch_from_the_attribute_the_pacer_sets() -> None:
    # The pacer sets Fetcher._fetch_max_wait_ms (aiokafka has no public way to change
    # a running consumer's wait): fail loudly if an upgrade renames it.
    assert "self._fetch_max_wait_ms = fetch_max_wait_ms" in inspect.getsource(Fetcher.__init__)
    assert "self._fetch_max_wait_ms" in inspect.getsource(Fetcher._get_actions_per_node)


def test_fetch_waits_default_per_broker_kind_and_settings_override_them() -> None:
    defaults = BusSettings()
    assert defaults.fetch_waits("embedded") == (1, 100)
    assert defaults.fetch_waits("kafka") == (500, 500)

    tuned = BusSettings(kafka_fetch_min_wait_ms=2, kafka_fetch_max_wait_ms=50)
    assert tuned.fetch_waits("embedded") == (2, 50)
    assert tuned.fetch_waits("kafka") == (2, 50)
    assert BusSettings(kafka_fetch_max_wait_ms=20).fetch_waits("kafka") == (20, 20)


def test_commit_interval_defaults_per_broker_kind_and_the_setting_overrides_it() -> None:
    defaults = BusSettings()
    assert defaults.commit_interval_ms("embedded") == 0
    assert defaults.commit_interval_ms("kafka") == 100

    tuned = BusSettings(bus_commit_interval_ms=25)
    assert tuned.commit_interval_ms("embedded") == 25
    assert tuned.commit_interval_ms("kafka") == 25
    assert BusSettings(bus_commit_interval_ms=0).commit_interval_ms("kafka") == 0


@pytest.mark.parametrize(("kind", "commits"), [("embedded", 2), ("kafka", 1)])
async def test_the_committer_spaces_commits_only_on_kafka(kind: str, commits: int) -> None:
    # Two records handled a few loop turns apart: on the embedded broker each is
    # committed at once; on Kafka the second waits out the 100 ms interval.
    tp = TopicPartition("t", 0)
    settings = BusSettings(kafka_broker_kind=kind)  # type: ignore[arg-type]
    committed: list[dict[TopicPartition, int]] = []

    class Consumer:
        def assignment(self) -> set[TopicPartition]:
            return {tp}

        async def commit(self, offsets: dict[TopicPartition, int]) -> None:
            committed.append(dict(offsets))

    class Owner:
        group = "g"
        stopping = False
        client = SimpleNamespace(settings=settings)

    committer = OffsetCommitter(Owner(), fail=pytest.fail)  # type: ignore[arg-type]
    committer.start(Consumer())  # type: ignore[arg-type]
    try:
        committer.record_done(tp, 0)
        for _ in range(20):
            await asyncio.sleep(0)
        committer.record_done(tp, 1)
        for _ in range(20):
            await asyncio.sleep(0)
        assert committed[:commits] == [{tp: 1}, {tp: 2}][:commits]
        assert len(committed) == commits
    finally:
        await committer.stop()


def test_waits_the_embedded_broker_cannot_serve_are_refused() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        BusSettings(kafka_fetch_max_wait_ms=0)
    with pytest.raises(ValidationError, match="must not exceed"):
        BusSettings(kafka_fetch_min_wait_ms=50, kafka_fetch_max_wait_ms=10)


def test_fetch_settings_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCO_KAFKA_BROKER_KIND", "kafka")
    monkeypatch.setenv("DISCO_KAFKA_FETCH_MAX_WAIT_MS", "250")

    settings = BusSettings()

    assert (settings.kafka_broker_kind, settings.fetch_waits("kafka")) == ("kafka", (250, 250))


@pytest.mark.parametrize(
    ("kind", "floor", "waits"),
    [
        ("embedded", None, (1, 100)),
        ("embedded", 50, (50, 100)),
        ("embedded", 500, (500, 500)),
        ("kafka", 100, (500, 500)),  # long-polling: the floor is below the waits anyway
    ],
)
async def test_a_wait_floor_raises_the_waits_below_it(
    kind: str, floor: int | None, waits: tuple[int, int]
) -> None:
    settings = BusSettings(kafka_broker_kind=kind)

    options = await fetch_options(settings, floor_ms=floor)
    pacer = options.pacer()

    assert (pacer.min_wait_ms, pacer.max_wait_ms) == waits
    assert options.consumer["fetch_max_wait_ms"] == waits[1]  # the first fetch waits longest


async def test_a_readers_fetch_options_come_from_the_settings_in_one_derivation() -> None:
    settings = BusSettings(
        kafka_broker_kind="embedded",
        kafka_bootstrap="127.0.0.1:1",
        kafka_client_id="reader",
        kafka_max_poll_records=300,
        kafka_fetch_backoff_ratio=0.1,
    )

    options = await fetch_options(settings)

    assert dict(options.consumer) == {
        **settings.kafka_connection_options(),
        "fetch_max_wait_ms": 100,
        "max_poll_records": 300,
    }
    assert (options.min_wait_ms, options.max_wait_ms, options.backoff_ratio) == (1, 100, 0.1)


async def test_a_group_members_fetch_options_add_its_session_timing() -> None:
    settings = BusSettings(
        kafka_broker_kind="kafka",
        kafka_session_timeout_ms=40_000,
        kafka_heartbeat_interval_ms=2_000,
        kafka_request_timeout_ms=30_000,
        kafka_max_poll_records=300,
    )

    options = await fetch_options(settings, group=True, min_poll_records=1000)

    assert options.consumer["session_timeout_ms"] == 40_000
    assert options.consumer["heartbeat_interval_ms"] == 2_000
    # aiokafka refuses a request timeout a session could outlive.
    assert options.consumer["request_timeout_ms"] == 45_000
    assert options.consumer["max_poll_records"] == 1000  # a batch handler's batch, at least


def test_a_consumer_refuses_a_wait_floor_below_one_millisecond() -> None:
    bus = BusClient(BusSettings(kafka_bootstrap="127.0.0.1:1"), name="floor")
    with pytest.raises(ValueError, match="at least 1"):
        BusConsumer(bus, "floored", fetch_wait_floor_ms=0)
