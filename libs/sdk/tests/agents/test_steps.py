"""Journaled steps (``disco.step``) in handlers run by ``disco.testing``: a step's result
is recorded before the handler goes on, and a redelivered envelope gets it back
without running the step again; it runs again only when the handler died between
the effect and its record."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import disco
from disco import (
    HandlerContext,
    NotInHandlerError,
    Step,
    StepError,
    StepNotRecordedError,
    Tool,
    handler_context,
)
from disco._steps import StepLog
from disco.clients import ServiceUnavailableError
from disco.testing import AgentTestKit, CrashPoint, HandlerFailedError, InMemoryMemory
from disco_common.envelope import BusinessFact


class Order(BaseModel):
    order_id: str
    amount: int


class Charge(BaseModel):
    charge_id: str
    amount: int


class Payments:
    """Another system: counts the charges it made, and the keys it was given."""

    def __init__(self) -> None:
        self.charges: list[tuple[str, int]] = []
        self.keys: list[str] = []

    def charge(self, amount: int, key: str) -> Charge:
        self.keys.append(key)
        self.charges.append((key, amount))
        return Charge(charge_id=f"ch-{len(self.charges)}", amount=amount)


def checkout(payments: Payments) -> Tool:
    tool = Tool("checkout", register=False)

    @tool.on_invoke("checkout.requested")
    async def pay(order: Order) -> dict[str, Any]:
        def charge(step: Step) -> Charge:
            return payments.charge(order.amount, step.idempotency_key)

        made = await disco.step("charge", charge)
        receipt = await disco.step("receipt", lambda: {"sent_to": order.order_id})
        return {"charge": made.charge_id, "amount": made.amount, "receipt": receipt}

    return tool


async def test_a_step_runs_once_and_its_result_is_recorded_before_the_handler_goes_on() -> None:
    payments = Payments()
    async with AgentTestKit(checkout(payments)) as kit:
        request = await kit.request(
            "checkout.requested", {"order_id": "o-1", "amount": 30}, response_event="paid"
        )

        answer = kit.result_of(request)

    assert answer.result == {"charge": "ch-1", "amount": 30, "receipt": {"sent_to": "o-1"}}
    assert payments.keys == [f"checkout/{request.id}/charge"]
    recorded = await kit.memory.step_journal("checkout", request.id, tenant_id="test")
    assert recorded == {
        "charge": {"charge_id": "ch-1", "amount": 30},
        "receipt": {"sent_to": "o-1"},
    }


async def test_a_handler_killed_after_a_step_was_recorded_does_not_run_it_again() -> None:
    payments = Payments()
    tool = checkout(payments)
    async with AgentTestKit(tool) as kit:
        kit.crash_after(CrashPoint.STEP_RECORDED)  # the first step, recorded: then dead
        request = await kit.request(
            "checkout.requested", {"order_id": "o-2", "amount": 12}, response_event="paid"
        )

        answer = kit.result_of(request)

    assert [crash.point for crash in kit.crashes] == [CrashPoint.STEP_RECORDED]
    assert len(payments.charges) == 1  # the redelivery got the recorded charge back
    assert answer.result["charge"] == "ch-1"  # type: ignore[index]


async def test_a_handler_killed_between_the_effect_and_its_record_runs_the_step_once_more() -> None:
    payments = Payments()
    async with AgentTestKit(checkout(payments)) as kit:
        kit.crash_after(CrashPoint.STEP_RAN)
        request = await kit.request(
            "checkout.requested", {"order_id": "o-3", "amount": 5}, response_event="paid"
        )

        answer = kit.result_of(request)

    assert len(payments.charges) == 2  # the one window a step has...
    assert payments.keys[0] == payments.keys[1]  # ...and the key the other system dedups on
    assert answer.result["charge"] == "ch-2"  # type: ignore[index]


async def test_a_step_recorded_by_another_run_first_answers_that_result() -> None:
    payments = Payments()
    memory = InMemoryMemory()
    tool = checkout(payments)
    async with AgentTestKit(tool, memory=memory) as kit:
        request = await kit.request(
            "checkout.requested",
            {"order_id": "o-4", "amount": 7},
            response_event="paid",
            settle=False,
        )
        # Another instance recorded the charge before this one got to it.
        await memory.record_step(
            "checkout", request.id, "charge", {"charge_id": "ch-other", "amount": 7}
        )
        await kit.settle()

        answer = kit.result_of(request)

    assert payments.charges == []
    assert answer.result["charge"] == "ch-other"  # type: ignore[index]


async def test_a_retried_attempt_gets_its_steps_back_and_runs_only_the_new_ones() -> None:
    calls: list[str] = []
    memory = InMemoryMemory()
    log = StepLog(memory, "retrier")
    envelope = BusinessFact(source="test", type="thing.happened", tenant_id="acme")

    def attempt(n: int) -> HandlerContext:
        return HandlerContext(
            envelope=envelope, topic="business-facts", group="retrier", steps=log, attempt=n
        )

    with handler_context(attempt(1)):
        first = await disco.step("first", lambda: calls.append("first") or 1)
        # ...and the handler failed after it: the bus retries it.
    with handler_context(attempt(2)):
        again = await disco.step("first", lambda: calls.append("first again") or 2)
        second = await disco.step("second", lambda: calls.append("second") or 3)

    assert (first, again, second) == (1, 1, 3)
    assert calls == ["first", "second"]
    assert await memory.step_journal("retrier", envelope.id, tenant_id="acme") == {
        "first": 1,
        "second": 3,
    }


async def test_the_same_step_name_twice_in_one_handling_is_refused() -> None:
    tool = Tool("twice", register=False)

    @tool.on_invoke("twice.requested")
    async def twice(request: Any) -> int:
        await disco.step("send", lambda: 1)
        return await disco.step("send", lambda: 2)

    async with AgentTestKit(tool) as kit:
        request = await kit.request("twice.requested", {}, response_event="done")

        answer = kit.result_of(request)

    assert not answer.success
    assert answer.error is not None
    assert answer.error.type == "StepError"
    assert "give each step of a handler its own name" in answer.error.message


async def test_a_result_a_replay_could_not_give_back_needs_its_type() -> None:
    tool = Tool("typed", register=False)

    @tool.on_invoke("untyped.requested")
    async def untyped(request: Any) -> int:
        await disco.step("charge", lambda: Charge(charge_id="c", amount=1))
        return 1

    async with AgentTestKit(tool) as kit:
        request = await kit.request("untyped.requested", {}, response_event="done")

        answer = kit.result_of(request)

    assert answer.error is not None
    assert "result_type" in answer.error.message


async def test_a_typed_result_comes_back_as_its_type_from_the_journal() -> None:
    tool = Tool("typed", register=False)
    seen: list[object] = []

    @tool.on_invoke("typed.requested")
    async def typed(request: Any) -> int:
        charge = await disco.step(
            "charge", lambda: Charge(charge_id="c-9", amount=9), result_type=Charge
        )
        seen.append(charge)
        return charge.amount

    async with AgentTestKit(tool) as kit:
        kit.crash_after(CrashPoint.STEP_RECORDED)
        await kit.request("typed.requested", {}, response_event="done")

    assert seen == [Charge(charge_id="c-9", amount=9)]  # the replay's, read back as a Charge


async def test_a_step_outside_a_handler_says_where_it_works() -> None:
    with pytest.raises(NotInHandlerError):
        await disco.step("x", lambda: 1)


async def test_a_long_step_name_is_refused() -> None:
    tool = Tool("names", register=False)

    @tool.on_invoke("names.requested")
    async def named(request: Any) -> int:
        result: int = await disco.step("x" * 151, lambda: 1)
        return result

    async with AgentTestKit(tool) as kit:
        request = await kit.request("names.requested", {}, response_event="done")

        answer = kit.result_of(request)

    assert answer.error is not None
    assert answer.error.type == StepError.__name__


class Unrecording(InMemoryMemory):
    """A memory whose step records fail while ``down`` (the memory service away)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True

    async def record_step(self, *args: Any, **kwargs: Any) -> Any:
        if self.down:
            raise ServiceUnavailableError(503, "unavailable", "the memory service is away")
        return await super().record_step(*args, **kwargs)


