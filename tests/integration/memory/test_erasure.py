"""Erasure: everything of one user, or of one tenant (admin only), in one transaction."""

from __future__ import annotations

import httpx

from disco_common.auth import Role
from tests.integration.memory.conftest import bearer, new_id


async def fill(client: httpx.AsyncClient, headers: dict[str, str], tag: str) -> dict[str, str]:
    """Write one record of every family; return the ids to look for afterwards."""
    plan, session, task, event = new_id("plan"), new_id("s"), new_id("task"), new_id("event")
    await client.put(f"/v1/memory/dedup/workers/{event}", json={}, headers=headers)
    await client.post(
        f"/v1/memory/steps/workers/{event}", json={"name": "s", "result": tag}, headers=headers
    )
    await client.put(f"/v1/memory/working/{plan}/k", json={"value": tag}, headers=headers)
    await client.put(
        f"/v1/memory/task-context/{task}",
        json={"context": {"task_id": task, "event_type": "a.b", "response_event": "a.c"}},
        headers=headers,
    )
    await client.put(
        f"/v1/memory/plan-context/{plan}",
        json={"context": {"plan_id": plan, "goal_event": "g.x", "response_event": "g.y"}},
        headers=headers,
    )
    await client.post(
        "/v1/memory/plans",
        json={"plan_id": plan, "goal_event": "g.x", "response_event": "g.y", "session_id": session},
        headers=headers,
    )
    memory = await client.put(
        "/v1/memory/semantic", json={"content": f"{tag} likes jazz"}, headers=headers
    )
    await client.post(
        "/v1/memory/episodic",
        json={"session_id": session, "agent_id": "a", "role": "user", "content": tag},
        headers=headers,
    )
    procedure = await client.post(
        "/v1/memory/procedural",
        json={"name": tag, "trigger": tag, "instructions": tag},
        headers=headers,
    )
    await client.put(
        f"/v1/memory/snapshots/{session}/a", json={"full": {}, "slim": {}}, headers=headers
    )
    return {
        "plan": plan,
        "session": session,
        "task": task,
        "event": event,
        "memory": memory.json()["memory_id"],
        "procedure": procedure.json()["procedure_id"],
    }


async def readable(
    client: httpx.AsyncClient, headers: dict[str, str], ids: dict[str, str]
) -> dict[str, int]:
    urls = {
        "working": f"/v1/memory/working/{ids['plan']}/k",
        "task": f"/v1/memory/task-context/{ids['task']}",
        "plan_context": f"/v1/memory/plan-context/{ids['plan']}",
        "plan": f"/v1/memory/plans/{ids['plan']}",
        "session": f"/v1/memory/sessions/{ids['session']}",
        "memory": f"/v1/memory/semantic/{ids['memory']}",
        "procedure": f"/v1/memory/procedural/{ids['procedure']}",
        "snapshot": f"/v1/memory/snapshots/{ids['session']}/a",
        "dedup_mark": f"/v1/memory/dedup/workers/{ids['event']}",
    }
    return {
        name: (await client.get(url, headers=headers)).status_code for name, url in urls.items()
    }


async def test_a_user_erases_themselves_and_nothing_of_others_goes(
    client: httpx.AsyncClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    alices = await fill(client, alice, "alice")
    bobs = await fill(client, bob, "bob")

    erased = await client.delete("/v1/memory/erasure/users/alice", headers=alice)

    assert erased.status_code == 200
    assert erased.json()["scope"] == "user"
    assert erased.json()["deleted"]["semantic_memories"] == 1
    assert erased.json()["deleted"]["dedup_marks"] == 1
    assert erased.json()["total"] >= 9
    assert set((await readable(client, alice, alices)).values()) == {404}
    assert set((await readable(client, bob, bobs)).values()) == {200}
    recent = await client.get(
        "/v1/memory/episodic/recent", params={"session_id": alices["session"]}, headers=alice
    )
    assert recent.json() == []


async def test_erasing_another_user_needs_the_admin_role(
    client: httpx.AsyncClient, tenant: str, alice: dict[str, str], bob: dict[str, str]
) -> None:
    alices = await fill(client, alice, "alice")
    admin = bearer(tenant, "root", roles=(Role.ADMIN,))

    refused = await client.delete("/v1/memory/erasure/users/alice", headers=bob)
    allowed = await client.delete("/v1/memory/erasure/users/alice", headers=admin)

    assert refused.status_code == 403
    assert allowed.status_code == 200
    assert set((await readable(client, alice, alices)).values()) == {404}


async def test_a_tenant_erasure_needs_admin_and_removes_every_users_rows(
    client: httpx.AsyncClient,
    tenant: str,
    alice: dict[str, str],
    bob: dict[str, str],
    stranger: dict[str, str],
) -> None:
    alices = await fill(client, alice, "alice")
    bobs = await fill(client, bob, "bob")
    strangers = await fill(client, stranger, "mallory")

    refused = await client.delete("/v1/memory/erasure/tenant", headers=alice)
    erased = await client.delete(
        "/v1/memory/erasure/tenant", headers=bearer(tenant, "root", roles=(Role.ADMIN,))
    )

    assert refused.status_code == 403
    assert erased.json()["scope"] == "tenant"
    assert erased.json()["deleted"]["sessions"] == 2
    assert erased.json()["deleted"]["dedup_marks"] == 2
    assert set((await readable(client, alice, alices)).values()) == {404}
    assert set((await readable(client, bob, bobs)).values()) == {404}
    assert set((await readable(client, stranger, strangers)).values()) == {200}


async def test_an_admin_of_another_tenant_cannot_erase_this_one(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    alices = await fill(client, alice, "alice")

    await client.delete(
        "/v1/memory/erasure/tenant", headers=bearer(new_id("tenant"), "root", roles=(Role.ADMIN,))
    )

    assert set((await readable(client, alice, alices)).values()) == {200}
