"""Workers end to end: delegation chains, fan-out/fan-in, a killed instance, duplicates, HITL."""

from __future__ import annotations

import asyncio
import signal

from disco.bus import BusClient
from disco.clients import MemoryClient, ServiceClientSettings
from disco_common.envelope import ActionRequest, Envelope
from disco_common.notifications import HumanInputResponse
from disco_common.tasks import ActionResultData, SubTaskStatus
from disco_common.topics import Topic
from tests.e2e.conftest import (
    TENANT,
    AgentProcess,
    Stack,
    Watcher,
    data_of,
    handled,
    launch_agents,
    published,
    start_agents,
    stop_agents,
)
from tests.fixtures.waiting import eventually


async def test_a_chain_worker_to_worker_to_tool_completes_the_original_task(
    fleet: dict[str, AgentProcess], caller: BusClient
) -> None:
    answer = await caller.request(
        "e2e.outer.requested", {"n": 21}, response_event="e2e.outer.done", tenant_id=TENANT, wait=60
    )

    result = ActionResultData.model_validate(answer.data)
    assert result.success, result.error
    assert result.result == {"outer": {"inner": {"total": 42}}}


async def _recorded(stack: Stack, sub_task_id: str, timeout: float = 30.0) -> None:
    """Wait until the worker recorded the answer to ``sub_task_id`` in memory."""
    settings = ServiceClientSettings(memory_url=stack.urls["memory"], tenant_id=TENANT)
    async with MemoryClient.from_settings(settings) as memory:

        async def completed() -> bool:
            record = await memory.get_task_by_subtask(sub_task_id)
            info = record.context.sub_tasks.get(sub_task_id) if record else None
            return info is not None and info.status is SubTaskStatus.COMPLETED

        await eventually(completed, timeout=timeout, what=f"{sub_task_id} recorded as completed")


async def test_a_fan_out_of_three_answered_in_shuffled_order_fans_in_exactly_once(
    fleet: dict[str, AgentProcess], e2e_stack: Stack, caller: BusClient, watcher: Watcher
) -> None:
    request = await caller.request(
        "e2e.fanout.requested",
        {"values": [10, 20, 30], "delays_ms": [0, 0, 0], "target": "e2e.manual.requested"},
        response_event="e2e.fanout.done",
        tenant_id=TENANT,
    )
    subs = await watcher.wait_for(
        lambda topic, e: e.type == "e2e.manual.requested" and e.causation_id == request.id,
        count=3,
        timeout=60,
    )
    by_value = {data_of(sub)["value"]: sub for sub in subs}
    # Answer the third first, then the first, then the second.
    for value in (30, 10, 20):
        sub = by_value[value]
        await caller.respond(
            "e2e.fanout.part",
            ActionResultData.ok({"value": value}),
            correlation_id=sub.correlation_id or "",
            tenant_id=TENANT,
        )
        if value != 20:  # the last one completes the task (and its context goes)
            await _recorded(e2e_stack, sub.correlation_id or "")

    (answer,) = await watcher.wait_for(
        lambda topic, e: topic == "action-results" and e.correlation_id == request.correlation_id,
        timeout=60,
    )
    await handled(e2e_stack, "e2e-fanout", "action-results")  # a second completion is out by now

    result = ActionResultData.model_validate(answer.data)
    assert result.success, result.error
    assert result.result == {"values": [10, 20, 30], "arrival": [2, 0, 1]}
    answers = [
        e
        for e in await published(e2e_stack, "action-results")
        if e.correlation_id == request.correlation_id
    ]
    completions = [
        e
        for e in await published(e2e_stack, "system-events")
        if e.type == "task.completed" and data_of(e)["task_id"] == request.id
    ]
    # Exactly once: one answer and one task.completed (a re-sent copy keeps its id).
    assert len({e.id for e in answers}) == 1
    assert len({e.id for e in completions}) == 1


