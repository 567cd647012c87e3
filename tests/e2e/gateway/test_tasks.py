"""Long tasks over both bindings: HITL as input-required, cancel, subscribe after a disconnect."""

from __future__ import annotations

import uuid

import pytest
from a2a.types import a2a_pb2
from a2a.utils.errors import TaskNotCancelableError

from tests.e2e.gateway.conftest import BINDINGS, GatewayProcess, GatewayStack, a2a_client
from tests.e2e.gateway.support import (
    as_json,
    bus_side,
    events_of,
    send_request,
    user_message,
)

pytestmark = pytest.mark.parametrize("binding", BINDINGS)

WORKING = a2a_pb2.TaskState.TASK_STATE_WORKING
INPUT_REQUIRED = a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = a2a_pb2.TaskState.TASK_STATE_COMPLETED
CANCELED = a2a_pb2.TaskState.TASK_STATE_CANCELED


async def test_a_worker_asking_a_human_is_input_required_and_the_next_message_answers(
    gateway: GatewayProcess, binding: str
) -> None:
    async with a2a_client(gateway.url, binding, agent="gw-asker") as client:
        asked = await events_of(client, send_request(user_message("greet someone")))
        task = asked[0].task
        question = asked[-1].status_update.status
        answered = await events_of(
            client, send_request(user_message("Grace", task_id=task.id, context_id=task.context_id))
        )
        stored = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id))

    assert question.state == INPUT_REQUIRED
    assert question.message.parts[0].text == "What is your name?"
    options = as_json(question.message.parts[1])["data"]["options"]
    assert [option["value"] for option in options] == ["Ada", "Grace"]
    assert answered[0].status_update.status.state == WORKING
    assert answered[-1].status_update.status.state == COMPLETED
    assert stored.status.state == COMPLETED
    assert as_json(stored.artifacts[0].parts[0])["data"] == {"text": "Hello, Grace!"}


async def test_a_blocking_message_to_a_worker_asking_a_human_returns_input_required(
    gateway: GatewayProcess, binding: str
) -> None:
    # Blocking: the gateway's fast path reads the worker's first answer itself. Whether
    # the question or the task's start comes first, the question is remembered, so the
    # next message answers it rather than starting a new turn.
    async with a2a_client(gateway.url, binding, agent="gw-asker") as client:
        client._config.streaming = False
        (asked,) = await events_of(client, send_request(user_message("greet someone")))
        task = asked.task
        (answered,) = await events_of(
            client, send_request(user_message("Ada", task_id=task.id, context_id=task.context_id))
        )

    assert task.status.state == INPUT_REQUIRED
    assert task.status.message.parts[0].text == "What is your name?"
    assert answered.task.status.state == COMPLETED
    assert as_json(answered.task.artifacts[0].parts[0])["data"] == {"text": "Hello, Ada!"}


async def test_cancelling_a_long_task_cancels_it_and_the_worker_stops(
    gateway: GatewayProcess, gateway_stack: GatewayStack, binding: str
) -> None:
    marker = uuid.uuid4().hex
    async with (
        bus_side(gateway_stack) as bus,
        a2a_client(gateway.url, binding, agent="gw-slow") as client,
    ):
        events = client.send_message(send_request(user_message({"text": marker})))
        first = await anext(events)
        task_id = first.task.id
        async for working in events:  # until the worker says how it works
            if working.status_update.status.message.parts:
                break
        canceled = await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task_id))
        await events.aclose()
        told = await bus.first(
            lambda topic, e: (
                topic == "action-results"
                and e.correlation_id == task_id
                and e.type == "a2a.answered"
            )
        )
        announced = await bus.first(
            lambda topic, e: (
                topic == "system-events" and e.type == "task.cancelled" and e.task_id == task_id
            )
        )
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task_id))
        stored = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))

    assert working.status_update.status.state == WORKING
    assert marker in working.status_update.status.message.parts[0].text
    assert canceled.status.state == CANCELED
    assert told.data["error"]["type"] == "cancelled"  # type: ignore[index,call-overload]
    assert announced.task_id == task_id
    assert stored.status.state == CANCELED


async def test_subscribing_after_a_disconnect_resumes_the_stream(
    gateway: GatewayProcess, gateway_stack: GatewayStack, binding: str
) -> None:
    marker = uuid.uuid4().hex
    async with (
        bus_side(gateway_stack) as bus,
        a2a_client(gateway.url, binding, agent="gw-relay") as client,
    ):
        events = client.send_message(send_request(user_message({"text": marker})))
        task_id = (await anext(events)).task.id
        await events.aclose()  # the caller goes away mid-task
        resumed = client.subscribe(a2a_pb2.SubscribeToTaskRequest(id=task_id))
        snapshot = await anext(resumed)
        await bus.open_gate(task_id, marker)
        rest = [event async for event in resumed]

    assert snapshot.task.id == task_id
    assert snapshot.task.status.state in (a2a_pb2.TaskState.TASK_STATE_SUBMITTED, WORKING)
    assert rest[-1].status_update.status.state == COMPLETED
    artifact = next(e.artifact_update.artifact for e in rest if e.HasField("artifact_update"))
    assert as_json(artifact.parts[0])["data"] == {"text": f"relayed: {marker.upper()}"}
