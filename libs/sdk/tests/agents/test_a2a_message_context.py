"""What a handler knows of the A2A message it answers: ``request.a2a`` (a Tool), ``task.a2a``
(a Worker's task, restored too), ``result.a2a`` (a human's answer) and ``goal.a2a`` (a
Planner's goal); None when the request did not come from an A2A caller."""

from __future__ import annotations

from typing import Any

from disco.agents import (
    GoalContext,
    InvocationContext,
    Planner,
    ResultContext,
    TaskContext,
    Tool,
    Worker,
)
from disco.testing import AgentTestKit
from disco_common.a2a import A2AMessageContext
from libs.sdk.tests.agents._agents import Text

CONTEXT = A2AMessageContext(
    message_id="m-1",
    metadata={"priority": "high"},
    extensions=["urn:example:citations"],
    requested_extensions=["urn:example:citations", "urn:example:trace"],
    reference_task_ids=["t-0"],
    accepted_output_modes=["text/plain"],
)


def _seen(value: A2AMessageContext | None) -> dict[str, Any] | None:
    return None if value is None else value.model_dump()


async def test_a_tool_handler_reads_the_callers_a2a_message() -> None:
    tool = Tool("ctx-tool", register=False)

    @tool.on_invoke("ctx.requested")
    async def handle(request: InvocationContext[Text]) -> dict[str, Any]:
        a2a = request.a2a
        return {
            "seen": _seen(a2a),
            "plain": a2a is not None and a2a.accepts("text/plain"),
            "json": a2a is not None and a2a.accepts("application/json"),
        }

    async with AgentTestKit(tool) as kit:
        from_a2a = await kit.request(
            "ctx.requested", {"text": "x"}, response_event="r", a2a=CONTEXT
        )
        from_bus = await kit.request("ctx.requested", {"text": "y"}, response_event="r")

    assert kit.result_of(from_a2a).result == {
        "seen": CONTEXT.model_dump(),
        "plain": True,
        "json": False,
    }
    assert kit.result_of(from_bus).result == {"seen": None, "plain": False, "json": False}


async def test_a_workers_task_keeps_its_a2a_message_and_the_answer_brings_its_own() -> None:
    worker = Worker("ctx-worker", register=False)

    @worker.on_task("ask.requested")
    async def ask(task: TaskContext[Text]) -> None:
        task.state["asked_with"] = _seen(task.a2a)
        await task.request_human_input("Who?", response_event="ask.answered", timeout_seconds=600)

    @worker.on_human_input("ask.answered")
    async def answered(result: ResultContext) -> None:
        task = await result.restore_task()
        await task.complete(
            {
                "task": _seen(task.a2a),
                "asked_with": task.state["asked_with"],
                "answer": _seen(result.a2a),
            }
        )

    follow_up = CONTEXT.model_copy(update={"message_id": "m-2", "metadata": {}})
    async with AgentTestKit(worker) as kit:
        request = await kit.request("ask.requested", {"text": "x"}, response_event="r", a2a=CONTEXT)
        await kit.answer_human(answer="Ada", a2a=follow_up)

    assert kit.result_of(request).result == {
        "task": CONTEXT.model_dump(),
        "asked_with": CONTEXT.model_dump(),
        "answer": follow_up.model_dump(),
    }


async def test_a_planners_goal_reads_the_callers_a2a_message() -> None:
    planner = Planner("ctx-planner", register=False)

    @planner.on_goal("goal.requested")
    async def goal(context: GoalContext[Text]) -> None:
        await context.complete({"seen": _seen(context.a2a)})

    async with AgentTestKit(planner) as kit:
        request = await kit.request(
            "goal.requested", {"text": "x"}, response_event="r", a2a=CONTEXT
        )

    assert kit.result_of(request).result == {"seen": CONTEXT.model_dump()}


async def test_an_attribute_that_is_not_a_message_context_reads_as_none() -> None:
    tool = Tool("ctx-bad", register=False)

    @tool.on_invoke("bad.requested")
    async def handle(request: InvocationContext[Text]) -> dict[str, Any]:
        return {"seen": _seen(request.a2a), "text": request.input.text}

    async with AgentTestKit(tool) as kit:
        request = await kit.request(
            "bad.requested",
            {"text": "still handled"},
            response_event="r",
            a2amessage='{"metadata": 3}',  # type: ignore[typeddict-unknown-key]
        )

    assert kit.result_of(request).result == {"seen": None, "text": "still handled"}
