"""Working memory: plan-scoped keys with TTL and optimistic concurrency."""

from __future__ import annotations

import asyncio

import httpx

from disco_common.memory import WORKING_MEMORY_VALUE_MAX_BYTES
from tests.fixtures.waiting import eventually
from tests.integration.memory.conftest import error_code, new_id


async def test_a_written_key_reads_back_with_its_version_as_etag(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    plan = new_id("plan")

    put = await client.put(
        f"/v1/memory/working/{plan}/draft", json={"value": {"n": 1}}, headers=alice
    )
    got = await client.get(f"/v1/memory/working/{plan}/draft", headers=alice)

    assert put.status_code == 200
    assert got.status_code == 200
    assert got.json()["value"] == {"n": 1}
    assert got.json()["version"] == 1
    assert got.headers["ETag"] == '"1"'


async def test_every_write_increments_the_version(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    plan = new_id("plan")
    for n in range(3):
        await client.put(f"/v1/memory/working/{plan}/k", json={"value": n}, headers=alice)

    got = await client.get(f"/v1/memory/working/{plan}/k", headers=alice)

    assert (got.json()["value"], got.json()["version"]) == (2, 3)


async def test_a_stale_expected_version_is_a_conflict_and_changes_nothing(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    plan = new_id("plan")
    url = f"/v1/memory/working/{plan}/counter"
    await client.put(url, json={"value": 1}, headers=alice)
    await client.put(url, json={"value": 2, "expected_version": 1}, headers=alice)

    stale = await client.put(url, json={"value": 99, "expected_version": 1}, headers=alice)

    assert stale.status_code == 409
    assert error_code(stale) == "version_conflict"
    assert stale.json()["error"]["details"] == {"expected_version": 1, "current_version": 2}
    assert (await client.get(url, headers=alice)).json()["value"] == 2


async def test_if_match_header_guards_a_write_like_expected_version(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    url = f"/v1/memory/working/{new_id('plan')}/k"
    first = await client.put(url, json={"value": "a"}, headers=alice)
    etag = first.headers["ETag"]
    await client.put(url, json={"value": "b"}, headers=alice)

    stale = await client.put(url, json={"value": "c"}, headers={**alice, "If-Match": etag})

    assert stale.status_code == 409


async def test_two_writers_racing_on_one_version_let_exactly_one_win(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    url = f"/v1/memory/working/{new_id('plan')}/k"
    await client.put(url, json={"value": 0}, headers=alice)

    answers = await asyncio.gather(
        *(
            client.put(url, json={"value": n, "expected_version": 1}, headers=alice)
            for n in range(1, 6)
        )
    )

    assert sorted(a.status_code for a in answers) == [200, 409, 409, 409, 409]
    assert (await client.get(url, headers=alice)).json()["version"] == 2


async def test_expected_version_zero_creates_only_when_absent(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    url = f"/v1/memory/working/{new_id('plan')}/lock"

    created = await client.put(url, json={"value": "me", "expected_version": 0}, headers=alice)
    again = await client.put(url, json={"value": "you", "expected_version": 0}, headers=alice)

    assert created.status_code == 200
    assert again.status_code == 409
    assert (await client.get(url, headers=alice)).json()["value"] == "me"


async def test_an_expired_key_is_gone_and_can_be_created_afresh(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    url = f"/v1/memory/working/{new_id('plan')}/short"
    await client.put(url, json={"value": "old", "ttl_seconds": 1}, headers=alice)

    async def gone() -> httpx.Response | None:
        response = await client.get(url, headers=alice)
        return response if response.status_code != 200 else None

    gone_answer = await eventually(gone, timeout=10, interval=0.1, what="the key expired")
    recreated = await client.put(url, json={"value": "new", "expected_version": 0}, headers=alice)

    assert gone_answer.status_code == 404
    assert recreated.status_code == 200
    assert recreated.json()["version"] == 1


async def test_a_key_can_be_deleted_and_a_plan_cleared(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    plan = new_id("plan")
    for key in ("a", "b", "c"):
        await client.put(f"/v1/memory/working/{plan}/{key}", json={"value": key}, headers=alice)

    deleted = await client.delete(f"/v1/memory/working/{plan}/a", headers=alice)
    deleted_again = await client.delete(f"/v1/memory/working/{plan}/a", headers=alice)
    cleared = await client.delete(f"/v1/memory/working/{plan}", headers=alice)
    left = await client.get(f"/v1/memory/working/{plan}", headers=alice)

    assert deleted.status_code == 204
    assert deleted_again.status_code == 404
    assert cleared.json() == {"deleted": 2}
    assert left.json()["items"] == []


async def test_a_plans_keys_list_page_by_page_in_key_order(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    plan = new_id("plan")
    for key in ("e", "a", "d", "b", "c"):
        await client.put(f"/v1/memory/working/{plan}/{key}", json={"value": 1}, headers=alice)

    seen: list[str] = []
    cursor: str | None = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await client.get(f"/v1/memory/working/{plan}", params=params, headers=alice)).json()
        seen += [item["key"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert seen == ["a", "b", "c", "d", "e"]


async def test_a_value_over_the_limit_is_refused_and_nothing_is_written(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    url = f"/v1/memory/working/{new_id('plan')}/big"
    huge = "x" * (WORKING_MEMORY_VALUE_MAX_BYTES + 10)

    response = await client.put(url, json={"value": huge}, headers=alice)

    assert response.status_code == 413
    assert error_code(response) == "payload_too_large"
    assert (await client.get(url, headers=alice)).status_code == 404


async def test_a_malformed_key_or_ttl_is_a_validation_error_and_a_bad_cursor_a_bad_request(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    plan = new_id("plan")

    bad_key = await client.put(
        f"/v1/memory/working/{plan}/bad%20key", json={"value": 1}, headers=alice
    )
    bad_cursor = await client.get(
        f"/v1/memory/working/{plan}", params={"cursor": "nope!"}, headers=alice
    )
    bad_ttl = await client.put(
        f"/v1/memory/working/{plan}/k", json={"value": 1, "ttl_seconds": 0}, headers=alice
    )

    assert [bad_key.status_code, bad_cursor.status_code, bad_ttl.status_code] == [422, 400, 422]
    assert error_code(bad_cursor) == "invalid_cursor"


async def test_another_tenant_can_neither_read_nor_overwrite_a_key(
    client: httpx.AsyncClient, alice: dict[str, str], stranger: dict[str, str]
) -> None:
    plan = new_id("plan")
    url = f"/v1/memory/working/{plan}/secret"
    await client.put(url, json={"value": "alice's"}, headers=alice)

    read = await client.get(url, headers=stranger)
    overwrite = await client.put(
        url, json={"value": "mine", "expected_version": 1}, headers=stranger
    )
    delete = await client.delete(url, headers=stranger)

    assert read.status_code == 404
    assert overwrite.status_code == 409
    assert delete.status_code == 404
    assert (await client.get(url, headers=alice)).json()["value"] == "alice's"
