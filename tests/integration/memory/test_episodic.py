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
