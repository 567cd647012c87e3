"""Planners end to end: a nested sub-plan, a failure branch, a HITL pause, a gate."""

from __future__ import annotations

from disco.bus import BusClient
from disco_common.notifications import HumanInputResponse
from disco_common.tasks import ActionResultData
from disco_common.topics import Topic
from tests.e2e.conftest import TENANT, AgentProcess, Watcher, data_of


async def test_a_plan_succeeds_through_a_nested_sub_plan_of_another_planner(
    fleet: dict[str, AgentProcess], caller: BusClient, watcher: Watcher
) -> None:
    answer = await caller.request(
        "e2e.trip.goal",
        {"city": "Lyon", "hits": 2},
        response_event="e2e.trip.done",
        tenant_id=TENANT,
        session_id="s-lyon",
        wait=60,
    )

    result = ActionResultData.model_validate(answer.data)
    assert result.success, result.error
    assert result.result == {
        "searching": {"query": "Lyon", "count": 2},
        "booking": {"adding": {"total": 120}},
    }
    started = await watcher.wait_for(
        lambda topic, e: e.type == "plan.started" and e.session_id == "s-lyon", count=2
    )
    parent = next(e for e in started if data_of(e)["goal_event"] == "e2e.trip.goal")
    child = next(e for e in started if data_of(e)["goal_event"] == "e2e.booking.goal")
    assert data_of(child)["parent_plan_id"] == data_of(parent)["plan_id"]


async def test_a_failed_action_takes_the_failure_branch_and_answers_the_goal_with_an_error(
    fleet: dict[str, AgentProcess], caller: BusClient, watcher: Watcher
) -> None:
    answer = await caller.request(
        "e2e.trip.goal",
        {"city": "boom", "hits": 1},
        response_event="e2e.trip.done",
        tenant_id=TENANT,
        wait=60,
    )

    result = ActionResultData.model_validate(answer.data)
    assert result.success is False
    assert result.error is not None
    assert "failure state 'failed'" in result.error.message
    await watcher.wait_for(
        lambda topic, e: e.type == "plan.failed" and data_of(e)["final_state"] == "failed"
    )


async def test_a_conditional_transition_pauses_for_a_human_and_the_answer_resumes_the_plan(
    fleet: dict[str, AgentProcess], caller: BusClient, watcher: Watcher
) -> None:
    request = await caller.request(
        "e2e.trip.goal",
        {"city": "Nowhere", "hits": 0},
        response_event="e2e.trip.done",
        tenant_id=TENANT,
    )
    (question,) = await watcher.wait_for(
        lambda topic, e: (
            e.type == "notification.human_input"
            and data_of(e)["question"] == "Nothing found in Nowhere. Go anyway?"
        ),
        timeout=60,
    )
    plan_id = question.plan_id
    await watcher.wait_for(
        lambda topic, e: e.type == "plan.paused" and data_of(e)["plan_id"] == plan_id
    )
    await caller.publish(
        Topic.NOTIFICATION_EVENTS,
        "e2e.trip.clarified",
        HumanInputResponse(answer="yes", request_id=question.id, plan_id=plan_id),
        correlation_id=question.correlation_id,
        tenant_id=TENANT,
    )

    (answer,) = await watcher.wait_for(
        lambda topic, e: topic == "action-results" and e.correlation_id == request.correlation_id,
        timeout=60,
    )
    await watcher.wait_for(
        lambda topic, e: e.type == "plan.completed" and data_of(e)["plan_id"] == plan_id
    )
    result = ActionResultData.model_validate(answer.data)
    assert result.success, result.error
    assert result.result == {"searching": {"query": "Nowhere", "count": 0}, "asking": "yes"}
    types = [
        e.type
        for e in watcher.matching(
            lambda topic, e: topic == "system-events" and e.plan_id == plan_id
        )
    ]
    assert types.index("plan.paused") < types.index("plan.resumed") < types.index("plan.completed")


async def test_a_plan_paused_at_a_gate_waits_until_an_external_event_resumes_it(
    fleet: dict[str, AgentProcess], caller: BusClient, watcher: Watcher
) -> None:
    request = await caller.request(
        "e2e.gated.goal", {}, response_event="e2e.gated.done", tenant_id=TENANT
    )
    (paused,) = await watcher.wait_for(
        lambda topic, e: e.type == "plan.paused" and e.causation_id == request.id, timeout=60
    )
    plan_id = data_of(paused)["plan_id"]
    early = watcher.matching(lambda topic, e: topic == "action-requests" and e.plan_id == plan_id)
    await caller.announce("e2e.gate.opened", {"plan_id": plan_id, "by": "carol"}, tenant_id=TENANT)

    (answer,) = await watcher.wait_for(
        lambda topic, e: topic == "action-results" and e.correlation_id == request.correlation_id,
        timeout=60,
    )
    assert data_of(paused)["reason"] == "waiting for the gate"
    assert early == []  # nothing ran while the gate was closed
    result = ActionResultData.model_validate(answer.data)
    assert result.result == {"user_input": {"opened_by": "carol"}, "pricing": {"total": 3}}
    await watcher.wait_for(
        lambda topic, e: e.type == "plan.resumed" and data_of(e)["plan_id"] == plan_id
    )
