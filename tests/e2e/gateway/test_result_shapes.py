"""Every shape of answer the gateway maps, from ``examples/a2a_conformance.py``, driven with the
a2a-sdk client on each binding, checked as it came on the wire.

For JSON-RPC and HTTP+JSON the bytes the client received are recorded under it
(:class:`~tests.e2e.gateway.wire.RecordingTransport`); over gRPC the messages it
received are the wire. Each is checked twice: it is exactly the specification's
JSON of its object (:func:`~tests.e2e.gateway.wire.spec_json`: camelCase members,
enum names, nothing else), and it is the JSON this shape must produce.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.client import Client
from a2a.types import a2a_pb2
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from tests.e2e.gateway.conftest import (
    BINDINGS,
    GatewayProcess,
    GatewayStack,
    a2a_client,
)
from tests.e2e.gateway.support import bus_side, events_of, send_request, user_message
from tests.e2e.gateway.wire import Exchange, RecordingTransport, spec_json

pytestmark = pytest.mark.parametrize("binding", BINDINGS)

_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
_REST_PATHS = {
    "SendMessage": "/message:send",
    "SendStreamingMessage": "/message:stream",
    "SubscribeToTask": ":subscribe",
    "CancelTask": ":cancel",
}
ARTIFACTS = {
    "text": {"artifactId": "text", "name": "text", "parts": [{"text": "Hello, A2A."}]},
    "file": {
        "artifactId": "file",
        "name": "hello.txt",
        "parts": [
            {
                "raw": base64.b64encode(b"Hello, A2A.\n").decode(),
                "filename": "hello.txt",
                "mediaType": "text/plain",
            }
        ],
    },
    "file-url": {
        "artifactId": "file-url",
        "name": "logo",
        "parts": [
            {
                "url": "https://a2a-protocol.org/latest/assets/a2a-logo-black.svg",
                "filename": "a2a-logo.svg",
                "mediaType": "image/svg+xml",
            }
        ],
    },
    "data": {
        "artifactId": "data",
        "name": "figures",
        "parts": [{"data": {"answer": 42, "units": ["m", "s"], "ok": True}}],
    },
}


class Caller:
    """An a2a-sdk client of the conformance agent over one binding, recording the wire."""

    def __init__(self, client: Client, transport: RecordingTransport, binding: str) -> None:
        self.client = client
        self.transport = transport
        self.binding = binding

    def streaming(self, on: bool) -> None:
        self.client._config.streaming = on

    def exchange(self, method: str) -> Exchange:
        """The last HTTP exchange of A2A method ``method``."""
        if self.binding == "JSONRPC":
            found = [
                e
                for e in self.transport.posted()
                if json.loads(e.request_body).get("method") == method
            ]
        else:
            found = self.transport.posted(_REST_PATHS[method])
        assert found, f"no {method} on the wire"
        return found[-1]

    def wire(self, method: str, received: list[Message], kind: type[Message]) -> list[Any]:
        """What ``method``'s answer carried, as JSON: each checked to be the spec's JSON of
        ``kind`` and to be what the client made of it."""
        if self.binding == "GRPC":
            documents: list[Any] = [MessageToDict(message) for message in received]
        else:
            exchange = self.exchange(method)
            assert exchange.status == 200
            streamed = method in ("SendStreamingMessage", "SubscribeToTask")
            expected_type = "text/event-stream" if streamed else "application/json"
            assert exchange.content_type.startswith(expected_type)
            body = exchange.json()
            bodies = body if isinstance(body, list) else [body]
            if self.binding == "JSONRPC":
                request_id = json.loads(exchange.request_body)["id"]
                for envelope in bodies:
                    assert set(envelope) == {"jsonrpc", "id", "result"}, envelope
                    assert (envelope["jsonrpc"], envelope["id"]) == ("2.0", request_id)
                documents = [envelope["result"] for envelope in bodies]
            else:
                documents = bodies
            assert documents == [MessageToDict(message) for message in received]
        return [spec_json(document, kind) for document in documents]

    async def send(
        self, shape: str, **fields: str
    ) -> tuple[list[a2a_pb2.StreamResponse], list[Any]]:
        """Send ``{"shape": shape}`` (a blocking send unless streaming); the events and
        their wire JSON."""
        events = await events_of(
            self.client, send_request(user_message({"shape": shape}, **fields))
        )
        method = "SendStreamingMessage" if self.client._config.streaming else "SendMessage"
        return events, self.wire(method, list(events), a2a_pb2.StreamResponse)


@contextlib.asynccontextmanager
async def caller(gateway: GatewayProcess, binding: str, agent: str) -> AsyncIterator[Caller]:
    transport = RecordingTransport()
    async with a2a_client(gateway.url, binding, agent=agent, transport=transport) as client:
        yield Caller(client, transport, binding)


def stamped(status: dict[str, Any]) -> dict[str, Any]:
    """A status without its timestamp, once the timestamp is checked (RFC 3339, UTC)."""
    assert _TIMESTAMP.match(status["timestamp"]), status
    return {key: value for key, value in status.items() if key != "timestamp"}


def agent_message(task_id: str | None, context_id: str, *parts: dict[str, Any]) -> Any:
    """Matches an agent's message with these parts (any message id)."""
    message: dict[str, Any] = {"contextId": context_id, "role": "ROLE_AGENT", "parts": list(parts)}
    if task_id is not None:
        message["taskId"] = task_id
    return message


