"""The A2A request handler: the a2a-sdk's ``DefaultRequestHandlerV2``, with what disco adds.

The a2a-sdk handles every method (tasks, streams, resubscription across
instances, cancel, push configurations) against the stores it is given. The
gateway adds, around it:

- before a message is taken up, its preparation
  (:mod:`disco_gateway.a2a.prepare`): the agent, the skill, the payload checked
  against the skill's schema, whether a task's next message answers a question
  to a human or starts a new turn, and its claim on its turn; a message sent
  again with the same ``messageId`` is answered with what its first sending
  made (:mod:`disco_gateway.a2a.replay`);
- after a cancel: ``task.cancel_requested`` on the bus, so the agent stops;
- the extended card of the caller's tenant (``GetExtendedAgentCard``);
- no error leaks what went wrong inside: anything but an A2A error becomes
  ``InternalError`` with a request id to quote;
- a fast path for the commonest calls, a ``SendMessage`` (blocking: no
  ``returnImmediately``) or ``SendStreamingMessage`` that starts a task with no
  push configuration in the request: the handler sends the request and waits
  for the first answer itself, and when it ends the turn (a tool's answer, a
  question to a human), stores the task once and returns it (or streams the
  events the a2a-sdk would), without the a2a-sdk's per-task machinery (active
  task, event queues, task manager, result aggregator), which cost as much CPU
  as the rest of the call and stores the task once per event. Any other first
  answer is handed over to that machinery, which follows the task from there
  (:class:`~disco_gateway.a2a.executor.Handover`): what the caller, the store,
  streams and pushes see is the same either way.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from typing import cast

import structlog
from a2a.server.agent_execution import RequestContext, SimpleRequestContextBuilder
from a2a.server.agent_execution.active_task import INTERRUPTED_TASK_STATES, TERMINAL_TASK_STATES
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.types import a2a_pb2
from a2a.utils.errors import A2AError, InternalError
from a2a.utils.task import apply_history_length

from disco.a2a import A2AGatewayHelper
from disco.bus import BusError
from disco_common.a2a_cards import A2AAgentCard
from disco_common.system_events import SystemEventType, TaskCancelRequestedData
from disco_common.topics import Topic
from disco_gateway.a2a.executor import (
    HANDOVER_KEY,
    OUTCOME_ONLY_KEY,
    PREPARED_KEY,
    STREAMING_KEY,
    BusAgentExecutor,
    Handover,
    finished_task,
    keys_of,
    new_task,
)
from disco_gateway.a2a.mapping import to_proto, translate
from disco_gateway.a2a.prepare import (
    TARGET_KEY,
    Duplicate,
    MessagePreparer,
    Prepared,
    give_back,
)
from disco_gateway.a2a.replay import Released, Replay, settled
from disco_gateway.a2a.runtime import A2ARuntime
from disco_gateway.a2a.unavailable import Unavailable
from disco_gateway.scope import CallScope
from disco_gateway.tasks.repository import TurnRow
from disco_gateway.tasks.store import FRESH_TASK_KEY
from disco_service import database_unavailable

__all__ = ["TARGET_KEY", "GatewayRequestHandler"]

_log = structlog.get_logger("disco_gateway.a2a")

_AWAITED = (Topic.ACTION_RESULTS.value,)
"""The topic a blocking call's answer comes on (see :meth:`BusFanout.subscribe`)."""
_SETTLED_STATES = TERMINAL_TASK_STATES | INTERRUPTED_TASK_STATES
"""Where a stream ends: the task is over, or waits for its caller."""
_SENDINGS = 3
"""How often a message is taken up when its earlier sending keeps giving its claim back."""


@contextlib.contextmanager
def _sanitized(operation: str) -> Iterator[None]:
    """A2A errors pass; anything else is logged and becomes an InternalError that says nothing."""
    try:
        yield
    except A2AError:
        raise
    except Exception as exc:
        if isinstance(exc, BusError) or database_unavailable(exc):
            _log.warning("a2a_call_refused_for_now", operation=operation, error=repr(exc))
            raise Unavailable from exc
        incident = uuid.uuid4().hex[:12]
        _log.exception("a2a_call_failed", operation=operation, incident=incident)
        raise InternalError(
            message=f"Internal error; quote incident {incident} when reporting it."
        ) from exc


