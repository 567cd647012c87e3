"""The a2a-sdk ``AgentExecutor`` of every disco agent: a request on the bus, answers from it.

The a2a-sdk runs ``execute`` once per message of a task, in the instance that
received the message, and turns what it enqueues into the task's stored state,
its stream and its push notifications. For a disco agent ``execute``:

1. subscribes to the instance's fan-out for the task before anything is sent;
2. sends the message: a new request on ``action-requests`` (its turn — what was
   asked of which agent, with which correlation id — was recorded when the
   message was prepared, :mod:`disco_gateway.a2a.prepare`, so that any instance
   can continue the task or apply its answer), or, when the task waits on a
   question to a human, the human's answer on ``notification-events``; both
   carry what the agent is told of the caller's message
   (:class:`~disco_common.a2a.A2AMessageContext`, the ``a2amessage`` attribute);
3. translates what comes back (:func:`~disco_gateway.a2a.mapping.translate`)
   and enqueues it, until the agent is done for now (the task is over, waits
   for input, or the agent answered with a direct message).

A task is created by the first thing the agent sends that is not a direct
message, so that an agent can answer with a message instead of a task.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace

import structlog
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue import EventQueue
from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types import a2a_pb2
from a2a.utils.errors import InternalError
from google.protobuf.json_format import MessageToDict, ParseDict

from disco.a2a import A2AGatewayHelper
from disco.bus import BusError
from disco_common.a2a import A2A_MESSAGE_ATTRIBUTE
from disco_common.envelope import Notification
from disco_common.topics import Topic
from disco_gateway.a2a.mapping import Translation, completed_with, translate, working
from disco_gateway.a2a.prepare import Duplicate, Prepared, give_back
from disco_gateway.a2a.runtime import A2ARuntime
from disco_gateway.a2a.unavailable import Unavailable
from disco_gateway.bus.fanout import Inbox, Key
from disco_gateway.scope import CallScope
from disco_gateway.tasks.repository import TurnRow

__all__ = [
    "HANDOVER_KEY",
    "OUTCOME_ONLY_KEY",
    "PREPARED_KEY",
    "STREAMING_KEY",
    "BusAgentExecutor",
    "Handover",
    "finished_task",
    "keys_of",
    "new_task",
]

_log = structlog.get_logger("disco_gateway.a2a")

PREPARED_KEY = "disco.prepared"
STREAMING_KEY = "disco.streaming"
"""Call-context state: whether the caller streams (else it waits for the outcome)."""
OUTCOME_ONLY_KEY = "disco.outcome_only"
"""Call-context state: the caller waits for the outcome alone (a blocking ``SendMessage``
without ``returnImmediately``): the task shows only with what the agent does."""
HANDOVER_KEY = "disco.handover"
"""Call-context state: a :class:`Handover` from the handler's fast path."""


