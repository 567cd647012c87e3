"""Layer 3: :class:`Worker`, asynchronous tasks with delegation, fan-out/fan-in and HITL.

How a Worker stays correct with several instances and at-least-once delivery:

- A task's context is saved in the memory service *before* anything is
  published that could answer it, so whichever instance receives a sub-task's
  answer can restore the task by the sub-task id (the answer's correlation id).
- Every write carries the version it read (optimistic concurrency). When two
  instances move one task at once (fan-in answers arriving together), one write
  wins and the other handler is re-run on a fresh copy, so a fan-in completes
  exactly once whatever the arrival order.
- An answer for a sub-task that is no longer pending (a duplicate, a late HITL
  answer after the timeout, an answer for a finished task) ends the handler
  quietly: :class:`StaleResultError`.
- Ids are derived from the ids they come from (sub-task ids from the task id,
  envelope ids from those), so a redelivered envelope re-publishes the very same
  envelopes and consumers deduplicate them.
- What a save promises to publish (sub-task requests, a question to a human,
  the final answer) is recorded in the context with the id of the envelope
  whose handling saved it. If the process dies between the save and the
  publish, that envelope is redelivered (its offset was never committed) and
  comes back as a request that finds its task saved, or as an answer that finds
  itself already recorded: either way the Worker publishes again what its first
  handling caused (:meth:`Worker._recover`). A stale answer also re-sends what
  has waited longer than a grace period, for a publish lost any other way.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

import structlog
from pydantic import BaseModel, JsonValue, ValidationError

from disco.agents._agent import Agent, PlatformContext
from disco.agents._common import (
    KEPT_PAYLOAD_MAX_BYTES,
    KEPT_TOTAL_MAX_BYTES,
    ResendMemo,
    answer,
    capability_for,
    current_cause,
    derived_id,
    json_size,
    publish_again,
    publish_system_event,
)
from disco.agents._errors import (
    AgentDefinitionError,
    StaleResultError,
    TaskConflictError,
    TaskStateError,
)
from disco.agents._faults import CrashPoint, crash_point
from disco.agents._handlers import describe, error_info, inspect_handler, to_json
from disco.bus import BusError
from disco.clients import ServiceConflictError, ServiceNotFoundError, ServiceUnavailableError
from disco_common.envelope import ActionRequest, Envelope
from disco_common.notifications import (
    HumanInputOption,
    HumanInputRequest,
    HumanInputResponse,
    NotificationType,
)
from disco_common.system_events import (
    DelegatedSubTask,
    SystemEventType,
    TaskCompletedData,
    TaskDelegatedData,
    TaskFailedData,
    TaskProgressData,
    TaskStartedData,
)
from disco_common.tasks import (
    ActionResultData,
    DelegationSpec,
    ErrorInfo,
    HumanInputWait,
    SubTaskInfo,
    SubTaskStatus,
    TaskContextData,
    TaskStatus,
)
from disco_common.topics import Topic

__all__ = ["ResultContext", "TaskContext", "Worker"]

_log = structlog.get_logger("disco.agents")

InputT = TypeVar("InputT")
HandlerT = TypeVar("HandlerT", bound=Callable[..., Awaitable[Any]])

_TRANSIENT = (ServiceUnavailableError, BusError)
"""Failures of the platform itself: the bus retries the envelope instead of failing the task."""

_CONFLICT_RETRIES = 20
_FINISHER_GRACE = timedelta(seconds=10)
"""How long a finished task's context may linger before a stale answer re-publishes its outcome.

Normally the context is deleted milliseconds after the answer went out; one
still there after this long belongs to a process that died in between.
"""
_RESEND_GRACE = timedelta(seconds=10)
"""How old a pending sub-task (or question) must be before a stale answer re-sends it.

