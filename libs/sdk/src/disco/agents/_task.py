"""A Worker's task: :class:`TaskContext`, its request, sub-tasks and state, saved in memory.

Delegating saves the task *before* publishing the requests (so any instance
can restore it when an answer comes), records what the save promises to
publish, and keeps the payloads (within a budget) for a re-send after a crash;
see :mod:`disco.agents._durable`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import JsonValue

from disco._faults import CrashPoint, crash_point
from disco.agents._common import derived_id
from disco.agents._durable import (
    KEPT_PAYLOAD_MAX_BYTES,
    KEPT_TOTAL_MAX_BYTES,
    DurableContext,
    SavedCopies,
    as_error,
    current_cause,
    json_size,
    utc_now,
)
from disco.agents._errors import AgentDefinitionError, TaskConflictError, TaskStateError
from disco.agents._handlers import to_json
from disco.agents._progress import ProgressReporter
from disco.agents._sub_tasks import group_ids, group_members, group_results, record_answer
from disco.agents._task_wire import (
    announce_delegation,
    announce_task,
    delegation_order,
    forget,
    publish_outcome,
    send_question,
    send_request,
    task_fields,
)
from disco_common.a2a import A2AAnswer, A2AArtifact, A2AMessageContext, A2APart
from disco_common.memory import TaskContextRecord
from disco_common.notifications import HumanInputOption, HumanInputRequest, NotificationType
from disco_common.system_events import SystemEventType, TaskProgressData
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

if TYPE_CHECKING:
    from disco.agents._platform import PlatformContext

__all__ = ["DEFAULT_TASK_TTL_SECONDS", "TaskContext", "delegation_spec"]

InputT = TypeVar("InputT")

DEFAULT_TASK_TTL_SECONDS = 7 * 86_400
"""How long an unfinished task context is kept by default (7 days)."""


def delegation_spec(value: DelegationSpec | Mapping[str, Any] | Sequence[Any]) -> DelegationSpec:
    """One member of ``delegate_parallel([...])`` as a :class:`DelegationSpec`."""
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


class TaskContext(DurableContext[TaskContextData], Generic[InputT]):
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
        copies: SavedCopies[TaskContextData] | None = None,
    ) -> None:
        if len(data.sub_tasks) > 1:
            # Stored as JSONB, whose key order is not ours: delegation order is
            # kept by delegated_at (distinct within one fan-out, see _add_sub_task).
            ordered = sorted(data.sub_tasks.values(), key=delegation_order)
            data.sub_tasks = {info.sub_task_id: info for info in ordered}
        super().__init__(data, platform, version=version, copies=copies)
        self.input: InputT = input
        """The request data, validated as the model of ``TaskContext[Model]`` if one was given."""
        self._ttl_seconds = ttl_seconds
        self._finished = data.status.is_final
        # Payloads of sub-tasks delegated by this copy that were too large to keep
        # in the context: enough to re-send them if this very run finds its save
        # already done (a redelivered request).
        self._unkept: dict[str, JsonValue] = {}
        self._kept_bytes: int | None = None  # pending payloads kept, counted when first needed
        self._progress: ProgressReporter | None = None

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
    def a2a(self) -> A2AMessageContext | None:
        """The A2A message the task's request came from (None: not from an A2A caller);
        kept with the task, so a restored task has it too. The message that answers a
        question to a human is the answer's: ``result.a2a``."""
        return self._data.a2a_message

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
    def finished(self) -> bool:
        """Whether the task was completed or failed."""
        return self._finished

    # -- sub-tasks -------------------------------------------------------------------

    @property
    def parallel_groups(self) -> list[str]:
        """The fan-out group ids, in delegation order."""
        return group_ids(self._data)

    def parallel_group(self, parallel_group_id: str) -> list[SubTaskInfo]:
        """The sub-tasks of one fan-out group, in delegation order.

        Raises:
            TaskStateError: no such group (the message lists the known ones).
        """
        members = group_members(self._data, parallel_group_id)
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
        if record_answer(self._data, info, result, success=success, error=error):
            self._kept_bytes = None
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
        return group_results(self.parallel_group(parallel_group_id))

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

    async def _write(self, expected_version: int) -> TaskContextRecord:
        return await self._platform.context_memory.store_task_context(
            self.task_id,
            self._data,
            plan_id=self._data.plan_id,
            ttl_seconds=self._ttl_seconds,
            expected_version=expected_version,
        )

    @property
    def _key(self) -> str:
        return self._data.task_id

    def _conflict(self, expected_version: int) -> TaskConflictError:
        return TaskConflictError(self.task_id, expected_version)

    def _check_open(self, action: str) -> None:
        if self._finished:
            raise TaskStateError(
                f"task {self.task_id!r} is already {self._data.status.value}: cannot {action} it"
            )

    def _next_delegation_time(self) -> datetime:
        # Strictly increasing within the task, so that sorting by it is delegation order.
        now = utc_now()
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
        specs = [delegation_spec(item) for item in sub_tasks]
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
        await send_request(self._platform, self._data, info, payload)

    async def _announce_delegation(
        self, delegated: list[tuple[str, DelegationSpec]], group: str | None
    ) -> None:
        infos = [self._data.sub_tasks[sid] for sid, _ in delegated]
        await announce_delegation(self._platform, self._data, infos, group)

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
        await send_question(self._platform, self._data, wait)
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
        progress = TaskProgressData(
            **task_fields(self._data), status=status, progress=fraction, message=message
        )
        await announce_task(self._platform, self._data, SystemEventType.TASK_PROGRESS, progress)

    async def update(self, *message: A2APart | str) -> None:
        """Tell the caller how the work goes: an intermediate status message.

        It goes to the caller (``action.progressed`` on the response topic, an A2A
        caller sees a ``working`` status update); :meth:`progress` is what the
        tracker reads.
        """
        await self._reporter().update(*message)

    async def artifact(
        self, artifact: A2AArtifact, *, append: bool = False, last_chunk: bool = False
    ) -> None:
        """Hand the caller an artifact, or a chunk of one (``append`` to the same ``artifact_id``).

        The last chunk says ``last_chunk=True``. Artifacts handed this way are not
        repeated in the answer: an A2A caller collects them as they come.
        """
        await self._reporter().artifact(artifact, append=append, last_chunk=last_chunk)

    def _reporter(self) -> ProgressReporter:
        if self._progress is None:
            self._progress = ProgressReporter(
                self._platform.bus,
                correlation_id=self.correlation_id,
                response_topic=self.response_topic,
                task_id=self.task_id,
                # A task's handlers run apart (and on any instance): number the
                # partial answers by time so that they still sort in order.
                first_sequence=time.time_ns() // 1000,
            )
        return self._progress

    async def complete(self, result: Any = None) -> None:
        """Answer the caller with success and end the task (exactly once).

        ``result`` (JSON data or a pydantic model) becomes the answer's ``result``.
        An :class:`~disco_common.a2a.A2AAnswer` shapes what an A2A caller sees
        (a direct message, artifacts, rejected...); one that is not ``completed``
        ends the task as failed for disco callers (see
        :meth:`ActionResultData.of_answer`).

        Raises:
            TaskStateError: the task is already finished.
            TaskConflictError: another instance moved the task meanwhile (the
                Worker re-runs the handler on a fresh copy).
        """
        self._check_open("complete")
        if isinstance(result, A2AAnswer):
            outcome = ActionResultData.of_answer(result, task_id=self.task_id)
            status = TaskStatus.COMPLETED if outcome.success else TaskStatus.FAILED
            await self._finish(outcome, status)
            return
        outcome = ActionResultData(success=True, result=to_json(result), task_id=self.task_id)
        await self._finish(outcome, TaskStatus.COMPLETED)

    async def fail(self, error: ErrorInfo | BaseException | str) -> None:
        """Answer the caller with an error and end the task (exactly once).

        Raises:
            TaskStateError: the task is already finished.
            TaskConflictError: another instance moved the task meanwhile.
        """
        self._check_open("fail")
        outcome = ActionResultData(
            success=False, error=as_error(error, kind="TaskFailed"), task_id=self.task_id
        )
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
        # The task's duration: from the request being taken up (not from this
        # handler, which may be the last of several) to its answer.
        created = self._data.created_at
        duration = (
            max(0.0, (utc_now() - created).total_seconds())
            if created is not None
            else time.monotonic() - self._started
        )
        await publish_outcome(self._platform, self._data, duration)
        if persisted:
            await forget(self._platform, self.task_id)
