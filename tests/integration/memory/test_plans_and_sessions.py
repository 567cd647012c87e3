"""Plans and sessions: create, read, status changes, filters, pagination, activity."""

from __future__ import annotations

import httpx

from tests.integration.memory.conftest import error_code, new_id


async def create_plan(client: httpx.AsyncClient, headers: dict[str, str], **fields: object) -> dict:
    body = {"goal_event": "research.goal", "response_event": "research.done", **fields}
    response = await client.post("/v1/memory/plans", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_a_created_plan_reads_back_pending(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    created = await create_plan(client, alice, goal_data={"topic": "ai"})

    got = await client.get(f"/v1/memory/plans/{created['plan_id']}", headers=alice)

    assert got.json()["status"] == "pending"
    assert got.json()["goal_data"] == {"topic": "ai"}
    assert got.json()["user_id"] == "alice"


async def test_a_plan_id_can_be_used_only_once(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    plan = new_id("plan")
    await create_plan(client, alice, plan_id=plan)

    again = await client.post(
        "/v1/memory/plans",
        json={"plan_id": plan, "goal_event": "x", "response_event": "y"},
        headers=alice,
    )

    assert again.status_code == 409
    assert error_code(again) == "plan_exists"


async def test_a_plan_pauses_resumes_and_completes_but_never_moves_after(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    plan = (await create_plan(client, alice))["plan_id"]
    url = f"/v1/memory/plans/{plan}"

    paused = await client.patch(
        url, json={"status": "paused", "reason": "ask a human"}, headers=alice
    )
    await client.patch(url, json={"status": "running"}, headers=alice)
    completed = await client.patch(url, json={"status": "completed"}, headers=alice)
    reopened = await client.patch(url, json={"status": "running"}, headers=alice)

    assert paused.json()["status_reason"] == "ask a human"
    assert completed.json()["completed_at"] is not None
    assert completed.json()["version"] == 4
    assert reopened.status_code == 409
    assert error_code(reopened) == "plan_finished"


async def test_a_status_change_with_a_stale_version_is_a_conflict(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    plan = (await create_plan(client, alice))["plan_id"]
    url = f"/v1/memory/plans/{plan}"
    await client.patch(url, json={"status": "running"}, headers=alice)

    stale = await client.patch(url, json={"status": "failed", "expected_version": 1}, headers=alice)

    assert stale.status_code == 409
    assert (await client.get(url, headers=alice)).json()["status"] == "running"


async def test_a_sub_plan_must_name_an_existing_parent(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    parent = (await create_plan(client, alice))["plan_id"]

    child = await create_plan(client, alice, parent_plan_id=parent)
    orphan = await client.post(
        "/v1/memory/plans",
        json={"goal_event": "x", "response_event": "y", "parent_plan_id": new_id("nope")},
        headers=alice,
    )
    children = await client.get(
        "/v1/memory/plans", params={"parent_plan_id": parent}, headers=alice
    )

    assert orphan.status_code == 422
    assert error_code(orphan) == "unknown_parent_plan"
    assert [p["plan_id"] for p in children.json()["items"]] == [child["plan_id"]]


async def test_plans_filter_by_status_and_session_and_page_newest_first(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    session = new_id("session")
    plans = [(await create_plan(client, alice, session_id=session))["plan_id"] for _ in range(3)]
    await create_plan(client, alice)
    await client.patch(f"/v1/memory/plans/{plans[0]}", json={"status": "running"}, headers=alice)

    running = await client.get(
        "/v1/memory/plans", params={"status": "running", "session_id": session}, headers=alice
    )
    first = await client.get(
        "/v1/memory/plans", params={"session_id": session, "limit": 2}, headers=alice
    )
    second = await client.get(
        "/v1/memory/plans",
        params={"session_id": session, "limit": 2, "cursor": first.json()["next_cursor"]},
        headers=alice,
    )

    assert [p["plan_id"] for p in running.json()["items"]] == [plans[0]]
    listed = [p["plan_id"] for p in first.json()["items"] + second.json()["items"]]
    assert listed == list(reversed(plans))
    assert second.json()["next_cursor"] is None


async def test_a_cursor_of_another_list_or_other_filters_or_too_long_is_a_bad_request(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    session = new_id("session")
    for _ in range(2):
        await create_plan(client, alice, session_id=session)
    page = await client.get(
        "/v1/memory/plans", params={"session_id": session, "limit": 1}, headers=alice
    )
    cursor = page.json()["next_cursor"]

    same_filters = await client.get(
        "/v1/memory/plans", params={"session_id": session, "cursor": cursor}, headers=alice
    )
    other_filters = await client.get(
        "/v1/memory/plans",
        params={"session_id": session, "status": "pending", "cursor": cursor},
        headers=alice,
    )
    other_list = await client.get("/v1/memory/sessions", params={"cursor": cursor}, headers=alice)
    too_long = await client.get("/v1/memory/plans", params={"cursor": "A" * 2000}, headers=alice)

    assert same_filters.status_code == 200
    assert len(same_filters.json()["items"]) == 1
    for refused in (other_filters, other_list, too_long):
        assert refused.status_code == 400, refused.text
        assert error_code(refused) == "invalid_cursor"
        assert "cursor" in refused.json()["error"]["message"]


async def test_an_unknown_status_filter_is_a_validation_error(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    response = await client.get("/v1/memory/plans", params={"status": "sleeping"}, headers=alice)

    assert response.status_code == 422
    assert error_code(response) == "validation_failed"


async def test_a_session_counts_its_plans_and_tracks_activity(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    created = await client.post(
        "/v1/memory/sessions",
        json={"name": "budget", "metadata": {"channel": "web"}},
        headers=alice,
    )
    session = created.json()["session_id"]
    for _ in range(2):
        await create_plan(client, alice, session_id=session)

    got = await client.get(f"/v1/memory/sessions/{session}", headers=alice)

    assert created.status_code == 201
    assert got.json()["plan_count"] == 2
    assert got.json()["name"] == "budget"
    assert got.json()["last_activity_at"] > created.json()["last_activity_at"]


async def test_a_plan_in_an_unknown_session_creates_the_session(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    session = new_id("session")

    await create_plan(client, alice, session_id=session)

    got = await client.get(f"/v1/memory/sessions/{session}", headers=alice)
    assert got.json()["plan_count"] == 1


async def test_sessions_list_most_recently_active_first(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    older, newer = new_id("s"), new_id("s")
    for session in (older, newer):
        await client.post("/v1/memory/sessions", json={"session_id": session}, headers=alice)
    await create_plan(client, alice, session_id=older)

    listed = await client.get("/v1/memory/sessions", params={"limit": 1}, headers=alice)
    rest = await client.get(
        "/v1/memory/sessions", params={"cursor": listed.json()["next_cursor"]}, headers=alice
    )

    assert [s["session_id"] for s in listed.json()["items"]] == [older]
    assert [s["session_id"] for s in rest.json()["items"]] == [newer]


async def test_a_session_id_can_be_created_only_once(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    session = new_id("s")
    await client.post("/v1/memory/sessions", json={"session_id": session}, headers=alice)

    again = await client.post("/v1/memory/sessions", json={"session_id": session}, headers=alice)

    assert again.status_code == 409
    assert error_code(again) == "session_exists"


async def test_sessions_and_plan_lists_are_private_to_their_user(
    client: httpx.AsyncClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    session = new_id("s")
    await create_plan(client, alice, session_id=session)

    bobs_session = await client.get(f"/v1/memory/sessions/{session}", headers=bob)
    bobs_sessions = await client.get("/v1/memory/sessions", headers=bob)
    bobs_plans = await client.get("/v1/memory/plans", params={"session_id": session}, headers=bob)

    assert bobs_session.status_code == 404
    assert bobs_sessions.json()["items"] == []
    assert bobs_plans.json()["items"] == []


async def test_another_tenant_cannot_read_or_move_a_plan(
    client: httpx.AsyncClient, alice: dict[str, str], stranger: dict[str, str]
) -> None:
    plan = (await create_plan(client, alice))["plan_id"]

    read = await client.get(f"/v1/memory/plans/{plan}", headers=stranger)
    moved = await client.patch(
        f"/v1/memory/plans/{plan}", json={"status": "failed"}, headers=stranger
    )

    assert [read.status_code, moved.status_code] == [404, 404]
    assert (await client.get(f"/v1/memory/plans/{plan}", headers=alice)).json()[
        "status"
    ] == "pending"
