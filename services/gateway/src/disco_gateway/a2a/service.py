"""The A2A side of a gateway instance: made and started in the lifespan, stopped with it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import structlog
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers import RequestHandler
from a2a.types import a2a_pb2
from sqlalchemy import text

from disco.clients import RegistryClient, ServiceClientSettings
from disco_common.a2a import A2A_RESPONSE_EVENT
from disco_common.ids import utcnow
from disco_common.notifications import NotificationType
from disco_common.topics import Topic
from disco_gateway.a2a.applier import AnswerApplier
from disco_gateway.a2a.handler import GatewayRequestHandler
from disco_gateway.a2a.mapping import ROUTES
from disco_gateway.a2a.runtime import A2ARuntime
from disco_gateway.a2a.side import A2AService
from disco_gateway.agents.service import AgentDirectory
from disco_gateway.bus.applier import GroupApplier
from disco_gateway.bus.fanout import BusFanout, FanoutRoute
from disco_gateway.cards.signing import CardSigner
from disco_gateway.publish.service import Publisher
from disco_gateway.push.sender import PushPoster, RetryingPushSender
from disco_gateway.push.store import PostgresPushConfigStore
from disco_gateway.push.urls import PushUrlPolicy
from disco_gateway.state import GatewayState
from disco_gateway.tasks.store import PostgresTaskStore
from disco_gateway.tasks.stream import PostgresTaskEventStream, TaskEventListener

__all__ = ["A2AService", "LiveHandler", "a2a_lifespan"]

_log = structlog.get_logger("disco_gateway")

_FANOUT_KEYS = ("correlation_id", "task_id", "session_id")
_FED = Topic.NOTIFICATION_EVENTS.value
"""The topic the session hub's reader reads for the fan-out (sessions/lifespan.py)."""