def without_id(message: dict[str, Any]) -> dict[str, Any]:
    assert message["messageId"]
    return {key: value for key, value in message.items() if key != "messageId"}


def updates(wire: list[Any], kind: str) -> list[dict[str, Any]]:
    return [event[kind] for event in wire if kind in event]


async def test_a_completed_task_carries_text_file_file_url_and_data_artifacts(
    gateway: GatewayProcess, conformance_agent: str, binding: str
) -> None:
    async with caller(gateway, binding, conformance_agent) as a2a:
        a2a.streaming(False)
        _, (blocking,) = await a2a.send("artifacts")
        a2a.streaming(True)
        streamed = {shape: (await a2a.send(shape))[1] for shape in ARTIFACTS}

    task = blocking["task"]
    assert set(task) == {"id", "contextId", "status", "artifacts", "history"}
    assert stamped(task["status"]) == {"state": "TASK_STATE_COMPLETED"}
    assert task["artifacts"] == list(ARTIFACTS.values())
    (sent,) = task["history"]
    assert (sent["role"], sent["parts"], sent["taskId"]) == (
        "ROLE_USER",
        [{"data": {"shape": "artifacts"}}],
        task["id"],
    )
    for shape, wire in streamed.items():
        first = wire[0]["task"]
        assert stamped_or_bare(first["status"]) == {"state": "TASK_STATE_SUBMITTED"}
        ids = {"taskId": first["id"], "contextId": first["contextId"]}
        assert updates(wire, "artifactUpdate") == [
            {**ids, "artifact": ARTIFACTS[shape], "lastChunk": True}
        ]
        last = wire[-1]["statusUpdate"]
        assert {**last, "status": stamped(last["status"])} == {
            **ids,
            "status": {"state": "TASK_STATE_COMPLETED"},
        }


def stamped_or_bare(status: dict[str, Any]) -> dict[str, Any]:
    return stamped(status) if "timestamp" in status else status


async def test_a_direct_message_answers_instead_of_a_task(
    gateway: GatewayProcess, conformance_agent: str, binding: str
) -> None:
    context_id = str(uuid.uuid4())
    async with caller(gateway, binding, conformance_agent) as a2a:
        a2a.streaming(False)
        _, (blocking,) = await a2a.send("message", context_id=context_id)
        a2a.streaming(True)
        _, streamed = await a2a.send("message", context_id=context_id)

    text = {"text": "Hello from a direct message: no task was kept."}
    # No task: the message names none.
    assert list(blocking) == ["message"]
    assert without_id(blocking["message"]) == agent_message(None, context_id, text)
    if len(streamed) == 1:
        assert without_id(streamed[0]["message"]) == agent_message(None, context_id, text)
    else:
        # A Worker starts a task (task.started): a caller streaming it may see the task
        # before the answer comes, and A2A allows no message after a task. The task then
        # completes with the message.
        task_id = streamed[0]["task"]["id"]
        last = streamed[-1]["statusUpdate"]
        status = stamped(last["status"])
        assert status["state"] == "TASK_STATE_COMPLETED"
        assert without_id(status["message"]) == agent_message(task_id, context_id, text)


async def test_input_required_then_completed_on_the_next_message(
    gateway: GatewayProcess, conformance_agent: str, binding: str
) -> None:
    async with caller(gateway, binding, conformance_agent) as a2a:
        _, asked = await a2a.send("ask")
        task = asked[0]["task"]
        a2a.streaming(False)
        # The next message names its task only: it is in the task's context.
        events = await events_of(
            a2a.client, send_request(user_message("Grace", task_id=task["id"]))
        )
        (answered,) = a2a.wire("SendMessage", list(events), a2a_pb2.StreamResponse)

    question = asked[-1]["statusUpdate"]
    status = stamped(question["status"])
    assert status["state"] == "TASK_STATE_INPUT_REQUIRED"
    options = [{"label": name, "value": name} for name in ("Ada", "Grace")]
    assert without_id(status["message"]) == agent_message(
        task["id"],
        task["contextId"],
        {"text": "What is your name?"},
        {"data": {"options": options, "timeout_seconds": 3600}},
    )
    done = answered["task"]
    assert (done["id"], done["contextId"]) == (task["id"], task["contextId"])
    assert stamped(done["status"]) == {"state": "TASK_STATE_COMPLETED"}
    assert done["artifacts"] == [
        {"artifactId": "greeting", "name": "greeting", "parts": [{"text": "Hello, Grace!"}]}
    ]
    said = [m["parts"] for m in done["history"] if m["role"] == "ROLE_USER"]
    assert said == [[{"data": {"shape": "ask"}}], [{"text": "Grace"}]]


