"""Cacheable JSON: ETag of the bytes served, Cache-Control, Last-Modified, 304 on a match."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from disco_service import cacheable_json, entity_tag


class Card(BaseModel):
    name: str
    note: str | None = None


def client(card: Card) -> TestClient:
    async def serve(request: Request) -> Response:
        return cacheable_json(
            request,
            card,
            max_age_seconds=60,
            private=request.query_params.get("private") == "1",
            last_modified=datetime(2026, 11, 2, 10, 30, tzinfo=UTC),
            vary="Authorization",
        )

    return TestClient(Starlette(routes=[Route("/card", serve)]))


def test_a_body_comes_with_its_entity_tag_and_how_long_to_keep_it() -> None:
    response = client(Card(name="hello")).get("/card")

    assert response.status_code == 200
    assert response.content == b'{"name":"hello"}'  # no nulls
    assert response.headers["etag"] == entity_tag(b'{"name":"hello"}')
    assert response.headers["cache-control"] == "public, max-age=60"
    assert response.headers["last-modified"] == "Mon, 02 Nov 2026 10:30:00 GMT"
    assert response.headers["vary"] == "Authorization"
    assert response.headers["content-type"] == "application/json"


def test_an_if_none_match_naming_the_tag_gets_304_without_a_body() -> None:
    http = client(Card(name="hello"))
    tag = http.get("/card").headers["etag"]

    for header in (tag, f"W/{tag}", f'"other", {tag}', "*"):
        response = http.get("/card", headers={"If-None-Match": header})
        assert (response.status_code, response.content) == (304, b""), header
        assert response.headers["etag"] == tag
    assert http.get("/card", headers={"If-None-Match": '"other"'}).status_code == 200
    private = http.get("/card?private=1")
    assert private.headers["cache-control"] == "private, max-age=60"


def test_another_body_has_another_tag() -> None:
    one = client(Card(name="hello")).get("/card").headers["etag"]
    other = client(Card(name="hello", note="changed")).get("/card").headers["etag"]

    assert one != other
