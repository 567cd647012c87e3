"""The SDK's memory stand-in and the real memory service keep one contract.

Every scenario runs twice: against :class:`disco.testing.InMemoryMemory` (what an
agent author's unit tests run on) and against the memory service itself (the
in-process app on real Postgres, through :class:`disco.clients.MemoryClient`, what
agents run on). The same assertions hold for both, so the stand-in cannot drift
from the service without a test failing. The stand-in half is a unit test (``make
test-unit``); the service half an integration test.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import pytest_asyncio
from fastapi import FastAPI

from disco.clients import (
    MemoryClient,
    ServiceConflictError,
    ServiceNotFoundError,
    ServiceValidationError,
)
from disco.testing import InMemoryMemory
from disco_common.plans import PlanContextData, PlanStatus
from disco_common.tasks import HumanInputWait, SubTaskInfo, TaskContextData
from disco_memory import MemorySettings
from tests.fixtures.infra import DatabaseUrls
from tests.fixtures.memory import (
    SharedEmbedder,
    memory_client,
    started_memory_app,
)
from tests.fixtures.settings import settings_factory

pytestmark = pytest.mark.asyncio(loop_scope="module")

USER = "alice"
Memory = InMemoryMemory | MemoryClient


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def memory_service(
    database: DatabaseUrls,
    kafka_bootstrap: str,
    module_topic_prefix: str,
    embedder: SharedEmbedder,
) -> AsyncIterator[FastAPI]:
    """The memory service, started in-process on the session's database."""
    settings = settings_factory(MemorySettings, database, kafka_bootstrap, module_topic_prefix)()
    async with started_memory_app(settings, embedder) as app:
        yield app


@pytest.fixture(
    params=[
        pytest.param("stand-in", id="stand-in"),
        pytest.param("service", id="service", marks=pytest.mark.integration),
    ]
)
def service_app(request: pytest.FixtureRequest) -> FastAPI | None:
    """None for the stand-in; the started app for the service (only then started)."""
    if request.param == "stand-in":
        return None
    app: FastAPI = request.getfixturevalue("memory_service")
    return app


@pytest_asyncio.fixture(loop_scope="module")
async def memory(service_app: FastAPI | None) -> AsyncIterator[Memory]:
    """The memory under contract: the stand-in, or a client of the service for a new tenant."""
    if service_app is None:
        yield InMemoryMemory(user_id=USER)
        return
    async with memory_client(service_app, new_id("contract"), USER) as client:
        yield client


def task_context(
    task_id: str, *sub_task_ids: str, plan_id: str | None = None, **fields: Any
) -> TaskContextData:
    return TaskContextData(
        task_id=task_id,
        event_type="report.requested",
        response_event="report.done",
        plan_id=plan_id,
        sub_tasks={
            sub: SubTaskInfo(sub_task_id=sub, event_type="part.requested", response_event="part")
            for sub in sub_task_ids
        },
        state={"step": 1, "notes": {"nested": [1, "two", None]}},
        **fields,
    )


def plan_context(plan_id: str, *correlation_ids: str, **fields: Any) -> PlanContextData:
    return PlanContextData(
        plan_id=plan_id,
        goal_event="trip.requested",
        response_event="trip.planned",
        correlation_ids=list(correlation_ids),
        state={"city": "Lyon"},
        **fields,
    )


def near(moment: datetime | None, expected: datetime, seconds: float = 30.0) -> bool:
    return moment is not None and abs((moment - expected).total_seconds()) < seconds


# -- task context -----------------------------------------------------------------------


async def test_a_saved_task_context_reads_back_and_each_save_is_a_new_version(
    memory: Memory,
) -> None:
    task, sub = new_id("task"), new_id("sub")
    context = task_context(task, sub, plan_id="plan-1")

    first = await memory.store_task_context(task, context)
    second = await memory.store_task_context(task, context)
    restored = await memory.get_task_context(task)

    assert (first.version, second.version) == (1, 2)
    assert restored is not None
    assert restored.version == 2
    assert restored.context == context
    assert (restored.task_id, restored.plan_id, restored.sub_task_ids) == (task, "plan-1", [sub])
    assert restored.expires_at is None
    assert restored.created_at == first.created_at
    assert await memory.get_task_context(new_id("task")) is None


