"""Tool: the return value is the answer; an exception is an error answer; the caller never hangs."""

from __future__ import annotations

from typing import Any

from disco.agents import InvocationContext, PlatformContext, Tool
from disco.testing import AgentTestKit
from libs.sdk.tests.agents._agents import Addition, Total


def calculator() -> Tool:
    tool = Tool("calculator", register=False)

    @tool.on_invoke("add.requested")
    async def add(request: Addition) -> Total:
        return Total(total=request.a + request.b)

    @tool.on_invoke("divide.requested")
    async def divide(request: InvocationContext[Any], context: PlatformContext) -> float:
        return float(request.data["a"] / request.data["b"])

    @tool.on_invoke("describe.requested")
    async def describe(request: InvocationContext[Addition]) -> dict[str, Any]:
        return {"sum_of": [request.input.a, request.input.b], "asked_by": request.user_id}

    return tool


async def test_the_return_value_is_the_answer_to_the_callers_response_event() -> None:
    async with AgentTestKit(calculator()) as kit:
        request = await kit.request("add.requested", {"a": 2, "b": 3}, response_event="sum.ready")

    (answer,) = kit.answers(request.correlation_id)
    assert answer.type == "sum.ready"
    assert answer.data == {"success": True, "result": {"total": 5}}
    assert answer.causation_id == request.id


async def test_an_exception_in_the_tool_reaches_the_caller_as_an_error_result() -> None:
    async with AgentTestKit(calculator()) as kit:
        request = await kit.request("divide.requested", {"a": 1, "b": 0}, response_event="q")

    result = kit.result_of(request)
    assert result.success is False
    assert result.error is not None
    assert result.error.type == "ZeroDivisionError"
    assert "division by zero" in result.error.message


async def test_request_data_that_does_not_fit_the_model_is_answered_with_every_problem() -> None:
    async with AgentTestKit(calculator()) as kit:
        request = await kit.request("add.requested", {"a": "two"}, response_event="sum.ready")

    result = kit.result_of(request)
    assert result.success is False
    assert result.error is not None
    assert result.error.type == "ValidationError"
    assert isinstance(result.error.details, dict)
    problems = {problem["loc"] for problem in result.error.details["errors"]}  # type: ignore[index,union-attr]
    assert problems == {"a", "b"}


async def test_an_invocation_context_carries_the_validated_input_and_the_caller() -> None:
    async with AgentTestKit(calculator(), user_id="alice") as kit:
        request = await kit.request("describe.requested", {"a": 1, "b": 2}, response_event="d")

    assert kit.result_of(request).result == {"sum_of": [1, 2], "asked_by": "alice"}


async def test_the_answer_goes_to_the_response_topic_the_caller_named() -> None:
    async with AgentTestKit(calculator()) as kit:
        await kit.request(
            "add.requested",
            {"a": 1, "b": 1},
            response_event="sum.ready",
            response_topic="business-facts",
            correlation_id="corr-1",
        )

    (answer,) = kit.events("business-facts", "sum.ready")
    assert answer.correlation_id == "corr-1"
    assert kit.answers() == []


async def test_a_redelivered_request_is_answered_with_the_same_envelope_id() -> None:
    tool = calculator()
    async with AgentTestKit(tool) as kit:
        request = await kit.request("add.requested", {"a": 1, "b": 1}, response_event="s")
        # The same envelope again (as after a crash before the commit), to a new consumer.
        kit._members[0].seen.clear()
        await kit.deliver("action-requests", request)

    first, second = kit.answers(request.correlation_id)
    assert first.id == second.id


async def test_an_answer_too_large_for_the_bus_reaches_the_caller_as_an_error() -> None:
    tool = Tool("hoarder", register=False)

    @tool.on_invoke("hoard.requested")
    async def hoard(request: InvocationContext[Any]) -> str:
        return "x" * 2_000_000

    async with AgentTestKit(tool) as kit:
        request = await kit.request("hoard.requested", {}, response_event="hoarded")

    result = kit.result_of(request)
    assert result.success is False
    assert result.error is not None
    assert result.error.type == "MessageTooLargeError"
    assert "DISCO_BUS_MAX_MESSAGE_BYTES" in result.error.message


async def test_waiting_for_a_response_inside_the_kit_fails_at_once_saying_what_to_do() -> None:
    tool = Tool("asker", register=False)

    @tool.on_invoke("ask.requested")
    async def ask(request: InvocationContext[Any], context: PlatformContext) -> Any:
        return await context.bus.request("other.requested", {}, response_event="other", wait=5)

    async with AgentTestKit(tool) as kit:
        request = await kit.request("ask.requested", {}, response_event="asked")

    result = kit.result_of(request)
    assert result.success is False
    assert result.error is not None
    assert result.error.type == "BusError"
    assert "needs a broker" in result.error.message
    assert "kit.request" in result.error.message
