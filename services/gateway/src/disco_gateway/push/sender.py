"""Delivering push notifications: in order per configuration, with retries and backoff.

The a2a-sdk's ``BasePushNotificationSender`` posts once and gives up; the
gateway posts the same body (the event as a ``StreamResponse``) with the same
headers — ``X-A2A-Notification-Token`` when the config has a token, and
``Authorization: <scheme> <credentials>`` from its authentication — but:

- never from the task's own path: deliveries run in the background, so a slow
  receiver slows no task;
- one configuration's notifications go out in the order of the events;
- a failed delivery (a 5xx, 408 or 429, a timeout, a refused connection) is
  tried again with exponential backoff and jitter, up to
  ``DISCO_GATEWAY_PUSH_MAX_ATTEMPTS``; a 4xx is final;
- the URL is checked again before every attempt (the DNS may have changed),
  and the attempt connects to the address that was checked (``push.urls``).

Deliveries live in the instance's memory: those pending when it stops are lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random

import httpx
import structlog
from a2a.server.tasks.push_notification_sender import (
    PushNotificationEvent,
    PushNotificationSender,
)
from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict

from disco_gateway.push.store import PostgresPushConfigStore
from disco_gateway.push.urls import PushUrlPolicy
from disco_gateway.scope import current_scope
from disco_gateway.tasks.store import PostgresTaskStore

__all__ = ["NOTIFICATION_TOKEN_HEADER", "RetryingPushSender"]

_log = structlog.get_logger("disco_gateway.push")

NOTIFICATION_TOKEN_HEADER = "X-A2A-Notification-Token"  # noqa: S105 - a header name
_RETRY_STATUSES = frozenset({408, 429})


class RetryingPushSender(PushNotificationSender):
    """The a2a-sdk's push sender interface, delivering as the module docs say.

    Args:
        store: where the task's configurations are.
        tasks: the task store, which knows which tasks have none.
        http: the client to post with (closed by its owner).
        url_policy: which URLs the gateway may post to, and at which address.
        max_attempts: tries per notification.
        backoff_seconds: the first wait between tries (doubled each time).
    """

    def __init__(
        self,
        store: PostgresPushConfigStore,
        tasks: PostgresTaskStore,
        http: httpx.AsyncClient,
        *,
        url_policy: PushUrlPolicy,
        max_attempts: int,
        backoff_seconds: float,
    ) -> None:
        self._store = store
        self._tasks = tasks
        self._http = http
        self._policy = url_policy
        self._max_attempts = max_attempts
        self._backoff = backoff_seconds
        self._last: dict[tuple[str, str, str], asyncio.Task[None]] = {}
        self._running: set[asyncio.Task[None]] = set()

    @property
    def url_policy(self) -> PushUrlPolicy:
        """The check a push URL must pass (also applied when a configuration is set)."""
        return self._policy

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        tenant_id = current_scope().tenant_id
        if not self._tasks.may_push(tenant_id, task_id):
            return  # its last write saw no configuration: no query per event
        configs = await self._store.get_info_for_dispatch(task_id)
        if not configs:
            return
        body = MessageToDict(to_stream_response(event))
        for config in configs:
            key = (tenant_id, task_id, config.id)
            previous = self._last.get(key)
            delivery = asyncio.create_task(
                self._after(previous, config, body, task_id),
                name=f"disco-push-{task_id}-{config.id}",
            )
            self._last[key] = delivery
            self._running.add(delivery)
            delivery.add_done_callback(functools.partial(self._done, key))

    def _done(self, key: tuple[str, str, str], delivery: asyncio.Task[None]) -> None:
        self._running.discard(delivery)
        if self._last.get(key) is delivery:
            del self._last[key]

    async def _after(
        self,
        previous: asyncio.Task[None] | None,
        config: TaskPushNotificationConfig,
        body: dict[str, object],
        task_id: str,
    ) -> None:
        if previous is not None:
            await asyncio.wait([previous])  # keep this configuration's order
        await self.deliver(config, body, task_id=task_id)

    async def deliver(
        self, config: TaskPushNotificationConfig, body: dict[str, object], *, task_id: str
    ) -> bool:
        """Post ``body`` to the configuration's URL, retrying; whether it was accepted."""
        headers: dict[str, str] = {}
        if config.token:
            headers[NOTIFICATION_TOKEN_HEADER] = config.token
        if config.HasField("authentication") and config.authentication.scheme:
            auth = config.authentication
            if auth.credentials:
                headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
        delay = self._backoff
        for attempt in range(1, self._max_attempts + 1):
            final = attempt == self._max_attempts
            try:
                target = await self._policy.target(config.url)
                if target is None:
                    _log.warning("push URL refused", task_id=task_id, url=config.url)
                    return False
                response = await target.post(self._http, body, headers)
                if response.is_success:
                    return True
                retry = response.status_code >= 500 or response.status_code in _RETRY_STATUSES
                _log.warning(
                    "push notification refused",
                    task_id=task_id,
                    status=response.status_code,
                    attempt=attempt,
                    giving_up=final or not retry,
                )
                if not retry:
                    return False
            except httpx.HTTPError as exc:
                _log.warning(
                    "push notification failed",
                    task_id=task_id,
                    error=repr(exc),
                    attempt=attempt,
                    giving_up=final,
                )
            if not final:
                await asyncio.sleep(delay / 2 + random.uniform(0, delay / 2))
                delay *= 2
        return False

    async def drain(self, timeout: float) -> None:  # noqa: ASYNC109 - a shutdown's budget
        """Wait up to ``timeout`` seconds for pending deliveries; cancel the rest."""
        pending = list(self._running)
        if pending:
            _, late = await asyncio.wait(pending, timeout=timeout)
            for task in late:
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*late, return_exceptions=True)
