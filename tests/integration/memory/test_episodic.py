"""Episodic memory: turns per session and agent, recent N, text and semantic search."""

from __future__ import annotations

import httpx

from tests.integration.memory.conftest import new_id


async def append(
    client: httpx.AsyncClient, headers: dict[str, str], session: str, content: str, **fields: object
) -> dict:
    body = {
        "session_id": session,
        "agent_id": "assistant",
        "role": "user",
        "content": content,
        **fields,
    }
    response = await client.post("/v1/memory/episodic", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_recent_turns_come_back_oldest_first_and_page_backwards(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    session = new_id("s")
    turns = [await append(client, alice, session, f"turn {n}") for n in range(5)]

    last_two = await client.get(
        "/v1/memory/episodic/recent", params={"session_id": session, "limit": 2}, headers=alice
    )
    before = await client.get(
        "/v1/memory/episodic/recent",
        params={
            "session_id": session,
            "limit": 2,
            "before_sequence": last_two.json()[0]["sequence"],
        },
        headers=alice,
    )

    assert [t["content"] for t in last_two.json()] == ["turn 3", "turn 4"]
    assert [t["content"] for t in before.json()] == ["turn 1", "turn 2"]
    assert turns[0]["sequence"] < turns[4]["sequence"]


async def test_recent_turns_can_be_limited_to_one_agent(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    session = new_id("s")
    await append(client, alice, session, "to the planner", agent_id="planner")
    await append(client, alice, session, "to the assistant", agent_id="assistant")

    recent = await client.get(
        "/v1/memory/episodic/recent",
        params={"session_id": session, "agent_id": "planner"},
        headers=alice,
    )

    assert [t["content"] for t in recent.json()] == ["to the planner"]


async def test_a_turn_touches_its_session(client: httpx.AsyncClient, alice: dict[str, str]) -> None:
    session = new_id("s")

    await append(client, alice, session, "hello")

    got = await client.get(f"/v1/memory/sessions/{session}", headers=alice)
    assert got.status_code == 200
    assert got.json()["plan_count"] == 0


async def test_semantic_search_finds_a_turn_by_meaning(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    session = new_id("s")
    await append(client, alice, session, "I booked a flight to Tokyo for next Tuesday.")
    await append(client, alice, session, "My favourite colour is green.")
    await append(client, alice, session, "The printer on floor three is jammed again.")

    hits = await client.post(
        "/v1/memory/episodic/search",
        json={"text": "When is my trip to Japan?", "session_id": session, "mode": "semantic"},
        headers=alice,
    )

    assert hits.json()[0]["turn"]["content"].startswith("I booked a flight to Tokyo")


async def test_text_search_finds_exact_words_and_scores_only_matches(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    session = new_id("s")
    await append(client, alice, session, "Order ZX-4411 was shipped yesterday.")
    await append(client, alice, session, "Please ship it fast.")

    hits = await client.post(
        "/v1/memory/episodic/search",
        json={"text": "ZX-4411", "session_id": session, "mode": "text"},
        headers=alice,
    )

    assert [h["turn"]["content"] for h in hits.json()] == ["Order ZX-4411 was shipped yesterday."]
    assert 0 < hits.json()[0]["score"] < 1


async def test_hybrid_search_ranks_a_turn_matching_words_and_meaning_first(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    session = new_id("s")
    await append(
        client, alice, session, "Invoice 7781 for the Berlin office was paid.", role="assistant"
    )
    await append(client, alice, session, "We talked about the weather in Berlin.")
    await append(client, alice, session, "Lunch was pasta.")

    hits = await client.post(
        "/v1/memory/episodic/search",
        json={"text": "invoice 7781 payment", "session_id": session, "role": "assistant"},
        headers=alice,
    )

    assert [h["turn"]["content"] for h in hits.json()] == [
        "Invoice 7781 for the Berlin office was paid."
    ]


async def test_another_user_cannot_read_or_search_a_conversation(
    client: httpx.AsyncClient, alice: dict[str, str], bob: dict[str, str], stranger: dict[str, str]
) -> None:
    session = new_id("s")
    await append(client, alice, session, "My salary is confidential.")

    for outsider in (bob, stranger):
        recent = await client.get(
            "/v1/memory/episodic/recent", params={"session_id": session}, headers=outsider
        )
        search = await client.post(
            "/v1/memory/episodic/search", json={"text": "salary"}, headers=outsider
        )
        assert recent.json() == []
        assert search.json() == []


async def test_a_turn_is_corrected_and_search_finds_what_it_says_now(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    session = new_id("s")
    turn = await append(client, alice, session, "my flight leaves on Monday", metadata={"a": 1})

    changed = await client.patch(
        f"/v1/memory/episodic/{turn['turn_id']}",
        json={"content": "my train leaves on Tuesday"},
        headers=alice,
    )
    tagged = await client.patch(
        f"/v1/memory/episodic/{turn['turn_id']}", json={"metadata": {"b": 2}}, headers=alice
    )
    found = await client.post(
        "/v1/memory/episodic/search",
        json={"text": "train", "session_id": session, "mode": "text"},
        headers=alice,
    )
    stale = await client.post(
        "/v1/memory/episodic/search",
        json={"text": "flight", "session_id": session, "mode": "text"},
        headers=alice,
    )

    assert changed.status_code == 200, changed.text
    assert changed.json()["content"] == "my train leaves on Tuesday"
    assert changed.json()["metadata"] == {"a": 1}  # not named: unchanged
    assert tagged.json()["content"] == "my train leaves on Tuesday"
    assert tagged.json()["metadata"] == {"b": 2}
    assert tagged.json()["sequence"] == turn["sequence"]
    assert [hit["turn"]["turn_id"] for hit in found.json()] == [turn["turn_id"]]
    assert stale.json() == []


async def test_a_turn_is_deleted_and_only_by_its_user(
    client: httpx.AsyncClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    session = new_id("s")
    turn = await append(client, alice, session, "forget this")
    url = f"/v1/memory/episodic/{turn['turn_id']}"

    by_bob = await client.delete(url, headers=bob)
    patched_by_bob = await client.patch(url, json={"content": "mine now"}, headers=bob)
    by_alice = await client.delete(url, headers=alice)
    again = await client.delete(url, headers=alice)
    recent = await client.get(
        "/v1/memory/episodic/recent", params={"session_id": session}, headers=alice
    )

    assert (by_bob.status_code, patched_by_bob.status_code) == (404, 404)
    assert by_bob.json()["error"]["code"] == "not_found"
    assert by_alice.status_code == 204
    assert again.status_code == 404
    assert recent.json() == []


async def test_an_update_that_changes_nothing_is_refused(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    turn = await append(client, alice, new_id("s"), "hello")

    response = await client.patch(f"/v1/memory/episodic/{turn['turn_id']}", json={}, headers=alice)

    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_failed"
