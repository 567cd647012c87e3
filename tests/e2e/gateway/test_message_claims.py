"""A message's claim on its turn never loses the message (issue 39 part 6, issue 34).

Through the real gateway, broker and Postgres:

- the claim's write refused by the database (its table held by a lock, as a stalled
  server holds it, until the statement's bound) is a retryable refusal: ``503`` with
  ``Retry-After`` and ``status: UNAVAILABLE`` on HTTP+JSON, the internal error with
  reason ``UNAVAILABLE`` on JSON-RPC, ``UNAVAILABLE`` with a ``RetryInfo`` on gRPC;
  nothing half-written blocks the message sent again, which completes (the request
  published beside a failed claim was lost that way: its answer found no turn, and the
  agent deduplicated the request sent again);
- a claim its holder left behind (the turn recorded, the request never published: the
  gateway died or its publish failed in between) is taken over at once by the message
  sent again, which sends the turn's request (the same envelope) and completes, instead
  of waiting for a task that never comes;
- an answer that comes while the gateway that sent the request is down is applied to the
  task (its turn was recorded before the request went out) and answers the message sent
  again.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import grpc
import grpc.aio
import httpx
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc
from google.rpc import error_details_pb2, status_pb2

from disco_gateway.a2a.mapping import message_task_id, turn_correlation_id
from tests.e2e.gateway.conftest import (
    PUBLIC_AGENT,
    TENANT,
    USER,
    GatewayProcess,
    GatewayStack,
    bearer,
    token,
)
from tests.e2e.gateway.support import bus_side, send_request, user_message
from tests.fixtures.waiting import eventually

COMPLETED = "TASK_STATE_COMPLETED"
RELAY = "gw-relay"
"""An agent whose answer waits on a gate the test opens."""
_ADD_TURN = "SELECT gateway.a2a_add_turn($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb)"


def _message(message_id: str) -> dict[str, Any]:
    return {
        "message": {
            "messageId": message_id,
            "role": "ROLE_USER",
            "parts": [{"data": {"name": "Ada"}}],
        }
    }


def _headers() -> dict[str, str]:
    return {**bearer(), "A2A-Version": "1.0"}


@asynccontextmanager
async def _turns_locked(stack: GatewayStack) -> AsyncIterator[None]:
    """The turns' table held as a stalled server holds it: the claim's write waits until its
    statement bound, then fails."""
    admin = await asyncpg.connect(stack.database_admin)
    try:
        async with admin.transaction():
            await admin.execute("LOCK TABLE gateway.a2a_turns IN ACCESS EXCLUSIVE MODE")
            yield
    finally:
        await admin.close()


async def test_a_claim_the_database_refuses_is_a_503_and_the_message_goes_out_when_sent_again(
    gateway: GatewayProcess, gateway_stack: GatewayStack
) -> None:
    rest_id, rpc_id = str(uuid.uuid4()), str(uuid.uuid4())
    rpc_body = {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": _message(rpc_id)}
    on_grpc = send_request(user_message({"name": "Ada"}))
    on_grpc.tenant = PUBLIC_AGENT
    metadata = (("authorization", f"Bearer {token()}"), ("a2a-version", "1.0"))
    url = f"{gateway.url}/a2a/{PUBLIC_AGENT}"
    async with (
        httpx.AsyncClient(timeout=30.0, headers=_headers()) as http,
        grpc.aio.insecure_channel(gateway.grpc_address) as channel,
    ):
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        async with _turns_locked(gateway_stack):
            refused = await http.post(f"{url}/message:send", json=_message(rest_id))
            rpc_refused = await http.post(url, json=rpc_body)
            with pytest.raises(grpc.aio.AioRpcError) as grpc_refused:
                await stub.SendMessage(on_grpc, metadata=metadata)
        again = await http.post(f"{url}/message:send", json=_message(rest_id))
        rpc_again = await http.post(url, json=rpc_body)
        grpc_again = await stub.SendMessage(on_grpc, metadata=metadata)

    assert refused.status_code == 503, refused.text
    assert refused.headers["Retry-After"].isdigit()
    error = refused.json()["error"]
    assert (error["code"], error["status"]) == (503, "UNAVAILABLE")
    assert error["details"][0]["reason"] == "UNAVAILABLE"
    rpc_error = rpc_refused.json()["error"]
    assert rpc_error["code"] == -32603
    assert rpc_error["data"][0]["reason"] == "UNAVAILABLE"
    assert rpc_error["data"][0]["metadata"]["retryAfterSeconds"].isdigit()
    status = status_pb2.Status()
    for key, value in grpc_refused.value.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status.ParseFromString(value)
    retry = error_details_pb2.RetryInfo()
    assert grpc_refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert any(detail.Unpack(retry) for detail in status.details)
    assert retry.retry_delay.seconds > 0
    # Sent again once the database answers: it goes out and completes.
    assert again.status_code == 200, again.text
    assert again.json()["task"]["status"]["state"] == COMPLETED
    assert rpc_again.json()["result"]["task"]["status"]["state"] == COMPLETED
    assert grpc_again.task.status.state == a2a_pb2.TaskState.TASK_STATE_COMPLETED


async def test_a_claim_whose_holder_died_before_sending_is_taken_over_at_once(
    gateway: GatewayProcess, gateway_stack: GatewayStack
) -> None:
    url = f"{gateway.url}/a2a/{PUBLIC_AGENT}/message:send"
    async with (
        bus_side(gateway_stack) as bus,
        httpx.AsyncClient(timeout=60.0, headers=_headers()) as http,
    ):
        # A message as the gateway records it, for its skill and event type.
        sample = await http.post(url, json=_message(str(uuid.uuid4())))
        assert sample.status_code == 200, sample.text
        admin = await asyncpg.connect(gateway_stack.database_admin)
        try:
            row = await admin.fetchrow(
                "SELECT skill, event_type FROM gateway.a2a_turns WHERE task_id = $1",
                sample.json()["task"]["id"],
            )
            assert row is not None
            # A sender that died between its claim and its publish: the turn, no request.
            message_id = str(uuid.uuid4())
            task_id = message_task_id(TENANT, USER, PUBLIC_AGENT, message_id)
            document = {
                **_message(message_id)["message"],
                "taskId": task_id,
                "contextId": "ctx-of-the-dead-sender",
            }
            await admin.execute(
                _ADD_TURN,
                TENANT,
                USER,
                task_id,
                1,
                turn_correlation_id(task_id, 1),
                "ctx-of-the-dead-sender",
                PUBLIC_AGENT,
                row["skill"],
                row["event_type"],
                json.dumps(document),
            )
        finally:
            await admin.close()
        # The caller heard nothing and sends the message again: it is not made to wait for
        # the dead sender (that was 300 s, then a refusal, and the message was lost).
        # Not the fast path (returnImmediately): its claim is written before anything is sent.
        again = await http.post(
            url, json={**_message(message_id), "configuration": {"returnImmediately": True}}
        )
        assert again.status_code == 200, again.text

        async def completed() -> dict[str, Any]:
            got: dict[str, Any] = (
                await http.get(f"{gateway.url}/a2a/{PUBLIC_AGENT}/tasks/{task_id}")
            ).json()
            return got if got["status"]["state"] == COMPLETED else {}

        task: dict[str, Any] = await eventually(
            completed, timeout=30, what="the task sent again completed"
        )
        published = [e.id for e in await bus.requests_for(task_id)]

    assert again.json()["task"]["id"] == task_id
    assert task["contextId"] == "ctx-of-the-dead-sender"
    assert published == [f"{task_id}.request"]  # once: the dead sender never sent it


async def test_an_answer_that_comes_while_its_gateway_is_down_completes_the_message_sent_again(
    gateway_stack: GatewayStack,
) -> None:
    marker, message_id = uuid.uuid4().hex, str(uuid.uuid4())
    task_id = message_task_id(TENANT, USER, RELAY, message_id)
    body = {
        "message": {
            "messageId": message_id,
            "role": "ROLE_USER",
            "parts": [{"data": {"text": marker}}],
        }
    }
    doomed = gateway_stack.new_gateway().start()
    url = f"{doomed.url}/a2a/{RELAY}/message:send"
    async with (
        bus_side(gateway_stack) as bus,
        httpx.AsyncClient(timeout=60.0, headers=_headers()) as http,
    ):
        # A blocking call (the fast path): its request goes out, the agent waits on its gate.
        call = asyncio.create_task(http.post(url, json=body))
        await bus.first(
            lambda topic, e: (
                topic == "action-requests"
                and e.type == "gw.gate.requested"
                and (e.data or {}).get("text") == marker  # type: ignore[union-attr]
            )
        )
        doomed.kill()
        with pytest.raises(httpx.HTTPError):
            await call
        # The agent answers while no gateway is up: the answer waits on the bus.
        await bus.open_gate(task_id, marker)
        await bus.answered(task_id)
        doomed.start()
        # The caller heard nothing and sends the same message again, once the gateway is back.
        again = await http.post(url, json=body)
        published = [e.id for e in await bus.requests_for(task_id)]
    doomed.stop()

    assert again.status_code == 200, again.text
    task = again.json()["task"]
    assert (task["id"], task["status"]["state"]) == (task_id, COMPLETED)
    assert task["artifacts"][0]["parts"][0]["data"] == {"text": f"relayed: {marker.upper()}"}
    # The request went out once more (the same envelope, which the agent deduplicated).
    assert set(published) == {f"{task_id}.request"}
