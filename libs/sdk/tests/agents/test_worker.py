"""Worker: tasks that delegate, fan out and in, ask humans, and finish exactly once."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from disco.agents import (
    AgentDefinitionError,
    PlatformContext,
    ResultContext,
    TaskContext,
    Worker,
)
from disco.testing import AgentTestKit, InMemoryMemory
from disco_common.envelope import ActionRequest
from disco_common.tasks import DelegationSpec
from libs.sdk.tests.agents._agents import Text, adder, ids_asked


def summer(name: str = "summer") -> Worker:
    """Adds three pairs in parallel, then sums the totals."""
    worker = Worker(name, register=False)

    @worker.on_task("sum3.requested")
    async def fan_out(task: TaskContext[Any]) -> None:
        task.state["group"] = await task.delegate_parallel(
            [
                DelegationSpec(event_type="add.requested", data=pair, response_event="added")
                for pair in task.data["pairs"]
            ]
        )

    @worker.on_result("added")
    async def fan_in(result: ResultContext) -> None:
        task = await result.restore_task()
        totals = task.aggregate_parallel_results(task.parallel_groups[0])
        if totals is not None:
            await task.complete({"total": sum(t["total"] for t in totals.values())})

    return worker


PAIRS = {"pairs": [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5, "b": 6}]}


async def test_a_task_completed_at_once_answers_once_and_reports_started_and_completed() -> None:
    worker = Worker("echo", register=False)

    @worker.on_task("echo.requested")
    async def echo(task: TaskContext[Text]) -> None:
        await task.complete({"echo": task.input.text})

    async with AgentTestKit(worker) as kit:
        request = await kit.request("echo.requested", {"text": "hi"}, response_event="echoed")

    result = kit.result_of(request)
    assert result.result == {"echo": "hi"}
    assert result.task_id == request.id
    assert [e.type for e in kit.system_events()] == ["task.started", "task.completed"]
    assert kit.memory.writes == 0  # nothing to persist for a task that ends at once


async def test_sequential_delegation_completes_the_task_with_the_sub_agents_result() -> None:
    worker = Worker("doubler", register=False)

    @worker.on_task("double.requested")
    async def start(task: TaskContext[Any], context: PlatformContext) -> None:
        n = task.data["n"]
        await task.delegate("add.requested", {"a": n, "b": n}, response_event="doubled")

    @worker.on_result("doubled")
    async def finish(result: ResultContext, context: PlatformContext) -> None:
        task = await result.restore_task()
        await task.complete({"double": result.result["total"]})  # type: ignore[index,call-overload]

    async with AgentTestKit(worker, adder()) as kit:
        request = await kit.request("double.requested", {"n": 21}, response_event="done")

    assert kit.result_of(request).result == {"double": 42}
    types = [e.type for e in kit.system_events()]
    assert types == ["task.started", "task.delegated", "task.completed"]
    assert kit.memory.tasks == {}  # forgotten once answered


async def test_the_task_is_saved_before_the_sub_task_request_is_published() -> None:
    worker = Worker("doubler", register=False)
    saved_when_published: list[bool] = []

    @worker.on_task("double.requested")
    async def start(task: TaskContext[Any]) -> None:
        await task.delegate("add.requested", {"a": 1, "b": 1}, response_event="doubled")

    async with AgentTestKit(worker, loopback=False) as kit:
        await kit.request("double.requested", {}, response_event="done")
        (sub_request,) = kit.requests("add.requested")
        record = await kit.memory.get_task_by_subtask(sub_request.correlation_id or "")
        saved_when_published.append(record is not None)

    assert saved_when_published == [True]


async def test_a_chain_of_delegations_worker_to_worker_to_tool_completes_the_first_task() -> None:
    outer = Worker("outer", register=False)
    inner = Worker("inner", register=False)

    @outer.on_task("outer.requested")
    async def outer_start(task: TaskContext[Any]) -> None:
        await task.delegate("inner.requested", {"n": task.data["n"]}, response_event="inner.done")

    @outer.on_result("inner.done")
    async def outer_finish(result: ResultContext) -> None:
        task = await result.restore_task()
        await task.complete({"outer": result.result})

    @inner.on_task("inner.requested")
    async def inner_start(task: TaskContext[Any]) -> None:
        await task.delegate(
            "add.requested", {"a": task.data["n"], "b": 1}, response_event="add.done"
        )

    @inner.on_result("add.done")
    async def inner_finish(result: ResultContext) -> None:
        task = await result.restore_task()
        await task.complete({"inner": result.result})

    async with AgentTestKit(outer, inner, adder()) as kit:
        request = await kit.request("outer.requested", {"n": 9}, response_event="all.done")

    assert kit.result_of(request).result == {"outer": {"inner": {"total": 10}}}


async def test_fan_in_completes_exactly_once_whatever_the_order_of_the_answers() -> None:
    for seed in range(5):
        async with AgentTestKit(summer(), loopback=False) as kit:
            request = await kit.request("sum3.requested", PAIRS, response_event="summed")
            await kit.settle()
            sub_requests = kit.requests("add.requested")
            random.Random(seed).shuffle(sub_requests)
            for sub in sub_requests:
                await kit.reply(sub, {"total": sub.data["a"] + sub.data["b"]})  # type: ignore[index,call-overload]

        assert kit.result_of(request).result == {"total": 21}, f"seed {seed}"
        assert len(kit.system_events("task.completed")) == 1


async def test_concurrent_answers_on_two_instances_complete_the_task_exactly_once() -> None:
    first, second = summer(), summer()
    async with AgentTestKit(first, second, loopback=False) as kit:
        request = await kit.request("sum3.requested", PAIRS, response_event="summed", settle=False)
        await kit.deliver("action-requests", request, to=first)
        subs = kit.requests("add.requested")
        answers = [
            await kit.reply(sub, {"total": sub.data["a"] + sub.data["b"]}, settle=False)  # type: ignore[index,call-overload]
            for sub in subs
        ]
        # Each instance gets one answer at the same moment; the third follows.
        await asyncio.gather(
            kit.deliver("action-results", answers[0], to=first),
            kit.deliver("action-results", answers[1], to=second),
        )
        await kit.deliver("action-results", answers[2], to=second)

    assert kit.result_of(request).result == {"total": 21}
    assert len(kit.system_events("task.completed")) == 1


async def test_answers_move_the_copy_this_process_saved_without_reading_it_back() -> None:
    memory = InMemoryMemory()
    asked = ids_asked(memory, "get_task_by_subtask")
    async with AgentTestKit(summer(), adder(), memory=memory) as kit:
        request = await kit.request("sum3.requested", PAIRS, response_event="summed")

    assert kit.result_of(request).result == {"total": 21}
    assert asked == []  # each answer moved the copy the handling before it saved


async def test_answers_of_one_fan_out_arriving_at_once_take_turns_without_conflicts() -> None:
    memory = InMemoryMemory()
    saves = ids_asked(memory, "store_task_context")
    worker = summer()
    async with AgentTestKit(worker, loopback=False, memory=memory) as kit:
        request = await kit.request("sum3.requested", PAIRS, response_event="summed", settle=False)
        await kit.deliver("action-requests", request, to=worker)
        answers = [
            await kit.reply(sub, {"total": sub.data["a"] + sub.data["b"]}, settle=False)  # type: ignore[index,call-overload]
            for sub in kit.requests("add.requested")
        ]
        await asyncio.gather(*(kit.deliver("action-results", a, to=worker) for a in answers))

    assert kit.result_of(request).result == {"total": 21}
    # Each save moved the copy the one before kept: none lost to a newer version.
    assert len(saves) == memory.writes


async def test_a_copy_another_instance_moved_past_is_read_afresh_and_the_task_ends_once() -> None:
    memory = InMemoryMemory()
    asked = ids_asked(memory, "get_task_by_subtask")
    first, second = summer(), summer()
    async with AgentTestKit(first, second, loopback=False, memory=memory) as kit:
        request = await kit.request("sum3.requested", PAIRS, response_event="summed", settle=False)
        await kit.deliver("action-requests", request, to=first)  # first keeps its saved copy
        subs = kit.requests("add.requested")
        answers = [
            await kit.reply(sub, {"total": sub.data["a"] + sub.data["b"]}, settle=False)  # type: ignore[index,call-overload]
            for sub in subs
        ]
        await kit.deliver("action-results", answers[0], to=second)  # moves the task on
        await kit.deliver("action-results", answers[1], to=first)  # its copy is stale
        await kit.deliver("action-results", answers[2], to=first)

    assert kit.result_of(request).result == {"total": 21}
    assert len(kit.system_events("task.completed")) == 1
    # second's restore, then first's after its save lost to second's; the last
    # answer moved the copy first saved then.
    assert asked == [subs[0].correlation_id, subs[1].correlation_id]


async def test_a_duplicated_answer_does_not_complete_a_task_twice() -> None:
    async with AgentTestKit(summer(), loopback=False) as kit:
        request = await kit.request("sum3.requested", PAIRS, response_event="summed")
        subs = kit.requests("add.requested")
        for sub in subs:
            await kit.reply(sub, {"total": 1})
        # The same answer again, as a new envelope (a tool that answered twice).
        await kit.reply(subs[0], {"total": 1})

    assert len(kit.answers(request.correlation_id)) == 1
    assert kit.result_of(request).result == {"total": 3}


async def test_a_duplicated_answer_before_fan_in_is_not_counted_twice() -> None:
    async with AgentTestKit(summer(), loopback=False) as kit:
        request = await kit.request("sum3.requested", PAIRS, response_event="summed")
        subs = kit.requests("add.requested")
        await kit.reply(subs[0], {"total": 100})
        await kit.reply(subs[0], {"total": 100})
        await kit.reply(subs[1], {"total": 10})
        assert kit.answers(request.correlation_id) == []
        await kit.reply(subs[2], {"total": 1})

    assert kit.result_of(request).result == {"total": 111}


async def test_an_exception_in_a_task_handler_answers_the_caller_with_the_error() -> None:
    worker = Worker("fragile", register=False)

    @worker.on_task("fragile.requested")
    async def explode(task: TaskContext[Any]) -> None:
        raise RuntimeError("the disk is full")

    async with AgentTestKit(worker) as kit:
        request = await kit.request("fragile.requested", {}, response_event="done")

    result = kit.result_of(request)
    assert result.success is False
    assert result.error is not None
    assert result.error.message == "the disk is full"
    assert [e.type for e in kit.system_events()] == ["task.started", "task.failed"]


async def test_a_failed_sub_task_reaches_the_result_handler_as_a_failure() -> None:
    worker = Worker("careful", register=False)

    @worker.on_task("careful.requested")
    async def start(task: TaskContext[Any]) -> None:
        await task.delegate("risky.requested", {}, response_event="risky.done")

    @worker.on_result("risky.done")
    async def finish(result: ResultContext) -> None:
        task = await result.restore_task()
        if result.success:
            await task.complete(result.result)
        else:
            assert result.error is not None
            await task.fail(f"the risky step failed: {result.error.message}")

    async with AgentTestKit(worker, loopback=False) as kit:
        request = await kit.request("careful.requested", {}, response_event="done")
        (sub,) = kit.requests("risky.requested")
        await kit.reply(sub, error="no route to host")

    result = kit.result_of(request)
    assert result.success is False
    assert result.error is not None
    assert result.error.message == "the risky step failed: no route to host"


async def test_invalid_task_data_is_answered_with_an_error_and_nothing_is_saved() -> None:
    worker = Worker("echo", register=False)

    @worker.on_task("echo.requested")
    async def echo(task: TaskContext[Text]) -> None:
        await task.complete(task.input.text)

    async with AgentTestKit(worker) as kit:
        request = await kit.request("echo.requested", {"txt": "typo"}, response_event="echoed")

    result = kit.result_of(request)
    assert result.success is False
    assert result.error is not None
    assert result.error.type == "ValidationError"
    assert kit.memory.writes == 0


async def test_delegating_without_a_response_event_says_how_to_fix_it() -> None:
    worker = Worker("sloppy", register=False)

    @worker.on_task("sloppy.requested")
    async def start(task: TaskContext[Any]) -> None:
        await task.delegate("add.requested", {"a": 1, "b": 2})

    async with AgentTestKit(worker) as kit:
        request = await kit.request("sloppy.requested", {}, response_event="done")

    result = kit.result_of(request)
    assert result.error is not None
    assert "needs response_event" in result.error.message
    assert "on_result" in result.error.message


async def test_completing_a_task_twice_is_refused() -> None:
    from disco.agents import TaskStateError

    worker = Worker("eager", register=False)
    refused: list[str] = []

    @worker.on_task("eager.requested")
    async def twice(task: TaskContext[Any]) -> None:
        await task.complete(1)
        with pytest.raises(TaskStateError) as caught:
            await task.complete(2)
        refused.append(str(caught.value))

    async with AgentTestKit(worker) as kit:
        request = await kit.request("eager.requested", {}, response_event="done")

    assert kit.result_of(request).result == 1
    assert len(refused) == 1
    assert "already completed" in refused[0]


def approver() -> Worker:
    worker = Worker("approver", register=False)

    @worker.on_task("publish.requested")
    async def ask(task: TaskContext[Any]) -> None:
        await task.request_human_input(
            f"Publish {task.data['title']!r}?",
            response_event="publish.approval",
            timeout_seconds=60,
            options=["yes", "no"],
        )

    @worker.on_human_input("publish.approval")
    async def decide(result: ResultContext) -> None:
        task = await result.restore_task()
        if result.timed_out:
            await task.fail("nobody approved in time")
        elif result.answer == "yes":
            await task.complete({"published": True})
        else:
            await task.complete({"published": False})

    return worker


async def test_a_question_to_a_human_is_published_with_its_timeout_and_the_task_waits() -> None:
    async with AgentTestKit(approver()) as kit:
        request = await kit.request("publish.requested", {"title": "Q3"}, response_event="done")

    (question,) = kit.questions()
    assert question.data["question"] == "Publish 'Q3'?"  # type: ignore[index,call-overload]
    assert question.data["timeout_seconds"] == 60  # type: ignore[index,call-overload]
    assert question.data["task_id"] == request.id  # type: ignore[index,call-overload]
    assert kit.answers() == []
    (record,) = kit.memory.tasks.values()
    assert record.context.human_input is not None
    assert record.context.human_input.correlation_id == question.correlation_id


async def test_an_answer_in_time_continues_the_task_and_a_late_second_answer_is_ignored() -> None:
    async with AgentTestKit(approver()) as kit:
        request = await kit.request("publish.requested", {"title": "Q3"}, response_event="done")
        await kit.answer_human(answer="yes")
        await kit.answer_human(answer="no")
        await kit.answer_human(timed_out=True)

    assert kit.result_of(request).result == {"published": True}


async def test_no_answer_before_the_timeout_takes_the_timeout_path() -> None:
    async with AgentTestKit(approver()) as kit:
        request = await kit.request("publish.requested", {"title": "Q3"}, response_event="done")
        await kit.answer_human(timed_out=True)
        await kit.answer_human(answer="yes")  # too late

    result = kit.result_of(request)
    assert result.success is False
    assert result.error is not None
    assert result.error.message == "nobody approved in time"


async def test_an_answer_meant_for_another_worker_is_not_taken() -> None:
    mine, theirs = Worker("mine", register=False), Worker("theirs", register=False)
    taken: list[str] = []

    @mine.on_task("job.requested")
    async def start(task: TaskContext[Any]) -> None:
        await task.delegate("add.requested", {"a": 1, "b": 1}, response_event="job.step")

    @mine.on_result("job.step")
    async def mine_finish(result: ResultContext) -> None:
        task = await result.restore_task()
        taken.append("mine")
        await task.complete(result.result)

    @theirs.on_result("job.step")
    async def theirs_finish(result: ResultContext) -> None:
        await result.restore_task()
        taken.append("theirs")

    @theirs.on_task("other.requested")
    async def unused(task: TaskContext[Any]) -> None:
        return None

    async with AgentTestKit(mine, theirs, adder()) as kit:
        request = await kit.request("job.requested", {}, response_event="done")

    assert taken == ["mine"]
    assert kit.result_of(request).success


async def test_the_sub_task_request_names_its_sub_task_and_inherits_the_plan() -> None:
    worker = Worker("doubler", register=False)

    @worker.on_task("double.requested")
    async def start(task: TaskContext[Any]) -> None:
        await task.delegate("add.requested", {"a": 1, "b": 1}, response_event="doubled")

    async with AgentTestKit(worker, loopback=False) as kit:
        await kit.request("double.requested", {}, response_event="done", plan_id="plan-7")

    (sub,) = kit.requests("add.requested")
    assert isinstance(sub, ActionRequest)
    assert sub.plan_id == "plan-7"
    assert sub.task_id == sub.correlation_id
    assert sub.response_event == "doubled"


def test_on_task_derives_a_capability_from_the_input_model() -> None:
    worker = Worker("echo", register=False)

    @worker.on_task("echo.requested")
    async def echo(task: TaskContext[Text]) -> None:
        """Repeats the text."""

    (capability,) = worker.registration().capabilities
    assert capability.consumed_event.json_schema is not None
    assert capability.consumed_event.json_schema["required"] == ["text"]
    assert capability.description == "Repeats the text."


def test_a_worker_refuses_a_second_on_result_for_the_same_event() -> None:
    worker = Worker("dup", register=False)

    @worker.on_result("x.done")
    async def first(result: ResultContext) -> None:
        return None

    with pytest.raises(AgentDefinitionError, match="already handles"):

        @worker.on_result("x.done")
        async def second(result: ResultContext) -> None:
            return None


async def test_a_handler_can_use_working_memory_in_a_unit_test() -> None:
    worker = Worker("noter", register=False)

    @worker.on_task("note.requested")
    async def note(task: TaskContext[Any], context: PlatformContext) -> None:
        await context.memory.put_working("plan-1", "note", {"text": task.data["text"]})
        entry = await context.memory.get_working("plan-1", "note")
        assert entry is not None
        await task.complete({"stored": entry.value, "version": entry.version})

    async with AgentTestKit(worker) as kit:
        request = await kit.request("note.requested", {"text": "hi"}, response_event="noted")

    assert kit.result_of(request).result == {"stored": {"text": "hi"}, "version": 1}


async def test_a_request_redelivered_after_a_crash_before_publishing_sends_its_sub_task() -> None:
    from disco.bus import PublishError

    worker = Worker("doubler", register=False)

    @worker.on_task("double.requested")
    async def start(task: TaskContext[Any]) -> None:
        await task.delegate("add.requested", {"a": 4, "b": 4}, response_event="doubled")

    @worker.on_result("doubled")
    async def finish(result: ResultContext) -> None:
        task = await result.restore_task()
        await task.complete(result.result)

    async with AgentTestKit(worker, adder(), raise_errors=False) as kit:
        bus = kit._members[0].bus
        write = bus._write_envelope
        failures: list[str] = []

        async def broker_gone_once(name: str, envelope: Any, *receiver: Any) -> Any:
            if envelope.type == "add.requested" and not failures:
                failures.append(envelope.id)
                raise PublishError("the broker went away")
            return await write(name, envelope, *receiver)

        bus._write_envelope = broker_gone_once  # type: ignore[method-assign]
        request = await kit.request("double.requested", {}, response_event="done")
        assert kit.answers(request.correlation_id) == []  # saved, but the request never left
        kit._members[0].seen.clear()  # the bus redelivers the uncommitted request
        await kit.deliver("action-requests", request)
        await kit.settle()

    assert len(failures) == 1
    assert kit.result_of(request).result == {"total": 8}


async def test_fan_in_can_aggregate_the_latest_group_without_keeping_its_id() -> None:
    worker = Worker("lazy-summer", register=False)

    @worker.on_task("sum.requested")
    async def fan_out(task: TaskContext[Any]) -> None:
        await task.delegate_parallel(
            [("add.requested", {"a": i, "b": i}, "part.added") for i in range(1, 4)]
        )

    @worker.on_result("part.added")
    async def fan_in(result: ResultContext) -> None:
        task = await result.restore_task()
        parts = task.aggregate_parallel_results()
        if parts is not None:
            await task.complete([part["total"] for part in parts.values()])  # type: ignore[index,call-overload]

    async with AgentTestKit(worker, adder()) as kit:
        request = await kit.request("sum.requested", {}, response_event="summed")

    assert kit.result_of(request).result == [2, 4, 6]