def _starts_plain_task(params: a2a_pb2.SendMessageRequest) -> bool:
    """Whether the message starts a task and asks for nothing but its answer (no push
    configuration): what the fast path takes."""
    return not (
        params.message.task_id or params.configuration.HasField("task_push_notification_config")
    )


@dataclass(frozen=True)
class _Answered:
    """A task the fast path stored as the agent's first answer left it.

    Attributes:
        task: the task as stored (over, or waiting for input).
        submitted: the task as the agent started it (the first thing a stream shows).
        events: the updates from one to the other, as a stream shows them.
    """

    task: a2a_pb2.Task
    submitted: a2a_pb2.Task
    events: tuple[Event, ...]


def gateway_card_proto() -> a2a_pb2.AgentCard:
    """The card the a2a-sdk checks capabilities on (streaming, push, extended card)."""
    return a2a_pb2.AgentCard(
        name="disco",
        description="disco's A2A gateway",
        version="1.0",
        supported_interfaces=[
            a2a_pb2.AgentInterface(url="/a2a", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=a2a_pb2.AgentCapabilities(
            streaming=True, push_notifications=True, extended_agent_card=True
        ),
        default_input_modes=["application/json"],
        default_output_modes=["application/json"],
        # Never served (each agent's card lists its own skills); a card without any
        # is not spec-compliant, and the a2a-sdk says so at every start.
        skills=[
            a2a_pb2.AgentSkill(
                id="disco-agents",
                name="disco agents",
                description="Calls the disco agent named in the path; its card lists its skills.",
                tags=["disco"],
            )
        ],
    )


class _ContextBuilder(SimpleRequestContextBuilder):
    """The a2a-sdk's request context of a new task, with the ids the gateway gave it when it
    prepared the message (:class:`~disco_gateway.a2a.prepare.Prepared`)."""

    async def build(
        self,
        context: ServerCallContext,
        params: a2a_pb2.SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: a2a_pb2.Task | None = None,
    ) -> RequestContext:
        prepared = context.state.get(PREPARED_KEY)
        if task_id is None and isinstance(prepared, Prepared):
            turn = prepared.turn
            built = await super().build(context, params, turn.task_id, turn.context_id, task)
            context.state[FRESH_TASK_KEY] = built.task_id  # no row holds it yet
            return built
        return await super().build(context, params, task_id, context_id, task)


class GatewayRequestHandler(DefaultRequestHandlerV2):
    """See the module docs."""

    def __init__(self, runtime: A2ARuntime) -> None:
        settings = runtime.settings
        super().__init__(
            agent_executor=BusAgentExecutor(runtime),
            request_context_builder=_ContextBuilder(),
            task_store=runtime.store,
            agent_card=gateway_card_proto(),
            push_config_store=runtime.push_store,
            push_sender=runtime.push_sender,
            push_url_validator=runtime.push_sender.url_policy.allows,
            event_stream=runtime.stream,
            interrupted_task_timeout=settings.interrupted_task_seconds,
        )
        self._runtime = runtime
        self._preparer = MessagePreparer(runtime)
        self._replay = Replay(runtime)

    # -- messages -------------------------------------------------------------------------

    async def on_message_send(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> a2a_pb2.Message | a2a_pb2.Task:
        with _sanitized("SendMessage"):
            context.state[STREAMING_KEY] = False
            context.state[OUTCOME_ONLY_KEY] = not params.configuration.return_immediately
            for _ in range(_SENDINGS):
                try:
                    return await self._send(params, context)
                except Duplicate as duplicate:
                    until = None if params.configuration.return_immediately else settled
                    try:
                        found = await self._replay.outcome(
                            duplicate, context, until=until, resend=self._resend(duplicate, context)
                        )
                    except Released:
                        continue  # its earlier sending never went out: this one goes
                    if isinstance(found, a2a_pb2.Task):
                        return apply_history_length(found, params.configuration)
                    return found
            raise InternalError(message="the message could not be taken up; send it again")

    def _resend(
        self, duplicate: Duplicate, context: ServerCallContext
    ) -> Callable[[TurnRow], Awaitable[None]] | None:
        """What sends the request of a message sent before once more, when its task shows
        nothing of it (None: it was sent once more already, or is not a request)."""
        again = duplicate.again
        if again is None or duplicate.resent:
            return None
        executor = cast(BusAgentExecutor, self.agent_executor)
        scope = replace(CallScope.of(context), agent=again.agent)

        async def resend(turn: TurnRow) -> None:
            _log.info("message sent once more", task_id=turn.task_id, turn=turn.turn)
            await executor.request(scope, turn, replace(again, turn=turn))

        return resend

    async def _send(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> a2a_pb2.Message | a2a_pb2.Task:
        """Prepare the message and send it (the fast path when it takes it); its claim is
        given back if it never went out.

        Raises:
            Duplicate: it was sent before.
        """
        fast = _starts_plain_task(params) and not params.configuration.return_immediately
        prepared = await self._prepare(params, context, defer_claim=fast)
        try:
            return await self._sent(params, context)
        finally:
            await give_back(self._runtime, CallScope.of(context).tenant_id, prepared)

    async def _sent(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> a2a_pb2.Message | a2a_pb2.Task:
        if params.configuration.return_immediately or not _starts_plain_task(params):
            return cast(
                a2a_pb2.Message | a2a_pb2.Task, await super().on_message_send(params, context)
            )
        started = await self._start_new(params, context)
        if isinstance(started, _Answered):
            return apply_history_length(started.task, params.configuration)
        try:
            return cast(
                a2a_pb2.Message | a2a_pb2.Task, await super().on_message_send(params, context)
            )
        finally:
            await started.release()

    async def on_message_send_stream(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        with _sanitized("SendStreamingMessage"):
            context.state[STREAMING_KEY] = True
            for _ in range(_SENDINGS):
                try:
                    prepared = await self._prepare(
                        params, context, defer_claim=_starts_plain_task(params)
                    )
                    try:
                        async with contextlib.aclosing(self._stream(params, context)) as events:
                            async for event in events:
                                yield event
                    finally:
                        await give_back(self._runtime, CallScope.of(context).tenant_id, prepared)
                    return
                except Duplicate as duplicate:
                    # Raised before the stream showed anything (by the preparation, or
                    # the fast path's send).
                    try:
                        found = await self._replay.outcome(
                            duplicate, context, resend=self._resend(duplicate, context)
                        )
                    except Released:
                        continue  # its earlier sending never went out: this one goes
                async with contextlib.aclosing(self._resumed(found, params, context)) as events:
                    async for event in events:
                        yield event
                return
            raise InternalError(message="the message could not be taken up; send it again")

    async def _stream(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        handover: Handover | None = None
        if _starts_plain_task(params):
            started = await self._start_new(params, context)
            if isinstance(started, _Answered):
                # What the a2a-sdk streams for these events, without storing each.
                yield apply_history_length(started.submitted, params.configuration)
                for event in started.events:
                    yield event
                return
            handover = started
        try:
            async with contextlib.aclosing(
                super().on_message_send_stream(params, context)
            ) as events:
                async for event in events:
                    yield event
        finally:
            if handover is not None:
                await handover.release()

    async def _resumed(
        self,
        found: a2a_pb2.Task | a2a_pb2.Message,
        params: a2a_pb2.SendMessageRequest,
        context: ServerCallContext,
    ) -> AsyncGenerator[Event, None]:
        """The stream of a message sent again: the direct message its first sending got, or
        the task from where it stands (its snapshot, then what follows, until it settles)."""
        if isinstance(found, a2a_pb2.Message):
            yield found
            return
        if found.status.state in _SETTLED_STATES:
            yield apply_history_length(found, params.configuration)
            return
        request = a2a_pb2.SubscribeToTaskRequest(id=found.id)
        async with contextlib.aclosing(super().on_subscribe_to_task(request, context)) as events:
            async for event in events:
                yield event

    async def _start_new(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> _Answered | Handover:
        """A message that starts a task: the fast path (see the module docs).

        It sends the request and waits for the agent's first answer itself; when
        that answer ends the turn (the usual case for a tool), the task is stored
        once, as it stands then: the a2a-sdk's per-task machinery (its active
        task, event queues, task manager) would only copy it around and store it
        once per event. Anything else (progress, a direct message) is handed to
        that machinery (the :class:`Handover` returned, to release once the call
        is over), which follows the task from there as if it had sent the
        message itself.
        """
        prepared = context.state[PREPARED_KEY]
        scope = CallScope.of(context)
        message = params.message
        turn = prepared.turn
        message.task_id = turn.task_id
        runtime = self._runtime
        executor = cast(BusAgentExecutor, self.agent_executor)
        async with contextlib.AsyncExitStack() as stack:
            # The caller waits for the answer (action-results): only that topic's
            # reader polls at its shortest wait, as the SDK's reply listener does.
            inbox = await stack.enter_async_context(
                runtime.fanout.subscribe(keys_of(turn), awaiting=_AWAITED)
            )
            try:
                await executor.send(scope, turn, prepared)
            except Duplicate:
                message.ClearField("task_id")  # a message to prepare again, as it came
                raise
            quiet = bool(context.state.get(OUTCOME_ONLY_KEY))
            while not (first := translate(await inbox.get(), turn, quiet_start=quiet)).events:
                pass
            if first.ends_turn and first.starts_task:
                if first.question is not None:
                    # Remembered before the caller can see input-required, as the executor
                    # does: the answer may come to any instance, which must find it.
                    await runtime.remember_question(scope.tenant_id, turn, first.question)
                task = finished_task(turn, message, first)
                await runtime.store.insert(task, context, history=[turn.message])
                runtime.settle(scope.tenant_id, turn.correlation_id)
                await runtime.push_sender.send_notification(task.id, task)
                return _Answered(task, new_task(turn, message), tuple(first.events))
            handover = Handover(stack.pop_all(), inbox, turn, first)
        context.state[HANDOVER_KEY] = handover
        message.ClearField("task_id")  # a new task to the a2a-sdk, with the prepared id
        return handover

    async def _prepare(
        self,
        params: a2a_pb2.SendMessageRequest,
        context: ServerCallContext,
        *,
        defer_claim: bool,
    ) -> Prepared:
        """The message checked and claimed (:class:`MessagePreparer`), in the call's state.

        Raises:
            Duplicate: it was sent before.
        """
        prepared = await self._preparer.prepare(params, context, defer_claim=defer_claim)
        scope = CallScope.of(context)
        if scope.agent != prepared.agent:
            # The gateway's own endpoint: the task is the named agent's.
            replace(scope, agent=prepared.agent).attach(context)
        context.state[PREPARED_KEY] = prepared
        return prepared

    # -- cancel -----------------------------------------------------------------------------

    async def on_cancel_task(
        self, params: a2a_pb2.CancelTaskRequest, context: ServerCallContext
    ) -> a2a_pb2.Task | None:
        with _sanitized("CancelTask"):
            task = cast(a2a_pb2.Task | None, await super().on_cancel_task(params, context))
            if task is not None and task.status.state == a2a_pb2.TaskState.TASK_STATE_CANCELED:
                # The a2a-sdk notifies the cancel of a task running here, but writes that
                # of a task running nowhere here without notifying it: what its write
                # queued is sent now (nothing when it was sent already).
                await self._runtime.push_sender.send_queued(
                    task.id,
                    a2a_pb2.TaskStatusUpdateEvent(
                        task_id=task.id, context_id=task.context_id, status=task.status
                    ),
                )
                await self._tell_agent(CallScope.of(context), task.id)
            return task

    async def _tell_agent(self, scope: CallScope, task_id: str) -> None:
        # Best effort: the task is canceled for the caller whatever the agent does.
        try:
            await self._runtime.bus.publish(
                Topic.SYSTEM_EVENTS,
                SystemEventType.TASK_CANCEL_REQUESTED.value,
                TaskCancelRequestedData(
                    task_id=task_id,
                    reason="the A2A caller canceled the task",
                    requested_by=scope.user_id,
                ),
                correlation_id=task_id,
                task_id=task_id,
                tenant_id=scope.tenant_id,
                user_id=scope.user_id,
                id=f"{task_id}.cancel",
            )
        except Exception as exc:
            _log.warning("cancel not announced", task_id=task_id, error=repr(exc))

    # -- the rest, sanitized ------------------------------------------------------------------

    async def on_get_task(
        self, params: a2a_pb2.GetTaskRequest, context: ServerCallContext
    ) -> a2a_pb2.Task | None:
        with _sanitized("GetTask"):
            return cast(a2a_pb2.Task | None, await super().on_get_task(params, context))

    async def on_list_tasks(
        self, params: a2a_pb2.ListTasksRequest, context: ServerCallContext
    ) -> a2a_pb2.ListTasksResponse:
        with _sanitized("ListTasks"):
            # A caller without a token never gets here: the door refuses it (401).
            return cast(a2a_pb2.ListTasksResponse, await super().on_list_tasks(params, context))

    async def on_subscribe_to_task(
        self, params: a2a_pb2.SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        with _sanitized("SubscribeToTask"):
            async with contextlib.aclosing(super().on_subscribe_to_task(params, context)) as events:
                async for event in events:
                    yield event

    async def on_create_task_push_notification_config(
        self, params: a2a_pb2.TaskPushNotificationConfig, context: ServerCallContext
    ) -> a2a_pb2.TaskPushNotificationConfig:
        with _sanitized("CreateTaskPushNotificationConfig"):
            created = await super().on_create_task_push_notification_config(params, context)
            return cast(a2a_pb2.TaskPushNotificationConfig, created)

    async def on_get_task_push_notification_config(
        self, params: a2a_pb2.GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> a2a_pb2.TaskPushNotificationConfig:
        with _sanitized("GetTaskPushNotificationConfig"):
            found = await super().on_get_task_push_notification_config(params, context)
            return cast(a2a_pb2.TaskPushNotificationConfig, found)

    async def on_list_task_push_notification_configs(
        self, params: a2a_pb2.ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> a2a_pb2.ListTaskPushNotificationConfigsResponse:
        with _sanitized("ListTaskPushNotificationConfigs"):
            listed = await super().on_list_task_push_notification_configs(params, context)
            return cast(a2a_pb2.ListTaskPushNotificationConfigsResponse, listed)

    async def on_delete_task_push_notification_config(
        self, params: a2a_pb2.DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        with _sanitized("DeleteTaskPushNotificationConfig"):
            await super().on_delete_task_push_notification_config(params, context)

    async def on_get_extended_agent_card(
        self, params: a2a_pb2.GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> a2a_pb2.AgentCard:
        """The card as the caller's tenant sees it: an agent's, or the gateway's with them all."""
        with _sanitized("GetExtendedAgentCard"):
            scope = CallScope.of(context)
            settings = self._runtime.settings
            card: A2AAgentCard
            if scope.agent is not None:
                target = await self._preparer.target(scope, context, scope.agent)
                card = A2AGatewayHelper.agent_to_card(
                    target,
                    public_url=settings.gateway_public_url,
                    requires_token=not settings.is_public_agent(target.name),
                    tenant=scope.tenant_id,
                    grpc_address=settings.gateway_grpc_address,
                )
            else:
                sources = await self._runtime.directory.agents(scope.tenant_id)
                card = A2AGatewayHelper.gateway_card(
                    sources,
                    public_url=settings.gateway_public_url,
                    grpc_address=settings.gateway_grpc_address,
                )
            return self._runtime.card_signer.sign_proto(to_proto(card, a2a_pb2.AgentCard))
