"""Push notifications are kept in Postgres until delivered: queued by the write of the
task's change, in order per configuration, retried, taken over from a stopped instance,
given up on after the last attempt."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import httpx
import pytest
from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.server.cluster.version import TaskVersion
from a2a.types import a2a_pb2
from prometheus_client import CollectorRegistry
from sqlalchemy import make_url, text

from disco_gateway import GatewaySettings
from disco_gateway.push.metrics import PushMetrics
from disco_gateway.push.sender import PushPoster, RetryingPushSender
from disco_gateway.push.store import PostgresPushConfigStore
from disco_gateway.push.urls import PushUrlPolicy
from disco_gateway.scope import scoped
from disco_gateway.tasks.store import PostgresTaskStore
from disco_service import Database
from tests.integration.gateway.conftest import caller, new_tenant, task_rows


class Receiver:
    """A webhook on loopback: answers ``statuses`` in turn (then 204), keeps every body."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.statuses = list(statuses or [])
        self.tries: list[tuple[int, dict[str, Any]]] = []
        self.changed = asyncio.Event()
        self.url = ""

    @property
    def delivered(self) -> list[dict[str, Any]]:
        return [body for status, body in self.tries if status < 300]

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
        length = int(head.split("content-length:", 1)[1].split("\r\n", 1)[0])
        body = json.loads(await reader.readexactly(length))
        status = self.statuses.pop(0) if self.statuses else 204
        self.tries.append((status, body))
        self.changed.set()
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
        )
        await writer.drain()
        writer.close()

    async def until(
        self, done: Callable[[], bool], *, pump: Callable[[], Awaitable[object]]
    ) -> None:
        """Wait until ``done()``, calling ``pump`` (a sweep) whenever nothing came for a while."""
        async with asyncio.timeout(20):
            while not done():
                self.changed.clear()
                await pump()
                with suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), 0.2)


async def idle() -> None:
    await asyncio.sleep(0)


@asynccontextmanager
async def receiving(statuses: list[int] | None = None) -> AsyncIterator[Receiver]:
    receiver = Receiver(statuses)
    server = await asyncio.start_server(receiver.handle, "127.0.0.1", 0)
    receiver.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook"
    try:
        yield receiver
    finally:
        server.close()
        await server.wait_closed()


@asynccontextmanager
async def instance(
    db: Database,
    *,
    max_attempts: int = 5,
    lease_seconds: float = 30.0,
    metrics: PushMetrics | None = None,
) -> AsyncIterator[RetryingPushSender]:
    """One gateway instance's sender (its sweeper not started: tests sweep by hand)."""
    async with httpx.AsyncClient(timeout=5) as http:
        sender = RetryingPushSender(
            db,
            PostgresTaskStore(db),
            PushPoster(http, PushUrlPolicy(allow_loopback=True)),
            max_attempts=max_attempts,
            backoff_seconds=0.05,
            lease_seconds=lease_seconds,
            sweep_seconds=60,
            metrics=metrics or PushMetrics(CollectorRegistry()),
        )
        try:
            yield sender
        finally:
            await sender.drain(5)


def status_event(task_id: str, state: int, text_: str) -> a2a_pb2.TaskStatusUpdateEvent:
    event = a2a_pb2.TaskStatusUpdateEvent(task_id=task_id, context_id="ctx")
    event.status.state = state  # type: ignore[assignment]
    event.status.message.role = a2a_pb2.ROLE_AGENT
    event.status.message.message_id = uuid.uuid4().hex
    event.status.message.parts.add().text = text_
    return event


def said(body: dict[str, Any]) -> str:
    return str(body["statusUpdate"]["status"]["message"]["parts"][0]["text"])


async def configure(db: Database, tenant: str, task_id: str, url: str, config_id: str) -> None:
    store = PostgresPushConfigStore(db, PostgresTaskStore(db))
    config = a2a_pb2.TaskPushNotificationConfig(id=config_id, url=url, token="tok")
    await store.set_info(task_id, config, caller(tenant).context())


async def waiting(db: Database, tenant: str, task_id: str) -> int:
    return await task_rows(db, tenant, "a2a_push_deliveries", task_id)


async def test_a_configurations_notifications_arrive_in_order_through_retries(
    db: Database,
) -> None:
    tenant, task_id = new_tenant(), str(uuid.uuid4())
    async with receiving([503, 503]) as receiver, instance(db) as sender:
        await configure(db, tenant, task_id, receiver.url, "hook")
        with scoped(caller(tenant)):
            for n in range(3):
                await sender.send_notification(
                    task_id, status_event(task_id, a2a_pb2.TASK_STATE_WORKING, f"step {n}")
                )
        await receiver.until(lambda: len(receiver.delivered) == 3, pump=sender.sweep)
    left = await waiting(db, tenant, task_id)  # the instance stopped: its tries are over

    assert [said(body) for body in receiver.delivered] == ["step 0", "step 1", "step 2"]
    assert [(status, said(body)) for status, body in receiver.tries[:3]] == [
        (503, "step 0"),
        (503, "step 0"),
        (204, "step 0"),
    ]  # the next waits behind the first
    assert left == 0


