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

The task itself is :class:`~disco.agents.TaskContext` (``_task.py``), what it
publishes is in ``_task_wire.py``, answers are :class:`~disco.agents.ResultContext`
(``_result.py``), and the machinery shared with Planners is in ``_durable.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import structlog
from pydantic import BaseModel, JsonValue, ValidationError
from typing_extensions import Unpack

from disco.agents._agent import Agent
from disco.agents._cancel import RunningTasks, cancel_task
from disco.agents._common import derived_id
from disco.agents._durable import (
    TRANSIENT,
    KeyedLocks,
    Recovery,
    ResendMemo,
    SavedCopies,
    retry_on_conflict,
    utc_now,
)
from disco.agents._errors import StaleResultError, StateConflictError, TaskConflictError
from disco.agents._handlers import HandlerSpec, describe, error_info, inspect_handler
from disco.agents._options import AgentOptions
from disco.agents._result import ResultContext, TaskOwner, restored_task
from disco.agents._task import DEFAULT_TASK_TTL_SECONDS, TaskContext
from disco.agents._task_wire import announce_task, publish_due, publish_outcome, task_fields
from disco_common.a2a import A2AMessageContext
from disco_common.envelope import ActionRequest, Envelope
from disco_common.system_events import (
    SystemEventType,
    TaskCancelRequestedData,
    TaskStartedData,
)
from disco_common.tasks import ActionResultData, SubTaskStatus, TaskContextData, TaskStatus
from disco_common.topics import Topic

__all__ = ["Worker"]

_log = structlog.get_logger("disco.agents")

HandlerT = TypeVar("HandlerT", bound=Callable[..., Awaitable[Any]])


def _pending_sub_tasks(data: TaskContextData) -> list[str]:
    if data.status.is_final:
        return []
    return [sid for sid, info in data.sub_tasks.items() if info.status is SubTaskStatus.PENDING]