class LiveHandler(RequestHandler):
    """The running instance's handler (it exists once the lifespan started): what the
    bindings' routes and servicer, made with the app, call."""

    def __init__(self, state: GatewayState) -> None:
        self._state = state

    def _handler(self) -> RequestHandler:
        return self._state.require_a2a().handler

    async def on_get_task(self, params: a2a_pb2.GetTaskRequest, context: ServerCallContext) -> Any:
        return await self._handler().on_get_task(params, context)

    async def on_list_tasks(
        self, params: a2a_pb2.ListTasksRequest, context: ServerCallContext
    ) -> Any:
        return await self._handler().on_list_tasks(params, context)

    async def on_cancel_task(
        self, params: a2a_pb2.CancelTaskRequest, context: ServerCallContext
    ) -> Any:
        return await self._handler().on_cancel_task(params, context)

    async def on_message_send(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> Any:
        return await self._handler().on_message_send(params, context)

    async def on_message_send_stream(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        async for event in self._handler().on_message_send_stream(params, context):
            yield event

    async def on_create_task_push_notification_config(
        self, params: a2a_pb2.TaskPushNotificationConfig, context: ServerCallContext
    ) -> Any:
        return await self._handler().on_create_task_push_notification_config(params, context)

    async def on_get_task_push_notification_config(
        self, params: a2a_pb2.GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> Any:
        return await self._handler().on_get_task_push_notification_config(params, context)

    async def on_subscribe_to_task(
        self, params: a2a_pb2.SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        async for event in self._handler().on_subscribe_to_task(params, context):
            yield event

    async def on_list_task_push_notification_configs(
        self, params: a2a_pb2.ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> Any:
        return await self._handler().on_list_task_push_notification_configs(params, context)

    async def on_delete_task_push_notification_config(
        self, params: a2a_pb2.DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        await self._handler().on_delete_task_push_notification_config(params, context)

    async def on_get_extended_agent_card(
        self, params: a2a_pb2.GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> Any:
        return await self._handler().on_get_extended_agent_card(params, context)


@contextlib.asynccontextmanager
async def a2a_lifespan(state: GatewayState) -> AsyncIterator[None]:
    """Start the registry client, the fan-out, the event listener, the push sender, the
    request handler, the consumer group and the retention job; stop them in reverse."""
    settings = state.settings
    database = state.require_database()
    bus = state.require_bus()
    async with contextlib.AsyncExitStack() as stack:
        # The gateway's own token (DISCO_AUTH_TOKEN, or dev-minted with the service role):
        # every call then acts for the caller's tenant (disco.clients.acting_for).
        clients = ServiceClientSettings()
        registry = RegistryClient(
            settings.registry_url,
            token=clients.token_provider(),
            timeout_seconds=clients.http_timeout_seconds,
            retries=clients.http_retries,
        )
        await registry.start()
        stack.push_async_callback(registry.stop)
        await bus.ensure_topics()
        fanout = BusFanout(
            settings,
            [
                # notification-events: the session hub reads it already, and feeds it.
                FanoutRoute(topic, types, _FANOUT_KEYS, fed=topic == _FED)
                for topic, types in ROUTES.items()
            ],
        )
        await fanout.start()
        stack.push_async_callback(fanout.stop)
        listener = TaskEventListener()
        await stack.enter_async_context(listener.listening(database))
        http = httpx.AsyncClient(timeout=settings.push_timeout_seconds)
        stack.push_async_callback(http.aclose)
        # A try is one URL check and one POST, bounded by the timeout.
        push_lease = settings.push_timeout_seconds * 2 + 5
        # A task's write queues its push notifications, held for this instance's first try.
        store = PostgresTaskStore(database, push_lease_seconds=push_lease)
        push_store = PostgresPushConfigStore(database, store)
        push_sender = RetryingPushSender(
            database,
            store,
            PushPoster(http, PushUrlPolicy(allow_loopback=settings.push_allow_loopback)),
            max_attempts=settings.push_max_attempts,
            backoff_seconds=settings.push_backoff_seconds,
            lease_seconds=push_lease,
            sweep_seconds=settings.push_sweep_seconds,
            metrics=state.push_metrics,
        )
        push_sender.start()
        stack.push_async_callback(push_sender.drain, settings.shutdown_grace_seconds / 2)
        runtime = A2ARuntime(
            settings=settings,
            database=database,
            bus=bus,
            fanout=fanout,
            directory=AgentDirectory(registry, cache_seconds=settings.registry_cache_seconds),
            store=store,
            stream=PostgresTaskEventStream(database, listener),
            push_store=push_store,
            push_sender=push_sender,
            card_signer=CardSigner.from_settings(settings),
        )
        handler = GatewayRequestHandler(runtime)
        stack.push_async_callback(handler.aclose)
        state.a2a = A2AService(runtime, handler, Publisher(bus, registry))
        stack.callback(setattr, state, "a2a", None)
        applier = GroupApplier(
            bus, settings.consumer_group, trail_seconds=settings.handover_seconds
        )
        answers = AnswerApplier(runtime)
        applier.on(Topic.ACTION_RESULTS.value, A2A_RESPONSE_EVENT)(answers.answer)
        applier.on(Topic.NOTIFICATION_EVENTS.value, NotificationType.HUMAN_INPUT.value)(
            answers.question
        )
        stack.push_async_callback(applier.stop, settings.shutdown_grace_seconds)
        state.start_alongside(applier.start(), name=settings.consumer_group)
        sweeper = asyncio.create_task(_retention(state), name="disco-gateway-retention")
        stack.callback(sweeper.cancel)
        yield


async def _retention(state: GatewayState) -> None:
    """Delete finished tasks older than the retention (a system function: every tenant)."""
    settings = state.settings
    while True:
        await asyncio.sleep(settings.retention_interval_seconds)
        cutoff = utcnow() - timedelta(days=settings.task_retention_days)
        try:
            async with state.require_database().unit_of_work(None) as session:
                purged = await session.scalar(
                    text("SELECT gateway.purge_a2a_tasks(:cutoff)"), {"cutoff": cutoff}
                )
            if purged:
                _log.info("a2a_tasks_purged", count=purged)
        except Exception as exc:
            _log.warning("a2a_retention_failed", error=repr(exc))
