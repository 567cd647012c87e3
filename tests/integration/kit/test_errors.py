"""Every error a kit service answers with has the stable shape.

``{"error": {"code", "message", "details"}}``, whatever raised it.
"""

from __future__ import annotations

from typing import Any

import httpx

from disco._dev.ports import free_port
from disco_common.errors import ErrorResponse
from tests.integration.kit.support import bearer, new_tenant


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = ErrorResponse.model_validate(response.json())
    return body.error.model_dump()


async def test_a_request_without_a_token_is_a_401_with_a_bearer_challenge(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/whoami")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert error_of(response)["code"] == "unauthenticated"


async def test_a_missing_role_is_a_403(client: httpx.AsyncClient) -> None:
    response = await client.get("/admin/ping", headers=bearer())
    assert response.status_code == 403
    error = error_of(response)
    assert error["code"] == "forbidden"
    assert "admin" in error["message"]


async def test_a_missing_row_is_a_404_from_the_route(client: httpx.AsyncClient) -> None:
    response = await client.get("/notes/nope", headers=bearer(new_tenant()))
    assert response.status_code == 404
    assert error_of(response) == {"code": "not_found", "message": "No note nope.", "details": None}


async def test_an_unknown_path_is_a_404_in_the_same_shape(client: httpx.AsyncClient) -> None:
    response = await client.get("/no/such/route")
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


async def test_a_wrong_method_is_a_405(client: httpx.AsyncClient) -> None:
    response = await client.delete("/whoami", headers=bearer())
    assert response.status_code == 405
    assert error_of(response)["code"] == "method_not_allowed"


async def test_an_invalid_body_is_a_422_listing_each_violation(client: httpx.AsyncClient) -> None:
    response = await client.post("/echo", json={"body": "", "priority": 9})
    assert response.status_code == 422
    error = error_of(response)
    assert error["code"] == "validation_failed"
    locations = sorted(tuple(v["location"]) for v in error["details"])
    assert locations == [("body", "body"), ("body", "priority")]
    assert all(v["message"] for v in error["details"])


async def test_a_body_that_is_not_json_is_a_422(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/echo", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert error_of(response)["code"] == "validation_failed"


async def test_a_conflict_raised_by_a_route_is_a_409(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/notes",
        params={"fail_after_publish": "true"},
        json={"body": "x"},
        headers=bearer(new_tenant()),
    )
    assert response.status_code == 409
    assert error_of(response)["code"] == "conflict"


async def test_a_unique_violation_nobody_checked_for_is_a_409_not_a_500(
    client: httpx.AsyncClient,
) -> None:
    headers = bearer(new_tenant())
    created = await client.post("/notes", json={"body": "original"}, headers=headers)
    response = await client.post(f"/notes/{created.json()['id']}/copy", headers=headers)
    assert response.status_code == 409
    assert error_of(response)["code"] == "conflict"


async def test_an_unexpected_exception_is_a_500_that_leaks_nothing(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/boom", headers=bearer())
    assert response.status_code == 500
    error = error_of(response)
    assert error["code"] == "internal_error"
    assert "hunter2" not in response.text
    assert "RuntimeError" not in response.text
    assert error["details"] == {"request_id": response.headers["x-request-id"]}


async def test_a_too_large_body_is_a_413(make_settings: Any, kit_schema: str) -> None:
    from tests.integration.kit.support import build_app, serve

    app = build_app(make_settings(max_body_bytes=64), kit_schema)
    async with serve(app) as http:
        response = await http.post("/echo", json={"body": "x" * 100})
    assert response.status_code == 413
    assert error_of(response) == {
        "code": "payload_too_large",
        "message": "The request body is larger than the limit of 64 bytes.",
        "details": {"max_bytes": 64},
    }


async def test_a_service_this_one_calls_being_down_is_a_503_not_a_500(
    client: httpx.AsyncClient,
) -> None:
    closed = free_port()  # nothing listens there
    response = await client.get("/upstream", params={"port": closed}, headers=bearer())
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    error = error_of(response)
    assert error["code"] == "unavailable"
    assert error["details"] == {"dependency": "service", "retry_after_seconds": 1}
    assert str(closed) not in response.text  # where it lives is not the caller's business
