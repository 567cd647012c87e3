"""The A2A task store: versions compared and swapped, tenants and owners kept apart, lists paged."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.server.cluster.version import TaskVersion
from a2a.types import a2a_pb2
from a2a.utils.errors import InvalidParamsError
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from disco_gateway.scope import scoped
from disco_gateway.tasks.repository import ScopedWrites
from disco_gateway.tasks.store import PostgresTaskStore
from disco_gateway.tasks.stream import PostgresTaskEventStream
from disco_service import Database, database_unavailable
from tests.fixtures.infra import DatabaseUrls
from tests.integration.gateway.conftest import caller, new_tenant, system, task_rows

WORKING = a2a_pb2.TaskState.TASK_STATE_WORKING
COMPLETED = a2a_pb2.TaskState.TASK_STATE_COMPLETED
CANCELED = a2a_pb2.TaskState.TASK_STATE_CANCELED


def new_task(
    state: int = WORKING, *, context_id: str = "ctx", at: datetime | None = None
) -> a2a_pb2.Task:
    task = a2a_pb2.Task(id=str(uuid.uuid4()), context_id=context_id)
    task.status.state = state  # type: ignore[assignment]
    task.status.timestamp.FromDatetime(at or datetime.now(UTC))
    return task


def status_event(task: a2a_pb2.Task, state: int) -> a2a_pb2.TaskStatusUpdateEvent:
    event = a2a_pb2.TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id)
    event.status.state = state  # type: ignore[assignment]
    return event


async def test_the_first_write_creates_version_one_and_a_second_first_write_conflicts(
    store: PostgresTaskStore,
) -> None:
    scope = caller(new_tenant())
    task = new_task()
    version = await store.save(
        task, event=None, prev=None, prev_version=TaskVersion.MISSING, context=scope.context()
    )

    stored = await store.get(task.id, scope.context())
    with pytest.raises(ConcurrentTaskModificationError):
        await store.save(
            task, event=None, prev=None, prev_version=TaskVersion.MISSING, context=scope.context()
        )

    assert version == TaskVersion(1)
    assert stored is not None
    assert stored.task == task
    assert stored.version == TaskVersion(1)


async def test_a_write_from_a_stale_version_conflicts_and_a_current_one_goes_through(
    store: PostgresTaskStore,
) -> None:
    scope = caller(new_tenant())
    task = new_task()
    one = await store.save(
        task, event=None, prev=None, prev_version=TaskVersion.MISSING, context=scope.context()
    )
    task.status.state = COMPLETED
    two = await store.save(task, event=None, prev=None, prev_version=one, context=scope.context())

    with pytest.raises(ConcurrentTaskModificationError):
        await store.save(task, event=None, prev=None, prev_version=one, context=scope.context())
    assert two == TaskVersion(2)


async def test_cancel_overwrites_any_version_of_a_live_task_but_never_a_finished_one(
    store: PostgresTaskStore,
) -> None:
    scope = caller(new_tenant())
    live, done = new_task(), new_task(COMPLETED)
    for task in (live, done):
        await store.save(
            task, event=None, prev=None, prev_version=TaskVersion.MISSING, context=scope.context()
        )
    canceled = a2a_pb2.Task()
    canceled.CopyFrom(live)
    canceled.status.state = CANCELED

    version = await store.save(
        canceled, event=None, prev=None, prev_version=TaskVersion(99), context=scope.context()
    )
    done.status.state = CANCELED
    with pytest.raises(ConcurrentTaskModificationError):
        await store.save(
            done, event=None, prev=None, prev_version=TaskVersion(1), context=scope.context()
        )

    assert version == TaskVersion(2)
    stored = await store.get(live.id, scope.context())
    assert stored is not None
    assert stored.task.status.state == CANCELED


async def test_another_tenant_another_user_and_another_agent_see_nothing(
    store: PostgresTaskStore, db: Database
) -> None:
    tenant = new_tenant()
    owner = caller(tenant)
    task = new_task()
    await store.save(
        task, event=None, prev=None, prev_version=TaskVersion.MISSING, context=owner.context()
    )

    assert await store.get(task.id, caller(new_tenant()).context()) is None
    assert await store.get(task.id, caller(tenant, "bob").context()) is None
    assert await store.get(task.id, caller(tenant, agent="other").context()) is None
    assert await store.get(task.id, caller(tenant, agent=None).context()) is not None
    assert await store.get(task.id, system(tenant).context()) is not None
    # Row-level security under the query: another tenant's transaction sees no row at all.
    async with db.unit_of_work(new_tenant()) as session:
        rows = await session.scalar(
            text("SELECT count(*) FROM gateway.a2a_tasks WHERE task_id = :id"), {"id": task.id}
        )
    assert rows == 0


async def test_lists_filter_by_context_and_status_and_page_with_tokens(
    store: PostgresTaskStore,
) -> None:
    scope = caller(new_tenant())
    start = datetime.now(UTC) - timedelta(minutes=10)
    tasks = [
        new_task(
            COMPLETED if i % 2 else WORKING,
            context_id="ctx-a" if i < 4 else "ctx-b",
            at=start + timedelta(seconds=i),
        )
        for i in range(6)
    ]
    for task in tasks:
        await store.save(
            task, event=None, prev=None, prev_version=TaskVersion.MISSING, context=scope.context()
        )

    first = await store.list(
        a2a_pb2.ListTasksRequest(context_id="ctx-a", page_size=3), scope.context()
    )
    second = await store.list(
        a2a_pb2.ListTasksRequest(context_id="ctx-a", page_size=3, page_token=first.next_page_token),
        scope.context(),
    )
    done = await store.list(a2a_pb2.ListTasksRequest(status=COMPLETED), scope.context())
    after = a2a_pb2.ListTasksRequest()
    after.status_timestamp_after.FromDatetime(start + timedelta(seconds=3, milliseconds=500))
    recent = await store.list(after, scope.context())

    assert [t.id for t in first.tasks] == [tasks[3].id, tasks[2].id, tasks[1].id]
    assert first.total_size == 4
    assert [t.id for t in second.tasks] == [tasks[0].id]
    assert second.next_page_token == ""
    assert {t.id for t in done.tasks} == {tasks[1].id, tasks[3].id, tasks[5].id}
    assert [t.id for t in recent.tasks] == [tasks[5].id, tasks[4].id]
    with pytest.raises(InvalidParamsError, match="pageToken"):
        await store.list(a2a_pb2.ListTasksRequest(page_token="garbage"), scope.context())
    with pytest.raises(InvalidParamsError, match="pageToken"):
        await store.list(
            a2a_pb2.ListTasksRequest(context_id="ctx-b", page_token=first.next_page_token),
            scope.context(),
        )


async def test_a_subscriber_gets_the_logged_events_then_each_new_one_as_it_is_written(
    store: PostgresTaskStore, stream: PostgresTaskEventStream
) -> None:
    scope = caller(new_tenant())
    task = new_task()
    one = await store.save(
        task, event=task, prev=None, prev_version=TaskVersion.MISSING, context=scope.context()
    )
    received: list[int] = []
    got_two = asyncio.Event()

    async def follow() -> None:
        with scoped(scope):
            async for versioned in stream.subscribe(task.id, after=TaskVersion.MISSING):
                received.append(versioned.version._value)  # type: ignore[arg-type]
                if len(received) == 2:
                    got_two.set()
                    return

    follower = asyncio.create_task(follow())
    task.status.state = COMPLETED
    await store.save(
        task,
        event=status_event(task, COMPLETED),
        prev=None,
        prev_version=one,
        context=scope.context(),
    )
    await asyncio.wait_for(got_two.wait(), 10)
    await follower

    assert received == [1, 2]


async def test_retention_purges_old_finished_tasks_with_their_log_and_keeps_the_rest(
    store: PostgresTaskStore, db: Database
) -> None:
    tenant = new_tenant()
    scope = caller(tenant)
    old_done, old_live, new_done = new_task(COMPLETED), new_task(), new_task(COMPLETED)
    for task in (old_done, old_live, new_done):
        await store.save(
            task, event=task, prev=None, prev_version=TaskVersion.MISSING, context=scope.context()
        )
    async with db.unit_of_work(tenant) as session:
        await session.execute(
            text(
                "UPDATE gateway.a2a_tasks SET updated_at = now() - interval '40 days' "
                "WHERE task_id = ANY(:ids)"
            ),
            {"ids": [old_done.id, old_live.id]},
        )
    async with db.unit_of_work(None) as session:
        purged = await session.scalar(
            text("SELECT gateway.purge_a2a_tasks(now() - interval '30 days')")
        )

    assert purged >= 1
    assert await store.get(old_done.id, scope.context()) is None
    assert await store.get(old_live.id, scope.context()) is not None
    assert await store.get(new_done.id, scope.context()) is not None
    async with db.unit_of_work(tenant) as session:
        left = await session.scalar(
            text("SELECT count(*) FROM gateway.a2a_task_events WHERE task_id = :id"),
            {"id": old_done.id},
        )
    assert left == 0


def with_history(task: a2a_pb2.Task) -> list[dict[str, object]]:
    """Add the caller's message to ``task``; its JSON, as the fast path makes it."""
    message = a2a_pb2.Message(message_id="m1", role=a2a_pb2.Role.ROLE_USER, task_id=task.id)
    message.parts.add(text="hi")
    task.history.append(message)
    return [{"messageId": "m1", "role": "ROLE_USER", "taskId": task.id, "parts": [{"text": "hi"}]}]


