"""Payload schemas: immutable versions, semver precedence, validation listing every violation."""

from __future__ import annotations

from typing import Any

import httpx

from tests.fixtures.infra import DatabaseUrls
from tests.integration.registry.support import (
    OBJECT_SCHEMA,
    assert_error,
    bearer,
    new_tenant,
    sql,
    unique,
)


async def publish(
    http: httpx.AsyncClient, tenant: str, name: str, version: str, schema: dict[str, Any]
) -> httpx.Response:
    return await http.post(
        "/v1/schemas",
        json={"name": name, "version": version, "json_schema": schema},
        headers=bearer(tenant),
    )


async def test_reposting_the_same_content_under_a_version_is_idempotent(
    http: httpx.AsyncClient,
) -> None:
    tenant, name = new_tenant(), unique("order")

    first = await publish(http, tenant, name, "1.0.0", OBJECT_SCHEMA)
    again = await publish(http, tenant, name, "1.0.0", dict(reversed(list(OBJECT_SCHEMA.items()))))

    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json() == first.json()


async def test_different_content_under_an_existing_version_is_a_conflict_and_changes_nothing(
    http: httpx.AsyncClient, database: DatabaseUrls
) -> None:
    tenant, name = new_tenant(), unique("order")
    first = await publish(http, tenant, name, "1.0.0", OBJECT_SCHEMA)

    response = await publish(http, tenant, name, "1.0.0", {"type": "string"})

    error = assert_error(response, 409, "schema_version_conflict")
    assert error["details"]["existing_content_hash"] == first.json()["content_hash"]
    stored = await http.get(f"/v1/schemas/{name}/versions/1.0.0", headers=bearer(tenant))
    assert stored.json()["json_schema"] == OBJECT_SCHEMA
    rows = await sql(
        database.admin, "SELECT count(*) AS n FROM registry.payload_schemas WHERE name = $1", name
    )
    assert rows[0]["n"] == 1


async def test_latest_follows_semver_precedence_not_the_order_of_publication(
    http: httpx.AsyncClient,
) -> None:
    tenant, name = new_tenant(), unique("order")
    for version in ("1.10.0-rc.1", "1.10.0", "1.9.0", "1.10.0-beta", "1.2.3"):
        assert (await publish(http, tenant, name, version, {"title": version})).status_code == 201

    latest = await http.get(f"/v1/schemas/{name}", headers=bearer(tenant))
    versions = await http.get(f"/v1/schemas/{name}/versions", headers=bearer(tenant))

    assert latest.json()["version"] == "1.10.0"
    assert [v["version"] for v in versions.json()["items"]] == [
        "1.10.0",
        "1.10.0-rc.1",
        "1.10.0-beta",
        "1.9.0",
        "1.2.3",
    ]


async def test_versions_are_listed_page_by_page_with_a_cursor(http: httpx.AsyncClient) -> None:
    tenant, name = new_tenant(), unique("order")
    for minor in range(5):
        await publish(http, tenant, name, f"1.{minor}.0", {"title": str(minor)})

    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = (
            await http.get(f"/v1/schemas/{name}/versions", params=params, headers=bearer(tenant))
        ).json()
        pages += 1
        seen += [item["version"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert pages == 3
    assert seen == ["1.4.0", "1.3.0", "1.2.0", "1.1.0", "1.0.0"]


async def test_validation_returns_every_violation_with_its_path(http: httpx.AsyncClient) -> None:
    tenant, name = new_tenant(), unique("order")
    await publish(http, tenant, name, "1.0.0", OBJECT_SCHEMA)

    response = await http.post(
        f"/v1/schemas/{name}/versions/1.0.0/validate",
        json={"payload": {"a": "one", "extra": True}},
        headers=bearer(tenant),
    )

    assert response.status_code == 200
    result = response.json()
    assert result["valid"] is False
    assert result["schema_ref"] == {"name": name, "version": "1.0.0"}
    found = {(v["path"], v["validator"]) for v in result["violations"]}
    assert found == {("/a", "type"), ("", "required"), ("", "additionalProperties")}


async def test_a_valid_payload_validates_without_violations(http: httpx.AsyncClient) -> None:
    tenant, name = new_tenant(), unique("order")
    await publish(http, tenant, name, "1.0.0", OBJECT_SCHEMA)

    response = await http.post(
        f"/v1/schemas/{name}/versions/1.0.0/validate",
        json={"payload": {"a": 1, "b": 2}},
        headers=bearer(tenant),
    )

    assert response.json() == {
        "valid": True,
        "violations": [],
        "truncated": False,
        "schema_ref": {"name": name, "version": "1.0.0"},
    }


async def test_unknown_schemas_and_versions_are_not_found(http: httpx.AsyncClient) -> None:
    tenant, name = new_tenant(), unique("order")
    await publish(http, tenant, name, "1.0.0", OBJECT_SCHEMA)

    assert_error(await http.get(f"/v1/schemas/{unique('nope')}", headers=bearer(tenant)), 404)
    assert_error(
        await http.get(f"/v1/schemas/{name}/versions/2.0.0", headers=bearer(tenant)),
        404,
        "schema_not_found",
    )
    assert_error(
        await http.post(
            f"/v1/schemas/{name}/versions/2.0.0/validate",
            json={"payload": {}},
            headers=bearer(tenant),
        ),
        404,
    )


async def test_an_invalid_json_schema_is_refused_and_not_stored(
    http: httpx.AsyncClient, database: DatabaseUrls
) -> None:
    tenant, name = new_tenant(), unique("order")

    response = await publish(http, tenant, name, "1.0.0", {"type": "nonsense"})
    bad_version = await publish(http, tenant, name, "1.0", OBJECT_SCHEMA)

    error = assert_error(response, 422, "validation_failed")
    assert "not a valid JSON Schema" in str(error["details"])
    assert_error(bad_version, 422)
    rows = await sql(
        database.admin, "SELECT count(*) AS n FROM registry.payload_schemas WHERE name = $1", name
    )
    assert rows[0]["n"] == 0