class Worker(Agent):
    """An asynchronous agent: tasks that delegate, fan out, wait for humans, and finish later.

    ``@worker.on_task("research.requested")`` starts a task from a request on
    ``action-requests``; the handler completes it at once or delegates and
    returns. ``@worker.on_result("search.completed")`` receives sub-task answers
    (on ``action-results``) and ``@worker.on_human_input("approval.given")``
    answers to questions (on ``notification-events``); both restore the task
    with :meth:`ResultContext.restore_task`. The task's context lives in the
    memory service between handlers; the answer goes to the request's
    ``response_event`` with the request's correlation id and the task id.

    What a Worker announces on ``system-events`` (the tracker's read model is
    built from it; nothing is sent to the tracker over HTTP): ``task.started``
    when a request is taken up, ``task.delegated`` for each delegation (with the
    fan-out group and its sub-tasks), ``task.progress`` (:meth:`TaskContext.progress`,
    and when the task asks a human), and ``task.completed`` or ``task.failed``
    with the task's duration from the request being taken up to its answer.
    Announcing is best effort: a broker hiccup there never fails the task.

    A question to a human (:meth:`TaskContext.request_human_input`) is
    time-bound: when nobody answers in ``timeout_seconds``, the tracker publishes
    ``task.timeout`` and a ``timed_out`` answer to ``on_human_input``, and counts
    the task failed with reason ``hitl_timeout`` whatever the handler does next;
    the handler decides what the caller is told (``result.timed_out``).

    Args:
        name: the agent's name (letters, digits, ``._-``); also its consumer group.
        task_ttl_seconds: how long an unfinished task context is kept (default 7 days).
        **options: the options of every agent (:class:`~disco.agents.AgentOptions`).
    """

    kind = "worker"
    durable_dedup_default = True

    def __init__(
        self,
        name: str,
        *,
        task_ttl_seconds: int | None = DEFAULT_TASK_TTL_SECONDS,
        **options: Unpack[AgentOptions],
    ) -> None:
        super().__init__(name, **options)
        self.task_ttl_seconds = task_ttl_seconds
        self._input_models: dict[str, type[BaseModel]] = {}
        self._resent = ResendMemo()
        self._running = RunningTasks()
        # The tasks this process last saved, by the sub-tasks they wait for (see
        # ResultContext.restore_task).
        self._copies: SavedCopies[TaskContextData] = SavedCopies(_pending_sub_tasks)
        self._fan_in = KeyedLocks()

    def _check_ready_to_start(self) -> None:
        super()._check_ready_to_start()
        # Every Worker honours cancellation (disco.agents._cancel); added once its
        # own handlers are there, so that a Worker without any still says so.
        key = (Topic.SYSTEM_EVENTS.value, SystemEventType.TASK_CANCEL_REQUESTED.value)
        if key not in self._routes:
            self._add_route(*key, self._on_cancel_requested, "Worker.cancel", internal=True)

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
        recovery = Recovery(self._resent, cause, by_age=by_age)
        return await publish_due(self.context, data, recovery, unkept=unkept)

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
            )
            worker = self
            name = describe(handler)

            async def dispatch(envelope: Envelope) -> None:
                await worker._run_task(envelope, spec, name)

            self._serve_requests(
                event_type,
                spec,
                dispatch,
                capability=capability,
                description=description,
                response_event=response_event,
            )
            if spec.input_model is not None:
                self._input_models[event_type] = spec.input_model
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
            )
            worker = self
            name = describe(handler)

            async def dispatch(envelope: Envelope) -> None:
                await worker._run_result(envelope, spec, name)

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

    def _task_data(self, request: ActionRequest) -> TaskContextData:
        created = utc_now()
        return TaskContextData(
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
            a2a_message=A2AMessageContext.of(request.extensions),
            agent_id=self.identity.agent_id,
            agent_name=self.name,
            traceparent=request.traceparent,
            created_at=created,
            updated_at=created,
        )

    async def _run_task(self, envelope: Envelope, handler: HandlerSpec, name: str) -> None:
        request: ActionRequest = envelope  # type: ignore[assignment]
        platform = self.context
        data = self._task_data(request)
        try:
            task_input = self._task_input(data)
        except ValidationError as exc:
            # Invalid request data: answer at once, nothing was saved.
            data.status = TaskStatus.FAILED
            data.outcome = ActionResultData(success=False, error=error_info(exc))
            await publish_outcome(platform, data, None)
            return
        task = TaskContext(
            data,
            platform,
            input=task_input,
            ttl_seconds=self.task_ttl_seconds,
            copies=self._copies,
        )
        started = TaskStartedData(
            **task_fields(data), event_type=request.type, correlation_id=request.correlation_id
        )
        await announce_task(
            platform,
            data,
            SystemEventType.TASK_STARTED,
            started,
            id=derived_id(task.task_id, "started"),
        )
        try:
            if not await self._running.run(task.task_id, handler.call(task, platform)):
                await cancel_task(task, self._running.reason(task.task_id))
                return
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
        except TRANSIENT:
            raise
        except Exception as exc:
            _log.warning("task handler failed", handler=name, task_id=task.task_id, error=repr(exc))
            if not task.finished:
                try:
                    await task.fail(exc)
                except TaskConflictError:
                    _log.info("task moved on elsewhere; not failing it", task_id=task.task_id)

    async def _on_cancel_requested(self, envelope: Envelope) -> None:
        """``task.cancel_requested``: stop the task if it is ours (:mod:`disco.agents._cancel`)."""
        try:
            request = TaskCancelRequestedData.model_validate(envelope.data)
        except ValidationError as exc:
            _log.warning("malformed cancel request ignored", error=str(exc))
            return
        reason = request.reason or "cancelled on request"
        if self._running.cancel(request.task_id, reason):
            return  # its handler ends it (_run_task)
        platform = self.context

        async def step() -> None:
            record = await platform.context_memory.get_task_context(request.task_id)
            if record is None or record.context.status.is_final:
                return
            if record.context.agent_name not in (None, self.name):
                return
            task: TaskContext[Any] = TaskContext(
                record.context,
                platform,
                input=self._task_input(record.context),
                version=record.version,
                ttl_seconds=self.task_ttl_seconds,
                copies=self._copies,
            )
            await cancel_task(task, reason)

        # An answer moving the task meanwhile: read it again and cancel that.
        await retry_on_conflict(step)

    async def _run_result(self, envelope: Envelope, handler: HandlerSpec, name: str) -> None:
        platform = self.context

        async def step() -> None:
            # A fresh answer context each time: it restores the task afresh.
            owner = TaskOwner(
                self.name,
                self.task_ttl_seconds,
                self._copies,
                self._recover,
                self._task_input,
            )
            result = ResultContext(envelope, platform, owner)
            try:
                await handler.call(result, platform)
                task = restored_task(result)
                if task is not None and not task.finished and task.dirty:
                    await task.save()
            except StaleResultError as exc:
                _log.debug("answer ignored", event_type=envelope.type, reason=str(exc))
            except (StateConflictError, *TRANSIENT):
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

        # Another instance moved the task meanwhile: read it again and redo the step.
        # The answers of one task that this process gets at once (a fan-in) take
        # turns: each then moves the copy the one before saved, instead of all
        # saving over the same version and all but one reading it again.
        async with self._fan_in.hold(self._copies.owner(envelope.correlation_id or "")):
            await retry_on_conflict(step)
