"""What a webhook receives for a task: each notification the a2a-sdk sends, once, in order,
whether the task answers at once, streams its work, or asks a question first.

(The notifications are queued by the writes of the task's changes: a change the a2a-sdk
stores without notifying it, such as the history of a task answered on, sends nothing.)
"""

from __future__ import annotations

import asyncpg
from a2a.types import a2a_pb2

from tests.e2e.gateway.conftest import GatewayProcess, GatewayStack, a2a_client
from tests.e2e.gateway.support import PushReceiver, events_of, send_request, until, user_message

COMPLETED = "statusUpdate:TASK_STATE_COMPLETED"


def _kind(body: dict[str, object]) -> str:
    for kind in ("task", "statusUpdate", "artifactUpdate", "message"):
        part = body.get(kind)
        if isinstance(part, dict):
            status = part.get("status")
            state = status.get("state") if isinstance(status, dict) else None
            return f"{kind}:{state}" if state else kind
    return "?"


async def _received(receiver: PushReceiver, last: str) -> list[str]:
    """The kinds of what came, once the notification of kind ``last`` came."""
    await receiver.wait_for(lambda body: _kind(body) == last)
    return [_kind(body) for _, body in receiver.received]


async def test_each_change_the_sdk_notifies_is_pushed_once_in_order(
    gateway: GatewayProcess, gateway_stack: GatewayStack
) -> None:
    config = a2a_pb2.TaskPushNotificationConfig(token="t")
    async with PushReceiver() as story_hook, PushReceiver() as city_hook:
        async with a2a_client(gateway.url, "JSONRPC", agent="gw-story") as client:
            config.url = story_hook.url
            client._config.streaming = False
            await events_of(client, send_request(user_message("a story"), push=config))
            story = await _received(story_hook, COMPLETED)
        async with a2a_client(gateway.url, "JSONRPC", agent="gw-city") as client:
            config.url = city_hook.url
            asked = await events_of(
                client, send_request(user_message("the weather, please"), push=config)
            )
            task = asked[0].task
            await _received(city_hook, "statusUpdate:TASK_STATE_INPUT_REQUIRED")
            # The answer, on the same task: the a2a-sdk stores the task's history with it.
            await events_of(
                client,
                send_request(
                    user_message("city:Atlantis", task_id=task.id, context_id=task.context_id)
                ),
            )
            city = await _received(city_hook, COMPLETED)
        admin = await asyncpg.connect(gateway_stack.database_admin)
        try:

            async def nothing_waits() -> bool | None:
                left = await admin.fetchval(
                    "SELECT count(*) FROM gateway.a2a_push_deliveries WHERE task_id = $1", task.id
                )
                return True if left == 0 else None

            # Well within the lease (25 s) a row the history's write queued would be held.
            await until(nothing_waits, timeout=10, what="no notification left for the task")
        finally:
            await admin.close()

    assert story == [
        "task:TASK_STATE_SUBMITTED",
        "statusUpdate:TASK_STATE_WORKING",
        "artifactUpdate",
        "artifactUpdate",
        "artifactUpdate",
        COMPLETED,
    ]
    assert city == [
        "task:TASK_STATE_SUBMITTED",
        "statusUpdate:TASK_STATE_INPUT_REQUIRED",
        "statusUpdate:TASK_STATE_WORKING",
        "artifactUpdate",
        COMPLETED,
    ]
