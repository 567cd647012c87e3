"""An answer to what a Worker's task asked for: :class:`ResultContext`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from disco._context import maybe_current_context
from disco.agents._answers import AnswerView
from disco.agents._durable import SavedCopies
from disco.agents._errors import StaleResultError
from disco.agents._task import TaskContext
from disco_common.envelope import Envelope
from disco_common.tasks import SubTaskStatus, TaskContextData
from disco_common.topics import Topic

if TYPE_CHECKING:
    from disco.agents._platform import PlatformContext

__all__ = ["ResultContext", "TaskOwner", "restored_task"]


@dataclass(frozen=True, slots=True)
class TaskOwner:
    """What a :class:`ResultContext` needs of the Worker whose task asked.

    Attributes:
        name: the Worker's name (a task of another agent is not restored).
        ttl_seconds: how long the restored task's context is kept.
        copies: the copies of tasks this process saved last, waiting for answers.
        recover: publishes again what a saved task promised (the envelope being
            handled is the cause); returns how many envelopes went out.
        task_input: the task's input, as the Worker's handler typed it.
    """

    name: str
    ttl_seconds: int | None
    copies: SavedCopies[TaskContextData]
    recover: Callable[[TaskContextData, str | None], Awaitable[int]]
    task_input: Callable[[TaskContextData], Any]


class ResultContext(AnswerView):
    """An answer to something a task asked for: a sub-task's result or a human's answer.

    ``success``, ``result`` and ``error`` read the answer's
    :class:`~disco_common.tasks.ActionResultData`; for a human's answer
    ``human_input`` is the :class:`~disco_common.notifications.HumanInputResponse`
    (``timed_out`` when nobody answered in time). :meth:`restore_task` brings
    back the task that asked, with this answer already recorded.
    """

    def __init__(self, envelope: Envelope, platform: PlatformContext, owner: TaskOwner) -> None:
        super().__init__(
            envelope,
            from_human=_is_human_answer(envelope),
            timeout_message="nobody answered within the timeout",
        )
        self._platform = platform
        self._owner = owner
        self._task: TaskContext[Any] | None = None

    @property
    def correlation_id(self) -> str:
        """The sub-task id (or question id) this answers."""
        return self.envelope.correlation_id or ""

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
        # The copy this process last saved, when it waits for this answer (a copy
        # another instance moved past fails the save; the Worker then runs the
        # handler again, and this reads the stored task).
        taken = self._owner.copies.take(correlation_id)
        if taken is not None:
            _, version, data = taken
        else:
            record = await self._platform.context_memory.get_task_by_subtask(correlation_id)
            if record is None:
                raise StaleResultError(f"no task waits for {correlation_id!r}")
            version, data = record.version, record.context
        if data.agent_name is not None and data.agent_name != self._owner.name:
            raise StaleResultError(
                f"{correlation_id!r} belongs to a task of {data.agent_name!r}, not "
                f"{self._owner.name!r}"
            )
        if data.status.is_final:
            # Its context normally goes right after the answer: finish a
            # publication the process that ended it may not have made.
            await self._owner.recover(data, self.envelope.id)
            raise StaleResultError(f"task {data.task_id!r} is already {data.status.value}")
        info = data.sub_tasks.get(correlation_id)
        if info is None or info.status is not SubTaskStatus.PENDING:
            # Already recorded: a duplicate, or this very answer redelivered
            # because the handler that recorded it died before publishing
            # what it saved (then send that now).
            await self._owner.recover(data, self.envelope.id)
            raise StaleResultError(
                f"sub-task {correlation_id!r} of task {data.task_id!r} already answered"
            )
        task: TaskContext[Any] = TaskContext(
            data,
            self._platform,
            input=self._owner.task_input(data),
            version=version,
            ttl_seconds=self._owner.ttl_seconds,
            copies=self._owner.copies,
        )
        task.update_sub_task_result(
            correlation_id, self.result, success=self.success, error=self.error
        )
        self._task = task
        return task


def restored_task(result: ResultContext) -> TaskContext[Any] | None:
    """The task ``result`` restored (None: its handler did not ask for it)."""
    return result._task


def _is_human_answer(envelope: Envelope) -> bool:
    context = maybe_current_context()
    if context is not None and context.envelope is envelope:
        return context.topic == Topic.NOTIFICATION_EVENTS.value
    return envelope.topic_hint is Topic.NOTIFICATION_EVENTS