class Handover:
    """A message the handler's fast path sent, handed to the a2a-sdk's machinery.

    The fast path subscribed, sent the message and read the agent's first answer;
    when that answer does not end the task at once (progress, a question, a
    direct message), the executor adopts the subscription and follows the task
    from that answer on.
    """

    def __init__(
        self, stack: contextlib.AsyncExitStack, inbox: Inbox, turn: TurnRow, first: Translation
    ) -> None:
        self._stack = stack
        self._inbox = inbox
        self.turn = turn
        self.first = first
        self._taken = False

    @contextlib.asynccontextmanager
    async def adopt(self) -> AsyncIterator[Inbox]:
        """The subscription, closed when the block exits.

        Raises:
            InternalError: the call ended (and closed it) before the executor ran.
        """
        if self._taken:
            raise InternalError(message="the call ended before its task was taken up")
        self._taken = True
        async with self._stack:
            yield self._inbox

    async def release(self) -> None:
        """Close the subscription unless the executor adopted it (the call is over)."""
        if not self._taken:
            self._taken = True
            await self._stack.aclose()


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
        streaming = bool(call.state.get(STREAMING_KEY, True))
        outcome_only = bool(call.state.get(OUTCOME_ONLY_KEY, False))
        handover = call.state.pop(HANDOVER_KEY, None)
        if isinstance(handover, Handover):
            # The handler's fast path sent the message and read the first answer.
            async with handover.adopt() as inbox:
                await self._follow(
                    inbox,
                    handover.turn,
                    context.message,
                    event_queue,
                    task_exists=False,
                    scope=scope,
                    streaming=streaming,
                    outcome_only=outcome_only,
                    first=handover.first,
                )
            return
        turn = prepared.turn  # recorded when prepared (the question's, for an answer)
        async with self._runtime.fanout.subscribe(keys_of(turn)) as inbox:
            await self.send(scope, turn, prepared)
            task_exists = context.current_task is not None
            if task_exists:
                await event_queue.enqueue_event(working(turn))
            await self._follow(
                inbox,
                turn,
                context.message,
                event_queue,
                task_exists=task_exists,
                scope=scope,
                streaming=streaming,
                outcome_only=outcome_only,
            )

    async def send(self, scope: CallScope, turn: TurnRow, prepared: Prepared) -> None:
        """Send the message: a new request (its turn recorded when it was prepared), or a
        human's answer. Its claim is the message's for good once it went out, and given
        back when it could not go out.

        Subscribe to the turn's keys first (:func:`keys_of`).

        Raises:
            Unavailable: the bus is unavailable (a request's turn is kept: sent again, the
                message sends it once more).
            InternalError: the call ended (and gave the claim
                back) before the message went out.
        """
        claim = prepared.claim
        if claim.state == "given back":
            raise InternalError(message="the call ended before its message went out")
        claim.state = "sending"
        runtime = self._runtime
        try:
            if prepared.answers_question:
                await self._answer_question(scope, turn, prepared)
            elif claim.recorded:
                await self.request(scope, turn, prepared)
            else:
                await self._record_and_request(scope, turn, prepared)
        except BusError as exc:
            _log.warning("message not sent", task_id=turn.task_id, error=repr(exc))
            if prepared.answers_question:
                claim.state = "held"  # the question is asked again
                await give_back(runtime, scope.tenant_id, prepared)
            # A request's turn is kept: the request may be on the bus all the same (its
            # answer then finds the turn); the message sent again sends it once more.
            raise Unavailable("the bus is unavailable; send the message again") from None
        claim.state = "sent"

    async def _record_and_request(
        self, scope: CallScope, turn: TurnRow, prepared: Prepared
    ) -> None:
        """Record the turn, then send its request (see :mod:`disco_gateway.a2a.prepare`):
        recorded first, so that its answer always finds it. If recording fails, nothing
        went out and the call fails.

        Raises:
            Duplicate: the turn was recorded already, by this message's earlier sending;
                its request was sent once more (the same envelope: it may never have
                gone out).
            BusError: the request did not go out (as far as this call knows).
        """
        recorded = await self._runtime.add_turn(scope.tenant_id, turn)
        claim = prepared.claim
        claim.recorded = recorded
        if recorded:
            await self.request(scope, turn, prepared)
            return
        claim.state = "sent"  # the turn is the earlier sending's: leave it be
        earlier = await self._runtime.turn(scope.tenant_id, turn.task_id, turn.turn)
        again = turn if earlier is None else earlier
        await self.request(scope, again, replace(prepared, turn=again))
        raise Duplicate(turn.task_id, turn.turn, prepared.message.message_id, resent=True)

    async def request(self, scope: CallScope, turn: TurnRow, prepared: Prepared) -> None:
        """Publish the request of ``turn`` (its envelope id is the turn's: sent again, it is
        the same request, which agents deduplicate)."""
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
            a2a=prepared.a2a,
        )
        await self._runtime.bus.publish_envelope(Topic.ACTION_REQUESTS, request)

    async def _answer_question(self, scope: CallScope, turn: TurnRow, prepared: Prepared) -> None:
        """The human's answer the caller's message is (its claim took the question)."""
        question = turn.question
        assert question is not None
        answer = A2AGatewayHelper.human_answer(
            prepared.message,
            request_id=question.get("request_id"),
            task_id=turn.task_id,
            user_id=scope.user_id,
        )
        envelope = Notification.from_dict(
            {
                "source": self._runtime.source,
                "type": str(question["response_event"]),
                "data": answer.model_dump(mode="json", exclude_none=True),
                "correlation_id": str(question["correlation_id"]),
                "task_id": turn.task_id,
                "session_id": turn.context_id,
                "tenant_id": scope.tenant_id,
                "user_id": scope.user_id,
                "id": f"{question['correlation_id']}.answer",
                A2A_MESSAGE_ATTRIBUTE: prepared.a2a.to_attribute(),
            }
        )
        await self._runtime.bus.publish_envelope(Topic.NOTIFICATION_EVENTS, envelope)

    async def _follow(
        self,
        inbox: Inbox,
        turn: TurnRow,
        message: a2a_pb2.Message | None,
        event_queue: EventQueue,
        *,
        task_exists: bool,
        scope: CallScope,
        streaming: bool,
        outcome_only: bool = False,
        first: Translation | None = None,
    ) -> None:
        while True:
            if first is not None:
                translation, first = first, None
            else:
                translation = translate(await inbox.get(), turn, quiet_start=outcome_only)
            if not translation.events or (translation.started and task_exists):
                continue
            if translation.direct_message and task_exists:
                translation = completed_with(translation, turn)
            if translation.direct_message:
                # Kept for the same message sent again: no task holds a direct message.
                reply = MessageToDict(translation.events[0])
                await self._runtime.remember_reply(scope.tenant_id, turn, reply)
            if translation.question is not None:
                # Remembered before the caller can see input-required: its answer may
                # come to any instance, which must find the question.
                await self._runtime.remember_question(scope.tenant_id, turn, translation.question)
            if (
                translation.ends_turn
                and translation.starts_task
                and not task_exists
                and not streaming
            ):
                # The agent answered at once and nobody streams: the task is stored
                # once, as it ends, rather than once per event.
                await event_queue.enqueue_event(finished_task(turn, message, translation))
                self._runtime.settle(scope.tenant_id, turn.correlation_id)
                return
            if translation.starts_task and not task_exists:
                await event_queue.enqueue_event(new_task(turn, message))
                task_exists = True
            for event in translation.events:
                await event_queue.enqueue_event(event)
            if translation.ends_turn:
                self._runtime.settle(scope.tenant_id, turn.correlation_id)
                return

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


def keys_of(turn: TurnRow) -> set[Key]:
    """What to subscribe to in the fan-out to follow ``turn``."""
    return {("correlation_id", turn.correlation_id), ("task_id", turn.task_id)}


def new_task(turn: TurnRow, message: a2a_pb2.Message | None) -> a2a_pb2.Task:
    """The task as the agent starts it: submitted, with the caller's message."""
    if message is None:
        message = ParseDict(turn.message, a2a_pb2.Message(), ignore_unknown_fields=True)
    return a2a_pb2.Task(
        id=turn.task_id,
        context_id=turn.context_id,
        status=a2a_pb2.TaskStatus(state=a2a_pb2.TaskState.TASK_STATE_SUBMITTED),
        history=[message],
    )


def finished_task(
    turn: TurnRow, message: a2a_pb2.Message | None, translation: Translation
) -> a2a_pb2.Task:
    """The task as it ends on the agent's first answer (one write instead of one per event)."""
    task = new_task(turn, message)
    for event in translation.events:
        if isinstance(event, a2a_pb2.TaskArtifactUpdateEvent):
            append_artifact_to_task(task, event)
        elif isinstance(event, a2a_pb2.TaskStatusUpdateEvent):
            task.status.CopyFrom(event.status)
    return task
