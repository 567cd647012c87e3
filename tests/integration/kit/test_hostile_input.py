"""Hostile HTTP input is refused cleanly: deep JSON, invalid UTF-8, slow heads, slow bodies.

Deep JSON and invalid UTF-8 go through the app in-process; the slow-client
bounds live in the server (the head) and the body middleware, so those tests
talk to a real uvicorn server, configured as ``run_service`` configures it,
over a raw socket that sends as slowly as an attacker would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx
import pytest
import uvicorn

from disco._dev.ports import free_port
from disco_service import ServiceSettings
from disco_service._run import server_config
from tests.fixtures.waiting import eventually
from tests.integration.kit.support import bearer, build_app, new_tenant, serve

BOUND_SECONDS = 0.5


def _assert_error_shape(body: bytes, status: int, code: str | None = None) -> None:
    error = json.loads(body)["error"]
    assert set(error) == {"code", "message", "details"}, (status, error)
    if code is not None:
        assert error["code"] == code


@pytest.fixture
async def app_client(
    make_settings: Callable[..., ServiceSettings], kit_schema: str
) -> AsyncIterator[httpx.AsyncClient]:
    app = build_app(make_settings(), kit_schema, database=False, bus=False, outbox=False)
    async with serve(app) as http:
        yield http


async def test_deeply_nested_json_is_refused_with_the_error_shape(
    app_client: httpx.AsyncClient,
) -> None:
    depth = 100_000  # far past Python's recursion limit, well under the body limit
    body = b"[" * depth + b"]" * depth
    response = await app_client.post(
        "/echo", content=body, headers={"Content-Type": "application/json"}
    )
    assert 400 <= response.status_code < 500, response.text
    _assert_error_shape(response.content, response.status_code)


async def test_invalid_utf8_is_refused_with_the_error_shape(
    app_client: httpx.AsyncClient,
) -> None:
    body = b'{"body": "\xff\xfe not utf-8"}'
    response = await app_client.post(
        "/echo", content=body, headers={"Content-Type": "application/json"}
    )
    assert 400 <= response.status_code < 500, response.text
    _assert_error_shape(response.content, response.status_code)


async def test_a_nul_character_postgres_cannot_store_is_a_422_and_nothing_is_written(
    client: httpx.AsyncClient,
) -> None:
    headers = bearer(new_tenant())
    response = await client.post("/notes", json={"body": "before\u0000after"}, headers=headers)
    assert response.status_code == 422, response.text
    _assert_error_shape(response.content, 422, "nul_character")
    assert (await client.get("/notes", headers=headers)).json() == []


async def test_the_errors_answered_before_any_handler_are_declared(
    app_client: httpx.AsyncClient,
) -> None:
    """400 (not UTF-8 JSON), 408 (too slow) and 413 (too large) on every operation taking
    a body, 401 on every one needing a token: answered before any handler runs, and
    declared in the OpenAPI document all the same."""
    document = (await app_client.get("/openapi.json")).json()
    with_body = {
        (method, path): operation["responses"]
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if "requestBody" in operation
    }
    assert ("post", "/echo") in with_body
    for responses in with_body.values():
        for status in ("400", "408", "413"):
            content = responses[status]["content"]["application/json"]["schema"]
            assert content == {"$ref": "#/components/schemas/ErrorResponse"}
    secured = [
        operation["responses"]
        for item in document["paths"].values()
        for operation in item.values()
        if operation.get("security")
    ]
    assert secured
    for responses in secured:
        assert "401" in responses
    assert "401" in document["paths"]["/whoami"]["get"]["responses"]
    malformed = await app_client.post(
        "/echo", content=b"\x13B\xff\x16", headers={"Content-Type": "application/json"}
    )
    assert str(malformed.status_code) in with_body[("post", "/echo")]


@dataclass
class Served:
    port: int


@pytest.fixture
async def served(
    make_settings: Callable[..., ServiceSettings], kit_schema: str
) -> AsyncIterator[Served]:
    """The kit app behind a real uvicorn server with short slow-client bounds."""
    settings = make_settings(
        port=free_port(),
        http_head_timeout_seconds=BOUND_SECONDS,
        http_body_timeout_seconds=BOUND_SECONDS,
    )
    app = build_app(settings, kit_schema, database=False, bus=False, outbox=False)
    server = uvicorn.Server(server_config(app, settings))
    task = asyncio.create_task(server.serve())
    try:
        await eventually(lambda: server.started, timeout=30, what="the server started")
        yield Served(settings.port)
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=15)


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Status and body of the one response the server sends before it closes."""
    raw = await asyncio.wait_for(reader.read(), timeout=30)
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


async def test_a_request_head_sent_too_slowly_gets_408_and_the_connection_closes(
    served: Served,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    try:
        # The slowloris pattern: a request line, then nothing more.
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: kit.test\r\n")
        await writer.drain()
        status, body = await _read_response(reader)
    finally:
        writer.close()
    assert status == 408
    _assert_error_shape(body, status, "request_timeout")


async def test_a_body_sent_too_slowly_gets_408(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    try:
        writer.write(
            b"POST /echo HTTP/1.1\r\nHost: kit.test\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\nConnection: close\r\n\r\n{"body": "'
        )
        await writer.drain()
        status, body = await _read_response(reader)
    finally:
        writer.close()
    assert status == 408
    _assert_error_shape(body, status, "request_timeout")


async def test_a_prompt_client_is_served_on_the_same_server(served: Served) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{served.port}") as http:
        first = await http.get("/healthz")
        second = await http.get("/healthz")  # the same kept-alive connection
    assert (first.status_code, second.status_code) == (200, 200)