Younger ones are most likely on their way; re-sending them would only double traffic.
"""
DEFAULT_TASK_TTL_SECONDS = 7 * 86_400


def _now() -> datetime:
    return datetime.now(UTC)


def _spec(value: DelegationSpec | Mapping[str, Any] | Sequence[Any]) -> DelegationSpec:
    if isinstance(value, DelegationSpec):
        return value
    if isinstance(value, Mapping):
        return DelegationSpec.model_validate(value)
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 3:
        event_type, data, response_event = value
        return DelegationSpec(event_type=event_type, data=data, response_event=response_event)
    raise TypeError(
        "a parallel delegation is a DelegationSpec(event_type=..., data=..., "
        "response_event=...), a mapping with those keys, or an (event_type, data, "
        f"response_event) tuple; got {value!r}"
    )


class TaskContext(Generic[InputT]):
    """A Worker's task: its request, sub-tasks and state, persisted in the memory service.

    Handlers receive one from ``@worker.on_task`` and restore one in
    ``@worker.on_result`` with :meth:`ResultContext.restore_task`. A task ends
    with exactly one answer to its caller: :meth:`complete` or :meth:`fail`.
    """

    def __init__(
        self,
        data: TaskContextData,
        platform: PlatformContext,
        *,
        input: InputT,
        version: int | None = None,
        ttl_seconds: int | None = DEFAULT_TASK_TTL_SECONDS,
    ) -> None:
        if len(data.sub_tasks) > 1:
            # Stored as JSONB, whose key order is not ours: delegation order is
            # kept by delegated_at (distinct within one fan-out, see _add_sub_task).
            ordered = sorted(data.sub_tasks.values(), key=_delegation_order)
            data.sub_tasks = {info.sub_task_id: info for info in ordered}
        self._data = data
        self._platform = platform
        self.input: InputT = input
        """The request data, validated as the model of ``TaskContext[Model]`` if one was given."""
        self._version = version
        self._ttl_seconds = ttl_seconds
        self._dirty = version is None
        self._finished = data.status.is_final
        self._started = time.monotonic()
        # Payloads of sub-tasks delegated by this copy that were too large to keep
        # in the context: enough to re-send them if this very run finds its save
        # already done (a redelivered request).
        self._unkept: dict[str, JsonValue] = {}
        self._kept_bytes: int | None = None  # pending payloads kept, counted when first needed

    # -- what the task is ---------------------------------------------------------

    @property
    def task_id(self) -> str:
        return self._data.task_id

    @property
    def event_type(self) -> str:
        """The request event type that started the task."""
        return self._data.event_type

    @property
    def data(self) -> JsonValue:
        """The request data as it came."""
        return self._data.data

    @property
    def plan_id(self) -> str | None:
        return self._data.plan_id

    @property
    def session_id(self) -> str | None:
        return self._data.session_id

    @property
    def tenant_id(self) -> str | None:
        return self._data.tenant_id

    @property
    def user_id(self) -> str | None:
        return self._data.user_id

    @property
    def response_event(self) -> str:
        return self._data.response_event

    @property
    def response_topic(self) -> str:
        return self._data.response_topic

    @property
    def correlation_id(self) -> str:
        """The id the answer carries (the request's correlation id, else the task id)."""
        return self._data.correlation_id or self._data.task_id

    @property
    def status(self) -> TaskStatus:
        return self._data.status

    @property
    def sub_tasks(self) -> dict[str, SubTaskInfo]:
        """Delegated sub-tasks (and questions to humans) by sub-task id, in order."""
        return self._data.sub_tasks

    @property
    def state(self) -> dict[str, JsonValue]:
        """The handler's own state; saved with the task (mutate it, then :meth:`save`)."""
        return self._data.state

    @property
    def human_input(self) -> HumanInputWait | None:
        """The outstanding question to a human, if the task awaits one."""
        return self._data.human_input

    @property
    def version(self) -> int | None:
        """The stored version this copy is based on (``None``: never saved)."""
        return self._version

    @property
    def finished(self) -> bool:
        """Whether the task was completed or failed."""
        return self._finished

    @property
    def dirty(self) -> bool:
        """Whether this copy has changes not saved yet."""
        return self._dirty

    def snapshot(self) -> TaskContextData:
        """A copy of the persisted form."""
        return self._data.model_copy(deep=True)

    # -- sub-tasks -------------------------------------------------------------------

    @property
    def parallel_groups(self) -> list[str]:
        """The fan-out group ids, in delegation order."""
        groups: dict[str, None] = {}
        for info in self._data.sub_tasks.values():
            if info.parallel_group_id is not None:
                groups[info.parallel_group_id] = None
        return list(groups)

    def parallel_group(self, parallel_group_id: str) -> list[SubTaskInfo]:
        """The sub-tasks of one fan-out group, in delegation order.

        Raises:
            TaskStateError: no such group (the message lists the known ones).
        """
        members = [
            info
            for info in self._data.sub_tasks.values()
            if info.parallel_group_id == parallel_group_id
        ]
        if not members:
            raise TaskStateError(
                f"task {self.task_id!r} has no parallel group {parallel_group_id!r}; its groups: "
                f"{self.parallel_groups}"
            )
        return members

    def update_sub_task_result(
        self,
        sub_task_id: str,
        result: Any = None,
        *,
        success: bool = True,
        error: ErrorInfo | BaseException | str | None = None,
    ) -> None:
        """Record a sub-task's answer (idempotent: a finished sub-task is left as it is).

        :meth:`ResultContext.restore_task` already records the answer it carries;
        call this for answers obtained otherwise.

        Raises:
            TaskStateError: the task has no such sub-task.
        """
        info = self._data.sub_tasks.get(sub_task_id)
        if info is None:
            raise TaskStateError(
                f"task {self.task_id!r} has no sub-task {sub_task_id!r}; its sub-tasks: "
                f"{list(self._data.sub_tasks)}"
            )
        if info.status is not SubTaskStatus.PENDING:
            return
        # Answered: the request will never be re-sent, its payload need not be kept.
        info.request_data = None
        info.request_kept = False
        self._kept_bytes = None
        if success:
            info.status = SubTaskStatus.COMPLETED
            info.result = to_json(result)
        else:
            info.status = SubTaskStatus.FAILED
            info.result = to_json(result)
            info.error = _as_error(error or "the sub-task failed")
        info.finished_at = _now()
        if self._data.human_input is not None and (
            self._data.human_input.correlation_id == sub_task_id
        ):
            self._data.human_input = None
        if self._data.status in (TaskStatus.WAITING, TaskStatus.AWAITING_INPUT) and not any(
            s.status is SubTaskStatus.PENDING for s in self._data.sub_tasks.values()
        ):
            self._data.status = TaskStatus.RUNNING
        self._dirty = True

    def aggregate_parallel_results(
        self, parallel_group_id: str | None = None
    ) -> dict[str, JsonValue] | None:
        """The results of a fan-out group by sub-task id once every member answered, else None.

        ``parallel_group_id`` defaults to the latest group (no need to keep the id
        in ``state``). Results are in delegation order; a failed member maps to
        ``None`` (see :meth:`parallel_group` for its error).

        Raises:
            TaskStateError: no such group (or no group at all).
        """
        if parallel_group_id is None:
            groups = self.parallel_groups
            if not groups:
                raise TaskStateError(
                    f"task {self.task_id!r} has no parallel group: delegate_parallel(...) first"
                )
            parallel_group_id = groups[-1]
        members = self.parallel_group(parallel_group_id)
        if any(info.status is SubTaskStatus.PENDING for info in members):
            return None
        return {
            info.sub_task_id: info.result if info.status is SubTaskStatus.COMPLETED else None
            for info in members
        }

    def is_complete(self) -> bool:
        """Whether every delegated sub-task has answered."""
        return all(info.status is not SubTaskStatus.PENDING for info in self.sub_tasks.values())

    # -- persistence -----------------------------------------------------------------

    async def save(self) -> None:
        """Persist the task context (optimistically: fails if another instance moved it).

        Raises:
            TaskConflictError: another instance saved a newer version (handlers
                are re-run by the Worker when this escapes them).
            TaskStateError: the task is finished.
        """
        self._check_open("save")
        await self._store()

    async def _store(self) -> None:
        memory = self._platform.context_memory
        expected = self._version if self._version is not None else 0
        self._data.updated_at = _now()
        try:
            record = await memory.store_task_context(
                self.task_id,
                self._data,
                plan_id=self._data.plan_id,
                ttl_seconds=self._ttl_seconds,
                expected_version=expected,
            )
        except ServiceConflictError:
            raise TaskConflictError(self.task_id, expected) from None
        self._version = record.version
        self._dirty = False

    def _check_open(self, action: str) -> None:
        if self._finished:
            raise TaskStateError(
                f"task {self.task_id!r} is already {self._data.status.value}: cannot {action} it"
            )

    def _next_delegation_time(self) -> datetime:
        # Strictly increasing within the task, so that sorting by it is delegation order.
        now = _now()
        latest = max(
            (info.delegated_at for info in self._data.sub_tasks.values() if info.delegated_at),
            default=None,
        )
        if latest is not None and now <= latest:
            now = latest + timedelta(microseconds=1)
        return now

    def _next_sub_task_id(self, kind: str = "sub") -> str:
        return derived_id(self.task_id, kind, str(len(self._data.sub_tasks)))

    # -- delegation -----------------------------------------------------------------

    async def delegate(
        self, event_type: str, data: Any = None, *, response_event: str | None = None
    ) -> str:
        """Ask another agent for a sub-task; its answer comes to ``on_result(response_event)``.

        The task is saved *before* the request is published, so any instance
        can restore it when the answer comes. The payload is checked against the
        request's registered schema first.

        Returns:
            The sub-task id (the request's correlation id).

        Raises:
            ValueError: no ``response_event``, or the payload fails the schema.
            TaskConflictError: another instance moved the task meanwhile.
        """
        if not response_event:
            raise AgentDefinitionError(
                f"delegate({event_type!r}, ...) needs response_event=...: the event type the "
                "sub-agent answers with; handle it with @worker.on_result(<that event type>)"
            )
        self._check_open("delegate from")
        spec = DelegationSpec(
            event_type=event_type, data=to_json(data), response_event=response_event
        )
        await self._platform.validate_request(spec.event_type, spec.data)
        sub_task_id = self._next_sub_task_id()
        self._add_sub_task(sub_task_id, spec, None)
        await self._store()
        crash_point(CrashPoint.TASK_DELEGATED)
        await self._publish_request(sub_task_id)
        await self._announce_delegation([(sub_task_id, spec)], None)
        return sub_task_id

    async def delegate_parallel(
        self, sub_tasks: Sequence[DelegationSpec | Mapping[str, Any] | Sequence[Any]]
    ) -> str:
        """Fan out: ask for several sub-tasks at once, as one group.

        Each answer comes to the ``on_result`` handler of its response event;
        :meth:`aggregate_parallel_results` tells when the whole group answered.

        Returns:
            The parallel group id.

        Raises:
            ValueError: no sub-tasks, or a payload fails its schema.
            TaskConflictError: another instance moved the task meanwhile.
        """
        specs = [_spec(item) for item in sub_tasks]
        if not specs:
            raise ValueError("delegate_parallel needs at least one sub-task")
        self._check_open("delegate from")
        for spec in specs:
            await self._platform.validate_request(spec.event_type, spec.data)
        group_id = derived_id(self.task_id, "group", str(len(self._data.sub_tasks)))
        delegated: list[tuple[str, DelegationSpec]] = []
        for spec in specs:
            sub_task_id = self._next_sub_task_id()
            self._add_sub_task(sub_task_id, spec, group_id)
            delegated.append((sub_task_id, spec))
        await self._store()
        crash_point(CrashPoint.TASK_DELEGATED)
        await asyncio.gather(*(self._publish_request(sid) for sid, _ in delegated))
        await self._announce_delegation(delegated, group_id)
        return group_id

    def _add_sub_task(self, sub_task_id: str, spec: DelegationSpec, group: str | None) -> None:
        # The payload is kept (within a budget) so that a request lost in a crash
        # can be sent again by whichever instance notices; see Worker._recover.
        kept = self._keeps(spec.data)
        self._data.sub_tasks[sub_task_id] = SubTaskInfo(
            sub_task_id=sub_task_id,
            event_type=spec.event_type,
            response_event=spec.response_event,
            parallel_group_id=group,
            delegated_at=self._next_delegation_time(),
            caused_by=current_cause(),
            request_data=spec.data if kept else None,
            request_kept=kept,
        )
        if not kept:
            self._unkept[sub_task_id] = spec.data
        self._data.status = TaskStatus.WAITING
        self._dirty = True

    def _keeps(self, payload: JsonValue) -> bool:
        size = json_size(payload)
        if size > KEPT_PAYLOAD_MAX_BYTES:
            return False
        if self._kept_bytes is None:
            self._kept_bytes = sum(
                json_size(info.request_data)
                for info in self._data.sub_tasks.values()
                if info.request_kept and info.status is SubTaskStatus.PENDING
            )
        if self._kept_bytes + size > KEPT_TOTAL_MAX_BYTES:
            return False
        self._kept_bytes += size
        return True

    async def _publish_request(self, sub_task_id: str) -> None:
        info = self._data.sub_tasks[sub_task_id]
        payload = info.request_data if info.request_kept else self._unkept[sub_task_id]
        await _send_request(self._platform, self._data, info, payload)

    async def _announce_delegation(
        self, delegated: list[tuple[str, DelegationSpec]], group: str | None
    ) -> None:
        infos = [self._data.sub_tasks[sid] for sid, _ in delegated]
        await _announce_delegation(self._platform, self._data, infos, group)

    def _envelope_scope(self) -> dict[str, Any]:
        scope: dict[str, Any] = {}
        for key in ("tenant_id", "user_id", "session_id", "plan_id"):
            value = getattr(self._data, key)
            if value is not None:
                scope[key] = value
        return scope

    # -- humans -----------------------------------------------------------------------

    async def request_human_input(
        self,
        question: str,
        *,
        response_event: str,
        timeout_seconds: int,
        options: Sequence[HumanInputOption | str | Mapping[str, Any]] | None = None,
        context: Mapping[str, Any] | None = None,
        answer_schema: Mapping[str, Any] | None = None,
    ) -> str:
        """Ask a human, time-bound: exactly one answer or a timeout comes back.

        Saves the task with the wait, then publishes ``notification.human_input``
        on ``notification-events``. The answer (or, when ``timeout_seconds``
        pass, the tracker's ``timed_out`` response) arrives as ``response_event``
        on ``notification-events``: handle it with ``@worker.on_human_input``.
        The first one wins; a late or repeated answer is ignored.

        Returns:
            The question's correlation id (the answer carries it).
        """
        self._check_open("ask a human for")
        correlation_id = self._next_sub_task_id("human")
        request_id = derived_id(correlation_id, "request")
        normalised = [
            option
            if isinstance(option, HumanInputOption)
            else HumanInputOption(value=option, label=option)
            if isinstance(option, str)
            else HumanInputOption.model_validate(option)
            for option in options or ()
        ]
        body = HumanInputRequest(
            question=question,
            response_event=response_event,
            timeout_seconds=timeout_seconds,
            options=normalised or None,
            answer_schema=dict(answer_schema) if answer_schema is not None else None,
            task_id=self.task_id,
            plan_id=self.plan_id,
            context=dict(context or {}),
        )
        asked_at = self._next_delegation_time()
        cause = current_cause()
        wait = HumanInputWait(
            request_id=request_id,
            correlation_id=correlation_id,
            response_event=response_event,
            timeout_seconds=timeout_seconds,
            asked_at=asked_at,
            caused_by=cause,
            request_data=body.model_dump(mode="json"),
        )
        self._data.human_input = wait
        self._data.sub_tasks[correlation_id] = SubTaskInfo(
            sub_task_id=correlation_id,
            event_type=NotificationType.HUMAN_INPUT.value,
            response_event=response_event,
            delegated_at=asked_at,
            caused_by=cause,
        )
        self._data.status = TaskStatus.AWAITING_INPUT
        self._dirty = True
        await self._store()
        crash_point(CrashPoint.TASK_ASKED)
        await _send_question(self._platform, self._data, wait)
        await self.progress(message=question[:2000], status=TaskStatus.AWAITING_INPUT)
        return correlation_id

    # -- progress and the end -------------------------------------------------------------

    async def progress(
        self,
        fraction: float | None = None,
        message: str | None = None,
        *,
        status: TaskStatus = TaskStatus.RUNNING,
    ) -> None:
        """Report progress on ``system-events`` (``task.progress``); the tracker reads it."""
        await publish_system_event(
            self._platform.bus,
            SystemEventType.TASK_PROGRESS,
            TaskProgressData(
                task_id=self.task_id,
                plan_id=self.plan_id,
                agent_name=self._data.agent_name,
                agent_id=self._data.agent_id,
                status=status,
                progress=fraction,
                message=message,
            ),
            plan_id=self.plan_id,
            task_id=self.task_id,
        )

    async def complete(self, result: Any = None) -> None:
        """Answer the caller with success and end the task (exactly once).

        ``result`` (JSON data or a pydantic model) becomes the answer's ``result``.

        Raises:
            TaskStateError: the task is already finished.
            TaskConflictError: another instance moved the task meanwhile (the
                Worker re-runs the handler on a fresh copy).
        """
        self._check_open("complete")
        outcome = ActionResultData(success=True, result=to_json(result), task_id=self.task_id)
        await self._finish(outcome, TaskStatus.COMPLETED)

    async def fail(self, error: ErrorInfo | BaseException | str) -> None:
        """Answer the caller with an error and end the task (exactly once).

        Raises:
            TaskStateError: the task is already finished.
            TaskConflictError: another instance moved the task meanwhile.
        """
        self._check_open("fail")
        outcome = ActionResultData(success=False, error=_as_error(error), task_id=self.task_id)
        await self._finish(outcome, TaskStatus.FAILED)

    async def _finish(self, outcome: ActionResultData, status: TaskStatus) -> None:
        persisted = self._version is not None
        if persisted:
            # Claim the end first: of two instances finishing at once only one
            # write succeeds, so only one answer goes out.
            self._data.status = status
            self._data.outcome = outcome
            self._data.human_input = None
            self._data.finished_by = current_cause()
            for info in self._data.sub_tasks.values():
                info.request_data, info.request_kept = None, False
            await self._store()
            crash_point(CrashPoint.TASK_FINISHED)
        else:
            self._data.status = status
            self._data.outcome = outcome
        self._finished = True
        await _publish_outcome(self._platform, self._data, time.monotonic() - self._started)
        if persisted:
            await _forget(self._platform, self.task_id)


def _delegation_order(info: SubTaskInfo) -> tuple[datetime, str]:
    return (info.delegated_at or datetime.min.replace(tzinfo=UTC), info.sub_task_id)


def _as_error(error: ErrorInfo | BaseException | str) -> ErrorInfo:
    if isinstance(error, ErrorInfo):
        return error
    if isinstance(error, BaseException):
        return error_info(error)
    return ErrorInfo(type="TaskFailed", message=str(error)[:4000])


def _scope_of(data: TaskContextData) -> dict[str, Any]:
    return {
        key: value
        for key in ("tenant_id", "user_id", "session_id", "plan_id")
        if (value := getattr(data, key)) is not None
    }


async def _send_request(
    platform: PlatformContext, data: TaskContextData, info: SubTaskInfo, payload: JsonValue
) -> None:
    """Publish a sub-task's request as its saved record describes it (first time or again)."""
    assert info.delegated_at is not None
    await publish_again(
        platform.bus,
        Topic.ACTION_REQUESTS,
        info.event_type,
        payload,
        id=derived_id(info.sub_task_id, "request"),
        time=info.delegated_at,
        traceparent=data.traceparent,
        correlation_id=info.sub_task_id,
        causation_id=info.caused_by,
        response_event=info.response_event,
        response_topic=Topic.ACTION_RESULTS.value,
        task_id=info.sub_task_id,
        **_scope_of(data),
    )


async def _send_question(
    platform: PlatformContext, data: TaskContextData, wait: HumanInputWait
) -> None:
    """Publish a task's question to a human as its saved wait describes it."""
    await publish_again(
        platform.bus,
        Topic.NOTIFICATION_EVENTS,
        NotificationType.HUMAN_INPUT.value,
        wait.request_data,
        id=wait.request_id,
        time=wait.asked_at,
        traceparent=data.traceparent,
        correlation_id=wait.correlation_id,
        causation_id=wait.caused_by,
        task_id=data.task_id,
        **_scope_of(data),
    )


async def _announce_delegation(
    platform: PlatformContext,
    data: TaskContextData,
    infos: Sequence[SubTaskInfo],
    group: str | None,
) -> None:
    """``task.delegated`` for one delegation (its id derived: announcing again is harmless)."""
    await publish_system_event(
        platform.bus,
        SystemEventType.TASK_DELEGATED,
        TaskDelegatedData(
            task_id=data.task_id,
            plan_id=data.plan_id,
            agent_name=data.agent_name,
            agent_id=data.agent_id,
            sub_tasks=[
                DelegatedSubTask(
                    sub_task_id=info.sub_task_id,
                    event_type=info.event_type,
                    response_event=info.response_event,
                )
                for info in infos
            ],
            parallel_group_id=group,
        ),
        id=derived_id(infos[0].sub_task_id, "delegated"),
        plan_id=data.plan_id,
        task_id=data.task_id,
    )


async def _publish_outcome(
    platform: PlatformContext, data: TaskContextData, duration: float | None
) -> None:
    """Publish a final task's answer and its system event (ids derived: repeatable)."""
    outcome = data.outcome
    assert outcome is not None
    scope = {
        key: value
        for key in ("tenant_id", "user_id", "session_id", "plan_id")
        if (value := getattr(data, key)) is not None
    }
    await answer(
        platform.bus,
        data.response_event,
        outcome.model_dump(mode="json", exclude_none=True),
        correlation_id=data.correlation_id or data.task_id,
        topic=data.response_topic,
        id=derived_id(data.task_id, "answer"),
        task_id=data.task_id,
        **scope,
    )
    kind: SystemEventType
    payload: TaskCompletedData | TaskFailedData
    if outcome.success:
        kind = SystemEventType.TASK_COMPLETED
        payload = TaskCompletedData(
            task_id=data.task_id,
            plan_id=data.plan_id,
            agent_name=data.agent_name,
            agent_id=data.agent_id,
            duration_seconds=duration,
            result=outcome.result,
        )
    else:
        assert outcome.error is not None
        kind = SystemEventType.TASK_FAILED
        payload = TaskFailedData(
            task_id=data.task_id,
            plan_id=data.plan_id,
            agent_name=data.agent_name,
            agent_id=data.agent_id,
            duration_seconds=duration,
            error=outcome.error,
        )
    await publish_system_event(
        platform.bus,
        kind,
        payload,
        id=derived_id(data.task_id, "completed" if outcome.success else "failed"),
        plan_id=data.plan_id,
        task_id=data.task_id,
    )


async def _forget(platform: PlatformContext, task_id: str) -> None:
    # Best effort: the answer is out; a context left behind expires by its TTL,
    # and a late answer that finds it sees a final task and is ignored.
    try:
        await platform.context_memory.delete_task_context(task_id)
    except ServiceNotFoundError:
        pass
    except Exception as exc:
        _log.warning("finished task context not deleted", task_id=task_id, error=repr(exc))


class ResultContext:
    """An answer to something a task asked for: a sub-task's result or a human's answer.

    ``success``, ``result`` and ``error`` read the answer's
    :class:`~disco_common.tasks.ActionResultData`; for a human's answer
    ``human_input`` is the :class:`~disco_common.notifications.HumanInputResponse`
    (``timed_out`` when nobody answered in time). :meth:`restore_task` brings
    back the task that asked, with this answer already recorded.
    """

    def __init__(self, envelope: Envelope, platform: PlatformContext, worker: Worker) -> None:
        self.envelope = envelope
        self._platform = platform
        self._worker = worker
        self._task: TaskContext[Any] | None = None
        self.human_input: HumanInputResponse | None = None
        self.success = True
        self.result: JsonValue = envelope.data
        self.error: ErrorInfo | None = None
        data = envelope.data
        if _is_human_answer(envelope):
            try:
                self.human_input = HumanInputResponse.model_validate(data)
            except ValidationError:
                self.human_input = HumanInputResponse(answer=data)
            self.result = self.human_input.answer
            if self.human_input.timed_out:
                self.success = False
                self.error = ErrorInfo(
                    type="hitl_timeout", message="nobody answered within the timeout"
                )
        elif isinstance(data, dict) and isinstance(data.get("success"), bool):
            try:
                parsed = ActionResultData.model_validate(data)
            except ValidationError:
                pass
            else:
                self.success = parsed.success
                self.result = parsed.result
                self.error = parsed.error

    @property
    def event_type(self) -> str:
        return self.envelope.type

    @property
    def correlation_id(self) -> str:
        """The sub-task id (or question id) this answers."""
        return self.envelope.correlation_id or ""

    @property
    def data(self) -> JsonValue:
        """The answer's data as it came."""
        return self.envelope.data

    @property
    def timed_out(self) -> bool:
        """Whether this is the timeout of a question to a human."""
        return self.human_input is not None and self.human_input.timed_out

    @property
    def answer(self) -> JsonValue:
        """A human's answer (``None`` when timed out)."""
        return self.human_input.answer if self.human_input is not None else None

    async def restore_task(self) -> TaskContext[Any]:
        """The task that asked, from memory, with this answer recorded in it.

        Raises:
            StaleResultError: nothing waits for this answer (a duplicate, a late
                answer, a finished or unknown task); the Worker ends the handler
                quietly when it escapes.
        """
        if self._task is not None:
            return self._task
        correlation_id = self.correlation_id
        if not correlation_id:
            raise StaleResultError(f"{self.event_type!r} carries no correlation id")
        memory = self._platform.context_memory
        record = await memory.get_task_by_subtask(correlation_id)
        if record is None:
            raise StaleResultError(f"no task waits for {correlation_id!r}")
        data = record.context
        if data.agent_name is not None and data.agent_name != self._worker.name:
            raise StaleResultError(
                f"{correlation_id!r} belongs to a task of {data.agent_name!r}, not "
                f"{self._worker.name!r}"
            )
        if data.status.is_final:
            # Its context normally goes right after the answer: finish a
            # publication the process that ended it may not have made.
            await self._worker._recover(data, self.envelope.id)
            raise StaleResultError(f"task {data.task_id!r} is already {data.status.value}")
        info = data.sub_tasks.get(correlation_id)
        if info is None or info.status is not SubTaskStatus.PENDING:
            # Already recorded: a duplicate, or this very answer redelivered
            # because the handler that recorded it died before publishing
            # what it saved (then send that now).
            await self._worker._recover(data, self.envelope.id)
            raise StaleResultError(
                f"sub-task {correlation_id!r} of task {data.task_id!r} already answered"
            )
        task: TaskContext[Any] = TaskContext(
            data,
            self._platform,
            input=self._worker._task_input(data),
            version=record.version,
            ttl_seconds=self._worker.task_ttl_seconds,
        )
        task.update_sub_task_result(
            correlation_id, self.result, success=self.success, error=self.error
        )
        self._task = task
        return task


def _is_human_answer(envelope: Envelope) -> bool:
    from disco._context import maybe_current_context

    context = maybe_current_context()
    if context is not None and context.envelope is envelope:
        return context.topic == Topic.NOTIFICATION_EVENTS.value
    return envelope.topic_hint is Topic.NOTIFICATION_EVENTS


class Worker(Agent):
    """An asynchronous agent: tasks that delegate, fan out, wait for humans, and finish later.

    ``@worker.on_task("research.requested")`` starts a task from a request on
    ``action-requests``; the handler completes it at once or delegates and
    returns. ``@worker.on_result("search.completed")`` receives sub-task answers
    (on ``action-results``) and ``@worker.on_human_input("approval.given")``
    answers to questions (on ``notification-events``); both restore the task
    with :meth:`ResultContext.restore_task`. Progress goes to ``system-events``.

    Args:
        task_ttl_seconds: how long an unfinished task context is kept (default 7 days).
        **options: as for :class:`Agent`.
    """

    kind = "worker"

    def __init__(
        self, name: str, *, task_ttl_seconds: int | None = DEFAULT_TASK_TTL_SECONDS, **options: Any
    ) -> None:
        super().__init__(name, **options)
        self.task_ttl_seconds = task_ttl_seconds
        self._input_models: dict[str, type[BaseModel]] = {}
        self._resent = ResendMemo(_RESEND_GRACE.total_seconds())

    async def _recover(
        self,
        data: TaskContextData,
        cause: str | None,
        *,
        by_age: bool = True,
        unkept: Mapping[str, JsonValue] | None = None,
    ) -> int:
        """Publish again what a saved task promised but may never have been published.

        Due are the requests, question and final answer that ``cause`` (the
        envelope being handled) brought about: it comes again only because its
        first handling did not finish, so what that handling saved may never
        have gone out. With ``by_age``, also pending requests and questions
        older than a grace period, and an outcome whose context outlived its
        publication by that long (each re-sent at most once per grace by this
        process). Everything goes out with its first ids (receivers
        deduplicate; a second answer is stale), so this cannot loop: a re-send
        only follows a stale answer, and answers to re-sends are stale at most once.

        Returns:
            How many envelopes were published again.
        """
        platform = self.context
        now = _now()

        def due(key: str, caused_by: str | None, since: datetime | None, grace: timedelta) -> bool:
            if cause is not None and caused_by == cause:
                return True
            return by_age and since is not None and now - since > grace and self._resent.due(key)

        if data.status.is_final:
            if data.outcome is None or not due(
                data.task_id, data.finished_by, data.updated_at or now, _FINISHER_GRACE
            ):
                return 0
            _log.info("publishing a finished task's answer again", task_id=data.task_id)
            await _publish_outcome(platform, data, None)
            self._resent.sent(data.task_id)
            await _forget(platform, data.task_id)
            return 1
        sent = 0
        announce: dict[str, None] = {}  # delegations to announce again, in order
        wait = data.human_input
        # Stored as JSONB, whose key order is not ours: delegation order by time.
        ordered = sorted(data.sub_tasks.values(), key=_delegation_order)
        for info in ordered:
            if info.status is not SubTaskStatus.PENDING:
                continue
            if not due(info.sub_task_id, info.caused_by, info.delegated_at, _RESEND_GRACE):
                continue
            if wait is not None and info.sub_task_id == wait.correlation_id:
                if wait.request_data is None:
                    continue  # asked by an older SDK: the question is not kept
                await _send_question(platform, data, wait)
            elif info.event_type == NotificationType.HUMAN_INPUT.value:
                continue  # a question no longer outstanding
            elif info.request_kept:
                await _send_request(platform, data, info, info.request_data)
            elif unkept is not None and info.sub_task_id in unkept:
                await _send_request(platform, data, info, unkept[info.sub_task_id])
            else:
                _log.warning(
                    "a pending sub-task cannot be sent again: its payload was too large to keep",
                    task_id=data.task_id,
                    sub_task_id=info.sub_task_id,
                )
                self._resent.sent(info.sub_task_id)  # say so once per grace, not per answer
                continue
            _log.info("published again", task_id=data.task_id, sub_task_id=info.sub_task_id)
            self._resent.sent(info.sub_task_id)
            sent += 1
            if info.event_type != NotificationType.HUMAN_INPUT.value:
                announce.setdefault(info.parallel_group_id or info.sub_task_id, None)
        # The delegation was announced after its requests: announce it again too.
        for key in announce:
            members = [
                info for info in ordered if key in (info.parallel_group_id, info.sub_task_id)
            ]
            group = members[0].parallel_group_id
            await _announce_delegation(platform, data, members, group)
        return sent

    def _task_input(self, data: TaskContextData) -> Any:
        model = self._input_models.get(data.event_type)
        if model is None:
            return data.data
        return model.model_validate(data.data)

    def on_task(
        self,
        event_type: str,
        *,
        capability: str | None = None,
        description: str | None = None,
        response_event: str | None = None,
    ) -> Callable[[HandlerT], HandlerT]:
        """Decorator: start a task for each ``event_type`` request on ``action-requests``.

        The handler is ``async def handler(task: TaskContext, context:
        PlatformContext)`` (``TaskContext[Model]`` validates the request data
        into ``task.input``; invalid data is answered with an error at once). It
        ends the task with ``task.complete``/``task.fail`` or delegates and
        returns; an exception it raises fails the task (the caller gets the error).

        Raises:
            AgentDefinitionError: a bad signature or a duplicate handler.
        """

        def register(handler: HandlerT) -> HandlerT:
            spec = inspect_handler(
                handler,
                decorator="on_task",
                first="task: TaskContext",
                context_types=(TaskContext,),
                allow_model_argument=False,
                check_return=False,
            )
            if spec.input_model is not None:
                self._input_models[event_type] = spec.input_model
            derived = capability_for(
                spec,
                event_type,
                capability=capability,
                description=description,
                response_event=response_event,
            )
            worker = self
            name = describe(handler)

            async def dispatch(envelope: Envelope) -> None:
                await worker._run_task(envelope, handler, spec.takes_context, name)

            self._add_route(Topic.ACTION_REQUESTS.value, event_type, dispatch, name, internal=True)
            self._derive_capability(derived)
            return handler

        return register

    def on_result(
        self, event_type: str, *, topic: str | Topic = Topic.ACTION_RESULTS
    ) -> Callable[[HandlerT], HandlerT]:
        """Decorator: handle answers of type ``event_type`` to this Worker's sub-tasks.

        The handler is ``async def handler(result: ResultContext, context:
        PlatformContext)``. Call ``await result.restore_task()`` for the task (the
        answer is recorded in it); anything it changed is saved when the handler
        returns. Answers nobody waits for (duplicates, late ones) end the handler
        quietly; concurrent answers for one task re-run the handler on a fresh copy.
        """
        logical = str(topic)

        def register(handler: HandlerT) -> HandlerT:
            spec = inspect_handler(
                handler,
                decorator="on_result",
                first="result: ResultContext",
                context_types=(ResultContext,),
                allow_model_argument=False,
                check_return=False,
            )
            worker = self
            name = describe(handler)

            async def dispatch(envelope: Envelope) -> None:
                await worker._run_result(envelope, handler, spec.takes_context, name)

            self._add_route(logical, event_type, dispatch, name, internal=True)
            return handler

        return register

    def on_human_input(self, event_type: str) -> Callable[[HandlerT], HandlerT]:
        """Decorator: handle answers to ``task.request_human_input(response_event=event_type)``.

        The same as ``on_result(event_type, topic="notification-events")``:
        ``result.human_input`` is the answer and ``result.timed_out`` tells the
        timeout path; the first of answer or timeout wins.
        """
        return self.on_result(event_type, topic=Topic.NOTIFICATION_EVENTS)

    # -- running handlers ------------------------------------------------------------

    def _new_task(self, request: ActionRequest, platform: PlatformContext) -> TaskContext[Any]:
        now = _now()
        data = TaskContextData(
            task_id=request.task_id or request.id,
            event_type=request.type,
            plan_id=request.plan_id,
            data=request.data,
            response_event=request.response_event,
            response_topic=request.response_topic,
            correlation_id=request.correlation_id,
            request_id=request.id,
            tenant_id=request.tenant_id,
            user_id=request.user_id,
            session_id=request.session_id,
            agent_id=self.identity.agent_id,
            agent_name=self.name,
            traceparent=request.traceparent,
            created_at=now,
            updated_at=now,
        )
        task_input = self._task_input(data)
        return TaskContext(data, platform, input=task_input, ttl_seconds=self.task_ttl_seconds)

    async def _run_task(
        self,
        envelope: Envelope,
        handler: Callable[..., Awaitable[Any]],
        takes_context: bool,
        name: str,
    ) -> None:
        request: ActionRequest = envelope  # type: ignore[assignment]
        platform = self.context
        try:
            task = self._new_task(request, platform)
        except ValidationError as exc:
            # Invalid request data: answer at once, nothing was saved.
            data = TaskContextData(
                task_id=request.task_id or request.id,
                event_type=request.type,
                response_event=request.response_event,
                response_topic=request.response_topic,
                correlation_id=request.correlation_id,
                plan_id=request.plan_id,
                agent_name=self.name,
                agent_id=self.identity.agent_id,
                status=TaskStatus.FAILED,
                outcome=ActionResultData(success=False, error=error_info(exc)),
            )
            await _publish_outcome(platform, data, None)
            return
        await publish_system_event(
            platform.bus,
            SystemEventType.TASK_STARTED,
            TaskStartedData(
                task_id=task.task_id,
                plan_id=task.plan_id,
                agent_name=self.name,
                agent_id=self.identity.agent_id,
                event_type=request.type,
                correlation_id=request.correlation_id,
            ),
            id=derived_id(task.task_id, "started"),
            plan_id=task.plan_id,
            task_id=task.task_id,
        )
        try:
            if takes_context:
                await handler(task, platform)
            else:
                await handler(task)
            if not task.finished and task.dirty:
                if task.version is None and not task.sub_tasks:
                    _log.warning(
                        "task handler returned without completing, delegating or asking; "
                        "saving the task so a later handler can finish it",
                        handler=name,
                        task_id=task.task_id,
                    )
                await task.save()
        except (StaleResultError, TaskConflictError) as exc:
            if task.version is None:
                # A fresh task conflicts only when the same request was taken up
                # before (a redelivery): that run owns it, but may have died
                # between its save and its publishing; send what it saved.
                _log.info("task already taken up; skipping", task_id=task.task_id, reason=str(exc))
                record = await platform.context_memory.get_task_context(task.task_id)
                if record is not None and record.context.agent_name in (None, self.name):
                    await self._recover(
                        record.context, envelope.id, by_age=False, unkept=task._unkept
                    )
            else:
                # The handler changed the task after delegating, and an answer
                # moved it meanwhile: those changes are lost.
                _log.warning(
                    "task changed by its answers before the task handler saved; its later "
                    "changes are lost: set task.state before delegating (and use "
                    "task.parallel_groups rather than storing group ids)",
                    handler=name,
                    task_id=task.task_id,
                )
        except _TRANSIENT:
            raise
        except Exception as exc:
            _log.warning("task handler failed", handler=name, task_id=task.task_id, error=repr(exc))
            if not task.finished:
                try:
                    await task.fail(exc)
                except TaskConflictError:
                    _log.info("task moved on elsewhere; not failing it", task_id=task.task_id)

    async def _run_result(
        self,
        envelope: Envelope,
        handler: Callable[..., Awaitable[Any]],
        takes_context: bool,
        name: str,
    ) -> None:
        platform = self.context
        for attempt in range(1, _CONFLICT_RETRIES + 1):
            result = ResultContext(envelope, platform, self)
            try:
                try:
                    if takes_context:
                        await handler(result, platform)
                    else:
                        await handler(result)
                    task = result._task
                    if task is not None and not task.finished and task.dirty:
                        await task.save()
                    return
                except (StaleResultError, TaskConflictError, *_TRANSIENT):
                    raise
                except Exception as exc:
                    task = result._task
                    if task is None:
                        raise
                    _log.warning(
                        "result handler failed; failing the task",
                        handler=name,
                        task_id=task.task_id,
                        error=repr(exc),
                    )
                    if not task.finished:
                        await task.fail(exc)
                    return
            except StaleResultError as exc:
                _log.debug("answer ignored", event_type=envelope.type, reason=str(exc))
                return
            except TaskConflictError:
                if attempt == _CONFLICT_RETRIES:
                    raise
                # Another instance moved the task: read it again and redo the step.
                await asyncio.sleep(random.uniform(0, 0.005 * attempt))
