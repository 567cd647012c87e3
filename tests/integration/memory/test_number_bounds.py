"""Numbers past what their Postgres columns hold are refused with the request (422, the
stable error shape, nothing written), not by the database with a 500. Each case is one
schemathesis found."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.memory.conftest import error_code, new_id
from tests.integration.memory.test_plan_context import plan_context

_PAST_INTEGER = 2**31  # versions and format versions are `integer` columns
_PAST_BIGINT = 2**63  # turn sequences are `bigint`


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/v1/memory/working/{plan}/k", {"value": 1, "expected_version": _PAST_INTEGER}),
        (
            "PUT",
            "/v1/memory/snapshots/{plan}/agent",
            {"full": {}, "slim": {}, "format_version": _PAST_INTEGER},
        ),
        (
            "PUT",
            "/v1/memory/snapshots/{plan}/agent",
            {"full": {}, "slim": {}, "expected_version": float(_PAST_INTEGER)},
        ),
        ("PUT", "/v1/memory/plan-context/{plan}", {"expected_version": _PAST_INTEGER}),
    ],
    ids=["working", "snapshot-format", "snapshot-version", "plan-context"],
)
async def test_a_version_past_an_integer_column_is_a_422_and_nothing_is_written(
    client: httpx.AsyncClient,
    alice: dict[str, str],
    method: str,
    path: str,
    body: dict[str, object],
) -> None:
    plan = new_id("plan")
    url = path.format(plan=plan)
    if "plan-context" in path:
        body = {**plan_context(plan), **body}

    refused = await client.request(method, url, json=body, headers=alice)
    read = await client.get(url, headers=alice)

    assert refused.status_code == 422, refused.text
    assert error_code(refused) == "validation_failed"
    assert read.status_code == 404


async def test_a_turn_sequence_past_a_bigint_column_is_a_422(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    params = {"session_id": new_id("s"), "before_sequence": str(_PAST_BIGINT)}
    largest = {**params, "before_sequence": str(_PAST_BIGINT - 1)}

    refused = await client.get("/v1/memory/episodic/recent", params=params, headers=alice)
    answered = await client.get("/v1/memory/episodic/recent", params=largest, headers=alice)

    assert refused.status_code == 422, refused.text
    assert error_code(refused) == "validation_failed"
    assert (answered.status_code, answered.json()) == (200, [])