async def test_a_duplicated_result_envelope_does_not_complete_a_task_twice(
    fleet: dict[str, AgentProcess], e2e_stack: Stack, caller: BusClient, watcher: Watcher
) -> None:
    request = await caller.request(
        "e2e.fanout.requested",
        {"values": [1, 2, 3], "delays_ms": [0, 0, 0]},
        response_event="e2e.fanout.done",
        tenant_id=TENANT,
    )
    (answer,) = await watcher.wait_for(
        lambda topic, e: topic == "action-results" and e.correlation_id == request.correlation_id,
        timeout=60,
    )
    # Every sub-task answer of this task again, as new envelopes, then the last one byte for byte.
    subs = watcher.matching(
        lambda topic, e: (
            topic == "action-requests"
            and e.type == "e2e.delayed.requested"
            and e.causation_id == request.id
        )
    )
    assert len(subs) == 3
    for sub in subs:
        assert isinstance(sub, Envelope)
        await caller.respond(
            "e2e.fanout.part",
            ActionResultData.ok({"value": 999}),
            correlation_id=sub.correlation_id or "",
            tenant_id=TENANT,
        )
    original = watcher.matching(
        lambda topic, e: (
            topic == "action-results"
            and e.type == "e2e.fanout.part"
            and e.correlation_id == subs[0].correlation_id
        )
    )[0]
    await caller.publish_envelope(Topic.ACTION_RESULTS, original)
    await handled(e2e_stack, "e2e-fanout", "action-results")  # a wrong answer is out by now

    answers = [
        e
        for e in await published(e2e_stack, "action-results")
        if e.correlation_id == request.correlation_id
    ]
    assert len({e.id for e in answers}) == 1
    assert ActionResultData.model_validate(answer.data).result["values"] == [1, 2, 3]  # type: ignore[index,call-overload]


async def test_a_worker_killed_between_delegate_and_result_is_finished_by_another_instance(
    e2e_stack: Stack, caller: BusClient, watcher: Watcher
) -> None:
    first = start_agents(e2e_stack, "survivor")
    second: AgentProcess | None = None
    try:
        request = await caller.request(
            "e2e.survive.requested",
            {"job": "j-1"},
            response_event="e2e.survive.done",
            tenant_id=TENANT,
        )
        (sub,) = await watcher.wait_for(
            lambda topic, e: e.type == "e2e.external.requested" and e.causation_id == request.id,
            timeout=60,
        )
        first.process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(first.process.wait, 10)

        second = await asyncio.to_thread(start_agents, e2e_stack, "survivor")
        assert isinstance(sub, ActionRequest) or sub.response_event is not None
        await caller.respond(
            sub.response_event or "",
            ActionResultData.ok({"external": "done"}),
            correlation_id=sub.correlation_id or "",
            tenant_id=TENANT,
        )
        (answer,) = await watcher.wait_for(
            lambda topic, e: (
                topic == "action-results" and e.correlation_id == request.correlation_id
            ),
            timeout=60,
        )
    finally:
        stop_agents(first, *([second] if second is not None else []))

    result = ActionResultData.model_validate(answer.data)
    assert result.success, result.error
    assert result.result == {"answer": {"external": "done"}, "completed_by": second.pid}
    assert second.pid != first.pid


async def _question_for(watcher: Watcher, request: ActionRequest) -> Envelope:
    (question,) = await watcher.wait_for(
        lambda topic, e: (
            topic == "notification-events"
            and e.type == "notification.human_input"
            and data_of(e)["task_id"] == request.id
        ),
        timeout=60,
    )
    return question


async def test_a_human_answer_in_time_continues_the_task_and_a_second_answer_is_ignored(
    fleet: dict[str, AgentProcess], e2e_stack: Stack, caller: BusClient, watcher: Watcher
) -> None:
    request = await caller.request(
        "e2e.review.requested",
        {"title": "Q3 report", "timeout_seconds": 60},
        response_event="e2e.review.done",
        tenant_id=TENANT,
    )
    question = await _question_for(watcher, request)
    for answer in ("yes", "no"):
        await caller.publish(
            Topic.NOTIFICATION_EVENTS,
            "e2e.review.answer",
            HumanInputResponse(answer=answer, request_id=question.id, answered_by="alice"),
            correlation_id=question.correlation_id,
            tenant_id=TENANT,
        )

    (done,) = await watcher.wait_for(
        lambda topic, e: topic == "action-results" and e.correlation_id == request.correlation_id,
        timeout=60,
    )
    await handled(e2e_stack, "e2e-reviewer", "notification-events")  # both answers handled

    assert data_of(question)["question"] == "Approve 'Q3 report'?"
    assert ActionResultData.model_validate(done.data).result == {"approved": True}
    answers = [
        e
        for e in await published(e2e_stack, "action-results")
        if e.correlation_id == request.correlation_id
    ]
    assert len(answers) == 1