async def logged_events(db: Database, tenant: str, task_id: str) -> int:
    return await task_rows(db, tenant, "a2a_task_events", task_id)


async def test_a_new_task_still_working_is_stored_once_and_logged_as_its_own_first_event(
    store: PostgresTaskStore, stream: PostgresTaskEventStream
) -> None:
    scope = caller(new_tenant())
    task = new_task(WORKING)
    history = with_history(task)

    await store.insert(task, scope.context(), history=history)
    stored = await store.get(task.id, scope.context())
    with scoped(scope):
        events = stream.subscribe(task.id, after=TaskVersion.MISSING)
        first = await asyncio.wait_for(anext(events), timeout=10)
        await events.aclose()
    with pytest.raises(ConcurrentTaskModificationError):
        await store.insert(task, scope.context(), history=[])

    assert stored is not None
    assert stored.task == task
    assert stored.version == TaskVersion(1)
    assert first.event == task
    assert first.version == TaskVersion(1)


async def test_a_new_task_already_over_is_stored_once_and_not_logged(
    store: PostgresTaskStore, db: Database
) -> None:
    tenant = new_tenant()
    scope = caller(tenant)
    task = new_task(COMPLETED)
    history = with_history(task)

    await store.insert(task, scope.context(), history=history)
    stored = await store.get(task.id, scope.context())
    with pytest.raises(ConcurrentTaskModificationError):
        await store.insert(task, scope.context(), history=[])

    assert stored is not None
    assert stored.task == task
    assert stored.version == TaskVersion(1)
    # Nobody can follow a task that is over: its log would be a copy nothing reads.
    assert await logged_events(db, tenant, task.id) == 0
    # The next write of it (a cancel cannot apply; a write from version 1 can) is logged.
    again = a2a_pb2.Task()
    again.CopyFrom(task)
    again.status.state = a2a_pb2.TaskState.TASK_STATE_FAILED
    version = await store.save(
        again, event=again, prev=task, prev_version=stored.version, context=scope.context()
    )
    assert version == TaskVersion(2)
    assert await logged_events(db, tenant, task.id) == 1


