"""The A2A task store in the gateway's Postgres schema, behind the a2a-sdk's interface.

:class:`PostgresTaskStore` is an a2a-sdk ``VersionedTaskStore`` (the cluster
contract): every write compares and swaps the task's version, so two gateway
instances (or an instance and the applier) never overwrite each other, and a
``CANCELED`` write wins over any version of a task that is not over. The
write that applied an event logs it (``a2a_task_events``) in the same
transaction: :class:`~disco_gateway.tasks.stream.PostgresTaskEventStream`
serves it to ``SubscribeToTask`` on any instance. The one exception is a new
task stored already over (:meth:`PostgresTaskStore.insert`): nobody can follow it.

Tenant and user come from the call's :class:`~disco_gateway.scope.CallScope`
(the token), never from the request; row-level security binds every query.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from a2a.server.cluster.task_store import (
    ConcurrentTaskModificationError,
    StoredTask,
    VersionedTaskStore,
)
from a2a.server.cluster.version import TaskVersion
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.errors import InvalidParamsError
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict, ParseDict
from pydantic import Field

from disco_common.ids import UtcDatetime
from disco_common.pagination import DEFAULT_PAGE_LIMIT, PageQuery
from disco_gateway.scope import CallScope
from disco_gateway.tasks.repository import (
    TERMINAL_STATES,
    ScopedWrites,
    TaskRepository,
    TaskRow,
    TaskWrite,
)
from disco_service import Database, InvalidCursor, Paginator

__all__ = ["FRESH_TASK_KEY", "PostgresTaskStore", "task_json", "task_of"]

FRESH_TASK_KEY = "disco.fresh_task"
"""Call-context state: the id the a2a-sdk generated for this call's new task. Until the
call writes it, no row can hold it: reading it needs no query."""

_PUSH_HINTS = 20_000

_PAGES = Paginator("a2a_tasks", tuple[UtcDatetime, str])
_TERMINAL = frozenset(TaskState.Value(state) for state in TERMINAL_STATES)


class _TaskListQuery(PageQuery):
    """ListTasks' filters, so that a page token is bound to them like any disco cursor."""

    agent: str | None = None
    context_id: str | None = None
    status: str | None = None
    status_after: UtcDatetime | None = None
    limit: int = Field(default=DEFAULT_PAGE_LIMIT, ge=1, le=100)


def task_json(task: Task, history: list[dict[str, Any]] | None = None) -> dict[str, object]:
    """A task as the A2A JSON the store keeps.

    ``history``: the JSON of the task's history, made already (it is not made again).
    """
    if history is None:
        result: dict[str, object] = MessageToDict(task)
        return result
    document: dict[str, object] = {"id": task.id, "contextId": task.context_id}
    if task.HasField("status"):
        document["status"] = MessageToDict(task.status)
    if task.artifacts:
        document["artifacts"] = [MessageToDict(artifact) for artifact in task.artifacts]
    if history:
        document["history"] = history
    if task.HasField("metadata"):
        document["metadata"] = MessageToDict(task.metadata)
    return document


def task_of(document: dict[str, object]) -> Task:
    """A stored task's JSON as the a2a-sdk's type."""
    return ParseDict(document, Task(), ignore_unknown_fields=True)


def _status_time(task: Task) -> datetime:
    if task.status.HasField("timestamp"):
        return task.status.timestamp.ToDatetime(tzinfo=UTC)
    return datetime.now(UTC)


def _version(value: TaskVersion) -> int:
    raw = value._value  # the a2a-sdk keeps it private; we wrote an int there
    if not isinstance(raw, int):
        raise TypeError(f"the gateway's task versions are integers, not {raw!r}")
    return raw


