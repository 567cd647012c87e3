"""Answering A2A callers: direct messages, artifacts, chunks, updates, input-required, rejection;
and cancellation of a Worker's task (handler running, or waiting on sub-tasks)."""

from __future__ import annotations

import asyncio
from typing import Any

from disco.a2a import A2AAnswer, A2AArtifact, A2APart, A2ATaskState
from disco.agents import InvocationContext, ResultContext, TaskContext, Tool, Worker
from disco.testing import AgentTestKit
from disco_common.system_events import SystemEventType
from disco_common.topics import Topic
from libs.sdk.tests.agents._agents import Text


def storyteller() -> Tool:
    tool = Tool("storyteller", register=False)

    @tool.on_invoke("hello.requested")
    async def hello(request: Text) -> A2AAnswer:
        return A2AAnswer.message(f"Hello, {request.text}!")

    @tool.on_invoke("story.requested")
    async def story(request: InvocationContext[Text]) -> A2AAnswer:
        await request.update("Thinking of a story...")
        await request.artifact(A2AArtifact(artifact_id="s", parts=[A2APart.from_text("Once ")]))
        await request.artifact(
            A2AArtifact(artifact_id="s", parts=[A2APart.from_text("upon a time.")]),
            append=True,
            last_chunk=True,
        )
        return A2AAnswer.completed(
            A2AArtifact(
                artifact_id="pdf",
                name="story.pdf",
                parts=[A2APart.from_file(b"%PDF", name="story.pdf", media_type="application/pdf")],
            )
        )

    @tool.on_invoke("city.requested")
    async def city(request: Text) -> A2AAnswer:
        if not request.text:
            return A2AAnswer.input_required("Which city?")
        if request.text == "Mordor":
            return A2AAnswer.rejected("One does not simply forecast Mordor.")
        return A2AAnswer.completed(result={"city": request.text})

    return tool


async def test_a_tool_answers_with_a_direct_message() -> None:
    async with AgentTestKit(storyteller()) as kit:
        request = await kit.request("hello.requested", {"text": "Ada"}, response_event="r")

    result = kit.result_of(request)
    assert result.success
    assert result.result == {"text": "Hello, Ada!"}
    assert result.a2a is not None
    assert result.a2a.kind == "message"
    assert result.a2a.text() == "Hello, Ada!"


async def test_partial_answers_go_out_in_order_before_the_answer() -> None:
    async with AgentTestKit(storyteller()) as kit:
        request = await kit.request("story.requested", {"text": "x"}, response_event="r")

    progress = kit.progress(request.correlation_id or request.id)
    assert [p.sequence for p in progress] == [1, 2, 3]
    assert progress[0].message is not None
    assert progress[0].message[0].text == "Thinking of a story..."
    assert [(p.append, p.last_chunk) for p in progress[1:]] == [(False, False), (True, True)]
    events = kit.events(Topic.ACTION_RESULTS)
    assert [e.type for e in events] == ["action.progressed"] * 3 + ["r"]
    answer = kit.result_of(request).a2a
    assert answer is not None
    assert answer.artifacts[0].parts[0].raw_bytes() == b"%PDF"


async def test_a_tool_asks_for_input_or_rejects_and_disco_callers_read_it_as_a_failure() -> None:
    async with AgentTestKit(storyteller()) as kit:
        asked = await kit.request("city.requested", {"text": ""}, response_event="r")
        refused = await kit.request("city.requested", {"text": "Mordor"}, response_event="r")
        done = await kit.request("city.requested", {"text": "Atlantis"}, response_event="r")

    question = kit.result_of(asked)
    assert question.success is False
    assert question.error is not None
    assert question.error.type == "input_required"
    assert question.a2a is not None
    assert question.a2a.state is A2ATaskState.INPUT_REQUIRED
    rejection = kit.result_of(refused)
    assert rejection.error is not None
    assert rejection.error.type == "rejected"
    assert kit.result_of(done).result == {"city": "Atlantis"}


def slow_worker(started: asyncio.Event) -> Worker:
    worker = Worker("slow", register=False)

    @worker.on_task("slow.requested")
    async def slow(task: TaskContext[Any]) -> None:
        started.set()
        await asyncio.Event().wait()  # works until told otherwise
        await task.complete("never")

    @worker.on_task("wait.requested")
    async def wait(task: TaskContext[Any]) -> None:
        await task.update("Asking the search team...")
        await task.delegate("search.requested", {"q": "x"}, response_event="searched")

    @worker.on_result("searched")
    async def searched(result: ResultContext) -> None:
        task = await result.restore_task()
        await task.complete(A2AAnswer.completed(result=result.result))

    return worker


async def test_cancelling_a_running_task_stops_its_handler_and_answers_cancelled() -> None:
    started = asyncio.Event()
    async with AgentTestKit(slow_worker(started)) as kit:
        running = asyncio.create_task(
            kit.request("slow.requested", {}, response_event="done", correlation_id="c-1")
        )
        await asyncio.wait_for(started.wait(), 5)
        (request,) = kit.requests("slow.requested")
        await kit.publish(
            Topic.SYSTEM_EVENTS,
            SystemEventType.TASK_CANCEL_REQUESTED,
            {"task_id": request.id, "reason": "the caller gave up"},
            settle=False,
        )
        await kit.deliver(Topic.SYSTEM_EVENTS, kit.system_events("task.cancel_requested")[0])
        await asyncio.wait_for(running, 5)

    result = kit.result_of(request)
    assert result.success is False
    assert result.error is not None
    assert result.error.type == "cancelled"
    assert result.error.message == "the caller gave up"
    (cancelled,) = kit.system_events(SystemEventType.TASK_CANCELLED)
    assert cancelled.data["task_id"] == request.id  # type: ignore[index,call-overload]


async def test_cancelling_a_waiting_task_answers_cancelled_and_stops_its_sub_tasks() -> None:
    async with AgentTestKit(slow_worker(asyncio.Event()), loopback=False) as kit:
        request = await kit.request("wait.requested", {}, response_event="done")
        (sub_request,) = kit.requests("search.requested")
        await kit.publish(
            Topic.SYSTEM_EVENTS,
            SystemEventType.TASK_CANCEL_REQUESTED,
            {"task_id": request.id},
            plan_id="plan-7",
        )
        late = await kit.reply(sub_request, {"hits": 1})  # the answer comes too late

    result = kit.result_of(request)
    assert result.error is not None
    assert result.error.type == "cancelled"
    asked = [
        e.data["task_id"]  # type: ignore[index,call-overload]
        for e in kit.system_events(SystemEventType.TASK_CANCEL_REQUESTED)
    ]
    assert asked == [request.id, sub_request.correlation_id]
    assert len(kit.answers(request.correlation_id or request.id)) == 1
    assert late.correlation_id == sub_request.correlation_id
    (update,) = kit.progress(request.correlation_id or request.id)
    assert update.message is not None
    assert update.message[0].text == "Asking the search team..."


async def test_a_cancel_for_a_finished_or_unknown_task_changes_nothing() -> None:
    async with AgentTestKit(slow_worker(asyncio.Event())) as kit:
        await kit.publish(
            Topic.SYSTEM_EVENTS, SystemEventType.TASK_CANCEL_REQUESTED, {"task_id": "nobody"}
        )

    assert kit.answers() == []
    assert kit.system_events(SystemEventType.TASK_CANCELLED) == []
