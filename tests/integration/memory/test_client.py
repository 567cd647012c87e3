"""MemoryClient against the real service: every family through the typed SDK client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from disco.clients import ServiceConflictError, ServiceValidationError
from disco_common.memory import EpisodicRole, MemoryVisibility, ProcedureCreate, ProcedureUpdate
from disco_common.plans import PlanContextData, PlanStatus
from disco_common.tasks import SubTaskInfo, TaskContextData
from tests.integration.memory.conftest import new_id


async def test_a_worker_saves_before_delegating_and_restores_by_sub_task(
    memory_client_for: Callable[..., Any], tenant: str
) -> None:
    task, sub = new_id("task"), new_id("sub")
    context = TaskContextData(
        task_id=task,
        event_type="analyze.requested",
        response_event="analyze.completed",
        sub_tasks={sub: SubTaskInfo(sub_task_id=sub, event_type="x.do", response_event="x.done")},
        state={"pending_group": "g1"},
    )
    async with memory_client_for(tenant) as saver, memory_client_for(tenant) as restorer:
        saved = await saver.store_task_context(task, context, plan_id="plan-1", ttl_seconds=600)
        restored = await restorer.get_task_by_subtask(sub)
        listed = await restorer.list_task_contexts("plan-1")
        deleted = await restorer.delete_task_context(task)
        after = await restorer.get_task_context(task)

    assert saved.context.plan_id == "plan-1"
    assert restored is not None
    assert restored.context == saved.context
    assert [r.task_id for r in listed.items] == [task]
    assert deleted is True
    assert after is None


async def test_a_stale_task_context_save_raises_a_conflict_error(
    memory_client_for: Callable[..., Any], tenant: str
) -> None:
    task = new_id("task")
    context = TaskContextData(task_id=task, event_type="a.b", response_event="a.c")
    async with memory_client_for(tenant) as memory:
        await memory.store_task_context(task, context)
        await memory.store_task_context(task, context)
        with pytest.raises(ServiceConflictError) as caught:
            await memory.store_task_context(task, context, expected_version=1)

    assert caught.value.code == "version_conflict"
    assert caught.value.details["current_version"] == 2


async def test_a_planner_saves_and_restores_its_plan_by_correlation(
    memory_client_for: Callable[..., Any], tenant: str
) -> None:
    plan, correlation, session = new_id("plan"), new_id("corr"), new_id("s")
    context = PlanContextData(
        plan_id=plan, goal_event="g.x", response_event="g.y", correlation_ids=[correlation]
    )
    async with memory_client_for(tenant) as memory:
        saved = await memory.store_plan_context(plan, context, session_id=session)
        by_id = await memory.get_plan_context(plan)
        by_correlation = await memory.get_plan_by_correlation(correlation)
        removed = await memory.delete_plan_context(plan)
        missing = await memory.get_plan_by_correlation(correlation)

    assert saved.session_id == session
    assert by_id is not None
    assert by_id.context.correlation_ids == [correlation]
    assert by_correlation is not None
    assert by_correlation.plan_id == plan
    assert removed is True
    assert missing is None


async def test_plans_and_sessions_through_the_client(
    memory_client_for: Callable[..., Any], tenant: str
) -> None:
    async with memory_client_for(tenant) as memory:
        session = await memory.create_session(name="chat", metadata={"k": 1})
        plan = await memory.create_plan(
            "research.goal", "research.done", goal_data={"q": 1}, session_id=session.session_id
        )
        running = await memory.update_plan_status(plan.plan_id, PlanStatus.RUNNING)
        listed = await memory.list_plans(status=PlanStatus.RUNNING)
        fetched = await memory.get_plan(plan.plan_id)
        touched = await memory.get_session(session.session_id)
        sessions = await memory.list_sessions(limit=10)
        none = await memory.get_plan(new_id("nope"))

    assert running.status is PlanStatus.RUNNING
    assert [p.plan_id for p in listed.items] == [plan.plan_id]
    assert fetched == running
    assert touched is not None
    assert touched.plan_count == 1
    assert [s.session_id for s in sessions.items] == [session.session_id]
    assert none is None


async def test_working_memory_through_the_client(
    memory_client_for: Callable[..., Any], tenant: str
) -> None:
    plan = new_id("plan")
    async with memory_client_for(tenant) as memory:
        assert await memory.store("draft", {"text": "v1"}, plan) is True
        value = await memory.retrieve("draft", plan)
        entry = await memory.put_working(plan, "draft", {"text": "v2"}, expected_version=1)
        with pytest.raises(ServiceConflictError):
            await memory.put_working(plan, "draft", {"text": "v3"}, expected_version=1)
        await memory.put_working(plan, "other", 1, ttl_seconds=60)
        page = await memory.list_working(plan)
        deleted = await memory.delete_working(plan, "draft")
        cleared = await memory.clear_working(plan)
        missing = await memory.retrieve("draft", plan)

    assert value == {"text": "v1"}
    assert entry.version == 2
    assert [e.key for e in page.items] == ["draft", "other"]
    assert deleted is True
    assert cleared == 1
    assert missing is None


async def test_semantic_episodic_and_procedural_memory_through_the_client(
    memory_client_for: Callable[..., Any], tenant: str
) -> None:
    session = new_id("s")
    async with memory_client_for(tenant) as memory:
        model = await memory.embedding_model()
        stored = await memory.upsert_semantic(
            "The Eiffel Tower is in Paris.", visibility=MemoryVisibility.PUBLIC, metadata={"k": "v"}
        )
        await memory.upsert_semantic("Bananas are rich in potassium.")
        hits = await memory.query_semantic("Where is the Eiffel Tower?", limit=1, filter={"k": "v"})
        assert await memory.get_semantic(stored.memory_id) == stored
        await memory.append_turn(
            session, "assistant", EpisodicRole.USER, "I love hiking in the Alps."
        )
        recent = await memory.recent_turns(session)
        found = await memory.search_turns("mountain walks", session_id=session)
        corrected = await memory.update_turn(
            recent[0].turn_id, content="I love hiking in the Andes.", metadata={"fixed": True}
        )
        fetched = await memory.get_turn(recent[0].turn_id)
        turn_deleted = await memory.delete_turn(recent[0].turn_id)
        turn_gone = await memory.get_turn(recent[0].turn_id)
        procedure = await memory.create_procedure(
            ProcedureCreate(name="reboot", trigger="server unresponsive", steps=["power cycle"])
        )
        changed = await memory.update_procedure(
            procedure.procedure_id, ProcedureUpdate(name="restart")
        )
        relevant = await memory.search_procedures("the machine does not answer pings")
        procedures = await memory.list_procedures()
        assert await memory.delete_procedure(procedure.procedure_id) is True
        assert await memory.delete_semantic(stored.memory_id) is True
        assert await memory.delete_semantic(stored.memory_id) is False

    assert model.dimensions == 384
    assert [h.record.memory_id for h in hits] == [stored.memory_id]
    assert [t.content for t in recent] == ["I love hiking in the Alps."]
    assert found[0].turn.content == "I love hiking in the Alps."
    assert (corrected.content, corrected.metadata) == (
        "I love hiking in the Andes.",
        {"fixed": True},
    )
    assert fetched == corrected
    assert (turn_deleted, turn_gone) == (True, None)
    assert changed.name == "restart"
    # A partial update leaves the fields it did not name as they were.
    assert (changed.trigger, changed.steps) == ("server unresponsive", ["power cycle"])
    assert relevant[0].procedure.procedure_id == procedure.procedure_id
    assert [p.procedure_id for p in procedures.items] == [procedure.procedure_id]


async def test_snapshots_and_erasure_through_the_client(
    memory_client_for: Callable[..., Any], tenant: str
) -> None:
    session = new_id("s")
    async with memory_client_for(tenant) as memory:
        summary = await memory.put_snapshot(
            session, "agent", full={"a": 1}, slim={"b": 2}, status="idle"
        )
        snapshot = await memory.get_snapshot(session, "agent")
        listed = await memory.list_snapshots(session)
        erased = await memory.erase_user("alice")
        gone = await memory.get_snapshot(session, "agent")

    assert summary.version == 1
    assert snapshot is not None
    assert snapshot.full == {"a": 1}
    assert [s.agent_id for s in listed] == ["agent"]
    assert erased.deleted["agent_snapshots"] == 1
    assert gone is None


async def test_bad_input_raises_a_validation_error_with_the_services_details(
    memory_client_for: Callable[..., Any], tenant: str
) -> None:
    async with memory_client_for(tenant) as memory:
        with pytest.raises(ServiceValidationError) as caught:
            await memory.query_semantic(embedding=[0.5, 0.5])

    assert caught.value.status == 422
    assert caught.value.details == {"dimensions": 2, "expected": 384}
