"""``publish``, ``send`` and ``request`` take envelope attributes from one typed definition."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime

import pytest

from disco.agents import Agent, PlatformContext
from disco.bus import BusClient, ContextAttributes, EnvelopeAttributes
from disco.testing import AgentTestKit
from disco_common.envelope import Envelope, EnvelopeError

HAPPENED = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)

# Every attribute but tenant and user, which the handled envelope hands down.
GIVEN: EnvelopeAttributes = {
    "correlation_id": "corr-1",
    "causation_id": "cause-1",
    "response_event": "order.checked",
    "response_topic": "action-results",
    "session_id": "session-1",
    "plan_id": "plan-1",
    "task_id": "task-1",
    "subject": "order/42",
    "payload_schema": "order.audited@1",
    "id": "env-1",
    "time": HAPPENED,
}


def _trace_id(traceparent: str | None) -> str | None:
    return None if traceparent is None else traceparent.split("-")[1]


def _var_keyword_annotation(method: object) -> object:
    parameters = inspect.signature(method).parameters.values()  # type: ignore[arg-type]
    (rest,) = [p for p in parameters if p.kind is inspect.Parameter.VAR_KEYWORD]
    return rest.annotation


def test_publish_send_and_announce_take_the_envelope_attributes_request_and_respond_the_rest() -> (
    None
):
    for full in (BusClient.publish, BusClient.send, BusClient.announce):
        assert _var_keyword_annotation(full) == "Unpack[EnvelopeAttributes]"
    for rest in (BusClient.request, BusClient.respond):
        assert _var_keyword_annotation(rest) == "Unpack[ContextAttributes]"
    assert ContextAttributes.__optional_keys__ < EnvelopeAttributes.__optional_keys__
    assert set(GIVEN) | {"tenant_id", "user_id"} == EnvelopeAttributes.__optional_keys__


async def test_publish_and_send_put_every_attribute_given_on_the_envelope_inherit_the_rest() -> (
    None
):
    agent = Agent("auditor", register=False)

    @agent.on_event(topic="business-facts", event_type="order.placed")
    async def audit(event: Envelope, context: PlatformContext) -> None:
        await context.bus.publish("business-facts", "order.audited", {"n": 1}, **GIVEN)
        acknowledged = await context.bus.send("business-facts", "order.audited", {"n": 1}, **GIVEN)
        await acknowledged

    async with AgentTestKit(agent, tenant_id="acme", user_id="ann") as kit:
        await kit.publish("business-facts", "order.placed", {"n": 1})

    published, sent = [p.envelope for p in kit.published if p.envelope.type == "order.audited"]
    # Each send is a span of its own once a tracer is installed (another test may have
    # installed one in this process): the same trace, not the same span.
    assert published.model_dump(exclude={"traceparent"}) == sent.model_dump(exclude={"traceparent"})
    assert _trace_id(published.traceparent) == _trace_id(sent.traceparent)
    for key, value in GIVEN.items():
        assert getattr(published, key) == value, key
    assert (published.tenant_id, published.user_id) == ("acme", "ann")


async def test_an_attribute_that_is_no_envelope_attribute_is_refused_by_name() -> None:
    agent = Agent("auditor", register=False)

    @agent.on_event(topic="business-facts", event_type="order.placed")
    async def audit(event: Envelope) -> None:
        return None

    async with AgentTestKit(agent) as kit:
        with pytest.raises(EnvelopeError, match="corelation_id"):
            await kit.publish("business-facts", "order.placed", {}, corelation_id="c-1")  # type: ignore[call-arg]
