"""``request(..., wait=...)``: the correlated response, or a clear timeout."""

from __future__ import annotations

import asyncio

import pytest

from disco.bus import BusClient, BusConsumer, CorrelationInUseError, RequestTimeout
from disco_common.envelope import ActionRequest, ActionResult, Envelope
from disco_common.topics import Topic


def _calculator(
    bus: BusClient, held: tuple[asyncio.Event, asyncio.Event] | None = None
) -> BusConsumer:
    """Answers ``add.requested``; with ``held`` (asked, release), it says it was asked,
    then waits to be released before answering."""
    consumer = BusConsumer(bus, "calculator")

    @consumer.on(Topic.ACTION_REQUESTS, "add.requested")
    async def add(envelope: Envelope) -> None:
        request = envelope.as_(ActionRequest)
        assert isinstance(request.data, dict)
        if held is not None:
            asked, release = held
            asked.set()
            await release.wait()
        await bus.respond(
            request.response_event,
            {"sum": request.data["a"] + request.data["b"]},
            correlation_id=request.correlation_id or request.id,
            topic=request.response_topic,
        )

    return consumer


async def test_request_with_wait_returns_the_correlated_response(bus: BusClient) -> None:
    async with _calculator(bus):
        answer = await bus.request(
            "add.requested", {"a": 2, "b": 3}, response_event="add.completed", wait=20
        )

    assert isinstance(answer, ActionResult)
    assert answer.type == "add.completed"
    assert answer.data == {"sum": 5}


async def test_concurrent_requests_each_get_their_own_response(bus: BusClient) -> None:
    async with _calculator(bus):
        answers = await asyncio.gather(
            *(
                bus.request(
                    "add.requested",
                    {"a": n, "b": 100},
                    response_event="add.completed",
                    correlation_id=f"corr-{n}",
                    wait=20,
                )
                for n in range(8)
            )
        )

    assert [(a.correlation_id, a.data) for a in answers] == [
        (f"corr-{n}", {"sum": n + 100}) for n in range(8)
    ]


async def test_request_without_an_answer_times_out_with_a_clear_error(bus: BusClient) -> None:
    with pytest.raises(RequestTimeout) as caught:
        await bus.request(
            "nobody.requested",
            {},
            response_event="nobody.answered",
            correlation_id="corr-lonely",
            wait=0.5,
        )

    message = str(caught.value)
    assert "'nobody.requested'" in message
    assert "corr-lonely" in message
    assert "'nobody.answered'" in message
    assert "0.5 s" in message
    assert isinstance(caught.value, TimeoutError)


async def test_the_reply_listener_starts_at_the_end_of_the_response_topic(bus: BusClient) -> None:
    # A response already on the topic before anyone waited must not be taken
    # for the answer: the listener positions at the end offsets first.
    await bus.respond("late.answered", {"stale": True}, correlation_id="corr-reused")

    with pytest.raises(RequestTimeout):
        await bus.request(
            "late.requested",
            {},
            response_event="late.answered",
            correlation_id="corr-reused",
            wait=1.0,
        )

    async with _calculator(bus):
        answer = await bus.request(
            "add.requested", {"a": 1, "b": 1}, response_event="add.completed", wait=20
        )
    assert answer.data == {"sum": 2}


async def test_a_response_for_another_tenant_is_passed_over_for_the_requests_own(
    bus: BusClient,
) -> None:
    # Anyone who reads action-requests can copy a correlation id: a response claiming
    # another tenant, published first, must not be taken for the answer.
    consumer = BusConsumer(bus, "impostor-then-calculator")

    @consumer.on(Topic.ACTION_REQUESTS, "add.requested")
    async def add(envelope: Envelope) -> None:
        request = envelope.as_(ActionRequest)
        for tenant, data in (("intruder", {"sum": -1}), (request.tenant_id, {"sum": 5})):
            await bus.respond(
                request.response_event,
                data,
                correlation_id=request.correlation_id or request.id,
                topic=request.response_topic,
                tenant_id=tenant,
            )

    async with consumer:
        answer = await bus.request(
            "add.requested",
            {"a": 2, "b": 3},
            response_event="add.completed",
            tenant_id="acme",
            wait=20,
        )

    assert (answer.tenant_id, answer.data) == ("acme", {"sum": 5})


async def test_two_tenants_may_wait_on_one_correlation_id_and_each_gets_its_own_answer(
    bus: BusClient,
) -> None:
    # A correlation id is the caller's choice (the gateway's publish bridge takes it from
    # any tenant): another tenant's use of the same one must neither fail nor answer it.
    async with _calculator(bus):
        answers = await asyncio.gather(
            *(
                bus.request(
                    "add.requested",
                    {"a": n, "b": 10},
                    response_event="add.completed",
                    correlation_id="order-1",
                    tenant_id=tenant,
                    wait=20,
                )
                for n, tenant in enumerate(("acme", "globex"))
            )
        )

    assert [(a.tenant_id, a.data) for a in answers] == [
        ("acme", {"sum": 10}),
        ("globex", {"sum": 11}),
    ]


async def test_one_tenant_waiting_twice_on_one_correlation_id_is_refused_at_once(
    bus: BusClient,
) -> None:
    asked, release = asyncio.Event(), asyncio.Event()
    async with _calculator(bus, held=(asked, release)):
        first = asyncio.create_task(
            bus.request(
                "add.requested",
                {"a": 1, "b": 2},
                response_event="add.completed",
                correlation_id="order-2",
                tenant_id="acme",
                wait=20,
            )
        )
        await asyncio.wait_for(asked.wait(), 20)
        with pytest.raises(CorrelationInUseError, match="'order-2' is already waiting"):
            await bus.request(
                "add.requested",
                {"a": 5, "b": 5},
                response_event="add.completed",
                correlation_id="order-2",
                tenant_id="acme",
                wait=20,
            )
        release.set()
        answer = await first

    assert answer.data == {"sum": 3}  # the first request is untouched
