"""Gateways come and go: a task outlives the instance that took it; two instances share tasks."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
from a2a.types import a2a_pb2

from tests.e2e.gateway.conftest import GatewayProcess, GatewayStack, a2a_client
from tests.e2e.gateway.support import (
    PushReceiver,
    as_json,
    bus_side,
    events_of,
    send_request,
    task_in,
    until,
    user_message,
)

COMPLETED = a2a_pb2.TaskState.TASK_STATE_COMPLETED
CANCELED = a2a_pb2.TaskState.TASK_STATE_CANCELED


async def test_a_gateway_killed_mid_task_shows_it_completed_once_restarted(
    gateway_stack: GatewayStack,
) -> None:
    marker = uuid.uuid4().hex
    doomed = gateway_stack.new_gateway().start()
    async with bus_side(gateway_stack) as bus:
        async with a2a_client(doomed.url, "JSONRPC", agent="gw-relay") as client:
            client._config.streaming = False
            (sent,) = await events_of(
                client, send_request(user_message({"text": marker}), return_immediately=True)
            )
            task_id = sent.task.id
        doomed.kill()
        # The agent answers while no gateway is up: the answer waits on the bus.
        await bus.open_gate(task_id, marker)
        await bus.answered(task_id)
    doomed.start()
    async with a2a_client(doomed.url, "HTTP+JSON", agent="gw-relay") as client:
        done = await task_in(client, task_id, COMPLETED)

    assert as_json(done.artifacts[0].parts[0])["data"] == {"text": f"relayed: {marker.upper()}"}
    doomed.stop()


async def test_two_gateway_instances_serve_the_same_tasks(
    gateway: GatewayProcess, gateway_stack: GatewayStack
) -> None:
    marker = uuid.uuid4().hex
    second = gateway_stack.new_gateway().start()
    async with (
        bus_side(gateway_stack) as bus,
        a2a_client(gateway.url, "JSONRPC", agent="gw-relay") as first_client,
        a2a_client(second.url, "HTTP+JSON", agent="gw-relay") as second_client,
        a2a_client(gateway.url, "JSONRPC", agent="gw-slow") as slow_first,
        a2a_client(second.url, "HTTP+JSON", agent="gw-slow") as slow_second,
    ):
        first_client._config.streaming = False
        (sent,) = await events_of(
            first_client, send_request(user_message({"text": marker}), return_immediately=True)
        )
        task_id = sent.task.id
        seen = await second_client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
        listed = await second_client.list_tasks(
            a2a_pb2.ListTasksRequest(context_id=sent.task.context_id)
        )
        followed = second_client.subscribe(a2a_pb2.SubscribeToTaskRequest(id=task_id))
        snapshot = await anext(followed)
        await bus.open_gate(task_id, marker)
        rest = [event async for event in followed]

        # A task running on the first instance, cancelled through the second.
        slow = slow_first.send_message(send_request(user_message({"text": marker})))
        slow_id = (await anext(slow)).task.id
        canceled = await slow_second.cancel_task(a2a_pb2.CancelTaskRequest(id=slow_id))
        on_first = await task_in(slow_first, slow_id, CANCELED)
        told = await bus.first(
            lambda topic, e: (
                topic == "system-events" and e.type == "task.cancelled" and e.task_id == slow_id
            )
        )
        await slow.aclose()

    assert seen.id == task_id
    assert [t.id for t in listed.tasks] == [task_id]
    assert snapshot.task.id == task_id
    assert rest[-1].status_update.status.state == COMPLETED
    assert canceled.status.state == CANCELED
    assert on_first.status.state == CANCELED
    assert told.task_id == slow_id  # the worker was told, and stopped
    second.stop()


async def test_a_push_waiting_when_its_gateway_is_killed_is_delivered_by_another(
    gateway: GatewayProcess, gateway_stack: GatewayStack
) -> None:
    # A backoff long enough to kill the instance between the first try and the next.
    doomed = GatewayProcess(
        {**gateway_stack.gateway_env, "DISCO_GATEWAY_PUSH_BACKOFF_SECONDS": "6"},
        gateway_stack.logs,
    )
    gateway_stack.gateways.append(doomed)
    doomed.start()
    config = a2a_pb2.TaskPushNotificationConfig(token="tok-k")
    admin = await asyncpg.connect(gateway_stack.database_admin)
    try:
        async with PushReceiver(fail_first=1) as receiver:
            config.url = receiver.url
            async with a2a_client(doomed.url, "JSONRPC", agent="gw-echo") as client:
                client._config.streaming = False
                (sent,) = await events_of(client, send_request(user_message("ping"), push=config))
            task_id = sent.task.id

            async def completion_waits() -> bool | None:
                waiting = await admin.fetchval(
                    "SELECT count(*) FROM gateway.a2a_push_deliveries WHERE task_id = $1"
                    " AND body::text LIKE '%TASK_STATE_COMPLETED%'",
                    task_id,
                )
                return True if waiting and receiver.refused == 1 else None

            await until(completion_waits, what="the refused first push and the rest waiting")
            doomed.kill()
            _, body = await receiver.wait_for(lambda b: _completes(b, task_id))
            delivered = [b for _, b in receiver.received]
    finally:
        await admin.close()

    assert receiver.refused == 1
    assert delivered[-1] == body  # the completion came last, after what came before it
    assert len({json.dumps(b, sort_keys=True) for b in delivered}) == len(delivered)


def _completes(body: dict[str, Any], task_id: str) -> bool:
    return _tells(body, task_id, "TASK_STATE_COMPLETED")


def _tells(body: dict[str, Any], task_id: str, state: str) -> bool:
    """Whether a push notification says task ``task_id`` is in ``state``."""
    for kind, id_field in (("statusUpdate", "taskId"), ("task", "id")):
        part = body.get(kind) or {}
        if part.get(id_field) == task_id:
            return bool(part.get("status", {}).get("state") == state)
    return False


async def test_a_cancel_through_another_instance_pushes_the_canceled_state_at_once(
    gateway: GatewayProcess, gateway_stack: GatewayStack
) -> None:
    other = GatewayProcess(gateway_stack.gateway_env, gateway_stack.logs)
    gateway_stack.gateways.append(other)
    other.start()
    config = a2a_pb2.TaskPushNotificationConfig(token="tok-c")
    try:
        async with (
            PushReceiver() as receiver,
            a2a_client(gateway.url, "JSONRPC", agent="gw-slow") as running_here,
            a2a_client(other.url, "JSONRPC", agent="gw-slow") as elsewhere,
        ):
            config.url = receiver.url
            running_here._config.streaming = False
            (sent,) = await events_of(
                running_here,
                send_request(
                    user_message({"text": uuid.uuid4().hex}), return_immediately=True, push=config
                ),
            )
            canceled = await elsewhere.cancel_task(a2a_pb2.CancelTaskRequest(id=sent.task.id))
            # Well within the lease (25 s) its write held the notification for.
            _, body = await receiver.wait_for(lambda b: _cancels(b, sent.task.id), timeout=10)
            # The instance running it hears of the cancel too, and pushes nothing more of it.
            await task_in(running_here, sent.task.id, CANCELED)
            await receiver.wait_for(lambda b: _cancels(b, sent.task.id))
            cancels = [b for _, b in receiver.received if _cancels(b, sent.task.id)]
    finally:
        other.stop()

    assert canceled.status.state == CANCELED
    assert body["statusUpdate"]["taskId"] == sent.task.id
    assert len(cancels) == 1


def _cancels(body: dict[str, Any], task_id: str) -> bool:
    return _tells(body, task_id, "TASK_STATE_CANCELED")
