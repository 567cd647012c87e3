"""An agent started with ``DISCO_METRICS_PORT`` serves exact counts on ``/metrics``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families

from disco import Agent, PlatformContext
from disco._dev.ports import free_port
from disco.bus import BusClient
from disco.settings import BusSettings
from disco.testing import InMemoryMemory
from disco_common.envelope import Envelope
from disco_common.topics import Topic
from tests.fixtures.waiting import eventually

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def _scrape(port: int) -> Samples:
    async with httpx.AsyncClient() as http:
        response = await http.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    response.raise_for_status()
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def _value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, have), v in samples.items() if n == name and wanted <= have)


def _agent(name: str, settings: BusSettings) -> Agent:
    return Agent(
        name,
        bus_settings=settings,
        register=False,
        validate_requests=False,
        memory=InMemoryMemory(),
    )


async def test_metrics_count_consumed_produced_failed_and_dead_lettered_exactly(
    agent_settings: BusSettings,
) -> None:
    port = free_port()
    settings = agent_settings.model_copy(
        update={"metrics_port": port, "metrics_lag_interval_seconds": 0.2}
    )
    name = f"metered-{uuid.uuid4().hex[:6]}"
    agent = _agent(name, settings)

    @agent.on_event(Topic.BUSINESS_FACTS, "m.ok")
    async def ok(event: Envelope, context: PlatformContext) -> None:
        await context.bus.publish(Topic.BUSINESS_FACTS, "m.echoed", {"of": event.id})

    @agent.on_event(Topic.BUSINESS_FACTS, "m.fail")
    async def fail(event: Envelope) -> None:
        raise RuntimeError("always fails")

    async with BusClient(agent_settings, name="metrics-script") as bus:
        await bus.ensure_topics()
        async with agent:
            await agent.wait_ready(30)
            for n in range(5):
                await bus.publish(Topic.BUSINESS_FACTS, "m.ok", {"n": n})
            for n in range(2):
                await bus.publish(Topic.BUSINESS_FACTS, "m.fail", {"n": n})
            await bus.send_record(
                bus.topic_name(Topic.BUSINESS_FACTS),
                b"k",
                b"{not an envelope",
                [("ce_type", b"m.ok")],
            )

            async def settled() -> Samples | None:
                samples = await _scrape(port)
                done = (
                    _value(samples, "disco_bus_dead_lettered_total", group=name) == 3
                    and _value(samples, "disco_bus_produced_total", client=name) == 5
                    and _value(samples, "disco_bus_handlers_in_flight", group=name) == 0
                )
                return samples if done else None

            samples = await eventually(settled, timeout=60, interval=0.2, what="the scripted run")

    facts = Topic.BUSINESS_FACTS.value
    assert _value(samples, "disco_bus_consumed_total", group=name, event_type="m.ok") == 5
    assert _value(samples, "disco_bus_consumed_total", group=name, event_type="m.fail") == 2
    assert _value(samples, "disco_bus_consumed_total", group=name) == 7  # not the malformed one
    assert (
        _value(samples, "disco_bus_produced_total", client=name, topic=facts, event_type="m.echoed")
        == 5
    )
    attempts = settings.bus_retry_attempts
    assert (
        _value(samples, "disco_bus_handler_failures_total", group=name, error_type="RuntimeError")
        == 2 * attempts
    )
    assert _value(samples, "disco_bus_handler_retries_total", group=name) == 2 * (attempts - 1)
    assert (
        _value(samples, "disco_bus_dead_lettered_total", group=name, error_type="RuntimeError") == 2
    )
    assert (
        _value(samples, "disco_bus_dead_lettered_total", group=name, error_type="EnvelopeError")
        == 1
    )
    assert (
        _value(samples, "disco_bus_handler_duration_seconds_count", group=name, event_type="m.ok")
        == 5
    )
    # The metrics server stopped with the (only) agent using it.
    async with httpx.AsyncClient() as http:
        try:
            await http.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
        except httpx.TransportError:
            pass
        else:
            raise AssertionError("the metrics server still answers after the agent stopped")


async def test_consumer_lag_rises_while_the_agent_is_held_and_falls_after(
    agent_settings: BusSettings,
) -> None:
    port = free_port()
    settings = agent_settings.model_copy(
        update={"metrics_port": port, "metrics_lag_interval_seconds": 0.2}
    )
    name = f"lagging-{uuid.uuid4().hex[:6]}"
    agent = _agent(name, settings)
    release = asyncio.Event()
    handled = 0

    @agent.on_event(Topic.BUSINESS_FACTS, "m.slow")
    async def slow(event: Envelope) -> None:
        nonlocal handled
        await release.wait()  # the agent is paused until the test releases it
        handled += 1

    async def lag() -> float:
        return _value(await _scrape(port), "disco_bus_consumer_lag", group=name)

    async with BusClient(agent_settings, name="lag-script") as bus:
        await bus.ensure_topics()
        async with agent:
            await agent.wait_ready(30)
            # One plan: one key, one partition, handled strictly in order.
            for n in range(12):
                await bus.publish(Topic.BUSINESS_FACTS, "m.slow", {"n": n}, plan_id="plan-1")
            high = await eventually(
                lambda: _lag_reaches(lag, lambda value: value >= 12),
                timeout=30,
                interval=0.2,
                what="a lag of 12 while the handler is held",
            )
            release.set()
            await eventually(
                lambda: _lag_reaches(lag, lambda value: value == 0),
                timeout=30,
                interval=0.2,
                what="the lag back to 0 once released",
            )

    assert high >= 12
    assert handled == 12


async def _lag_reaches(
    lag: Callable[[], Awaitable[float]], wanted: Callable[[float], bool]
) -> float | None:
    value = await lag()
    # The value itself may be 0: answer it wrapped so that a match is truthy.
    return (value or 0.0001) if wanted(value) else None
