"""Procedural memory: CRUD and search by relevance to a situation."""

from __future__ import annotations

import httpx

from tests.integration.memory.conftest import error_code


async def create(client: httpx.AsyncClient, headers: dict[str, str], **fields: object) -> dict:
    body = {
        "name": "refund a duplicate charge",
        "trigger": "a customer was charged twice",
        "steps": ["find both charges", "refund the later one"],
        **fields,
    }
    response = await client.post("/v1/memory/procedural", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_a_procedure_is_created_read_updated_and_deleted(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    created = await create(client, alice)
    url = f"/v1/memory/procedural/{created['procedure_id']}"

    updated = await client.patch(
        url, json={"steps": ["refund the later charge"], "expected_version": 1}, headers=alice
    )
    read = await client.get(url, headers=alice)
    deleted = await client.delete(url, headers=alice)
    gone = await client.get(url, headers=alice)

    assert updated.json()["version"] == 2
    assert read.json()["steps"] == ["refund the later charge"]
    assert read.json()["name"] == "refund a duplicate charge"
    assert deleted.status_code == 204
    assert gone.status_code == 404


async def test_a_stale_procedure_update_is_a_conflict(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    created = await create(client, alice)
    url = f"/v1/memory/procedural/{created['procedure_id']}"
    await client.patch(url, json={"instructions": "be kind"}, headers=alice)

    stale = await client.patch(
        url, json={"instructions": "be quick", "expected_version": 1}, headers=alice
    )

    assert stale.status_code == 409
    assert (await client.get(url, headers=alice)).json()["instructions"] == "be kind"


async def test_search_finds_the_procedure_for_a_described_situation(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    refund = await create(client, alice)
    await create(
        client,
        alice,
        name="reset a password",
        trigger="a user cannot log in",
        steps=["send a reset link"],
    )
    await create(
        client,
        alice,
        name="escalate an outage",
        trigger="the website is down for everyone",
        steps=["page on-call"],
    )

    hits = await client.post(
        "/v1/memory/procedural/search",
        json={"situation": "The client says their card got billed two times for one order"},
        headers=alice,
    )

    assert hits.json()[0]["procedure"]["procedure_id"] == refund["procedure_id"]
    assert hits.json()[0]["score"] > hits.json()[1]["score"]


async def test_search_for_an_agent_includes_procedures_for_every_agent(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    general = await create(client, alice)
    mine = await create(client, alice, name="refund in the billing tool", agent_id="billing")
    await create(client, alice, name="refund via support tool", agent_id="support")

    hits = await client.post(
        "/v1/memory/procedural/search",
        json={"situation": "double charge", "agent_id": "billing", "limit": 10},
        headers=alice,
    )

    assert {h["procedure"]["procedure_id"] for h in hits.json()} == {
        general["procedure_id"],
        mine["procedure_id"],
    }


async def test_procedures_list_newest_first_with_public_ones_of_others(
    client: httpx.AsyncClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    first = await create(client, alice, visibility="public")
    second = await create(client, alice)
    bobs = await create(client, bob)

    alice_list = await client.get("/v1/memory/procedural", params={"limit": 1}, headers=alice)
    alice_rest = await client.get(
        "/v1/memory/procedural", params={"cursor": alice_list.json()["next_cursor"]}, headers=alice
    )
    bob_list = await client.get("/v1/memory/procedural", headers=bob)

    assert [p["procedure_id"] for p in alice_list.json()["items"] + alice_rest.json()["items"]] == [
        second["procedure_id"],
        first["procedure_id"],
    ]
    assert {p["procedure_id"] for p in bob_list.json()["items"]} == {
        bobs["procedure_id"],
        first["procedure_id"],
    }


async def test_a_public_procedure_cannot_be_changed_by_another_user(
    client: httpx.AsyncClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    shared = await create(client, alice, visibility="public")
    url = f"/v1/memory/procedural/{shared['procedure_id']}"

    update = await client.patch(url, json={"name": "hijacked"}, headers=bob)
    delete = await client.delete(url, headers=bob)

    assert [update.status_code, delete.status_code] == [404, 404]
    assert (await client.get(url, headers=alice)).json()["name"] == "refund a duplicate charge"


async def test_a_procedure_without_steps_or_instructions_is_refused(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    created = await create(client, alice)

    empty = await client.post(
        "/v1/memory/procedural", json={"name": "x", "trigger": "y"}, headers=alice
    )
    emptied = await client.patch(
        f"/v1/memory/procedural/{created['procedure_id']}", json={"steps": []}, headers=alice
    )

    assert [empty.status_code, emptied.status_code] == [422, 422]
    assert error_code(emptied) == "validation_failed"


async def test_another_tenant_cannot_see_a_procedure(
    client: httpx.AsyncClient, alice: dict[str, str], stranger: dict[str, str]
) -> None:
    shared = await create(client, alice, visibility="public")

    read = await client.get(f"/v1/memory/procedural/{shared['procedure_id']}", headers=stranger)
    search = await client.post(
        "/v1/memory/procedural/search", json={"situation": "charged twice"}, headers=stranger
    )

    assert read.status_code == 404
    assert search.json() == []
