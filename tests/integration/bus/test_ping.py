"""``ping`` follows the broker: false while it is down, true again when it returns."""

from __future__ import annotations

from collections.abc import Callable

from disco._dev.broker import EmbeddedBroker
from disco.bus import BusClient
from disco.settings import BusSettings
from tests.fixtures.waiting import eventually

# Tansu leaves on SIGTERM only once its clients have gone (5 s of grace, then
# SIGKILL): an outage need not wait for that.
OUTAGE_GRACE = 0.2


async def test_ping_goes_false_when_the_broker_stops_and_true_when_it_returns(
    broker_factory: Callable[[], EmbeddedBroker],
) -> None:
    broker = broker_factory()
    async with BusClient(BusSettings(kafka_bootstrap=broker.bootstrap)) as bus:
        assert await bus.ping(timeout=5)

        broker.stop(grace=OUTAGE_GRACE)
        assert not await bus.ping(timeout=2)

        broker.start()
        await eventually(lambda: bus.ping(timeout=1), timeout=30)
        await bus.announce("still.working", {})


async def test_ping_on_a_client_that_never_reached_the_broker_is_false(
    broker_factory: Callable[[], EmbeddedBroker],
) -> None:
    broker = broker_factory()
    broker.stop()
    bus = BusClient(BusSettings(kafka_bootstrap=broker.bootstrap))

    assert not await bus.ping(timeout=2)
    broker.start()
    await eventually(lambda: bus.ping(timeout=1), timeout=30)
    await bus.stop()
