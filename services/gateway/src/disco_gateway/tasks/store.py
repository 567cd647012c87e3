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

import itertools
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass
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
    Written,
)
from disco_service import Database, InvalidCursor, Paginator

__all__ = ["FRESH_TASK_KEY", "PostgresTaskStore", "QueuedPushes", "task_json", "task_of"]

FRESH_TASK_KEY = "disco.fresh_task"
"""Call-context state: the id the a2a-sdk generated for this call's new task. Until the
call writes it, no row can hold it: reading it needs no query."""

_PUSH_HINTS = 20_000
_QUEUED_PER_TASK = 16

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


@dataclass(frozen=True, slots=True)
class QueuedPushes:
    """The push notifications one write queued: a row per configuration of the task.

    Attributes:
        token: what holds them (``<instance>/w<n>``) until the lease ends.
        body: the notification (the event as a ``StreamResponse``, JSON).
        rows: each row's ``seq``, ``config_id``, ``attempts`` (1: held for its first
            try, the oldest of its configuration) and ``config``, oldest first.
        event: the event the write applied, which the a2a-sdk notifies next.
    """

    token: str
    body: dict[str, Any]
    rows: tuple[dict[str, Any], ...]
    event: object


@dataclass(slots=True)
class _TaskPushes:
    """What writes of one task queued that nobody took yet, and the events taken lately."""

    queued: deque[QueuedPushes]
    taken: deque[object]

    @classmethod
    def new(cls) -> _TaskPushes:
        # Bounded: what falls off waits for a sweeper (held until its lease ends).
        return cls(deque(maxlen=_QUEUED_PER_TASK), deque(maxlen=_QUEUED_PER_TASK))


def _same(one: object, other: object) -> bool:
    return one is other or one == other


def _version(value: TaskVersion) -> int:
    raw = value._value  # the a2a-sdk keeps it private; we wrote an int there
    if not isinstance(raw, int):
        raise TypeError(f"the gateway's task versions are integers, not {raw!r}")
    return raw


class PostgresTaskStore(VersionedTaskStore):
    """Tasks in ``gateway.a2a_tasks`` (see the module docs)."""

    def __init__(
        self,
        database: Database,
        *,
        push_instance: str | None = None,
        push_lease_seconds: float = 30.0,
    ) -> None:
        """``push_instance``: the instance id the push sender's tokens start with (its
        drain hands back what they hold); ``push_lease_seconds``: how long a queued
        notification is held for this instance's first try."""
        self._database = database
        self._writes = ScopedWrites(database)
        self._push_instance = push_instance or f"gateway-{uuid.uuid4()}"
        self._push_lease = push_lease_seconds
        self._push_tokens = itertools.count()
        # (tenant, task) -> False when its last write here saw no push configuration,
        # else what its writes queued (and what of it was taken lately).
        self._pushes: OrderedDict[tuple[str, str], bool | _TaskPushes] = OrderedDict()

    @property
    def push_instance(self) -> str:
        """The instance id the tokens of queued push notifications start with."""
        return self._push_instance

    def may_push(self, tenant_id: str, task_id: str) -> bool:
        """Whether the task may have push configurations (False only when its last write
        through this store saw none: a configuration set since shows at the next write)."""
        return self._pushes.get((tenant_id, task_id), True) is not False

    def take_queued(
        self, tenant_id: str, task_id: str, event: object
    ) -> tuple[QueuedPushes | bool, list[QueuedPushes]]:
        """What a write of the task here queued for ``event``, and what older writes
        queued for events nobody notified (and nobody will: the a2a-sdk notifies in
        the order it writes), to drop.

        Instead of the first: False when there is nothing to send (the task's last
        write saw no push configuration, or what its write queued for ``event`` was
        taken already), or True when no write here queued ``event`` (whoever sends
        it must queue it).
        """
        known = self._pushes.get((tenant_id, task_id), True)
        if not isinstance(known, _TaskPushes):
            return known, []
        for index, queued in enumerate(known.queued):
            if _same(queued.event, event):
                skipped = [known.queued.popleft() for _ in range(index)]
                taken = known.queued.popleft()
                known.taken.append(taken.event)
                return taken, skipped
        if any(_same(taken, event) for taken in known.taken):
            return False, []
        return True, []

    def note_pushes(
        self, tenant_id: str, task_id: str, pushes: bool, queued: QueuedPushes | None = None
    ) -> None:
        """Remember whether the task has push configurations, and what a write queued
        (bounded: the oldest tasks are forgotten; their rows wait for a sweeper)."""
        key = (tenant_id, task_id)
        known = self._pushes.get(key)
        if queued is not None:
            if not isinstance(known, _TaskPushes):
                known = _TaskPushes.new()
            known.queued.append(queued)
            self._pushes[key] = known
        elif not pushes or not isinstance(known, _TaskPushes):
            self._pushes[key] = pushes
        self._pushes.move_to_end(key)
        while len(self._pushes) > _PUSH_HINTS:
            self._pushes.popitem(last=False)

    def _push_token(self) -> str:
        return f"{self._push_instance}/w{next(self._push_tokens)}"

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
        token = self._push_token()
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
            # The event is the notification the a2a-sdk sends next (the same JSON).
            push=logged,
            push_token=token,
            push_lease_seconds=self._push_lease,
        )
        if written is None:
            raise ConcurrentTaskModificationError(task.id)
        if context.state.get(FRESH_TASK_KEY) == task.id:
            del context.state[FRESH_TASK_KEY]  # it has a row now
        self._noted(scope.tenant_id, task.id, written, token, logged, event)
        return TaskVersion(written.version)

    def _noted(
        self,
        tenant_id: str,
        task_id: str,
        written: Written,
        token: str,
        body: dict[str, Any] | None,
        event: object,
    ) -> None:
        queued = None
        if written.queued and body is not None:
            queued = QueuedPushes(token, body, written.queued, event)
        self.note_pushes(tenant_id, task_id, written.pushes, queued)

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
        notification = {"task": document}  # what the caller sends next
        token = self._push_token()
        written = await self._writes.write_task(
            "insert",
            tenant_id=scope.tenant_id,
            user_id=scope.user_id,
            task_id=task.id,
            status=TaskState.Name(task.status.state),
            status_timestamp=_status_time(task),
            task=document,
            event=None if over else notification,
            context_id=task.context_id,
            owner=scope.user_id,
            agent=scope.agent,
            push=notification,
            push_token=token,
            push_lease_seconds=self._push_lease,
        )
        if written is None:
            raise ConcurrentTaskModificationError(task.id)
        self._noted(scope.tenant_id, task.id, written, token, notification, task)

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
