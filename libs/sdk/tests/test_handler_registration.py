"""Handlers are checked when registered, not when the first message arrives."""

from __future__ import annotations

import pytest

from disco.bus import Batch, BusClient, BusConsumer, HandlerRegistrationError
from disco.settings import BusSettings
from disco_common.envelope import Envelope


@pytest.fixture
def consumer() -> BusConsumer:
    return BusConsumer(BusClient(BusSettings()), "agent")


async def handle(envelope: Envelope) -> None:
    del envelope


def test_the_decorator_returns_the_function_unchanged(consumer: BusConsumer) -> None:
    decorated = consumer.on("business-facts", "order.placed")(handle)

    assert decorated is handle
    assert consumer.topics == ["business-facts"]


def test_a_plain_function_is_refused(consumer: BusConsumer) -> None:
    def not_async(envelope: Envelope) -> None:
        del envelope

    with pytest.raises(HandlerRegistrationError, match="async def"):
        consumer.add_handler("business-facts", "order.placed", not_async)  # type: ignore[arg-type]


def test_a_handler_that_cannot_take_the_envelope_is_refused(consumer: BusConsumer) -> None:
    async def two_arguments(envelope: Envelope, other: int) -> None:
        del envelope, other

    with pytest.raises(HandlerRegistrationError, match="one positional argument"):
        consumer.add_handler("business-facts", "order.placed", two_arguments)  # type: ignore[arg-type]


def test_a_second_handler_for_the_same_topic_and_type_is_refused_naming_the_first(
    consumer: BusConsumer,
) -> None:
    consumer.add_handler("business-facts", "order.placed", handle)

    async def other(envelope: Envelope) -> None:
        del envelope

    with pytest.raises(HandlerRegistrationError, match=r"handle already handles 'order.placed'"):
        consumer.add_handler("business-facts", "order.placed", other)


def test_an_invalid_event_type_is_refused(consumer: BusConsumer) -> None:
    with pytest.raises(HandlerRegistrationError, match="not valid"):
        consumer.add_handler("business-facts", "has spaces", handle)


def test_a_dead_letter_topic_cannot_get_a_handler(consumer: BusConsumer) -> None:
    with pytest.raises(HandlerRegistrationError, match="dead-letter"):
        consumer.add_handler("business-facts.dlq", "*", handle)


def test_a_group_that_is_not_an_agent_name_is_refused() -> None:
    with pytest.raises(ValueError, match="consumer group"):
        BusConsumer(BusClient(BusSettings()), "no spaces")


async def test_starting_without_handlers_says_to_register_some(consumer: BusConsumer) -> None:
    with pytest.raises(Exception, match="has no handlers"):
        await consumer.start()


async def test_a_registered_handler_can_be_called_directly_without_a_broker(
    consumer: BusConsumer,
) -> None:
    seen: list[str] = []

    @consumer.on("business-facts", "order.placed")
    async def record(envelope: Envelope) -> None:
        seen.append(envelope.id)

    envelope = Envelope(source="urn:test", type="order.placed")
    await record(envelope)

    assert seen == [envelope.id]


async def apply(batch: Batch) -> None:
    del batch


def test_a_batch_decorator_returns_the_function_unchanged(consumer: BusConsumer) -> None:
    decorated = consumer.on_batch("system-events", max_records=100, linger_ms=20)(apply)

    assert decorated is apply
    assert consumer.topics == ["system-events"]


def test_a_topic_takes_either_a_batch_handler_or_handlers_per_type(consumer: BusConsumer) -> None:
    consumer.add_batch_handler("system-events", apply)
    consumer.add_handler("business-facts", "order.placed", handle)

    with pytest.raises(HandlerRegistrationError, match=r"apply takes every envelope"):
        consumer.add_handler("system-events", "task.started", handle)
    with pytest.raises(HandlerRegistrationError, match=r"per event type \(order.placed\)"):
        consumer.add_batch_handler("business-facts", apply)
    with pytest.raises(HandlerRegistrationError, match=r"apply already takes 'system-events'"):
        consumer.add_batch_handler("system-events", apply)


def test_a_batch_handler_must_be_async_and_take_one_batch(consumer: BusConsumer) -> None:
    def not_async(batch: Batch) -> None:
        del batch

    async def two_arguments(batch: Batch, other: int) -> None:
        del batch, other

    with pytest.raises(HandlerRegistrationError, match="`async def` taking one batch"):
        consumer.add_batch_handler("system-events", not_async)  # type: ignore[arg-type]
    with pytest.raises(HandlerRegistrationError, match="one positional argument, the batch"):
        consumer.add_batch_handler("system-events", two_arguments)  # type: ignore[arg-type]
    with pytest.raises(HandlerRegistrationError, match="dead-letter topic"):
        consumer.add_batch_handler("system-events.dlq", apply)


@pytest.mark.parametrize(
    ("max_records", "linger_ms", "problem"),
    [(0, 0, "max_records"), (100_001, 0, "max_records"), (10, -1, "linger_ms")],
)
def test_batch_sizes_and_lingers_out_of_range_are_refused(
    consumer: BusConsumer, max_records: int, linger_ms: int, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        consumer.add_batch_handler(
            "system-events", apply, max_records=max_records, linger_ms=linger_ms
        )
