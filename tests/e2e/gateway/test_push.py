"""Push notifications: configs per task, the spec's headers, retries, URL checks."""

from __future__ import annotations

import uuid

import pytest
from a2a.types import a2a_pb2
from a2a.utils.errors import InvalidParamsError

from tests.e2e.gateway.conftest import BINDINGS, GatewayProcess, GatewayStack, a2a_client
from tests.e2e.gateway.support import (
    PushReceiver,
    bus_side,
    events_of,
    send_request,
    user_message,
)

pytestmark = pytest.mark.parametrize("binding", BINDINGS)


def _config(url: str, **fields: object) -> a2a_pb2.TaskPushNotificationConfig:
    config = a2a_pb2.TaskPushNotificationConfig(url=url, token="tok-1", **fields)  # type: ignore[arg-type]
    config.authentication.scheme = "Bearer"
    config.authentication.credentials = "receiver-secret"
    return config


async def test_a_task_pushes_its_updates_with_the_specs_headers_retrying_refusals(
    gateway: GatewayProcess, gateway_stack: GatewayStack, binding: str
) -> None:
    marker = uuid.uuid4().hex
    async with (
        PushReceiver(fail_first=2) as receiver,
        bus_side(gateway_stack) as bus,
        a2a_client(gateway.url, binding, agent="gw-relay") as client,
    ):
        client._config.streaming = False
        (sent,) = await events_of(
            client,
            send_request(
                user_message({"text": marker}), return_immediately=True, push=_config(receiver.url)
            ),
        )
        task_id = sent.task.id
        await bus.open_gate(task_id, marker)
        headers, body = await receiver.wait_for(
            lambda b: (
                b.get("statusUpdate", {}).get("taskId") == task_id
                and b["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
            )
        )

    assert receiver.refused == 2  # refused twice, delivered on a later try
    assert headers["x-a2a-notification-token"] == "tok-1"
    assert headers["authorization"] == "Bearer receiver-secret"
    assert body["statusUpdate"]["contextId"] == sent.task.context_id


async def test_push_configs_are_created_read_listed_and_deleted_per_task(
    gateway: GatewayProcess, binding: str
) -> None:
    async with (
        PushReceiver() as receiver,
        a2a_client(gateway.url, binding, agent="gw-echo") as client,
    ):
        task_id = (await events_of(client, send_request(user_message("x"))))[0].task.id
        created = await client.create_task_push_notification_config(
            _config(receiver.url, task_id=task_id, id="hook-1")
        )
        got = await client.get_task_push_notification_config(
            a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1")
        )
        listed = await client.list_task_push_notification_configs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
        await client.delete_task_push_notification_config(
            a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1")
        )
        after = await client.list_task_push_notification_configs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )

    assert (created.id, created.task_id, created.url) == ("hook-1", task_id, receiver.url)
    assert got.token == "tok-1"
    assert [c.id for c in listed.configs] == ["hook-1"]
    assert list(after.configs) == []


@pytest.mark.parametrize(
    "url",
    [
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest",
        "ftp://127.0.0.1/hook",
        "http://[fe80::1]/x",
    ],
)
async def test_push_urls_in_private_or_link_local_ranges_are_refused(
    gateway: GatewayProcess, binding: str, url: str
) -> None:
    async with a2a_client(gateway.url, binding, agent="gw-echo") as client:
        task_id = (await events_of(client, send_request(user_message("x"))))[0].task.id
        with pytest.raises(InvalidParamsError):
            await client.create_task_push_notification_config(_config(url, task_id=task_id))
