"""Gateways come and go: a task outlives the instance that took it; two instances share tasks."""

from __future__ import annotations

import uuid

from a2a.types import a2a_pb2

from tests.e2e.gateway.conftest import GatewayProcess, GatewayStack, a2a_client
from tests.e2e.gateway.support import (
    as_json,
    bus_side,
    events_of,
    send_request,
    task_in,
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
        await bus.first(
            lambda topic, e: (
                topic == "action-results"
                and e.correlation_id == task_id
                and e.type == "a2a.answered"
            )
        )
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
