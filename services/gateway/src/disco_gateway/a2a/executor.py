"""The a2a-sdk ``AgentExecutor`` of every disco agent: a request on the bus, answers from it.

The a2a-sdk runs ``execute`` once per message of a task, in the instance that
received the message, and turns what it enqueues into the task's stored state,
its stream and its push notifications. For a disco agent ``execute``:

1. records the turn (what was asked of which agent, with which correlation id)
   so that any instance can continue the task or apply its answer;
2. subscribes to the instance's fan-out for the task before anything is sent;
3. sends the message: a new request on ``action-requests``, or, when the task
   waits on a question to a human, the human's answer on ``notification-events``;
4. translates what comes back (:func:`~disco_gateway.a2a.mapping.translate`)
   and enqueues it, until the agent is done for now (the task is over, waits
   for input, or the agent answered with a direct message).

A task is created by the first thing the agent sends that is not a direct
message, so that an agent can answer with a message instead of a task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue import EventQueue
from a2a.types import a2a_pb2
from a2a.utils.errors import InternalError

from disco.a2a import A2AGatewayHelper
from disco.bus import BusError
from disco_common.a2a import A2AMessage
from disco_common.registry import DiscoveredCapability
from disco_common.topics import Topic
from disco_gateway.a2a.mapping import Translation, to_proto, translate, turn_correlation_id, working
from disco_gateway.a2a.runtime import A2ARuntime
from disco_gateway.bus.fanout import Inbox
from disco_gateway.scope import CallScope
from disco_gateway.tasks.repository import TurnRow

__all__ = ["BusAgentExecutor", "Prepared"]

_log = structlog.get_logger("disco_gateway.a2a")

PREPARED_KEY = "disco.prepared"


@dataclass(frozen=True)
class Prepared:
    """A message checked before the a2a-sdk takes it up (see ``GatewayRequestHandler``).

    Attributes:
        message: the caller's message.
        agent: the agent it is for.
        capability: the skill it asks for (None: it answers a question to a human).
        payload: the request payload (checked against the skill's schema).
        turn: the task's turn so far (None for a new task).
    """

    message: A2AMessage
    agent: str
    capability: DiscoveredCapability | None
    payload: Any
    turn: TurnRow | None

    @property
    def answers_question(self) -> bool:
        return self.turn is not None and self.turn.question is not None and self.capability is None


class BusAgentExecutor(AgentExecutor):
    """See the module docs."""

    def __init__(self, runtime: A2ARuntime) -> None:
        self._runtime = runtime

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        call = context.call_context
        scope = CallScope.of(call)
        prepared = call.state.get(PREPARED_KEY)
        if not isinstance(prepared, Prepared):
            raise InternalError(message="the message was not prepared by the gateway")
        task_id = context.task_id
        context_id = context.context_id
        assert task_id is not None
        assert context_id is not None
        previous = prepared.turn
        if prepared.answers_question:
            assert previous is not None
            turn = previous
        else:
            assert prepared.capability is not None
            number = previous.turn + 1 if previous is not None else 1
            turn = TurnRow(
                task_id=task_id,
                turn=number,
                correlation_id=turn_correlation_id(task_id, number),
                context_id=context_id,
                user_id=scope.user_id,
                agent=prepared.agent,
                skill=prepared.capability.task_name,
                event_type=prepared.capability.consumed_event.event_type,
                message=prepared.message.model_copy(
                    update={"task_id": task_id, "context_id": context_id}
                ).to_wire(),
                question=None,
            )
        runtime = self._runtime
        keys = {("correlation_id", turn.correlation_id), ("task_id", task_id)}
        async with runtime.fanout.subscribe(keys) as inbox:
            try:
                if prepared.answers_question:
                    await self._answer_question(scope, turn, prepared.message)
                else:
                    await runtime.add_turn(scope.tenant_id, turn)
                    await self._request(scope, turn, prepared)
            except BusError as exc:
                _log.warning("message not sent", task_id=task_id, error=repr(exc))
                raise InternalError(
                    message="the bus is unavailable; send the message again"
                ) from None
            task_exists = context.current_task is not None
            if task_exists:
                await event_queue.enqueue_event(working(turn))
            await self._follow(inbox, turn, event_queue, task_exists=task_exists, scope=scope)

    async def _request(self, scope: CallScope, turn: TurnRow, prepared: Prepared) -> None:
        assert prepared.capability is not None
        request = A2AGatewayHelper.message_to_request(
            prepared.message,
            prepared.capability,
            payload=prepared.payload,
            task_id=turn.task_id,
            context_id=turn.context_id,
            correlation_id=turn.correlation_id,
            tenant_id=scope.tenant_id,
            user_id=scope.user_id,
            source=self._runtime.source,
            # The same turn sent again is the same request: agents deduplicate.
            id=f"{turn.correlation_id}.request",
        )
        await self._runtime.bus.publish_envelope(Topic.ACTION_REQUESTS, request)

    async def _answer_question(self, scope: CallScope, turn: TurnRow, message: A2AMessage) -> None:
        question = turn.question
        assert question is not None
        answer = A2AGatewayHelper.human_answer(
            message,
            request_id=question.get("request_id"),
            task_id=turn.task_id,
            user_id=scope.user_id,
        )
        await self._runtime.bus.publish(
            Topic.NOTIFICATION_EVENTS,
            str(question["response_event"]),
            answer.model_dump(mode="json", exclude_none=True),
            correlation_id=str(question["correlation_id"]),
            task_id=turn.task_id,
            session_id=turn.context_id,
            tenant_id=scope.tenant_id,
            user_id=scope.user_id,
            id=f"{question['correlation_id']}.answer",
        )
        await self._runtime.remember_question(scope.tenant_id, turn, None)

    async def _follow(
        self,
        inbox: Inbox,
        turn: TurnRow,
        event_queue: EventQueue,
        *,
        task_exists: bool,
        scope: CallScope,
    ) -> None:
        while True:
            translation: Translation = translate(await inbox.get(), turn)
            if not translation.events:
                continue
            if translation.starts_task and not task_exists:
                await event_queue.enqueue_event(self._new_task(turn))
                task_exists = True
            if translation.question is not None:
                # Remembered before the caller can see input-required: its answer may
                # come to any instance, which must find the question.
                await self._runtime.remember_question(scope.tenant_id, turn, translation.question)
            for event in translation.events:
                await event_queue.enqueue_event(event)
            if translation.ends_turn:
                return

    def _new_task(self, turn: TurnRow) -> a2a_pb2.Task:
        message = to_proto(A2AMessage.model_validate(turn.message), a2a_pb2.Message)
        return a2a_pb2.Task(
            id=turn.task_id,
            context_id=turn.context_id,
            status=a2a_pb2.TaskStatus(state=a2a_pb2.TaskState.TASK_STATE_SUBMITTED),
            history=[message],
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """The task stops here; the agent is told by the handler (``task.cancel_requested``)."""
        if context.task_id is None or context.context_id is None:
            return
        status = a2a_pb2.TaskStatus(state=a2a_pb2.TaskState.TASK_STATE_CANCELED)
        await event_queue.enqueue_event(
            a2a_pb2.TaskStatusUpdateEvent(
                task_id=context.task_id, context_id=context.context_id, status=status
            )
        )
