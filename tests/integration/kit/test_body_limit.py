"""The request body limit: 413 in the stable shape, with or without a Content-Length."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from disco_service import ServiceSettings
from tests.integration.kit.support import build_app, serve

LIMIT = 256


@pytest.fixture
async def limited(
    make_settings: Callable[..., ServiceSettings], kit_schema: str
) -> AsyncIterator[httpx.AsyncClient]:
    app = build_app(
        make_settings(max_body_bytes=LIMIT), kit_schema, database=False, bus=False, outbox=False
    )
    async with serve(app) as http:
        yield http


def chunks(total: int, size: int = 64) -> Callable[[], AsyncIterator[bytes]]:
    async def body() -> AsyncIterator[bytes]:
        # A JSON document streamed in pieces: no Content-Length, chunked encoding.
        payload = b'{"body": "' + b"x" * (total - 12) + b'"}'
        for start in range(0, len(payload), size):
            yield payload[start : start + size]

    return body


async def test_a_declared_length_over_the_limit_is_refused_before_reading(
    limited: httpx.AsyncClient,
) -> None:
    response = await limited.post("/echo", json={"body": "x" * (LIMIT * 2)})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert response.json()["error"]["details"] == {"max_bytes": LIMIT}


async def test_a_chunked_body_over_the_limit_is_refused_once_it_passes_it(
    limited: httpx.AsyncClient,
) -> None:
    request = limited.build_request(
        "POST",
        "/echo",
        content=chunks(LIMIT * 4)(),
        headers={"content-type": "application/json"},
    )
    assert "content-length" not in request.headers
    response = await limited.send(request)
    assert response.status_code == 413
    assert response.json()["error"] == {
        "code": "payload_too_large",
        "message": f"The request body is larger than the limit of {LIMIT} bytes.",
        "details": {"max_bytes": LIMIT},
    }


async def test_a_chunked_body_under_the_limit_is_served(limited: httpx.AsyncClient) -> None:
    request = limited.build_request(
        "POST", "/echo", content=chunks(LIMIT // 2)(), headers={"content-type": "application/json"}
    )
    response = await limited.send(request)
    assert response.status_code == 200
    assert response.json()["body"] == "x" * (LIMIT // 2 - 12)


async def test_refused_bodies_are_counted_in_the_metrics(limited: httpx.AsyncClient) -> None:
    await limited.post("/echo", json={"body": "x" * (LIMIT * 2)})
    metrics = (await limited.get("/metrics")).text
    assert "disco_http_body_rejected_total 1.0" in metrics.splitlines()
