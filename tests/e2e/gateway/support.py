"""Helpers of the gateway's end-to-end tests: messages, streams, the bus side of a test."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import uvicorn
from a2a.client import Client
from a2a.types import a2a_pb2
from google.protobuf.json_format import MessageToDict, ParseDict

from disco._dev.ports import free_port
from disco.bus import BusClient
from disco_common.envelope import Envelope
from disco_common.topics import Topic
from tests.e2e.conftest import Watcher
from tests.e2e.gateway.conftest import TENANT, GatewayStack

T = TypeVar("T")


def user_message(
    *parts: str | dict[str, Any],
    task_id: str = "",
    context_id: str = "",
    metadata: dict[str, Any] | None = None,
) -> a2a_pb2.Message:
    """A caller's message: strings are text parts, dicts data parts."""
    message = a2a_pb2.Message(
        message_id=str(uuid.uuid4()),
        role=a2a_pb2.Role.ROLE_USER,
        task_id=task_id,
        context_id=context_id,
    )
    for part in parts:
        if isinstance(part, str):
            message.parts.add(text=part)
        else:
            ParseDict({"data": part}, message.parts.add())
    if metadata:
        message.metadata.update(metadata)
    return message


def send_request(
    message: a2a_pb2.Message, *, return_immediately: bool = False, **configuration: Any
) -> a2a_pb2.SendMessageRequest:
    """A SendMessage request for ``message``."""
    request = a2a_pb2.SendMessageRequest(message=message)
    request.configuration.return_immediately = return_immediately
    for key, value in configuration.items():
        if key == "push":
            request.configuration.task_push_notification_config.CopyFrom(value)
        else:
            setattr(request.configuration, key, value)
    return request


async def events_of(
    client: Client, request: a2a_pb2.SendMessageRequest
) -> list[a2a_pb2.StreamResponse]:
    """Every event of a send (one for a blocking send, the stream for a streaming one)."""
    return [event async for event in client.send_message(request)]


def kinds(events: list[a2a_pb2.StreamResponse]) -> list[str]:
    """The payload kind of each event (``task``, ``status_update``...)."""
    return [str(event.WhichOneof("payload")) for event in events]


def as_json(message: Any) -> dict[str, Any]:
    """A protobuf object as its A2A JSON."""
    result: dict[str, Any] = MessageToDict(message)
    return result


async def until(
    check: Callable[[], Awaitable[T | None]], *, timeout: float = 30.0, what: str = ""
) -> T:
    """Poll ``check`` until it returns something (fails the test after ``timeout``)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = await check()
        if found is not None:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(0.1)


def metric_value(text: str, series: str, default: float | None = None) -> float:
    """The value of ``series`` (a name, with its ``{labels}`` if any) in a ``/metrics``
    page; ``default`` when it is not there yet (None: the test fails)."""
    for line in text.splitlines():
        if line.startswith(f"{series} "):
            return float(line.split()[-1])
    if default is None:
        raise AssertionError(f"no metric {series}")
    return default


async def task_in(
    client: Client, task_id: str, *states: int, timeout: float = 30.0
) -> a2a_pb2.Task:
    """The task, once it is in one of ``states`` (fails the test after ``timeout``)."""

    async def check() -> a2a_pb2.Task | None:
        task = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
        return task if task.status.state in states else None

    return await until(check, timeout=timeout, what=f"task {task_id} in {states}")


class BusSide(Watcher):
    """The test's own hand on the bus: it watches topics and answers what no agent answers."""

    def __init__(self, stack: GatewayStack, bus: BusClient) -> None:
        super().__init__(
            stack,  # type: ignore[arg-type]
            [
                "action-requests",
                "action-results",
                "business-facts",
                "system-events",
                "notification-events",
            ],
        )
        self.bus = bus

    async def first(
        self, predicate: Callable[[str, Envelope], bool], timeout: float = 30.0
    ) -> Envelope:
        """The first envelope matching ``predicate`` (waits for it)."""
        return (await self.wait_for(predicate, timeout=timeout))[0]

    async def requests_for(self, task_id: str, event_type: str | None = None) -> list[Envelope]:
        """Every request (of ``event_type``, or any) published for the task, all of them: a
        marker published after them on their partition (the same key) is seen last."""
        marker = uuid.uuid4().hex
        await self.bus.publish(
            Topic.ACTION_REQUESTS,
            "e2e.marker",
            {"marker": marker},
            correlation_id=task_id,
            response_event="e2e.marker.answered",
            tenant_id=TENANT,
        )
        await self.first(lambda topic, e: e.type == "e2e.marker" and e.correlation_id == task_id)
        return self.matching(
            lambda topic, e: (
                topic == "action-requests"
                and e.task_id == task_id
                and e.type != "e2e.marker"
                and (event_type is None or e.type == event_type)
            )
        )

    async def answered(self, task_id: str) -> Envelope:
        """The agent's answer to the task's first request (``a2a.answered``), once on the bus."""
        return await self.first(
            lambda topic, e: (
                topic == "action-results"
                and e.correlation_id == task_id
                and e.type == "a2a.answered"
            )
        )

    async def open_gate(self, task_id: str, text: str) -> None:
        """Answer gw-relay's ``gw.gate.requested`` carrying ``text`` (as the agent nobody runs)."""
        del task_id
        request = await self.first(
            lambda topic, e: (
                topic == "action-requests"
                and e.type == "gw.gate.requested"
                and e.tenant_id == TENANT
                and (e.data or {}).get("text") == text
            )  # type: ignore[union-attr]
        )
        assert request.correlation_id is not None
        assert request.response_event is not None
        await self.bus.respond(
            request.response_event,
            {"success": True, "result": text.upper()},
            correlation_id=request.correlation_id,
            tenant_id=TENANT,
        )


@contextlib.asynccontextmanager
async def bus_side(stack: GatewayStack) -> AsyncIterator[BusSide]:
    """A :class:`BusSide` for the test."""
    async with BusClient(stack.bus_settings(), name="gateway-e2e") as bus:
        side = BusSide(stack, bus)
        await side.start()
        try:
            yield side
        finally:
            await side.stop()


class PushReceiver:
    """A webhook on loopback that records the push notifications it gets.

    ``fail_first`` answers the first N notifications with 503 (to see retries).
    """

    def __init__(self, *, fail_first: int = 0) -> None:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Route

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.received: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.refused = 0
        self._fail_first = fail_first
        self._changed = asyncio.Event()

        async def hook(request: Request) -> Response:
            if self.refused < self._fail_first:
                self.refused += 1
                return Response(status_code=503)
            self.received.append((dict(request.headers), await request.json()))
            self._changed.set()
            return Response(status_code=204)

        app = Starlette(routes=[Route("/hook", hook, methods=["POST"])])
        self._server = uvicorn.Server(
            uvicorn.Config(
                app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
            )
        )
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> PushReceiver:
        self._task = asyncio.create_task(self._server.serve())
        await until(lambda: _started(self._server), what="the push receiver to start")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], *, timeout: float = 30.0
    ) -> tuple[dict[str, str], dict[str, Any]]:
        """The first notification whose body matches ``predicate`` (waits for it)."""
        async with asyncio.timeout(timeout):
            while True:
                for headers, body in self.received:
                    if predicate(body):
                        return headers, body
                self._changed.clear()
                await self._changed.wait()


async def _started(server: uvicorn.Server) -> bool | None:
    return True if server.started else None