async def test_a_step_whose_record_failed_is_recorded_by_the_retry_without_running_again() -> None:
    memory = Unrecording()
    log = StepLog(memory, "payer")
    envelope = BusinessFact(source="test", type="thing.happened", tenant_id="acme")
    payments = Payments()

    def attempt(n: int) -> HandlerContext:
        return HandlerContext(
            envelope=envelope, topic="business-facts", group="payer", steps=log, attempt=n
        )

    with handler_context(attempt(1)), pytest.raises(StepNotRecordedError):
        await disco.step(
            "charge", lambda s: payments.charge(3, s.idempotency_key), result_type=Charge
        )
    memory.down = False
    with handler_context(attempt(2)):
        charge = await disco.step(
            "charge", lambda s: payments.charge(3, s.idempotency_key), result_type=Charge
        )

    assert len(payments.charges) == 1
    assert charge == Charge(charge_id="ch-1", amount=3)
    assert "charge" in await memory.step_journal("payer", envelope.id, tenant_id="acme")


async def test_a_tool_whose_step_could_not_be_recorded_is_retried_not_answered() -> None:
    memory = Unrecording()
    payments = Payments()
    async with AgentTestKit(checkout(payments), memory=memory) as kit:
        with pytest.raises(HandlerFailedError) as failed:
            await kit.request(
                "checkout.requested", {"order_id": "o-5", "amount": 1}, response_event="paid"
            )

        assert kit.answers() == []  # no error answer: the bus retries the envelope
    assert isinstance(failed.value.__cause__, StepNotRecordedError)