async def test_an_unanswered_question_past_its_timeout_ends_in_the_timeout_path(
    fleet: dict[str, AgentProcess], caller: BusClient, watcher: Watcher
) -> None:
    request = await caller.request(
        "e2e.review.requested",
        {"title": "nobody reads this", "timeout_seconds": 2},
        response_event="e2e.review.done",
        tenant_id=TENANT,
    )
    await _question_for(watcher, request)

    (done,) = await watcher.wait_for(
        lambda topic, e: topic == "action-results" and e.correlation_id == request.correlation_id,
        timeout=60,
    )
    timeouts = await watcher.wait_for(
        lambda topic, e: e.type == "task.timeout" and data_of(e)["task_id"] == request.id,
        timeout=30,
    )

    result = ActionResultData.model_validate(done.data)
    assert result.success is False
    assert result.error is not None
    assert result.error.message == "nobody answered in time"
    assert len(timeouts) == 1


async def test_answers_arriving_together_at_two_instances_complete_each_task_exactly_once(
    e2e_stack: Stack, caller: BusClient, watcher: Watcher
) -> None:
    # Side by side: each is ready once the group gave it partitions, so once both
    # are, the group has settled with both members.
    instances = [launch_agents(e2e_stack, "gatherer") for _ in range(2)]
    try:
        for instance in instances:
            await asyncio.to_thread(instance.wait_ready)
        requests = [
            await caller.request(
                "e2e.gather.requested",
                {"values": [1, 2, 3, 4, 5, 6]},
                response_event="e2e.gather.done",
                tenant_id=TENANT,
            )
            for _ in range(3)
        ]
        for request in requests:
            subs = await watcher.wait_for(
                lambda topic, e, r=request: (
                    e.type == "e2e.manual.requested" and e.causation_id == r.id
                ),
                count=6,
                timeout=60,
            )
            # All six answers at once: they land on different partitions, so on both instances.
            await asyncio.gather(
                *(
                    caller.respond(
                        "e2e.gather.part",
                        ActionResultData.ok({"value": data_of(sub)["value"]}),
                        correlation_id=sub.correlation_id or "",
                        tenant_id=TENANT,
                    )
                    for sub in subs
                )
            )
        answers = [
            (
                await watcher.wait_for(
                    lambda topic, e, r=request: (
                        topic == "action-results" and e.correlation_id == r.correlation_id
                    ),
                    timeout=60,
                )
            )[0]
            for request in requests
        ]
        await handled(e2e_stack, "e2e-gatherer", "action-results")  # a second completion is out
    finally:
        stop_agents(*instances)
    results = await published(e2e_stack, "action-results")
    system_events = await published(e2e_stack, "system-events")

    for request, answer in zip(requests, answers, strict=True):
        result = ActionResultData.model_validate(answer.data)
        assert result.success, result.error
        assert result.result["sum"] == 21  # type: ignore[index,call-overload]
        copies = [e for e in results if e.correlation_id == request.correlation_id]
        completed = [
            e
            for e in system_events
            if e.type == "task.completed" and data_of(e)["task_id"] == request.id
        ]
        assert len({e.id for e in copies}) == 1
        assert len({e.id for e in completed}) == 1


async def test_an_agent_reads_the_open_questions_of_a_task_from_the_tracker(
    fleet: dict[str, AgentProcess], caller: BusClient, watcher: Watcher
) -> None:
    request = await caller.request(
        "e2e.review.requested",
        {"title": "inbox", "timeout_seconds": 60},
        response_event="e2e.review.done",
        tenant_id=TENANT,
    )
    question = await _question_for(watcher, request)

    async def listed_questions() -> list[str]:  # the tracker records the question from the bus
        answer = await caller.request(
            "e2e.inbox.requested",
            {"task_id": request.id},
            response_event="e2e.inbox.done",
            tenant_id=TENANT,
            wait=30,
        )
        result = ActionResultData.model_validate(answer.data)
        assert result.success, result.error
        return result.result["questions"]  # type: ignore[index,call-overload,no-any-return]

    listed = await eventually(
        listed_questions, timeout=30, interval=0.2, what="the question listed"
    )
    await caller.publish(
        Topic.NOTIFICATION_EVENTS,
        "e2e.review.answer",
        HumanInputResponse(answer="yes", request_id=question.id, answered_by="alice"),
        correlation_id=question.correlation_id,
        tenant_id=TENANT,
    )
    await watcher.wait_for(
        lambda topic, e: topic == "action-results" and e.correlation_id == request.correlation_id
    )

    assert listed == ["Approve 'inbox'?"]
