"""Agent-state snapshots: latest full and slim state per agent and session."""

from __future__ import annotations

import httpx

from disco_common.auth import ON_BEHALF_OF_TENANT_HEADER, ON_BEHALF_OF_USER_HEADER, Role
from disco_common.memory import SNAPSHOT_FULL_MAX_BYTES, SNAPSHOT_SLIM_MAX_BYTES
from tests.integration.memory.conftest import bearer, error_code, new_id


def snapshot(step: int, **fields: object) -> dict[str, object]:
    return {
        "full": {"messages": [{"role": "user", "content": "hi"}], "step": step},
        "slim": {"step": step},
        "status": "running",
        **fields,
    }


async def test_the_latest_snapshot_reads_back_with_full_and_slim_state(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    url = f"/v1/memory/snapshots/{new_id('s')}/assistant"
    first = await client.put(url, json=snapshot(1), headers=alice)
    second = await client.put(url, json=snapshot(2, execution_id="exec-2"), headers=alice)

    got = await client.get(url, headers=alice)

    assert "full" not in first.json()
    assert second.json()["version"] == 2
    assert got.json()["full"]["step"] == 2
    assert got.json()["slim"] == {"step": 2}
    assert got.json()["execution_id"] == "exec-2"
    assert got.json()["full_bytes"] > got.json()["slim_bytes"] > 0


async def test_a_sessions_snapshots_list_one_per_agent_without_full_state(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    session = new_id("s")
    for agent in ("planner", "researcher"):
        await client.put(f"/v1/memory/snapshots/{session}/{agent}", json=snapshot(1), headers=alice)
    await client.put(f"/v1/memory/snapshots/{session}/planner", json=snapshot(2), headers=alice)

    listed = await client.get(f"/v1/memory/snapshots/{session}", headers=alice)

    assert [s["agent_id"] for s in listed.json()] == ["planner", "researcher"]
    assert all("full" not in s for s in listed.json())
    assert listed.json()[0]["slim"] == {"step": 2}


async def test_a_stale_snapshot_write_is_a_conflict(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    url = f"/v1/memory/snapshots/{new_id('s')}/assistant"
    await client.put(url, json=snapshot(1), headers=alice)
    await client.put(url, json=snapshot(2), headers=alice)

    stale = await client.put(url, json=snapshot(3, expected_version=1), headers=alice)

    assert stale.status_code == 409
    assert (await client.get(url, headers=alice)).json()["slim"] == {"step": 2}


async def test_an_oversized_slim_state_is_refused_and_the_old_snapshot_kept(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    url = f"/v1/memory/snapshots/{new_id('s')}/assistant"
    await client.put(url, json=snapshot(1), headers=alice)

    too_big = await client.put(
        url,
        json={"full": {}, "slim": {"blob": "x" * (SNAPSHOT_SLIM_MAX_BYTES + 1)}},
        headers=alice,
    )

    assert too_big.status_code == 413
    assert error_code(too_big) == "payload_too_large"
    assert (await client.get(url, headers=alice)).json()["slim"] == {"step": 1}


async def test_a_full_state_near_the_limit_is_stored(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    url = f"/v1/memory/snapshots/{new_id('s')}/assistant"
    big = "y" * (SNAPSHOT_FULL_MAX_BYTES - 1024)

    stored = await client.put(url, json={"full": {"blob": big}, "slim": {}}, headers=alice)

    assert stored.status_code == 200
    assert stored.json()["full_bytes"] > SNAPSHOT_FULL_MAX_BYTES - 2048


async def test_a_deleted_snapshot_is_gone(client: httpx.AsyncClient, alice: dict[str, str]) -> None:
    url = f"/v1/memory/snapshots/{new_id('s')}/assistant"
    await client.put(url, json=snapshot(1), headers=alice)

    deleted = await client.delete(url, headers=alice)

    assert deleted.status_code == 204
    assert (await client.get(url, headers=alice)).status_code == 404


async def test_snapshots_are_private_to_their_user_and_tenant(
    client: httpx.AsyncClient, alice: dict[str, str], bob: dict[str, str], stranger: dict[str, str]
) -> None:
    session = new_id("s")
    url = f"/v1/memory/snapshots/{session}/assistant"
    await client.put(url, json=snapshot(1), headers=alice)

    for outsider in (bob, stranger):
        assert (await client.get(url, headers=outsider)).status_code == 404
        assert (await client.get(f"/v1/memory/snapshots/{session}", headers=outsider)).json() == []
        guarded = await client.put(url, json=snapshot(9, expected_version=1), headers=outsider)
        assert guarded.status_code == 409
    assert (await client.get(url, headers=alice)).json()["slim"] == {"step": 1}


async def test_another_user_cannot_overwrite_a_sessions_snapshot(
    client: httpx.AsyncClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    url = f"/v1/memory/snapshots/{new_id('s')}/assistant"
    await client.put(url, json=snapshot(1), headers=alice)

    taken = await client.put(url, json=snapshot(2), headers=bob)

    assert taken.status_code == 409
    assert taken.json()["error"]["code"] == "owned_by_another_user"
    assert (await client.get(url, headers=alice)).json()["slim"] == {"step": 1}


async def test_an_agent_resumes_a_session_by_session_and_agent_whoever_acts_and_the_owner_stays(
    client: httpx.AsyncClient, tenant: str, alice: dict[str, str], bob: dict[str, str]
) -> None:
    session = new_id("s")
    url = f"/v1/memory/snapshots/{session}/assistant"
    await client.put(url, json=snapshot(1), headers=alice)
    # An agent (service role) handling the decision of an operator of the tenant.
    agent = bearer("platform", "agent", (Role.SERVICE,))
    acting = {**agent, ON_BEHALF_OF_TENANT_HEADER: tenant, ON_BEHALF_OF_USER_HEADER: "ops"}
    operator = bearer(tenant, "ops", (Role.OPERATOR,))

    read = await client.get(url, headers=acting)
    written = await client.put(url, json=snapshot(2), headers=acting)
    listed = await client.get(f"/v1/memory/snapshots/{session}", headers=operator)

    assert read.status_code == 200
    assert read.json()["slim"] == {"step": 1}
    assert written.status_code == 200
    assert [item["slim"] for item in listed.json()] == [{"step": 2}]
    assert (await client.get(url, headers=alice)).json()["slim"] == {"step": 2}  # still hers
    assert (await client.get(url, headers=bob)).status_code == 404


async def test_a_snapshot_holding_a_nul_character_is_refused_clearly_and_the_old_one_kept(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    url = f"/v1/memory/snapshots/{new_id('s')}/assistant"
    await client.put(url, json=snapshot(1), headers=alice)

    refused = await client.put(
        url, json={"full": {"text": "a\u0000b"}, "slim": {"text": "a\\u0000b"}}, headers=alice
    )

    assert refused.status_code == 422
    assert error_code(refused) == "nul_character"
    assert "full state" in refused.json()["error"]["message"]
    assert (await client.get(url, headers=alice)).json()["slim"] == {"step": 1}