async def test_notifications_a_stopped_instance_held_are_delivered_by_another(
    db: Database,
) -> None:
    tenant, task_id = new_tenant(), str(uuid.uuid4())
    async with receiving([503]) as receiver:
        await configure(db, tenant, task_id, receiver.url, "hook")
        async with instance(db) as first:
            with scoped(caller(tenant)):
                await first.send_notification(
                    task_id, status_event(task_id, a2a_pb2.TASK_STATE_WORKING, "working")
                )
                await first.send_notification(
                    task_id, status_event(task_id, a2a_pb2.TASK_STATE_COMPLETED, "done")
                )
            await receiver.until(lambda: len(receiver.tries) == 1, pump=idle)
        # The first instance stopped after one refused try: both wait in Postgres.
        held = await waiting(db, tenant, task_id)
        async with instance(db) as second:
            await receiver.until(lambda: len(receiver.delivered) == 2, pump=second.sweep)

    assert held == 2
    assert [said(body) for body in receiver.delivered] == ["working", "done"]
    assert len(receiver.tries) == 3


async def test_a_notification_whose_holder_died_is_taken_once_its_lease_ends(
    db: Database,
) -> None:
    tenant, task_id = new_tenant(), str(uuid.uuid4())
    async with receiving() as receiver, instance(db) as survivor:
        await configure(db, tenant, task_id, receiver.url, "hook")
        orphan = {"parts": [{"text": "orphan"}]}
        async with db.unit_of_work(tenant) as session:
            # What a crashed instance leaves: stored and held (its lease has an hour to
            # run), never tried.
            await session.execute(
                text(
                    "INSERT INTO gateway.a2a_push_deliveries (tenant_id, task_id, config_id,"
                    " user_id, body, claimed_by, due_at) VALUES (:tenant, :task, 'hook', 'alice',"
                    " CAST(:body AS jsonb), 'gateway-dead/0', now() + interval '1 hour')"
                ),
                {
                    "tenant": tenant,
                    "task": task_id,
                    "body": json.dumps({"statusUpdate": {"status": {"message": orphan}}}),
                },
            )
        await survivor.sweep()
        async with db.unit_of_work(tenant) as session:
            holder = await session.scalar(
                text("SELECT claimed_by FROM gateway.a2a_push_deliveries WHERE task_id = :t"),
                {"t": task_id},
            )
            # The hour passes.
            await session.execute(
                text("UPDATE gateway.a2a_push_deliveries SET due_at = now() WHERE task_id = :t"),
                {"t": task_id},
            )
        await receiver.until(lambda: len(receiver.delivered) == 1, pump=survivor.sweep)

    assert holder == "gateway-dead/0"  # the sweep left it alone while it was held
    assert [said(body) for body in receiver.delivered] == ["orphan"]


async def test_a_notification_is_given_up_after_the_last_attempt_and_a_4xx_at_once(
    db: Database,
) -> None:
    tenant = new_tenant()
    failing, refused = str(uuid.uuid4()), str(uuid.uuid4())
    registry = CollectorRegistry()
    async with (
        receiving([503, 503, 503]) as flaky,
        receiving([404]) as gone,
        instance(db, max_attempts=2, metrics=PushMetrics(registry)) as sender,
    ):
        await configure(db, tenant, failing, flaky.url, "hook")
        await configure(db, tenant, refused, gone.url, "hook")
        with scoped(caller(tenant)):
            for task_id in (failing, refused):
                await sender.send_notification(
                    task_id, status_event(task_id, a2a_pb2.TASK_STATE_WORKING, "x")
                )

        async def settled() -> bool:
            return await waiting(db, tenant, failing) + await waiting(db, tenant, refused) == 0

        async with asyncio.timeout(20):
            while not await settled():
                await sender.sweep()
                await asyncio.sleep(0.05)

    assert [status for status, _ in flaky.tries] == [503, 503]
    assert [status for status, _ in gone.tries] == [404]
    series = "disco_gateway_push_attempts_total"
    tries = {
        outcome: registry.get_sample_value(series, {"outcome": outcome})
        for outcome in ("delivered", "retry", "refused")
    }
    assert tries == {"delivered": None, "retry": 2.0, "refused": 1.0}
    assert registry.get_sample_value("disco_gateway_push_given_up_total") == 2.0


