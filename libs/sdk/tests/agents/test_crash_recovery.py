"""A handler killed between saving a context and publishing what it saved: the work still ends.

Each test arms a crash at one point (``AgentTestKit.crash_after``): the handler
stops dead there, and the kit delivers its envelope again as the bus would to
the instance that takes over. Without recovery the task or plan would wait
until its TTL; with it, the redelivered envelope publishes what was saved, with
the first ids, and the work finishes exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest

from disco.agents import GoalContext, Planner, ResultContext, TaskContext, Worker
from disco.testing import CRASH_ENV, CRASH_EXIT_CODE, AgentTestKit, CrashPoint
from disco_common.envelope import Envelope
from disco_common.plans import PlanDefinition, StateAction, StateConfig, StateTransition
from disco_common.tasks import DelegationSpec, SubTaskStatus
from libs.sdk.tests.agents._agents import adder
from libs.sdk.tests.agents.test_planner import (
    RESEARCH,
    booking_plan,
    research_planner,
    search_tool,
)


def stepper() -> Worker:
    """Adds 1+1, then the total to itself, then asks a human, then answers."""
    worker = Worker("stepper", register=False)

    @worker.on_task("steps.requested")
    async def first(task: TaskContext[Any]) -> None:
        await task.delegate("add.requested", {"a": 1, "b": 1}, response_event="step.one")

    @worker.on_result("step.one")
    async def second(result: ResultContext) -> None:
        task = await result.restore_task()
        total = result.result["total"]  # type: ignore[index,call-overload]
        await task.delegate("add.requested", {"a": total, "b": total}, response_event="step.two")

    @worker.on_result("step.two")
    async def third(result: ResultContext) -> None:
        task = await result.restore_task()
        task.state["total"] = result.result["total"]  # type: ignore[index,call-overload]
        await task.request_human_input(
            f"Accept {task.state['total']}?", response_event="step.approved", timeout_seconds=60
        )

    @worker.on_human_input("step.approved")
    async def last(result: ResultContext) -> None:
        task = await result.restore_task()
        if result.answer == "yes":
            await task.complete({"total": task.state["total"]})
        else:
            await task.fail("refused")

    return worker


def fanner() -> Worker:
    """Adds 1+1, then fans out three additions of that total, then sums them."""
    worker = Worker("fanner", register=False)

    @worker.on_task("fan.requested")
    async def first(task: TaskContext[Any]) -> None:
        await task.delegate("add.requested", {"a": 1, "b": 1}, response_event="fan.seed")

    @worker.on_result("fan.seed")
    async def fan_out(result: ResultContext) -> None:
        task = await result.restore_task()
        seed = result.result["total"]  # type: ignore[index,call-overload]
        await task.delegate_parallel(
            [
                DelegationSpec(
                    event_type="add.requested", data={"a": seed, "b": i}, response_event="fan.part"
                )
                for i in range(3)
            ]
        )

    @worker.on_result("fan.part")
    async def fan_in(result: ResultContext) -> None:
        task = await result.restore_task()
        parts = task.aggregate_parallel_results()
        if parts is not None:
            await task.complete({"sum": sum(p["total"] for p in parts.values())})  # type: ignore[index,call-overload,misc]

    return worker


def asker() -> Worker:
    worker = Worker("asker", register=False)

    @worker.on_task("ask.requested")
    async def ask(task: TaskContext[Any]) -> None:
        await task.request_human_input("Go?", response_event="ask.answered", timeout_seconds=60)

    @worker.on_human_input("ask.answered")
    async def decide(result: ResultContext) -> None:
        task = await result.restore_task()
        await task.complete({"answer": result.answer})

    return worker


def _ids(envelopes: list[Any]) -> list[str]:
    return [envelope.id for envelope in envelopes]


# -- Worker --------------------------------------------------------------------------------


async def test_a_result_handler_killed_after_saving_its_next_delegation_still_finishes() -> None:
    worker = stepper()
    async with AgentTestKit(worker, adder()) as kit:
        kit.crash_after(CrashPoint.TASK_DELEGATED, agent=worker, skip=1)
        request = await kit.request("steps.requested", {}, response_event="steps.done")
        await kit.answer_human(answer="yes")

    (crash,) = kit.crashes
    assert (crash.point, crash.envelope.type) == (CrashPoint.TASK_DELEGATED, "step.one")
    assert kit.result_of(request).result == {"total": 4}
    second = [r for r in kit.requests("add.requested") if r.response_event == "step.two"]
    assert len(second) == 1  # sent once: by the redelivered answer
    assert second[0].causation_id == crash.envelope.id
    delegated = kit.system_events("task.delegated")
    assert [e.data["sub_tasks"][0]["response_event"] for e in delegated] == [  # type: ignore[index,call-overload]
        "step.one",
        "step.two",  # announced by the recovery too
    ]
    assert kit.memory.tasks == {}


async def test_a_fan_out_killed_after_its_save_sends_the_whole_group_on_redelivery() -> None:
    worker = fanner()
    async with AgentTestKit(worker, adder()) as kit:
        kit.crash_after(CrashPoint.TASK_DELEGATED, agent=worker, skip=1)
        request = await kit.request("fan.requested", {}, response_event="fan.done")

    assert [c.envelope.type for c in kit.crashes] == ["fan.seed"]
    assert kit.result_of(request).result == {"sum": 2 * 3 + 0 + 1 + 2}
    parts = [r for r in kit.requests("add.requested") if r.response_event == "fan.part"]
    assert len(parts) == 3
    assert len(set(_ids(parts))) == 3


async def test_a_task_handler_killed_after_saving_its_question_asks_on_redelivery() -> None:
    worker = asker()
    async with AgentTestKit(worker) as kit:
        kit.crash_after(CrashPoint.TASK_ASKED)
        request = await kit.request("ask.requested", {}, response_event="asked")
        questions = kit.questions()
        await kit.answer_human(answer="go")

    assert [c.envelope.id for c in kit.crashes] == [request.id]
    assert len(questions) == 1
    assert questions[0].data["question"] == "Go?"  # type: ignore[index,call-overload]
    assert questions[0].causation_id == request.id
    assert kit.result_of(request).result == {"answer": "go"}


async def test_a_result_handler_killed_after_saving_its_question_asks_on_redelivery() -> None:
    worker = stepper()
    async with AgentTestKit(worker, adder()) as kit:
        kit.crash_after(CrashPoint.TASK_ASKED, agent=worker)
        request = await kit.request("steps.requested", {}, response_event="steps.done")
        (question,) = kit.questions()
        (record,) = kit.memory.tasks.values()
        await kit.answer_human(question, "yes")

    assert [c.envelope.type for c in kit.crashes] == ["step.two"]
    assert record.context.human_input is not None
    assert question.id == record.context.human_input.request_id
    assert question.time == record.context.human_input.asked_at  # the tracker's clock starts there
    assert kit.result_of(request).result == {"total": 4}


async def test_a_task_killed_after_saving_its_completion_answers_on_redelivery() -> None:
    worker = stepper()
    async with AgentTestKit(worker, adder()) as kit:
        kit.crash_after(CrashPoint.TASK_FINISHED)
        request = await kit.request("steps.requested", {}, response_event="steps.done")
        answer = await kit.answer_human(answer="yes")

    assert [c.envelope.id for c in kit.crashes] == [answer.id]
    assert kit.result_of(request).result == {"total": 4}
    assert len(kit.system_events("task.completed")) == 1
    assert kit.memory.tasks == {}


async def test_a_task_killed_after_saving_its_failure_answers_with_the_error_on_redelivery() -> (
    None
):
    worker = stepper()
    async with AgentTestKit(worker, adder()) as kit:
        kit.crash_after(CrashPoint.TASK_FINISHED)
        request = await kit.request("steps.requested", {}, response_event="steps.done")
        await kit.answer_human(answer="no")

    assert len(kit.crashes) == 1
    result = kit.result_of(request)
    assert result.success is False
    assert result.error is not None
    assert result.error.message == "refused"
    assert kit.memory.tasks == {}


async def test_a_duplicated_answer_re_sends_nothing_while_the_next_sub_task_is_young() -> None:
    worker = stepper()
    async with AgentTestKit(worker, loopback=False) as kit:
        await kit.request("steps.requested", {}, response_event="steps.done")
        (first,) = kit.requests("add.requested")
        await kit.reply(first, {"total": 2})
        writes, published = kit.memory.writes, len(kit.published)
        await kit.reply(first, {"total": 2})  # the same answer again, as a new envelope

    assert kit.memory.writes == writes
    assert len(kit.published) == published + 1  # only the duplicate itself


def _age_pending(kit: AgentTestKit, by: timedelta) -> None:
    """Move the stored delegation times back, as if the sub-tasks had waited ``by``."""
    for record in kit.memory.tasks.values():
        for info in record.context.sub_tasks.values():
            if info.delegated_at is not None:
                info.delegated_at -= by


async def test_a_stale_answer_re_sends_a_long_pending_sub_task_once_with_its_first_id() -> None:
    worker = stepper()
    async with AgentTestKit(worker, loopback=False) as kit:
        await kit.request("steps.requested", {}, response_event="steps.done")
        (first,) = kit.requests("add.requested")
        await kit.reply(first, {"total": 2})
        _age_pending(kit, timedelta(minutes=1))
        for _ in range(3):  # a burst of duplicates
            await kit.reply(first, {"total": 2})

    sent = [r for r in kit.requests("add.requested") if r.response_event == "step.two"]
    assert len(sent) == 2  # the first send and one re-send
    assert sent[0].id == sent[1].id
    assert sent[0].data == sent[1].data == {"a": 2, "b": 2}


async def test_a_payload_too_large_to_keep_is_not_kept_yet_a_redelivered_request_sends_it() -> None:
    worker = Worker("bulky", register=False)
    big = "x" * (70 * 1024)

    @worker.on_task("bulk.requested")
    async def start(task: TaskContext[Any]) -> None:
        await task.delegate("store.requested", {"blob": big}, response_event="stored")

    async with AgentTestKit(worker, loopback=False) as kit:
        kit.crash_after(CrashPoint.TASK_DELEGATED)
        await kit.request("bulk.requested", {}, response_event="bulk.done")

    (record,) = kit.memory.tasks.values()
    (info,) = record.context.sub_tasks.values()
    assert (info.request_kept, info.request_data, info.status) == (
        False,
        None,
        SubTaskStatus.PENDING,
    )
    (sent,) = kit.requests("store.requested")
    assert sent.data == {"blob": big}


def test_an_unknown_crash_point_lists_the_known_ones() -> None:
    kit = AgentTestKit(Worker("w", register=False))

    with pytest.raises(ValueError, match=r"task\.delegated"):
        kit.crash_after("task.exploded")


def test_a_process_armed_by_the_environment_exits_at_the_crash_point() -> None:
    script = (
        "from disco._faults import CrashPoint, crash_point\n"
        "crash_point(CrashPoint.TASK_DELEGATED)\n"
        "print('first passed', flush=True)\n"
        "crash_point(CrashPoint.TASK_DELEGATED)\n"
        "print('second passed', flush=True)\n"
    )
    env = {**os.environ, CRASH_ENV: "plan.action,task.delegated@2"}

    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == CRASH_EXIT_CODE
    assert done.stdout == "first passed\n"


# -- Planner -------------------------------------------------------------------------------


async def test_a_plan_killed_after_saving_its_second_action_sends_it_on_redelivery() -> None:
    planner = research_planner()
    async with AgentTestKit(planner, search_tool()) as kit:
        kit.crash_after(CrashPoint.PLAN_ACTION, agent=planner, skip=1)
        goal = await kit.request("research.goal", {"topic": "x", "hits": 2}, response_event="r")

    (crash,) = kit.crashes
    assert crash.envelope.type == "search.done"
    (summary,) = kit.requests("summarize.requested")
    assert summary.causation_id == crash.envelope.id
    moves = [
        (e.data["from_state"], e.data["to_state"]) for e in kit.system_events("plan.state_changed")
    ]  # type: ignore[index,call-overload]
    assert moves == [
        (None, "start"),
        ("start", "searching"),
        ("searching", "summarizing"),  # announced by the recovery
        ("summarizing", "done"),
    ]
    assert kit.result_of(goal).result == {
        "searching": {"query": "x", "count": 2},
        "summarizing": {"summary": "2 results for x"},
    }


async def test_a_plan_killed_after_saving_its_question_to_a_human_asks_on_redelivery() -> None:
    planner = research_planner()
    async with AgentTestKit(planner, search_tool()) as kit:
        kit.crash_after(CrashPoint.PLAN_ACTION, agent=planner, skip=1)
        goal = await kit.request("research.goal", {"topic": "x", "hits": 0}, response_event="r")
        questions = kit.questions()
        await kit.answer_human(answer="yes")

    assert len(kit.crashes) == 1
    (question,) = questions
    assert question.data["question"] == "Nothing found for x. Give up?"  # type: ignore[index,call-overload]
    assert kit.result_of(goal).success is True


def _trip_and_booking() -> tuple[Planner, Planner]:
    parent, child = Planner("parent", register=False), Planner("child", register=False)
    parent.add_plan(
        "trip.goal",
        PlanDefinition(
            plan_type="trip",
            states=[
                StateConfig(state_name="start", default_next="searching"),
                StateConfig(
                    state_name="searching",
                    action=StateAction(
                        event_type="search.requested",
                        response_event="trip.found",
                        data={"query": "{goal_data.city}", "hits": 1},
                    ),
                    transitions=[StateTransition(on_event="trip.found", to_state="booking")],
                ),
                StateConfig(
                    state_name="booking",
                    action=StateAction(
                        event_type="booking.goal",
                        response_event="trip.booked",
                        data={"city": "{goal_data.city}"},
                    ),
                    transitions=[StateTransition(on_event="trip.booked", to_state="done")],
                ),
                StateConfig(state_name="done", is_terminal=True),
            ],
        ),
    )
    child.add_plan("booking.goal", booking_plan())
    return parent, child


async def test_a_plan_killed_after_saving_a_sub_plan_goal_starts_the_sub_plan_on_redelivery() -> (
    None
):
    parent, child = _trip_and_booking()
    async with AgentTestKit(parent, child, search_tool()) as kit:
        kit.crash_after(CrashPoint.PLAN_ACTION, agent=parent, skip=1)
        goal = await kit.request("trip.goal", {"city": "Lyon"}, response_event="trip.done")

    assert [c.envelope.type for c in kit.crashes] == ["trip.found"]
    assert len(kit.requests("booking.goal")) == 1
    assert kit.result_of(goal).result == {
        "searching": {"query": "Lyon", "count": 1},
        "booking": {"searching": {"query": "hotel in Lyon", "count": 2}},
    }


async def test_a_sub_plan_killed_after_saving_its_end_answers_its_parent_on_redelivery() -> None:
    parent, child = _trip_and_booking()
    async with AgentTestKit(parent, child, search_tool()) as kit:
        kit.crash_after(CrashPoint.PLAN_FINISHED, agent=child)
        goal = await kit.request("trip.goal", {"city": "Lyon"}, response_event="trip.done")

    assert [(c.agent, c.envelope.type) for c in kit.crashes] == [("child", "hotel.found")]
    assert kit.result_of(goal).success is True
    assert len(kit.system_events("plan.completed")) == 2
    assert all(record.context.outcome_sent for record in kit.memory.plans.values())


async def test_a_plan_killed_after_saving_its_failure_answers_the_goal_on_redelivery() -> None:
    planner = research_planner()
    async with AgentTestKit(planner, search_tool()) as kit:
        kit.crash_after(CrashPoint.PLAN_FINISHED)
        goal = await kit.request("research.goal", {"topic": "boom", "hits": 1}, response_event="r")

    assert len(kit.crashes) == 1
    result = kit.result_of(goal)
    assert result.success is False
    assert result.error is not None
    assert result.error.message == "the plan ended in its failure state 'failed'"


async def test_a_gate_opened_by_an_event_that_dies_mid_way_opens_when_the_event_comes_again() -> (
    None
):
    planner = Planner("gatekeeper", register=False)
    states = [
        StateConfig(state_name="start", default_next="quoting"),
        StateConfig(
            state_name="quoting",
            action=StateAction(event_type="search.requested", response_event="quoted", data={}),
            transitions=[StateTransition(on_event="quoted", to_state="done")],
        ),
        StateConfig(state_name="done", is_terminal=True),
    ]

    @planner.on_goal("gated.goal")
    async def start(goal: GoalContext[Any]) -> None:
        await goal.new_plan(states).pause("waiting for the gate")

    @planner.on_event(topic="business-facts", event_type="gate.opened")
    async def opened(event: Envelope) -> None:
        plan = await planner.restore_plan(event.data["plan_id"])  # type: ignore[index,call-overload]
        if plan is not None and plan.status == "paused":
            await plan.resume()

    async with AgentTestKit(planner, loopback=False) as kit:
        kit.crash_after(CrashPoint.PLAN_ACTION)
        goal = await kit.request("gated.goal", {}, response_event="gated.done")
        (paused,) = kit.system_events("plan.paused")
        gate = await kit.publish(
            "business-facts",
            "gate.opened",
            {"plan_id": paused.data["plan_id"]},  # type: ignore[index,call-overload]
        )
        (quote,) = kit.requests("search.requested")
        await kit.reply(quote, {"price": 3})

    assert [c.envelope.id for c in kit.crashes] == [gate.id]
    assert quote.causation_id == gate.id
    assert kit.result_of(goal).result == {"quoting": {"price": 3}}


async def test_a_stale_answer_re_sends_a_plans_long_pending_action_once() -> None:
    planner = research_planner()
    async with AgentTestKit(planner, loopback=False) as kit:
        await kit.request("research.goal", {"topic": "x", "hits": 2}, response_event="r")
        (search,) = kit.requests("search.requested")
        await kit.reply(search, {"query": "x", "count": 2})
        (record,) = kit.memory.plans.values()
        assert record.context.current_action is not None
        record.context.current_action.sent_at -= timedelta(minutes=1)
        for _ in range(3):
            await kit.reply(search, {"query": "x", "count": 2})

    sent = kit.requests("summarize.requested")
    assert len(sent) == 2
    assert sent[0].id == sent[1].id
    assert sent[0].data == sent[1].data == {"query": "x", "count": 2}


async def test_a_duplicated_answer_to_a_plan_publishes_nothing_while_its_action_is_young() -> None:
    planner = Planner("researcher", register=False)
    planner.add_plan("research.goal", RESEARCH)
    async with AgentTestKit(planner, loopback=False) as kit:
        await kit.request("research.goal", {"topic": "x", "hits": 2}, response_event="r")
        (search,) = kit.requests("search.requested")
        await kit.reply(search, {"query": "x", "count": 2})
        writes, published = kit.memory.writes, len(kit.published)
        await kit.reply(search, {"query": "x", "count": 2})

    assert kit.memory.writes == writes
    assert len(kit.published) == published + 1
