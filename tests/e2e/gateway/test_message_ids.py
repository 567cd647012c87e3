"""The caller's A2A message reaches the agent (``a2amessage``), and a message sent again with
the same ``messageId`` is the same message: one task, one request (an agent may see the very
same request envelope again, which it deduplicates), whichever gateway instance each sending
reaches."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from a2a.client import ClientCallContext
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.types import a2a_pb2
from google.protobuf.json_format import MessageToDict

from disco_common.a2a import A2A_MESSAGE_ATTRIBUTE
from tests.e2e.gateway.conftest import (
    BINDINGS,
    PUBLIC_AGENT,
    GatewayProcess,
    GatewayStack,
    a2a_client,
)
from tests.e2e.gateway.support import bus_side, events_of, send_request, user_message

COMPLETED = a2a_pb2.TaskState.TASK_STATE_COMPLETED
WORKING = a2a_pb2.TaskState.TASK_STATE_WORKING
REQUESTED = "conformance.requested"


def shape(name: str, *, message_id: str | None = None, task_id: str = "") -> a2a_pb2.Message:
    message = user_message({"shape": name} if not task_id else name, task_id=task_id)
    if message_id is not None:
        message.message_id = message_id
    return message


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_agent_is_told_the_callers_message_on_every_binding(
    gateway: GatewayProcess, gateway_stack: GatewayStack, conformance_agent: str, binding: str
) -> None:
    message = shape("context")
    message.metadata.update({"trace": "t-1", "priority": 2})
    message.extensions.append("urn:example:citations")
    message.reference_task_ids.append("an-earlier-task")
    request = send_request(message)
    request.configuration.accepted_output_modes.extend(["application/json", "text/plain"])
    extensions = ["urn:example:trace", "urn:example:citations"]
    call = ClientCallContext(
        service_parameters=ServiceParametersFactory.create([with_a2a_extensions(extensions)])
    )
    async with (
        bus_side(gateway_stack) as bus,
        a2a_client(gateway.url, binding, agent=conformance_agent) as client,
    ):
        client._config.streaming = False
        (answer,) = [event async for event in client.send_message(request, context=call)]
        task_id = answer.task.id
        (sent,) = await bus.requests_for(task_id, REQUESTED)

    told = {
        "messageId": message.message_id,
        "metadata": {"trace": "t-1", "priority": 2},
        "extensions": ["urn:example:citations"],
        "requestedExtensions": sorted(extensions),
        "referenceTaskIds": ["an-earlier-task"],
        "acceptedOutputModes": ["application/json", "text/plain"],
    }
    (artifact,) = answer.task.artifacts
    assert MessageToDict(artifact.parts[0])["data"] == {"a2a": told}
    # On the bus: a CloudEvents extension attribute, a string of the context's JSON, that
    # any Kafka client reads without disco.
    wire = json.loads(sent.to_kafka_value())
    assert isinstance(wire[A2A_MESSAGE_ATTRIBUTE], str)
    assert json.loads(wire[A2A_MESSAGE_ATTRIBUTE]) == told
    assert sent.task_id == task_id


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_message_sent_again_to_another_instance_is_the_same_task(
    gateway: GatewayProcess,
    twin_gateway: GatewayProcess,
    gateway_stack: GatewayStack,
    conformance_agent: str,
    binding: str,
) -> None:
    message_id = str(uuid.uuid4())
    async with bus_side(gateway_stack) as bus:
        async with a2a_client(gateway.url, binding, agent=conformance_agent) as client:
            client._config.streaming = False
            (first,) = await events_of(client, send_request(shape("data", message_id=message_id)))
        # The caller did not hear back and sends the same message again, through another
        # instance: blocking, then streaming.
        async with a2a_client(twin_gateway.url, binding, agent=conformance_agent) as client:
            client._config.streaming = False
            (again,) = await events_of(client, send_request(shape("data", message_id=message_id)))
            client._config.streaming = True
            streamed = await events_of(client, send_request(shape("data", message_id=message_id)))
            stored = await client.get_task(a2a_pb2.GetTaskRequest(id=first.task.id))
        published = await bus.requests_for(first.task.id, REQUESTED)
        answered = bus.matching(
            lambda topic, e: (
                topic == "action-results"
                and e.type == "a2a.answered"
                and e.correlation_id == first.task.id
            )
        )

    assert first.task.status.state == COMPLETED
    assert MessageToDict(again.task) == MessageToDict(first.task) == MessageToDict(stored)
    # A stream of a task that is over: the task, as it stands.
    assert [MessageToDict(event) for event in streamed] == [{"task": MessageToDict(stored)}]
    # A sending again may repeat the request before it finds the message's turn taken:
    # the very same envelope, which the agent deduplicates. It answered once.
    assert {envelope.id for envelope in published} == {f"{first.task.id}.request"}
    assert len(answered) == 1


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_message_sent_again_while_its_task_works_follows_that_task(
    gateway: GatewayProcess, twin_gateway: GatewayProcess, conformance_agent: str, binding: str
) -> None:
    message_id = str(uuid.uuid4())
    async with a2a_client(gateway.url, binding, agent=conformance_agent) as client:
        stream = client.send_message(send_request(shape("long", message_id=message_id)))
        task_id = (await anext(stream)).task.id
        async with a2a_client(twin_gateway.url, binding, agent=conformance_agent) as twin:
            # Streaming: the task as it stands, then its updates.
            resumed = twin.send_message(send_request(shape("long", message_id=message_id)))
            snapshot = await anext(resumed)
            update = await anext(resumed)
            while not update.status_update.status.message.parts:
                update = await anext(resumed)
            await resumed.aclose()
            # Blocking with returnImmediately: the task, at once.
            twin._config.streaming = False
            (at_once,) = await events_of(
                twin, send_request(shape("long", message_id=message_id), return_immediately=True)
            )
        await stream.aclose()
        canceled = await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task_id))

    assert snapshot.task.id == task_id
    assert snapshot.task.status.state == WORKING
    assert update.status_update.task_id == task_id
    assert update.status_update.status.message.parts[0].text.startswith("Still working")
    assert at_once.task.id == task_id
    assert canceled.status.state == a2a_pb2.TaskState.TASK_STATE_CANCELED


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_direct_message_and_a_next_message_sent_again_get_what_the_first_got(
    gateway: GatewayProcess,
    twin_gateway: GatewayProcess,
    gateway_stack: GatewayStack,
    conformance_agent: str,
    binding: str,
) -> None:
    greeted, asked, answer = (str(uuid.uuid4()) for _ in range(3))
    async with bus_side(gateway_stack) as bus:
        async with a2a_client(gateway.url, binding, agent=conformance_agent) as client:
            client._config.streaming = False
            (reply,) = await events_of(client, send_request(shape("message", message_id=greeted)))
            (question,) = await events_of(client, send_request(shape("ask", message_id=asked)))
            task_id = question.task.id
            next_message = shape("Ada", message_id=answer, task_id=task_id)
            (done,) = await events_of(client, send_request(next_message))
        async with a2a_client(twin_gateway.url, binding, agent=conformance_agent) as twin:
            twin._config.streaming = False
            (reply_again,) = await events_of(
                twin, send_request(shape("message", message_id=greeted))
            )
            (done_again,) = await events_of(twin, send_request(next_message))
        published = await bus.requests_for(task_id, REQUESTED)
        answers = bus.matching(
            lambda topic, e: (
                topic == "notification-events"
                and e.task_id == task_id
                and e.type == "conformance.answered"
            )
        )

    # The direct message is the one the agent answered with (no task holds it).
    assert reply.WhichOneof("payload") == "message"
    assert MessageToDict(reply_again) == MessageToDict(reply)
    assert done.task.status.state == COMPLETED
    assert MessageToDict(done_again.task) == MessageToDict(done.task)
    said = [m.message_id for m in done.task.history if m.role == a2a_pb2.Role.ROLE_USER]
    assert said == [asked, answer]
    assert {envelope.id for envelope in published} == {f"{task_id}.request"}
    assert len(answers) == 1  # and one answer to its question
    told: dict[str, Any] = json.loads(answers[0].extensions[A2A_MESSAGE_ATTRIBUTE])
    assert told["messageId"] == answer  # the answer carries the caller's message too


async def test_callers_without_a_token_are_not_matched_by_message_id(
    gateway: GatewayProcess,
) -> None:
    # They share one user: matching their first messages by id would hand one caller the
    # task of another who used the same id.
    message_id = str(uuid.uuid4())
    async with a2a_client(gateway.url, "JSONRPC", tenant=None, agent=PUBLIC_AGENT) as client:
        client._config.streaming = False
        tasks = [
            (await events_of(client, send_request(_hello(message_id))))[0].task for _ in range(2)
        ]

    assert [task.status.state for task in tasks] == [COMPLETED, COMPLETED]
    assert tasks[0].id != tasks[1].id


def _hello(message_id: str) -> a2a_pb2.Message:
    message = user_message({"name": "Ada"})
    message.message_id = message_id
    return message
