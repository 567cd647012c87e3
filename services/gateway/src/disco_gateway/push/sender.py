"""Delivering push notifications: kept until delivered, in order per configuration,
with retries and backoff, by whichever instance is up.

The a2a-sdk's ``BasePushNotificationSender`` posts once and gives up; the
gateway posts the same body (the event as a ``StreamResponse``) with the same
headers — ``X-A2A-Notification-Token`` when the config has a token, and
``Authorization: <scheme> <credentials>`` from its authentication — but:

- each notification is stored, a row per configuration of the task
  (``gateway.a2a_push_deliveries``), by the very transaction that writes the
  task's change (:class:`~disco_gateway.tasks.store.PostgresTaskStore`), and
  forgotten once delivered or given up on: one whose instance stops (or dies)
  before or between its tries is delivered by another instance, or by this one
  when it is back;
- never from the task's own path: deliveries run in the background, so a slow
  receiver slows no task;
- one configuration's notifications go out in the order they were sent: only
  the oldest waiting one of a configuration is tried, by one instance at a time;
- a failed delivery (a 5xx, 408 or 429, a timeout, a refused connection) is
  tried again with exponential backoff and jitter, up to
  ``DISCO_GATEWAY_PUSH_MAX_ATTEMPTS`` in all; a 4xx is final;
- the URL is checked again before every attempt (the DNS may have changed),
  and the attempt connects to the address that was checked (``push.urls``).

The instance that wrote the change tries its notifications at once, when the
a2a-sdk hands it the event (:meth:`RetryingPushSender.send_notification`), under
the token the write held them with. Each instance's sweeper (every
``DISCO_GATEWAY_PUSH_SWEEP_SECONDS``) takes the rest: rows whose holder's lease
ran out (its instance died before trying them), retries that are due,
notifications that waited behind an older one of their configuration.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import itertools
import random
from collections.abc import Coroutine
from typing import Any

import httpx
import structlog
from a2a.server.tasks.push_notification_sender import (
    PushNotificationEvent,
    PushNotificationSender,
)
from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict, ParseDict

from disco_gateway.push.metrics import PushMetrics
from disco_gateway.push.repository import (
    ClaimedDelivery,
    PushDeliveryRepository,
    claim_due_deliveries,
    release_deliveries,
)
from disco_gateway.push.urls import PushUrlPolicy
from disco_gateway.scope import current_scope
from disco_gateway.tasks.store import PostgresTaskStore, QueuedPushes
from disco_service import Database

__all__ = ["NOTIFICATION_TOKEN_HEADER", "Outcome", "PushPoster", "RetryingPushSender"]

_log = structlog.get_logger("disco_gateway.push")

NOTIFICATION_TOKEN_HEADER = "X-A2A-Notification-Token"  # noqa: S105 - a header name
_RETRY_STATUSES = frozenset({408, 429})
_SWEEP_BATCH = 100


class Outcome(enum.Enum):
    """What one attempt came to."""

    DELIVERED = "delivered"
    RETRY = "retry"  # worth another try: a 5xx, 408, 429, or no answer
    REFUSED = "refused"  # final: a 4xx, or a URL the policy refuses


class PushPoster:
    """One attempt at one notification: the URL checked, the spec's headers, one POST.

    Args:
        http: the client to post with (closed by its owner).
        url_policy: which URLs the gateway may post to, and at which address.
    """

    def __init__(self, http: httpx.AsyncClient, url_policy: PushUrlPolicy) -> None:
        self._http = http
        self.url_policy = url_policy

    async def attempt(
        self, config: TaskPushNotificationConfig, body: dict[str, object], *, task_id: str
    ) -> Outcome:
        target = await self.url_policy.target(config.url)
        if target is None:
            _log.warning("push URL refused", task_id=task_id, url=config.url)
            return Outcome.REFUSED
        headers: dict[str, str] = {}
        if config.token:
            headers[NOTIFICATION_TOKEN_HEADER] = config.token
        if config.HasField("authentication") and config.authentication.scheme:
            auth = config.authentication
            if auth.credentials:
                headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
        try:
            response = await target.post(self._http, body, headers)
        except httpx.HTTPError as exc:
            _log.warning("push notification failed", task_id=task_id, error=repr(exc))
            return Outcome.RETRY
        if response.is_success:
            return Outcome.DELIVERED
        retry = response.status_code >= 500 or response.status_code in _RETRY_STATUSES
        _log.warning(
            "push notification refused",
            task_id=task_id,
            status=response.status_code,
            final=not retry,
        )
        return Outcome.RETRY if retry else Outcome.REFUSED


class RetryingPushSender(PushNotificationSender):
    """The a2a-sdk's push sender interface, delivering as the module docs say.

    Each try holds its row under a token of its own for ``lease_seconds``; a
    change after the try applies only while the token still holds the row.

    Args:
        database: where notifications wait (the gateway's schema).
        tasks: the task store, which knows which tasks have no configuration.
        poster: makes each attempt.
        max_attempts: tries per notification, by all instances together.
        backoff_seconds: the wait after the first failed try (doubled after each).
        lease_seconds: how long a try may take before another may take the
            notification over.
        sweep_seconds: how often this instance looks for notifications to take.
        metrics: counts the tries and what they came to.
    """

    def __init__(
        self,
        database: Database,
        tasks: PostgresTaskStore,
        poster: PushPoster,
        *,
        max_attempts: int,
        backoff_seconds: float,
        lease_seconds: float,
        sweep_seconds: float,
        metrics: PushMetrics,
    ) -> None:
        self._database = database
        self._metrics = metrics
        self._tasks = tasks
        self._poster = poster
        self._max_attempts = max_attempts
        self._backoff = backoff_seconds
        self._lease = lease_seconds
        self._sweep_seconds = sweep_seconds
        # The store's writes hold the notifications they queue under this instance too.
        self._instance = tasks.push_instance
        self._tokens = itertools.count()
        self._last: dict[tuple[str, str, str], asyncio.Task[None]] = {}
        self._running: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def tasks(self) -> PostgresTaskStore:
        """The task store whose writes queue this sender's notifications."""
        return self._tasks

    @property
    def url_policy(self) -> PushUrlPolicy:
        """The check a push URL must pass (also applied when a configuration is set)."""
        return self._poster.url_policy

    def _token(self) -> str:
        return f"{self._instance}/{next(self._tokens)}"

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        """Start delivering the event to each configuration of the task: the rows the
        write of the event queued; or, when no write here queued it (a store that does
        not know the task), rows stored now.

        Best effort, as the interface asks: a failure is logged, never raised into
        the task's own path (its answer is stored already).
        """
        scope = current_scope()
        written = await self._take(scope.tenant_id, task_id, event)
        if written is False:
            return  # no configuration at its last write, or sent already: no query
        if isinstance(written, QueuedPushes):
            self._deliver_queued(scope.tenant_id, task_id, written)
            return
        body = MessageToDict(to_stream_response(event))
        token = self._token()
        try:
            async with self._database.unit_of_work(scope.tenant_id, scope.user_id) as session:
                queued = await PushDeliveryRepository(session, scope.tenant_id, token).enqueue(
                    task_id, body, lease_seconds=self._lease
                )
        except Exception as exc:
            _log.warning("push notification not stored", task_id=task_id, error=repr(exc))
            return
        for seq, config_id, claimed in queued:
            self._start(scope.tenant_id, task_id, config_id, seq, token, claimed)

    async def send_queued(self, task_id: str, event: PushNotificationEvent) -> None:
        """Deliver what a write of the task here queued for ``event``, if nobody took it
        yet; never store anything. For a change the a2a-sdk writes without notifying
        it: its cancel of a task that runs nowhere here."""
        scope = current_scope()
        written = await self._take(scope.tenant_id, task_id, event)
        if isinstance(written, QueuedPushes):
            self._deliver_queued(scope.tenant_id, task_id, written)

    async def _take(
        self, tenant_id: str, task_id: str, event: PushNotificationEvent
    ) -> QueuedPushes | bool:
        written, unnotified = self._tasks.take_queued(tenant_id, task_id, event)
        if unnotified:
            # Older writes' notifications nobody sends: dropped first, so that this
            # event's rows are the oldest of their configurations.
            await self._drop(tenant_id, unnotified)
        return written

    async def _drop(self, tenant_id: str, unnotified: list[QueuedPushes]) -> None:
        try:
            async with self._database.unit_of_work(tenant_id) as session:
                for queued in unnotified:
                    await PushDeliveryRepository(session, tenant_id, queued.token).drop(
                        [int(row["seq"]) for row in queued.rows]
                    )
        except Exception as exc:
            # They stay held: a sweeper sends them once the lease ends (one more each).
            _log.warning("push notifications not dropped", error=repr(exc))

    def _deliver_queued(self, tenant_id: str, task_id: str, queued: QueuedPushes) -> None:
        for row in queued.rows:
            seq, config_id = int(row["seq"]), str(row["config_id"])
            claimed = (
                ClaimedDelivery(tenant_id, seq, task_id, 1, queued.body, dict(row["config"]))
                if row["attempts"]
                else None
            )
            self._start(tenant_id, task_id, config_id, seq, queued.token, claimed)

    def _start(
        self,
        tenant_id: str,
        task_id: str,
        config_id: str,
        seq: int,
        token: str,
        claimed: ClaimedDelivery | None,
    ) -> None:
        """Deliver row ``seq`` after whatever this instance sends to its configuration already."""
        key = (tenant_id, task_id, config_id)
        previous = self._last.get(key)
        self._spawn(key, self._after(previous, tenant_id, seq, token, claimed))

    def _spawn(self, key: tuple[str, str, str], delivery: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(delivery, name=f"disco-push-{key[1]}-{key[2]}")
        self._last[key] = task
        self._running.add(task)
        task.add_done_callback(functools.partial(self._done, key))

    def _done(self, key: tuple[str, str, str], task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if self._last.get(key) is task:
            del self._last[key]

    async def _after(
        self,
        previous: asyncio.Task[None] | None,
        tenant_id: str,
        seq: int,
        token: str,
        claimed: ClaimedDelivery | None,
    ) -> None:
        """Try row ``seq`` once ``previous`` is done: at once if it was stored held for its
        first try (``claimed``), else once a claim says it is the oldest."""
        if previous is not None:
            await asyncio.wait([previous])  # keep this configuration's order
        if claimed is not None:
            await self._try(claimed, token)
            return
        try:
            async with self._database.unit_of_work(tenant_id) as session:
                rows = PushDeliveryRepository(session, tenant_id, token)
                claimed = await rows.claim(seq, lease_seconds=self._lease)
                if claimed is None:
                    # Taken over, or behind an older notification: the sweeper sees to it.
                    await rows.release(seq)
        except Exception as exc:
            # The row stays: a sweeper takes it once its lease ends.
            _log.warning("push delivery not started", seq=seq, error=repr(exc))
            return
        if claimed is not None:
            await self._try(claimed, token)

    async def _try(self, claimed: ClaimedDelivery, token: str) -> None:
        """One attempt, then the row is forgotten (delivered, or given up on) or due again
        after the backoff, for whichever sweeper comes first."""
        try:
            config = ParseDict(
                claimed.config, TaskPushNotificationConfig(), ignore_unknown_fields=True
            )
            outcome = await self._poster.attempt(config, claimed.body, task_id=claimed.task_id)
            self._metrics.attempts.labels(outcome.value).inc()
            async with self._database.unit_of_work(claimed.tenant_id) as session:
                rows = PushDeliveryRepository(session, claimed.tenant_id, token)
                if outcome is Outcome.RETRY and claimed.attempts < self._max_attempts:
                    delay = self._backoff * 2 ** (claimed.attempts - 1)
                    await rows.retry(claimed.seq, delay_seconds=random.uniform(delay / 2, delay))
                    return
                await rows.done(claimed.seq)
        except Exception as exc:
            # The row stays: it is taken again once its lease ends.
            _log.warning("push delivery interrupted", task_id=claimed.task_id, error=repr(exc))
            return
        if outcome is not Outcome.DELIVERED:
            self._metrics.given_up.inc()
            _log.warning(
                "push notification given up",
                task_id=claimed.task_id,
                attempts=claimed.attempts,
                outcome=outcome.value,
            )

    # -- the sweeper ------------------------------------------------------------------

    def start(self) -> None:
        """Start this instance's sweeper."""
        self._sweeper = asyncio.create_task(self._sweep_forever(), name="disco-push-sweeper")

    async def _sweep_forever(self) -> None:
        while True:
            try:
                taken = await self.sweep()
            except Exception as exc:
                _log.warning("push sweep failed", error=repr(exc))
                taken = 0
            if taken < _SWEEP_BATCH:
                await asyncio.sleep(self._sweep_seconds)

    async def sweep(self) -> int:
        """Take every tenant's due notifications (the oldest of each configuration) and try
        each once; how many."""
        token = self._token()
        async with self._database.unit_of_work(None) as session:
            claimed = await claim_due_deliveries(
                session, token, lease_seconds=self._lease, max_rows=_SWEEP_BATCH
            )
        for delivery in claimed:
            key = (delivery.tenant_id, delivery.task_id, str(delivery.config.get("id", "")))
            self._spawn(key, self._try(delivery, token))
        return len(claimed)

    async def drain(self, timeout: float) -> None:  # noqa: ASYNC109 - a shutdown's budget
        """Stop the sweeper, wait up to ``timeout`` seconds for tries under way, and hand
        back every notification this instance holds (due at once, for any instance)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        pending = list(self._running)
        if pending:
            _, late = await asyncio.wait(pending, timeout=timeout)
            for task in late:
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*late, return_exceptions=True)
        try:
            async with self._database.unit_of_work(None) as session:
                released = await release_deliveries(session, self._instance)
        except Exception as exc:
            _log.warning("push deliveries not handed back", error=repr(exc))
        else:
            if released:
                _log.info("push deliveries handed back", count=released)