async def test_rejected_and_failed_tasks_say_why(
    gateway: GatewayProcess, conformance_agent: str, binding: str
) -> None:
    async with caller(gateway, binding, conformance_agent) as a2a:
        a2a.streaming(False)
        _, (rejected,) = await a2a.send("reject")
        _, (failed,) = await a2a.send("fail")
        _, (unknown,) = await a2a.send("juggle")

    for answer, state, parts in (
        (
            rejected,
            "TASK_STATE_REJECTED",
            [{"text": "This agent does not take that kind of work."}],
        ),
        (
            failed,
            "TASK_STATE_FAILED",
            [
                {"text": "the work broke down, as asked"},
                {
                    "data": {
                        "error": {
                            "type": "RuntimeError",
                            "message": "the work broke down, as asked",
                        }
                    }
                },
            ],
        ),
    ):
        task = answer["task"]
        status = stamped(task["status"])
        assert status["state"] == state
        assert without_id(status["message"]) == agent_message(task["id"], task["contextId"], *parts)
        assert "artifacts" not in task
    assert "no shape 'juggle'" in unknown["task"]["status"]["message"]["parts"][0]["text"]


async def test_status_updates_stream_and_an_artifact_comes_in_chunks(
    gateway: GatewayProcess, conformance_agent: str, binding: str
) -> None:
    async with caller(gateway, binding, conformance_agent) as a2a:
        _, wire = await a2a.send("stream")

    task = wire[0]["task"]
    ids = {"taskId": task["id"], "contextId": task["contextId"]}
    said = [
        (
            update["status"]["state"],
            [part["text"] for part in update["status"]["message"]["parts"]],
        )
        for update in updates(wire, "statusUpdate")
        if "message" in update["status"]  # task.started's working says nothing
    ]
    assert said == [
        ("TASK_STATE_WORKING", ["Starting the story..."]),
        ("TASK_STATE_WORKING", ["The story is told."]),
        ("TASK_STATE_COMPLETED", ["Done."]),
    ]
    chunk = {"artifactId": "story", "name": "story"}
    assert updates(wire, "artifactUpdate") == [
        {**ids, "artifact": {**chunk, "parts": [{"text": "Once upon a time, "}]}},
        {**ids, "artifact": {**chunk, "parts": [{"text": "an agent answered "}]}, "append": True},
        {
            **ids,
            "artifact": {**chunk, "parts": [{"text": "in chunks."}]},
            "append": True,
            "lastChunk": True,
        },
    ]
    kinds = [next(iter(event)) for event in wire]
    assert kinds[0] == "task"
    assert kinds.index("artifactUpdate") < len(kinds) - 1  # the chunks come before the end
    assert wire[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_long_task_is_subscribed_to_again_and_cancelled(
    gateway: GatewayProcess, gateway_stack: GatewayStack, conformance_agent: str, binding: str
) -> None:
    async with bus_side(gateway_stack) as bus, caller(gateway, binding, conformance_agent) as a2a:
        stream = a2a.client.send_message(send_request(user_message({"shape": "long"})))
        received = [await anext(stream)]
        while not received[-1].status_update.status.message.parts:
            received.append(await anext(stream))
        await stream.aclose()  # the caller goes away while the task works on
        sent = a2a.wire("SendStreamingMessage", received, a2a_pb2.StreamResponse)
        task_id = sent[0]["task"]["id"]

        resumed = a2a.client.subscribe(a2a_pb2.SubscribeToTaskRequest(id=task_id))
        again = [await anext(resumed)]
        while not again[-1].status_update.status.message.parts:
            again.append(await anext(resumed))
        await resumed.aclose()
        subscribed = a2a.wire("SubscribeToTask", again, a2a_pb2.StreamResponse)

        canceled = await a2a.client.cancel_task(a2a_pb2.CancelTaskRequest(id=task_id))
        (cancel_wire,) = a2a.wire("CancelTask", [canceled], a2a_pb2.Task)
        stopped = await bus.first(
            lambda topic, e: (
                topic == "system-events" and e.type == "task.cancelled" and e.task_id == task_id
            )
        )

    working = sent[-1]["statusUpdate"]["status"]
    assert working["state"] == "TASK_STATE_WORKING"
    assert working["message"]["parts"][0]["text"].startswith("Still working (")
    snapshot = subscribed[0]["task"]  # the task as it stands, then what follows
    assert (snapshot["id"], snapshot["status"]["state"]) == (task_id, "TASK_STATE_WORKING")
    later = subscribed[-1]["statusUpdate"]
    assert later["taskId"] == task_id
    assert later["status"]["message"]["parts"][0]["text"].startswith("Still working (")
    assert (cancel_wire["id"], cancel_wire["status"]["state"]) == (task_id, "TASK_STATE_CANCELED")
    assert stopped.task_id == task_id  # the Worker stopped its handler