async def test_a_write_on_a_connection_the_server_dropped_goes_through_on_a_fresh_one(
    store: PostgresTaskStore, database: DatabaseUrls
) -> None:
    scope = caller(new_tenant())
    await store.insert(new_task(), scope.context(), history=[])  # a pooled connection now
    killer = await asyncpg.connect(_plain(database.admin))
    try:
        killed = await killer.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = 'disco-gateway' AND pid <> pg_backend_pid()"
        )
    finally:
        await killer.close()
    task = new_task(COMPLETED)

    await store.insert(task, scope.context(), history=[])

    assert killed >= 1
    stored = await store.get(task.id, scope.context())
    assert stored is not None
    assert stored.task == task


async def test_a_statement_the_database_refuses_is_a_dbapi_error_with_its_sqlstate(
    db: Database,
) -> None:
    with pytest.raises(DBAPIError) as raised:
        await ScopedWrites(db).write_task(
            "bogus",  # type: ignore[arg-type]
            tenant_id=new_tenant(),
            user_id="alice",
            task_id="t1",
            status="TASK_STATE_WORKING",
            status_timestamp=datetime.now(UTC),
            task={},
            event=None,
        )

    assert getattr(raised.value.orig, "sqlstate", None) == "P0001"  # RAISE: unknown operation
    assert not database_unavailable(raised.value)


def _plain(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"postgresql://{rest}" if scheme.startswith("postgres") else url
