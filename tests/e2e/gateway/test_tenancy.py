"""Tenants and tokens: tenant B never reaches tenant A's tasks; no token, no entry (but public)."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
from a2a.types import a2a_pb2
from a2a.utils.errors import TaskNotFoundError

from tests.e2e.gateway.conftest import (
    BINDINGS,
    OTHER_TENANT,
    PUBLIC_AGENT,
    TENANT,
    GatewayProcess,
    GatewayStack,
    a2a_client,
    bearer,
)
from tests.e2e.gateway.support import bus_side, events_of, send_request, user_message
from tests.fixtures.tokens import signed_with_the_dev_secret


@pytest.mark.parametrize("binding", BINDINGS)
async def test_another_tenant_can_neither_get_list_cancel_subscribe_nor_configure_pushes(
    gateway: GatewayProcess, binding: str
) -> None:
    async with a2a_client(gateway.url, binding, agent="gw-slow") as owner:
        stream = owner.send_message(send_request(user_message({"text": uuid.uuid4().hex})))
        task = (await anext(stream)).task
        async with a2a_client(gateway.url, binding, tenant=OTHER_TENANT, agent="gw-slow") as other:
            with pytest.raises(TaskNotFoundError):
                await other.get_task(a2a_pb2.GetTaskRequest(id=task.id))
            listed = await other.list_tasks(a2a_pb2.ListTasksRequest(context_id=task.context_id))
            with pytest.raises(TaskNotFoundError):
                await other.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id))
            with pytest.raises(TaskNotFoundError):
                await anext(other.subscribe(a2a_pb2.SubscribeToTaskRequest(id=task.id)))
            with pytest.raises(TaskNotFoundError):
                await other.create_task_push_notification_config(
                    a2a_pb2.TaskPushNotificationConfig(task_id=task.id, url="http://127.0.0.1:9/x")
                )
            with pytest.raises(TaskNotFoundError):
                await other.list_task_push_notification_configs(
                    a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id)
                )
            with pytest.raises(TaskNotFoundError):
                await events_of(other, send_request(user_message("hijack", task_id=task.id)))
        # The owner still has it, untouched, and can end it.
        mine = await owner.get_task(a2a_pb2.GetTaskRequest(id=task.id))
        canceled = await owner.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id))
        await stream.aclose()

    assert list(listed.tasks) == []
    assert mine.id == task.id
    assert canceled.status.state == a2a_pb2.TaskState.TASK_STATE_CANCELED


async def test_a_tenant_path_or_field_other_than_the_tokens_is_refused(
    gateway: GatewayProcess,
) -> None:
    message = {
        "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
    }
    headers = {**bearer(TENANT), "A2A-Version": "1.0"}
    async with httpx.AsyncClient(base_url=gateway.url, headers=headers) as http:
        rest = await http.post(f"/a2a/gw-echo/{OTHER_TENANT}/message:send", json=message)
        own = await http.post(f"/a2a/gw-echo/{TENANT}/message:send", json=message)
        rpc = await http.post(
            "/a2a/gw-echo",
            json={
                "jsonrpc": "2.0",
                "id": 7,
                "method": "SendMessage",
                "params": {**message, "tenant": OTHER_TENANT},
            },
        )

    assert rest.status_code == 403
    assert rest.json()["error"]["status"] == "PERMISSION_DENIED"
    assert rest.json()["error"]["details"][0]["reason"] == "TENANT_MISMATCH"
    assert own.status_code == 200, own.text
    assert own.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert rpc.status_code == 403
    assert rpc.json()["id"] == 7
    assert rpc.json()["error"]["code"] == -32600


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/a2a"),
        ("POST", "/a2a/gw-echo"),
        ("POST", "/a2a/gw-echo/message:send"),
        ("POST", "/a2a/gw-echo/message:stream"),
        ("GET", "/a2a/gw-echo/tasks"),
        ("GET", "/a2a/gw-echo/tasks/abc"),
        ("POST", "/a2a/gw-echo/tasks/abc:cancel"),
        ("GET", "/a2a/gw-echo/tasks/abc:subscribe"),
        ("GET", "/a2a/gw-echo/tasks/abc/pushNotificationConfigs"),
        ("GET", "/a2a/gw-echo/extendedAgentCard"),
        ("GET", "/a2a/tasks"),
        ("GET", "/a2a/extendedAgentCard"),
        ("POST", "/v1/publish"),
    ],
)
async def test_without_a_token_everything_but_the_public_cards_is_401(
    gateway: GatewayProcess, method: str, path: str
) -> None:
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        response = await http.request(method, path, json={})

    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_a_token_signed_with_an_algorithm_the_gateway_is_not_configured_for_is_401(
    gateway: GatewayProcess,
) -> None:
    now = int(time.time())
    claims = {"sub": "alice", "tenant_id": TENANT, "user_id": "alice", "roles": ["user"]}
    claims |= {"iat": now, "exp": now + 300}
    tokens = {alg: signed_with_the_dev_secret(claims, alg) for alg in ("HS512", "HS256")}
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        answers = {
            alg: await http.get(
                "/v1/sessions/s-algorithms/events", headers={"Authorization": f"Bearer {token}"}
            )
            for alg, token in tokens.items()
        }

    assert answers["HS512"].status_code == 401  # the dev secret, but not an algorithm of ours
    assert "HS512" in answers["HS512"].json()["error"]["message"]
    assert answers["HS256"].status_code == 200


async def test_a_public_agent_takes_calls_without_a_token_in_the_public_tenant(
    gateway: GatewayProcess, gateway_stack: GatewayStack
) -> None:
    name = uuid.uuid4().hex[:12]
    async with (
        bus_side(gateway_stack) as bus,
        a2a_client(gateway.url, "HTTP+JSON", tenant=None, agent=PUBLIC_AGENT) as anonymous,
    ):
        events = await events_of(anonymous, send_request(user_message({"name": name})))
        request = await bus.first(
            lambda topic, e: topic == "action-requests" and e.correlation_id == events[0].task.id
        )
        seen = await anonymous.get_task(a2a_pb2.GetTaskRequest(id=events[0].task.id))

    assert events[-1].status_update.status.state == a2a_pb2.TaskState.TASK_STATE_COMPLETED
    assert (request.tenant_id, request.user_id) == (TENANT, "anonymous")
    assert request.data == {"name": name}
    assert seen.status.state == a2a_pb2.TaskState.TASK_STATE_COMPLETED
