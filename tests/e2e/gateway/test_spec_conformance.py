"""Where the A2A v1.0 specification and clients other than the a2a-sdk's expect something the
SDK's own server does not do, the gateway does as the specification says, on every binding."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import grpc
import grpc.aio
import httpx
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

from tests.e2e.gateway.conftest import (
    BINDINGS,
    PUBLIC_AGENT,
    GatewayProcess,
    a2a_client,
    bearer,
    token,
)
from tests.e2e.gateway.support import events_of, send_request, user_message

DetailT = TypeVar("DetailT", bound=Message)

V1 = {"A2A-Version": "1.0"}
INPUT_REQUIRED = a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = a2a_pb2.TaskState.TASK_STATE_COMPLETED


def rpc_body(method: str, params: dict[str, Any], request_id: str = "r-1") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def send_params(text: str, **metadata: str) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"text": text}}],
    }
    if metadata:
        message["metadata"] = metadata
    return {"message": message}


@pytest.fixture
async def stub(gateway: GatewayProcess) -> AsyncIterator[a2a_pb2_grpc.A2AServiceStub]:
    async with grpc.aio.insecure_channel(gateway.grpc_address) as channel:
        yield a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]


def details_of(error: grpc.aio.AioRpcError, kind: type[DetailT]) -> list[DetailT]:
    """The details of ``kind`` in the ``google.rpc.Status`` of a failed call."""
    status = status_pb2.Status()
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status.ParseFromString(value)
    found = []
    for detail in status.details:
        unpacked = kind()
        if detail.Unpack(unpacked):
            found.append(unpacked)
    return found


async def test_json_rpc_answers_at_the_endpoint_url_with_a_trailing_slash(
    gateway: GatewayProcess,
) -> None:
    text = uuid.uuid4().hex
    async with httpx.AsyncClient(base_url=gateway.url, headers={**bearer(), **V1}) as http:
        agent = await http.post("/a2a/gw-echo/", json=rpc_body("SendMessage", send_params(text)))
        own = await http.post(
            "/a2a/", json=rpc_body("SendMessage", send_params(text, agent="gw-echo"), "r-2")
        )

    for response, request_id in ((agent, "r-1"), (own, "r-2")):
        assert response.status_code == 200, response.text
        body = response.json()
        assert (body["jsonrpc"], body["id"]) == ("2.0", request_id)
        task = body["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"][0]["data"] == {"text": f"echo: {text}"}


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_next_message_naming_only_its_task_is_in_the_tasks_context(
    gateway: GatewayProcess, binding: str
) -> None:
    # A tool's input-required (the next message is a new turn) and a worker's question
    # to a human (the next message is the human's answer): neither names the context.
    async with a2a_client(gateway.url, binding, agent="gw-city") as client:
        client._config.streaming = False
        (asked,) = await events_of(client, send_request(user_message("weather please")))
        (answered,) = await events_of(
            client, send_request(user_message("city:Lisbon", task_id=asked.task.id))
        )
    async with a2a_client(gateway.url, binding, agent="gw-asker") as client:
        question = await events_of(client, send_request(user_message("greet someone")))
        task = question[0].task
        answer = await events_of(client, send_request(user_message("Ada", task_id=task.id)))

    assert asked.task.status.state == INPUT_REQUIRED
    assert answered.task.id == asked.task.id
    assert answered.task.context_id == asked.task.context_id
    assert answered.task.status.state == COMPLETED
    assert question[-1].status_update.status.state == INPUT_REQUIRED
    assert answer[-1].status_update.status.state == COMPLETED
    assert {e.status_update.context_id for e in answer if e.HasField("status_update")} == {
        task.context_id
    }
    stored = answer[-1].status_update
    assert stored.task_id == task.id


async def test_listing_tasks_without_a_token_is_unauthenticated_on_every_binding(
    gateway: GatewayProcess, stub: a2a_pb2_grpc.A2AServiceStub
) -> None:
    # At a public agent: a caller without a token may call it, but not list tasks (every
    # such caller is the same user).
    async with httpx.AsyncClient(base_url=gateway.url, headers=V1) as http:
        rest = await http.get(f"/a2a/{PUBLIC_AGENT}/tasks")
        jsonrpc = await http.post(f"/a2a/{PUBLIC_AGENT}", json=rpc_body("ListTasks", {}))
        with_token = await http.get(f"/a2a/{PUBLIC_AGENT}/tasks", headers=bearer())
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.ListTasks(
            a2a_pb2.ListTasksRequest(tenant=PUBLIC_AGENT), metadata=(("a2a-version", "1.0"),)
        )

    assert rest.status_code == 401
    assert rest.headers["www-authenticate"].startswith("Bearer")
    assert rest.headers["content-type"] == "application/json"
    error = rest.json()["error"]
    assert (error["code"], error["status"]) == (401, "UNAUTHENTICATED")
    assert "ListTasks needs a bearer token" in error["message"]
    assert jsonrpc.status_code == 401
    assert jsonrpc.headers["www-authenticate"].startswith("Bearer")
    body = jsonrpc.json()
    assert (body["jsonrpc"], body["id"]) == ("2.0", "r-1")
    assert body["error"]["code"] == -32600
    assert body["error"]["data"][0]["reason"] == "UNAUTHENTICATED"
    assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "ListTasks needs a bearer token" in (raised.value.details() or "")
    assert with_token.status_code == 200


async def test_http_json_answers_are_labelled_application_json(gateway: GatewayProcess) -> None:
    text = uuid.uuid4().hex
    async with httpx.AsyncClient(base_url=gateway.url, headers={**bearer(), **V1}) as http:
        sent = await http.post("/a2a/gw-echo/message:send", json=send_params(text))
        task_id = sent.json()["task"]["id"]
        answers = [
            sent,
            await http.get(f"/a2a/gw-echo/tasks/{task_id}"),
            await http.get("/a2a/gw-echo/tasks"),
            await http.get("/a2a/gw-echo/extendedAgentCard"),
            await http.get("/a2a/gw-echo/tasks/no-such-task"),
        ]

    assert [a.status_code for a in answers] == [200, 200, 200, 200, 404]
    assert {a.headers["content-type"] for a in answers} == {"application/json"}


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml", None]
)
async def test_a_json_rpc_request_not_sent_as_json_is_content_type_not_supported(
    gateway: GatewayProcess, content_type: str | None
) -> None:
    payload = json.dumps(rpc_body("GetTask", {"id": "t"}, "r-9")).encode()
    headers = {**bearer(), **V1}
    if content_type is not None:
        headers["Content-Type"] = content_type
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        refused = await http.post("/a2a/gw-echo", content=payload, headers=headers)
        accepted = await http.post(
            "/a2a/gw-echo",
            content=payload,
            headers={**headers, "Content-Type": "application/json; charset=utf-8"},
        )

    assert refused.status_code == 200
    body = refused.json()
    assert (body["jsonrpc"], body["id"]) == ("2.0", "r-9")
    assert body["error"]["code"] == -32005  # ContentTypeNotSupportedError, not -32700
    assert "application/json" in body["error"]["message"]
    assert accepted.json()["error"]["code"] == -32001  # read as JSON: the task is unknown


async def test_a_grpc_call_naming_no_agent_says_its_tenant_field_is_empty(
    stub: a2a_pb2_grpc.A2AServiceStub,
) -> None:
    request = send_request(user_message({"name": "Ada"}))  # no tenant: no agent named
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.SendMessage(request, metadata=(("a2a-version", "1.0"),))
    named = send_request(user_message({"name": "Ada"}))
    named.tenant = PUBLIC_AGENT
    answered = await stub.SendMessage(named, metadata=(("a2a-version", "1.0"),))

    error = raised.value
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "`tenant` field is empty" in (error.details() or "")
    (bad_request,) = details_of(error, error_details_pb2.BadRequest)
    assert [violation.field for violation in bad_request.field_violations] == ["tenant"]
    assert answered.task.status.state == COMPLETED  # with the agent named, it is called


async def test_an_unsupported_a2a_version_over_grpc_is_unimplemented(
    stub: a2a_pb2_grpc.A2AServiceStub,
) -> None:
    request = a2a_pb2.GetTaskRequest(id="t", tenant="gw-echo")
    metadata = (("authorization", f"Bearer {token()}"), ("a2a-version", "2.0"))
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.GetTask(request, metadata=metadata)
    stream = stub.SendStreamingMessage(
        send_request(user_message({"text": "hi"})), metadata=metadata
    )
    with pytest.raises(grpc.aio.AioRpcError) as streamed:
        await anext(aiter(stream))

    for error in (raised.value, streamed.value):
        assert error.code() == grpc.StatusCode.UNIMPLEMENTED
        assert "'2.0' is not supported" in (error.details() or "")
        infos = details_of(error, error_details_pb2.ErrorInfo)
        assert [(info.domain, info.reason) for info in infos] == [
            ("a2a-protocol.org", "VERSION_NOT_SUPPORTED")
        ]
