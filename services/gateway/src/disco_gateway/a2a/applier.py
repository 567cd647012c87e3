"""Answers no instance applied: the gateway's consumer group applies them to the stored task.

The instance that took a message up follows its task live and applies what
the agent sends (:mod:`disco_gateway.a2a.executor`). When it cannot — it was
killed mid-task, the whole gateway was down when the agent answered — the
consumer group (:mod:`disco_gateway.bus.applier`) applies, after the handover
delay, what the store does not show yet:

- an agent's answer (:data:`~disco_common.a2a.A2A_RESPONSE_EVENT` on
  ``action-results``): the task completes (fails, waits for input...);
- a question to a human for an A2A task: the task waits in ``input-required``
  and its next message, on any instance, answers it.

It writes through the a2a-sdk's ``TaskManager`` and the versioned store, as the
live path does: if both apply the same envelope, the version check lets one
write through, and the other finds the task already there. Push notifications
go out for what it applied.
"""

from __future__ import annotations

import structlog
from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.server.tasks import TaskManager
from a2a.types import a2a_pb2
from google.protobuf.json_format import ParseDict

from disco_common.a2a import A2A_TERMINAL_STATES, A2ATaskState
from disco_common.envelope import Envelope
from disco_common.topics import Topic
from disco_gateway.a2a.mapping import translate
from disco_gateway.a2a.runtime import A2ARuntime
from disco_gateway.bus.applier import hand_over
from disco_gateway.bus.fanout import Delivery
from disco_gateway.scope import CallScope, scoped, system_identity
from disco_gateway.tasks.repository import TurnRow

__all__ = ["AnswerApplier"]

_log = structlog.get_logger("disco_gateway.a2a")

_ATTEMPTS = 5
_TERMINAL = {a2a_pb2.TaskState.Value(state.value) for state in A2A_TERMINAL_STATES}
_TERMINAL_NAMES = {state.value for state in A2A_TERMINAL_STATES}


class AnswerApplier:
    """Applies answers and questions no instance applied (see the module docs)."""

    def __init__(self, runtime: A2ARuntime) -> None:
        self._runtime = runtime

    async def answer(self, envelope: Envelope) -> None:
        """An agent's answer to a gateway request (``action-results``)."""
        tenant_id = envelope.tenant_id
        if tenant_id is None or envelope.correlation_id is None:
            return
        await hand_over(envelope, self._runtime.settings.handover_seconds)
        if self._runtime.settled(tenant_id, envelope.correlation_id):
            return  # this instance followed the task and applied the answer itself
        found = await self._runtime.turn_and_status(tenant_id, envelope.correlation_id)
        if found is None:
            return
        turn, status = found
        if status in _TERMINAL_NAMES:
            return  # the usual case: the live path applied it (one query to know)
        await self._apply(tenant_id, turn, Delivery(Topic.ACTION_RESULTS.value, envelope))

    async def question(self, envelope: Envelope) -> None:
        """A question to a human (``notification-events``), when it is an A2A task's."""
        tenant_id = envelope.tenant_id
        if tenant_id is None or envelope.task_id is None:
            return
        await hand_over(envelope, self._runtime.settings.handover_seconds)
        turn = await self._runtime.latest_turn(tenant_id, envelope.task_id)
        if turn is None:
            return
        if turn.question is not None and turn.question.get("request_id") == envelope.id:
            return  # the live path asked the caller already
        await self._apply(tenant_id, turn, Delivery(Topic.NOTIFICATION_EVENTS.value, envelope))

    async def _apply(self, tenant_id: str, turn: TurnRow, delivery: Delivery) -> None:
        translation = translate(delivery, turn)
        if not translation.events or translation.direct_message:
            return  # nothing for a task (a direct message went to a caller who is gone)
        runtime = self._runtime
        scope = CallScope(system_identity(tenant_id, turn.user_id), agent=turn.agent, system=True)
        with scoped(scope):
            for _ in range(_ATTEMPTS):
                manager = TaskManager(
                    task_store=runtime.store,
                    context=scope.context(),
                    task_id=turn.task_id,
                    context_id=turn.context_id,
                    initial_message=ParseDict(turn.message, a2a_pb2.Message()),
                )
                task = await manager.get_task()
                if task is not None and _applied(task, delivery):
                    return
                if translation.question is not None:
                    await runtime.remember_question(tenant_id, turn, translation.question)
                events = [
                    event for event in translation.events if not isinstance(event, a2a_pb2.Message)
                ]
                try:
                    for event in events:
                        await manager.save_task_event(event)
                except ConcurrentTaskModificationError:
                    continue  # written meanwhile (the live path): look again
                _log.info(
                    "answer applied by the consumer group",
                    task_id=turn.task_id,
                    event_type=delivery.envelope.type,
                )
                for event in events:
                    await runtime.push_sender.send_notification(turn.task_id, event)
                return
            _log.warning("answer not applied: the task kept changing", task_id=turn.task_id)


def _applied(task: a2a_pb2.Task, delivery: Delivery) -> bool:
    """Whether the stored task already shows the delivered envelope (or is over)."""
    envelope = delivery.envelope
    if task.status.state in _TERMINAL:
        return True
    seen = [message.message_id for message in task.history]
    if task.status.HasField("message"):
        seen.append(task.status.message.message_id)
    if envelope.id in seen:
        return True
    # A question already asked (live): the task waits for its answer.
    waiting = task.status.state == a2a_pb2.TaskState.Value(A2ATaskState.INPUT_REQUIRED.value)
    return waiting and delivery.topic == Topic.NOTIFICATION_EVENTS.value
