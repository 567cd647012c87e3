"""JSONRoute: pydantic-core parses JSON bodies; every answer is the one FastAPI gave."""

from __future__ import annotations

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel

from disco_service import JSONRoute


class Item(BaseModel):
    name: str
    weights: list[float]
    extra: dict[str, object] = {}


def _app(route_class: type[APIRoute]) -> FastAPI:
    router = APIRouter(route_class=route_class)

    @router.post("/items")
    async def echo(item: Item) -> str:
        # repr: the values exactly as parsed (a lone surrogate would not encode as JSON)
        return repr(item.model_dump())

    app = FastAPI()
    app.include_router(router)
    return app


BODIES = [
    b'{"name": "a", "weights": [0.1, -2.5e-3, 1e400, 3], "extra": {"n": 123456789012345678901}}',
    b'{"name": "\\u0000\\u00e9", "weights": []}',
    b'{"name": "\\ud800", "weights": []}',  # a lone surrogate: json.loads takes it
    b'{"name": "dup", "name": "last", "weights": [NaN]}',
    b"\xef\xbb\xbf{}",
    b"[1,]",
    b'{"name": "x"}x',
    b"",
    b'{"name": 5, "weights": "no"}',
]


@pytest.mark.parametrize("body", BODIES)
async def test_a_json_route_answers_every_body_as_fastapis_own_route(body: bytes) -> None:
    answers = []
    for route_class in (APIRoute, JSONRoute):
        transport = httpx.ASGITransport(app=_app(route_class))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            response = await client.post(
                "/items", content=body, headers={"Content-Type": "application/json"}
            )
        answers.append((response.status_code, response.content))

    assert answers[1] == answers[0]