async def test_a_waiting_notification_is_its_tenants_and_goes_with_its_configuration(
    db: Database,
) -> None:
    tenant, task_id = new_tenant(), str(uuid.uuid4())
    async with receiving([503]) as receiver, instance(db) as sender:
        await configure(db, tenant, task_id, receiver.url, "hook")
        with scoped(caller(tenant)):
            await sender.send_notification(
                task_id, status_event(task_id, a2a_pb2.TASK_STATE_WORKING, "x")
            )
        await receiver.until(lambda: len(receiver.tries) == 1, pump=idle)
        own, other = await waiting(db, tenant, task_id), await waiting(db, new_tenant(), task_id)
        await PostgresPushConfigStore(db, PostgresTaskStore(db)).delete_info(
            task_id, caller(tenant).context(), "hook"
        )
        after = await waiting(db, tenant, task_id)

    assert (own, other) == (1, 0)  # row-level security: another tenant sees none
    assert after == 0  # a deleted configuration stops its pushes


async def test_a_notification_that_cannot_be_stored_is_logged_not_raised(
    settings: GatewaySettings,
) -> None:
    url = make_url(settings.database_url).set(port=1)  # nothing listens there
    unreachable = settings.model_copy(
        update={"database_url": url.render_as_string(hide_password=False)}
    )
    broken = Database(unreachable, schema="gateway")
    task_id = str(uuid.uuid4())
    try:
        async with instance(broken) as sender:
            with scoped(caller(new_tenant())):
                # The task's answer is stored already: its caller must still get it.
                await sender.send_notification(
                    task_id, status_event(task_id, a2a_pb2.TASK_STATE_COMPLETED, "done")
                )
    finally:
        await broken.dispose()


def _working_task(task_id: str) -> a2a_pb2.Task:
    task = a2a_pb2.Task(id=task_id, context_id="ctx")
    task.status.state = a2a_pb2.TASK_STATE_WORKING
    return task


async def test_a_write_queues_its_notifications_so_an_instance_dying_before_its_try_loses_none(
    db: Database,
) -> None:
    tenant, task_id = new_tenant(), str(uuid.uuid4())
    # The instance that writes the task's change dies before it tries the notification:
    # no sender of its ever runs.
    dying = PostgresTaskStore(db, push_lease_seconds=3600)
    context = caller(tenant).context()
    async with receiving() as receiver, instance(db) as survivor:
        await configure(db, tenant, task_id, receiver.url, "hook")
        first = await dying.save(
            _working_task(task_id),
            event=None,
            prev=None,
            prev_version=TaskVersion.MISSING,
            context=context,
        )
        event = status_event(task_id, a2a_pb2.TASK_STATE_COMPLETED, "done")
        done = _working_task(task_id)
        done.status.CopyFrom(event.status)
        await dying.save(done, event=event, prev=None, prev_version=first, context=context)
        with pytest.raises(ConcurrentTaskModificationError):  # a write that did not happen...
            await dying.save(done, event=event, prev=None, prev_version=first, context=context)
        queued = await waiting(db, tenant, task_id)  # ...queued nothing
        async with db.unit_of_work(tenant) as session:
            holder = await session.scalar(
                text("SELECT claimed_by FROM gateway.a2a_push_deliveries WHERE task_id = :t"),
                {"t": task_id},
            )
        await survivor.sweep()  # held for the dead instance's try: left alone
        untouched = len(receiver.tries)
        async with db.unit_of_work(tenant) as session:  # the lease ends
            await session.execute(
                text("UPDATE gateway.a2a_push_deliveries SET due_at = now() WHERE task_id = :t"),
                {"t": task_id},
            )
        await receiver.until(lambda: len(receiver.delivered) == 1, pump=survivor.sweep)
    left = await waiting(db, tenant, task_id)

    assert queued == 1  # the event's write queued it (the first write had no event)
    assert holder == f"{dying.push_instance}/w1"
    assert untouched == 0
    assert [said(body) for body in receiver.delivered] == ["done"]
    assert receiver.delivered[0]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert left == 0


async def test_the_writer_tries_what_its_write_queued_without_storing_it_again(
    db: Database,
) -> None:
    tenant, task_id = new_tenant(), str(uuid.uuid4())
    context = caller(tenant).context()
    async with receiving([503]) as receiver, instance(db) as sender:
        store = sender.tasks
        await configure(db, tenant, task_id, receiver.url, "hook")
        event = status_event(task_id, a2a_pb2.TASK_STATE_WORKING, "working")
        task = _working_task(task_id)
        task.status.CopyFrom(event.status)
        await store.save(
            task, event=event, prev=None, prev_version=TaskVersion.MISSING, context=context
        )
        queued = await waiting(db, tenant, task_id)
        with scoped(caller(tenant)):
            await sender.send_notification(task_id, event)  # what the a2a-sdk does next
        await receiver.until(lambda: len(receiver.delivered) == 1, pump=sender.sweep)
    left = await waiting(db, tenant, task_id)  # the instance stopped: its tries are over

    assert queued == 1
    assert [(status, said(body)) for status, body in receiver.tries] == [
        (503, "working"),
        (204, "working"),
    ]
    assert left == 0  # one row, tried twice, delivered: none stored a second time