class PostgresTaskStore(VersionedTaskStore):
    """Tasks in ``gateway.a2a_tasks`` (see the module docs)."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._writes = ScopedWrites(database)
        # (tenant, task) -> whether its last write here saw push configurations.
        self._pushes: OrderedDict[tuple[str, str], bool] = OrderedDict()

    def may_push(self, tenant_id: str, task_id: str) -> bool:
        """Whether the task may have push configurations (False only when its last write
        through this store saw none: a configuration set since shows at the next write)."""
        return self._pushes.get((tenant_id, task_id), True)

    def note_pushes(self, tenant_id: str, task_id: str, pushes: bool) -> None:
        """Remember whether the task has push configurations (bounded)."""
        key = (tenant_id, task_id)
        self._pushes[key] = pushes
        self._pushes.move_to_end(key)
        while len(self._pushes) > _PUSH_HINTS:
            self._pushes.popitem(last=False)

    async def save(
        self,
        task: Task,
        *,
        event: Event | None,
        prev: Task | None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        del prev  # the whole task is written: nothing to diff
        scope = CallScope.of(context)
        status = TaskState.Name(task.status.state)
        when = _status_time(task)
        document = task_json(task)
        logged: dict[str, object] | None = None
        if event is task or (isinstance(event, Task) and event == task):
            logged = {"task": document}  # the same JSON: convert the task once
        elif event is not None:
            logged = MessageToDict(to_stream_response(event))
        write: TaskWrite
        if task.status.state == TaskState.TASK_STATE_CANCELED:
            write = "cancel"
        elif prev_version.is_missing:
            write = "insert"
        else:
            write = "update"
        written = await self._writes.write_task(
            write,
            tenant_id=scope.tenant_id,
            user_id=scope.user_id,
            task_id=task.id,
            status=status,
            status_timestamp=when,
            task=document,
            event=logged,
            context_id=task.context_id,
            owner=scope.user_id,
            agent=scope.agent,
            prev=_version(prev_version) if write == "update" else None,
        )
        if written is None:
            raise ConcurrentTaskModificationError(task.id)
        if context.state.get(FRESH_TASK_KEY) == task.id:
            del context.state[FRESH_TASK_KEY]  # it has a row now
        self.note_pushes(scope.tenant_id, task.id, written.pushes)
        return TaskVersion(written.version)

    async def insert(
        self, task: Task, context: ServerCallContext, *, history: list[dict[str, Any]]
    ) -> None:
        """Store a new task (the blocking fast path's one write).

        A task that is not over is logged as its own first event, for whoever
        subscribes to it next. One already over is not logged, and wakes nobody:
        nobody can follow it, then or later (``SubscribeToTask`` refuses a task
        that is over, and nobody could subscribe before it existed), so its log
        would be a second copy of it that nothing reads, and its ``NOTIFY``
        serialises the commit with every other one that notifies.

        ``history``: the JSON of the task's history, made already.

        Raises:
            ConcurrentTaskModificationError: the id is taken.
        """
        scope = CallScope.of(context)
        document = task_json(task, history)
        over = task.status.state in _TERMINAL
        written = await self._writes.write_task(
            "insert",
            tenant_id=scope.tenant_id,
            user_id=scope.user_id,
            task_id=task.id,
            status=TaskState.Name(task.status.state),
            status_timestamp=_status_time(task),
            task=document,
            event=None if over else {"task": document},
            context_id=task.context_id,
            owner=scope.user_id,
            agent=scope.agent,
        )
        if written is None:
            raise ConcurrentTaskModificationError(task.id)
        self.note_pushes(scope.tenant_id, task.id, written.pushes)

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        if context.state.get(FRESH_TASK_KEY) == task_id:
            return None
        row = await self.row(task_id, context)
        if row is None:
            return None
        return StoredTask(task_of(row.task), TaskVersion(row.version))

    async def row(self, task_id: str, context: ServerCallContext | None) -> TaskRow | None:
        """The stored row of ``task_id`` as the call's scope sees it."""
        scope = CallScope.of(context)
        async with self._database.unit_of_work(scope.tenant_id, scope.user_id) as session:
            return await TaskRepository(session, scope.tenant_id).get(task_id, scope.where())

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        scope = CallScope.of(context)
        where = scope.where()
        status = (
            TaskState.Name(params.status)
            if params.status != TaskState.TASK_STATE_UNSPECIFIED
            else None
        )
        status_after = (
            params.status_timestamp_after.ToDatetime(tzinfo=UTC)
            if params.HasField("status_timestamp_after")
            else None
        )
        query = _TaskListQuery(
            cursor=params.page_token or None,
            limit=params.page_size if params.HasField("page_size") else DEFAULT_PAGE_LIMIT,
            agent=where.agent,
            context_id=params.context_id or None,
            status=status,
            status_after=status_after,
        )
        try:
            page_request = _PAGES.open(query, scope=scope.user_id)
        except InvalidCursor as exc:
            raise InvalidParamsError(message=f"pageToken: {exc.message}") from None
        async with self._database.unit_of_work(scope.tenant_id, scope.user_id) as session:
            tasks = TaskRepository(session, scope.tenant_id)
            rows = await tasks.list(
                where,
                context_id=query.context_id,
                status=query.status,
                status_after=query.status_after,
                after=page_request.after,
                limit=page_request.fetch,
            )
            total = await tasks.count(
                where,
                context_id=query.context_id,
                status=query.status,
                status_after=query.status_after,
            )
        page = page_request.page(rows, key=lambda row: (row.status_timestamp, row.task_id))
        return ListTasksResponse(
            tasks=[task_of(row.task) for row in page.items],
            next_page_token=page.next_cursor or "",
            page_size=query.limit,
            total_size=total,
        )

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        scope = CallScope.of(context)
        async with self._database.unit_of_work(scope.tenant_id, scope.user_id) as session:
            await TaskRepository(session, scope.tenant_id).delete(task_id, scope.where())