async def test_a_task_is_found_by_each_sub_task_and_by_its_question_to_a_human(
    memory: Memory,
) -> None:
    task, sub, question = new_id("task"), new_id("sub"), new_id("question")
    wait = HumanInputWait(
        request_id=new_id("request"),
        correlation_id=question,
        response_event="approval.given",
        timeout_seconds=60,
        asked_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    await memory.store_task_context(task, task_context(task, sub, human_input=wait))

    by_sub = await memory.get_task_by_subtask(sub)
    by_question = await memory.get_task_by_subtask(question)

    assert by_sub is not None
    assert by_sub.task_id == task
    assert by_question is not None
    assert by_question.task_id == task
    assert await memory.get_task_by_subtask(new_id("sub")) is None


async def test_a_stale_task_save_is_a_version_conflict_naming_both_versions(
    memory: Memory,
) -> None:
    task = new_id("task")
    await memory.store_task_context(task, task_context(task))
    await memory.store_task_context(task, task_context(task))

    with pytest.raises(ServiceConflictError) as stale:
        await memory.store_task_context(task, task_context(task), expected_version=1)

    assert (stale.value.status, stale.value.code) == (409, "version_conflict")
    assert stale.value.details == {"expected_version": 1, "current_version": 2}


async def test_expected_version_zero_creates_a_task_context_only_when_absent(
    memory: Memory,
) -> None:
    task, absent_task = new_id("task"), new_id("task")

    created = await memory.store_task_context(task, task_context(task), expected_version=0)
    with pytest.raises(ServiceConflictError) as taken:
        await memory.store_task_context(task, task_context(task), expected_version=0)
    with pytest.raises(ServiceConflictError) as absent:
        await memory.store_task_context(absent_task, task_context(absent_task), expected_version=3)

    assert created.version == 1
    assert taken.value.details == {"expected_version": 0, "current_version": 1}
    assert absent.value.details == {"expected_version": 3, "current_version": None}


async def test_a_sub_task_of_another_live_task_cannot_be_claimed(memory: Memory) -> None:
    first, second, sub = new_id("task"), new_id("task"), new_id("sub")
    await memory.store_task_context(first, task_context(first, sub))

    with pytest.raises(ServiceConflictError) as claimed:
        await memory.store_task_context(second, task_context(second, sub))

    assert (claimed.value.status, claimed.value.code) == (409, "sub_task_claimed")
    owner = await memory.get_task_by_subtask(sub)
    assert owner is not None
    assert owner.task_id == first


async def test_a_sub_task_dropped_from_a_context_no_longer_finds_it_and_is_free(
    memory: Memory,
) -> None:
    first, second = new_id("task"), new_id("task")
    kept, dropped = new_id("sub"), new_id("sub")
    await memory.store_task_context(first, task_context(first, kept, dropped))
    await memory.store_task_context(first, task_context(first, kept))

    found = await memory.get_task_by_subtask(dropped)
    reclaimed = await memory.store_task_context(second, task_context(second, dropped))

    assert found is None
    assert reclaimed.sub_task_ids == [dropped]


async def test_a_deleted_task_context_is_gone_with_its_sub_tasks(memory: Memory) -> None:
    task, other, sub = new_id("task"), new_id("task"), new_id("sub")
    await memory.store_task_context(task, task_context(task, sub))

    deleted = await memory.delete_task_context(task)
    deleted_again = await memory.delete_task_context(task)
    reclaimed = await memory.store_task_context(other, task_context(other, sub))

    assert (deleted, deleted_again) == (True, False)
    assert await memory.get_task_context(task) is None
    assert reclaimed.task_id == other


async def test_the_plan_id_argument_fills_the_context_and_a_contradiction_is_refused(
    memory: Memory,
) -> None:
    task, other = new_id("task"), new_id("task")

    saved = await memory.store_task_context(task, task_context(task), plan_id="plan-7")
    with pytest.raises(ValueError, match="contradicts"):
        await memory.store_task_context(
            other, task_context(other, plan_id="plan-7"), plan_id="plan-8"
        )

    assert (saved.plan_id, saved.context.plan_id) == ("plan-7", "plan-7")
    assert await memory.get_task_context(other) is None


async def test_a_task_context_saved_under_another_task_id_is_refused(memory: Memory) -> None:
    task = new_id("task")

    with pytest.raises(ServiceValidationError) as refused:
        await memory.store_task_context(task, task_context(new_id("task")))

    assert (refused.value.status, refused.value.code) == (422, "validation_failed")
    assert await memory.get_task_context(task) is None


async def test_a_task_context_with_a_ttl_says_when_it_expires(memory: Memory) -> None:
    task = new_id("task")

    saved = await memory.store_task_context(task, task_context(task), ttl_seconds=600)
    restored = await memory.get_task_context(task)

    assert near(saved.expires_at, datetime.now(UTC) + timedelta(seconds=600))
    assert restored is not None
    assert restored.expires_at == saved.expires_at


# -- plan context -----------------------------------------------------------------------


async def test_a_saved_plan_context_reads_back_by_plan_and_by_correlation(
    memory: Memory,
) -> None:
    plan, correlation = new_id("plan"), new_id("corr")
    context = plan_context(plan, correlation, session_id="session-1")

    first = await memory.store_plan_context(plan, context)
    second = await memory.store_plan_context(plan, context)
    by_plan = await memory.get_plan_context(plan)
    by_correlation = await memory.get_plan_by_correlation(correlation)

    assert (first.version, second.version) == (1, 2)
    assert by_plan is not None
    assert by_plan.context == context
    assert (by_plan.plan_id, by_plan.session_id, by_plan.correlation_ids) == (
        plan,
        "session-1",
        [correlation],
    )
    assert by_correlation == by_plan
    assert await memory.get_plan_by_correlation(new_id("corr")) is None


async def test_a_correlation_id_moves_with_the_plans_saves(memory: Memory) -> None:
    plan, old, new = new_id("plan"), new_id("corr"), new_id("corr")
    await memory.store_plan_context(plan, plan_context(plan, old))
    await memory.store_plan_context(plan, plan_context(plan, new))

    assert await memory.get_plan_by_correlation(old) is None
    found = await memory.get_plan_by_correlation(new)
    assert found is not None
    assert found.plan_id == plan


async def test_a_correlation_id_of_another_plan_cannot_be_claimed(memory: Memory) -> None:
    first, second, correlation = new_id("plan"), new_id("plan"), new_id("corr")
    await memory.store_plan_context(first, plan_context(first, correlation))

    with pytest.raises(ServiceConflictError) as claimed:
        await memory.store_plan_context(second, plan_context(second, correlation))

    assert (claimed.value.status, claimed.value.code) == (409, "correlation_claimed")
    assert await memory.get_plan_context(second) is None


async def test_a_stale_plan_save_is_a_version_conflict(memory: Memory) -> None:
    plan = new_id("plan")
    await memory.store_plan_context(plan, plan_context(plan), expected_version=0)

    with pytest.raises(ServiceConflictError) as stale:
        await memory.store_plan_context(plan, plan_context(plan), expected_version=0)

    assert stale.value.code == "version_conflict"
    assert stale.value.details == {"expected_version": 0, "current_version": 1}


async def test_the_session_id_argument_fills_the_plan_and_a_contradiction_is_refused(
    memory: Memory,
) -> None:
    plan, other = new_id("plan"), new_id("plan")

    saved = await memory.store_plan_context(plan, plan_context(plan), session_id="session-2")
    with pytest.raises(ValueError, match="contradicts"):
        await memory.store_plan_context(
            other, plan_context(other, session_id="session-2"), session_id="session-3"
        )

    assert (saved.session_id, saved.context.session_id) == ("session-2", "session-2")


async def test_a_plan_context_saved_under_another_plan_id_is_refused(memory: Memory) -> None:
    plan = new_id("plan")

    with pytest.raises(ServiceValidationError) as refused:
        await memory.store_plan_context(plan, plan_context(new_id("plan")))

    assert (refused.value.status, refused.value.code) == (422, "validation_failed")
    assert await memory.get_plan_context(plan) is None


# -- working memory ---------------------------------------------------------------------


async def test_a_working_memory_key_reads_back_with_its_version(memory: Memory) -> None:
    plan = new_id("plan")
    value = {"cities": ["Lyon", "Nice"], "budget": 1200.5, "booked": False, "note": None}

    first = await memory.put_working(plan, "trip", value)
    second = await memory.put_working(plan, "trip", value)
    entry = await memory.get_working(plan, "trip")

    assert (first.version, second.version) == (1, 2)
    assert entry is not None
    assert (entry.plan_id, entry.key, entry.value, entry.version) == (plan, "trip", value, 2)
    assert entry.expires_at is None
    assert await memory.get_working(plan, "missing") is None


async def test_working_memory_writes_honour_the_expected_version(memory: Memory) -> None:
    plan = new_id("plan")
    created = await memory.put_working(plan, "lock", "me", expected_version=0)

    with pytest.raises(ServiceConflictError) as taken:
        await memory.put_working(plan, "lock", "you", expected_version=0)
    with pytest.raises(ServiceConflictError) as stale:
        await memory.put_working(plan, "lock", "you", expected_version=7)
    moved = await memory.put_working(plan, "lock", "you", expected_version=1)

    assert created.version == 1
    assert taken.value.details == {"expected_version": 0, "current_version": 1}
    assert stale.value.code == "version_conflict"
    assert (moved.version, moved.value) == (2, "you")


async def test_a_working_memory_key_can_be_deleted_once(memory: Memory) -> None:
    plan = new_id("plan")
    await memory.put_working(plan, "k", 1)

    assert (await memory.delete_working(plan, "k"), await memory.delete_working(plan, "k")) == (
        True,
        False,
    )
    assert await memory.get_working(plan, "k") is None


async def test_store_and_retrieve_are_last_write_wins(memory: Memory) -> None:
    plan = new_id("plan")

    stored = [await memory.store("k", value, plan) for value in ({"a": 1}, [1, 2])]
    retrieved = await memory.retrieve("k", plan)

    assert stored == [True, True]
    assert retrieved == [1, 2]
    assert await memory.retrieve("absent", plan) is None


async def test_a_working_memory_key_with_a_ttl_says_when_it_expires(memory: Memory) -> None:
    plan = new_id("plan")

    entry = await memory.put_working(plan, "short", 1, ttl_seconds=600)

    assert near(entry.expires_at, datetime.now(UTC) + timedelta(seconds=600))


# -- plans ------------------------------------------------------------------------------


async def test_a_created_plan_is_pending_with_its_goal(memory: Memory) -> None:
    plan = new_id("plan")

    record = await memory.create_plan(
        "trip.requested",
        "trip.planned",
        goal_data={"city": "Lyon"},
        plan_id=plan,
        plan_type="trip",
        session_id="session-1",
    )

    assert (record.plan_id, record.goal_event, record.response_event) == (
        plan,
        "trip.requested",
        "trip.planned",
    )
    assert (record.goal_data, record.plan_type, record.session_id) == (
        {"city": "Lyon"},
        "trip",
        "session-1",
    )
    assert (record.status, record.status_reason, record.user_id) == (
        PlanStatus.PENDING,
        None,
        USER,
    )
    assert record.completed_at is None


async def test_a_plan_id_is_created_once(memory: Memory) -> None:
    plan = new_id("plan")
    await memory.create_plan("trip.requested", "trip.planned", plan_id=plan)

    with pytest.raises(ServiceConflictError) as exists:
        await memory.create_plan("trip.requested", "trip.planned", plan_id=plan)

    assert (exists.value.status, exists.value.code) == (409, "plan_exists")


async def test_a_plan_moves_between_statuses_until_it_is_finished(memory: Memory) -> None:
    plan = new_id("plan")
    await memory.create_plan("trip.requested", "trip.planned", plan_id=plan)

    paused = await memory.update_plan_status(plan, PlanStatus.PAUSED, reason="waiting for Bob")
    failed = await memory.update_plan_status(plan, PlanStatus.FAILED, reason="no trains")
    again = await memory.update_plan_status(plan, PlanStatus.FAILED, reason="no trains")
    with pytest.raises(ServiceConflictError) as finished:
        await memory.update_plan_status(plan, PlanStatus.RUNNING)

    assert (paused.status, paused.status_reason, paused.completed_at) == (
        PlanStatus.PAUSED,
        "waiting for Bob",
        None,
    )
    assert (failed.status, failed.status_reason) == (PlanStatus.FAILED, "no trains")
    assert failed.completed_at is not None
    assert again == failed  # the same status again changes nothing
    assert (finished.value.status, finished.value.code) == (409, "plan_finished")


async def test_the_status_of_an_unknown_plan_cannot_be_set(memory: Memory) -> None:
    with pytest.raises(ServiceNotFoundError) as unknown:
        await memory.update_plan_status(new_id("plan"), PlanStatus.RUNNING)

    assert unknown.value.status == 404


# -- step records -------------------------------------------------------------------------


async def test_a_step_is_recorded_once_and_answers_its_first_result(memory: Memory) -> None:
    envelope = new_id("evt")

    empty = await memory.step_journal("payments", envelope)
    first = await memory.record_step("payments", envelope, "charge", {"id": 1})
    again = await memory.record_step("payments", envelope, "charge", {"id": 2})
    other = await memory.record_step("payments", envelope, "mail", [True, None])
    elsewhere = await memory.step_journal("billing", envelope)

    assert empty == {}
    assert (first, again, other) == ({"id": 1}, {"id": 1}, [True, None])
    assert await memory.step_journal("payments", envelope) == {
        "charge": {"id": 1},
        "mail": [True, None],
    }
    assert elsewhere == {}


async def test_a_step_result_over_a_mebibyte_is_refused(memory: Memory) -> None:
    envelope = new_id("evt")

    with pytest.raises(ServiceValidationError) as refused:
        await memory.record_step("payments", envelope, "big", "x" * (1 << 20))

    assert refused.value.status == 413
    assert await memory.step_journal("payments", envelope) == {}
