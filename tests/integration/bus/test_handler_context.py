"""Inside a handler: the current envelope, and what publishing inherits from it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

import disco
from disco.bus import BusClient, BusConsumer
from disco.telemetry import add_handler_context
from disco_common.envelope import Envelope
from disco_common.topics import Topic
from tests.integration.bus.conftest import Recorder


async def test_publishing_inside_a_handler_inherits_causation_tenant_user_session_and_plan(
    bus: BusClient, recorder: Recorder
) -> None:
    seen: list[Envelope] = []
    relay = BusConsumer(bus, "relay")

    @relay.on(Topic.BUSINESS_FACTS, "order.placed")
    async def relay_order(envelope: Envelope) -> None:
        seen.append(disco.current_envelope())
        await bus.publish(Topic.SYSTEM_EVENTS, "order.relayed", {"ok": True})
        await bus.publish(Topic.SYSTEM_EVENTS, "order.audited", {}, tenant_id="other-tenant")

    watcher = BusConsumer(bus, "watcher")
    watcher.add_handler(Topic.SYSTEM_EVENTS, "*", recorder)
    cause = await bus.announce(
        "order.placed",
        {},
        tenant_id="acme",
        user_id="alice",
        session_id="s-1",
        plan_id="plan-1",
    )

    async with relay, watcher:
        relayed, audited = await recorder.wait_for(2)

    assert seen == [cause]
    assert relayed.causation_id == cause.id
    assert (relayed.tenant_id, relayed.user_id, relayed.session_id, relayed.plan_id) == (
        "acme",
        "alice",
        "s-1",
        "plan-1",
    )
    assert relayed.correlation_id is None
    assert audited.tenant_id == "other-tenant"
    assert audited.causation_id == cause.id


async def test_a_handler_continues_the_trace_of_the_envelope_it_handles(
    bus: BusClient, recorder: Recorder
) -> None:
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    relay = BusConsumer(bus, "tracer")

    @relay.on(Topic.BUSINESS_FACTS, "traced.happened")
    async def forward(envelope: Envelope) -> None:
        await bus.publish(Topic.SYSTEM_EVENTS, "traced.forwarded", {})

    watcher = BusConsumer(bus, "trace-watcher")
    watcher.add_handler(Topic.SYSTEM_EVENTS, "traced.forwarded", recorder)
    await bus.publish_envelope(
        Topic.BUSINESS_FACTS,
        Envelope(source="urn:test", type="traced.happened", traceparent=traceparent),
    )

    async with relay, watcher:
        [forwarded] = await recorder.wait_for(1)

    assert forwarded.traceparent is not None
    assert forwarded.traceparent.split("-")[1] == "0af7651916cd43dd8448eb211c80319c"


def test_the_current_envelope_outside_a_handler_is_a_clear_error() -> None:
    with pytest.raises(disco.NotInHandlerError, match="only work inside a bus handler"):
        disco.current_envelope()


class _Captured:
    """A structlog processor that keeps every line and writes none."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def __call__(self, logger: Any, method: str, event: Any) -> Any:
        self.lines.append(dict(event))
        raise structlog.DropEvent


@pytest.fixture
def captured() -> Iterator[_Captured]:
    saved = structlog.get_config()
    yield _Captured()
    structlog.configure(**saved)


@pytest.mark.parametrize("adds_fields", [True, False], ids=["disco-processors", "app-processors"])
async def test_a_handler_log_line_names_its_event_whether_structlog_adds_the_fields_or_not(
    bus: BusClient, captured: _Captured, adds_fields: bool
) -> None:
    # disco.configure_logging() installs add_handler_context: the fields are added when a
    # line is written, nothing is bound per message. An application's own structlog set-up
    # without it still gets them, bound as context variables while the handler runs.
    processors: list[Any] = [structlog.contextvars.merge_contextvars]
    if adds_fields:
        processors.append(add_handler_context)
    structlog.configure(processors=[*processors, captured], cache_logger_on_first_use=False)
    bound: list[dict[str, Any]] = []
    logged = asyncio.Event()
    consumer = BusConsumer(bus, f"logger-{adds_fields}")

    @consumer.on(Topic.BUSINESS_FACTS, "logged.happened")
    async def log_it(envelope: Envelope) -> None:
        bound.append(structlog.contextvars.get_contextvars())
        structlog.get_logger("test").info("handled", step=1)
        logged.set()

    sent = await bus.announce("logged.happened", {}, tenant_id="acme")
    async with consumer:
        await asyncio.wait_for(logged.wait(), 20)

    [line] = [line for line in captured.lines if line.get("event") == "handled"]
    assert (line["event_id"], line["event_type"], line["tenant_id"]) == (
        sent.id,
        "logged.happened",
        "acme",
    )
    assert line["step"] == 1
    assert ("event_id" in bound[0]) is not adds_fields
    assert "event_id" not in structlog.contextvars.get_contextvars()
