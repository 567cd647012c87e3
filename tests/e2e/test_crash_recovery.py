"""Agent processes killed between saving a context and publishing what it saved.

Each test starts one instance armed to exit (``os._exit``, as abrupt as a
SIGKILL: no offset commit, no leaving the group) right after a save at a named
crash point, checks in the memory service that the save happened and the
publish did not, then starts a second instance: the uncommitted envelope is
redelivered to it, it publishes what was saved (with the first ids) and the
work finishes, exactly once.
"""

from __future__ import annotations

import asyncio
import dataclasses

from disco.bus import BusClient
from disco.clients import MemoryClient, ServiceClientSettings
from disco.testing import CRASH_ENV, CRASH_EXIT_CODE
from disco_common.plans import PlanContextData
from disco_common.tasks import ActionResultData, SubTaskStatus, TaskContextData
from tests.e2e.conftest import (
    TENANT,
    AgentProcess,
    Stack,
    Watcher,
    start_agents,
    stop_agents,
)


def _armed(stack: Stack, crash_after: str) -> Stack:
    """The stack's environment, with agent processes set to crash at ``crash_after``."""
    return dataclasses.replace(stack, env={**stack.env, CRASH_ENV: crash_after})


def _memory(stack: Stack) -> MemoryClient:
    return MemoryClient.from_settings(
        ServiceClientSettings(memory_url=stack.urls["memory"], tenant_id=TENANT)
    )


async def _saved_task(stack: Stack, task_id: str) -> TaskContextData:
    async with _memory(stack) as memory:
        record = await memory.get_task_context(task_id)
    assert record is not None, f"task {task_id!r} was not saved"
    return record.context


async def _saved_plan(stack: Stack, plan_id: str) -> PlanContextData:
    async with _memory(stack) as memory:
        record = await memory.get_plan_context(plan_id)
    assert record is not None, f"plan {plan_id!r} was not saved"
    return record.context


async def test_a_worker_killed_after_saving_its_next_delegation_is_finished_by_another_instance(
    fleet: dict[str, AgentProcess], e2e_stack: Stack, caller: BusClient, watcher: Watcher
) -> None:
    doomed = await asyncio.to_thread(start_agents, _armed(e2e_stack, "task.delegated@2"), "relay")
    survivor: AgentProcess | None = None
    try:
        request = await caller.request(
            "e2e.relay.requested", {"n": 5}, response_event="e2e.relay.done", tenant_id=TENANT
        )
        exit_code = await asyncio.to_thread(doomed.process.wait, 60)
        saved = await _saved_task(e2e_stack, request.id)
        survivor = await asyncio.to_thread(start_agents, e2e_stack, "relay")
        (answer,) = await watcher.wait_for(
            lambda topic, e: (
                topic == "action-results" and e.correlation_id == request.correlation_id
            ),
            timeout=60,
        )
    finally:
        stop_agents(doomed)
        if survivor is not None:
            stop_agents(survivor)

    assert exit_code == CRASH_EXIT_CODE
    first, second = sorted(saved.sub_tasks.values(), key=lambda info: info.delegated_at or 0)
    assert first.status is SubTaskStatus.COMPLETED
    assert second.status is SubTaskStatus.PENDING  # saved by the killed instance...
    assert second.request_data == {"a": 10, "b": 1}
    sent = watcher.matching(
        lambda topic, e: topic == "action-requests" and e.correlation_id == second.sub_task_id
    )
    assert len({e.id for e in sent}) == 1  # ...published by the survivor, with its first id
    assert sent[0].causation_id == second.caused_by
    result = ActionResultData.model_validate(answer.data)
    assert result.success, result.error
    assert result.result == {"total": 11, "completed_by": survivor.pid}


async def test_a_planner_killed_after_saving_its_second_state_is_finished_by_another_instance(
    fleet: dict[str, AgentProcess], e2e_stack: Stack, caller: BusClient, watcher: Watcher
) -> None:
    doomed = await asyncio.to_thread(
        start_agents, _armed(e2e_stack, "plan.action@2"), "relay-planner"
    )
    survivor: AgentProcess | None = None
    try:
        goal = await caller.request(
            "e2e.relay.goal", {"n": 5}, response_event="e2e.relay.planned", tenant_id=TENANT
        )
        exit_code = await asyncio.to_thread(doomed.process.wait, 60)
        (first_action,) = await watcher.wait_for(
            lambda topic, e: topic == "action-requests" and e.causation_id == goal.id
        )
        assert first_action.plan_id is not None
        saved = await _saved_plan(e2e_stack, first_action.plan_id)
        survivor = await asyncio.to_thread(start_agents, e2e_stack, "relay-planner")
        (answer,) = await watcher.wait_for(
            lambda topic, e: topic == "action-results" and e.correlation_id == goal.correlation_id,
            timeout=60,
        )
    finally:
        stop_agents(doomed)
        if survivor is not None:
            stop_agents(survivor)

    assert exit_code == CRASH_EXIT_CODE
    pending = saved.current_action
    assert saved.current_state == "taxing"  # saved by the killed instance...
    assert pending is not None
    assert pending.correlation_id in saved.correlation_ids
    sent = watcher.matching(
        lambda topic, e: topic == "action-requests" and e.correlation_id == pending.correlation_id
    )
    assert {e.id for e in sent} == {pending.request_id}  # ...published by the survivor
    result = ActionResultData.model_validate(answer.data)
    assert result.success, result.error
    assert result.result == {"pricing": {"total": 10}, "taxing": {"total": 11}}
