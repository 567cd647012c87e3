"""Semantic memory: upsert, similarity query with scores, filters, visibility, bad input."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable

import httpx
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from pgvector import Vector
from sqlalchemy import text

from disco_memory import MemorySettings, create_app
from disco_memory.semantic.repository import _QUERY
from disco_memory.startup import check_hnsw_options
from disco_memory.state import MemoryState
from disco_service import get_state
from tests.fixtures.memory import SharedEmbedder
from tests.integration.memory.conftest import bearer, error_code

FACTS = [
    "To reset your password, open Settings and choose 'Forgot password'.",
    "Our refund policy allows returns within 30 days of purchase.",
    "The Eiffel Tower is located in Paris, France.",
    "Photosynthesis converts sunlight into chemical energy in plants.",
    "Quarterly revenue grew 12 percent thanks to strong cloud sales.",
    "The cat sat on the mat and purred quietly.",
]


async def store(
    client: httpx.AsyncClient, headers: dict[str, str], content: str, **fields: object
) -> dict:
    response = await client.put(
        "/v1/memory/semantic", json={"content": content, **fields}, headers=headers
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def query(client: httpx.AsyncClient, headers: dict[str, str], **body: object) -> list[dict]:
    response = await client.post("/v1/memory/semantic/query", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return list(response.json())


async def test_a_paraphrased_question_ranks_the_matching_memory_first(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    for fact in FACTS:
        await store(client, alice, fact)

    login = await query(client, alice, text="How can I change my login credentials?", limit=3)
    money = await query(client, alice, text="Can I get my money back if I return an item?", limit=3)
    plants = await query(client, alice, text="How do plants make food from light?", limit=3)

    assert login[0]["record"]["content"] == FACTS[0]
    assert money[0]["record"]["content"] == FACTS[1]
    assert plants[0]["record"]["content"] == FACTS[3]
    assert login[0]["score"] > login[1]["score"]
    assert all(-1.0 <= hit["score"] <= 1.0 for hit in login)


async def test_the_same_text_stored_twice_is_one_memory(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    first = await store(client, alice, "Alice prefers tea.", metadata={"v": 1})
    second = await store(client, alice, "Alice prefers tea.", metadata={"v": 2})

    hits = await query(client, alice, text="What does Alice drink?")

    assert first["memory_id"] == second["memory_id"]
    assert [hit["record"]["metadata"] for hit in hits] == [{"v": 2}]


async def test_an_external_id_upsert_replaces_the_content_and_its_meaning(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    first = await store(client, alice, "The meeting is on Monday.", external_id="meeting")
    second = await store(
        client, alice, "The office is closed for renovation.", external_id="meeting"
    )

    hits = await query(client, alice, text="Is the office open?", limit=5)

    assert first["memory_id"] == second["memory_id"]
    assert [hit["record"]["content"] for hit in hits] == ["The office is closed for renovation."]


async def test_metadata_filters_and_threshold_narrow_the_hits(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    await store(client, alice, "Paris is the capital of France.", metadata={"source": "wiki"})
    await store(client, alice, "Paris has many museums.", metadata={"source": "blog"})
    await store(client, alice, "Bananas are yellow.", metadata={"source": "wiki"})

    wiki = await query(client, alice, text="Tell me about Paris", filter={"source": "wiki"})
    close = await query(client, alice, text="Tell me about Paris", threshold=0.99)

    assert {hit["record"]["metadata"]["source"] for hit in wiki} == {"wiki"}
    assert wiki[0]["record"]["content"] == "Paris is the capital of France."
    assert close == []


async def test_a_callers_own_vector_is_stored_and_searched(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    model = (await client.get("/v1/memory/semantic/model", headers=alice)).json()
    near = [1.0] + [0.0] * (model["dimensions"] - 1)
    far = [0.0, 1.0] + [0.0] * (model["dimensions"] - 2)
    await store(client, alice, "near", embedding=near)
    await store(client, alice, "far", embedding=far)

    hits = await query(client, alice, embedding=near, limit=2)

    assert [hit["record"]["content"] for hit in hits] == ["near", "far"]
    assert hits[0]["score"] == 1.0


async def test_a_vector_of_the_wrong_dimension_is_refused_and_nothing_is_written(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    stored = await client.put(
        "/v1/memory/semantic",
        json={"content": "short vector", "embedding": [0.1, 0.2]},
        headers=alice,
    )
    searched = await client.post(
        "/v1/memory/semantic/query", json={"embedding": [0.1, 0.2]}, headers=alice
    )

    assert [stored.status_code, searched.status_code] == [422, 422]
    assert error_code(stored) == "validation_failed"
    assert await query(client, alice, text="short vector") == []


async def test_bad_queries_are_validation_errors(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    neither = await client.post("/v1/memory/semantic/query", json={"limit": 3}, headers=alice)
    bad_filter = await client.post(
        "/v1/memory/semantic/query",
        json={"text": "x", "filter": {"nested": {"no": "objects"}}},
        headers=alice,
    )
    bad_limit = await client.post(
        "/v1/memory/semantic/query", json={"text": "x", "limit": 0}, headers=alice
    )

    assert [neither.status_code, bad_filter.status_code, bad_limit.status_code] == [422, 422, 422]


async def test_private_memories_stay_private_and_public_ones_are_shared_read_only(
    client: httpx.AsyncClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    private = await store(client, alice, "Alice's locker code is 4711.")
    public = await store(client, alice, "The cafeteria opens at 8am.", visibility="public")

    bob_hits = await query(client, bob, text="When does the cafeteria open? locker code", limit=10)
    bob_private = await client.get(f"/v1/memory/semantic/{private['memory_id']}", headers=bob)
    bob_public = await client.get(f"/v1/memory/semantic/{public['memory_id']}", headers=bob)
    bob_delete = await client.delete(f"/v1/memory/semantic/{public['memory_id']}", headers=bob)
    no_public = await query(client, bob, text="cafeteria", include_public=False)

    assert [hit["record"]["memory_id"] for hit in bob_hits] == [public["memory_id"]]
    assert bob_private.status_code == 404
    assert bob_public.status_code == 200
    assert bob_delete.status_code == 404
    assert no_public == []
    assert (
        await client.get(f"/v1/memory/semantic/{public['memory_id']}", headers=alice)
    ).status_code == 200


async def test_another_tenant_sees_no_memory_even_public_ones(
    client: httpx.AsyncClient, alice: dict[str, str], stranger: dict[str, str]
) -> None:
    public = await store(client, alice, "Acme's wifi password is hunter2.", visibility="public")

    hits = await query(client, stranger, text="wifi password")
    read = await client.get(f"/v1/memory/semantic/{public['memory_id']}", headers=stranger)

    assert hits == []
    assert read.status_code == 404


async def test_a_deleted_memory_is_no_longer_found(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    memory = await store(client, alice, "Temporary fact about zebras.")

    deleted = await client.delete(f"/v1/memory/semantic/{memory['memory_id']}", headers=alice)

    assert deleted.status_code == 204
    assert await query(client, alice, text="zebras") == []


async def test_every_pooled_connection_searches_with_the_configured_hnsw_options(
    memory_settings: Callable[..., MemorySettings], embedder: SharedEmbedder
) -> None:
    app = create_app(memory_settings(hnsw_ef_search=77), embedder=embedder)
    async with LifespanManager(app, startup_timeout=60):
        database = get_state(app).require_database()
        async with database.unit_of_work("t") as first, database.unit_of_work("t") as second:
            values = [
                (
                    await session.execute(text("SHOW hnsw.ef_search")),
                    await session.execute(text("SHOW hnsw.iterative_scan")),
                )
                for session in (first, second)
            ]

    assert [(ef.scalar(), scan.scalar()) for ef, scan in values] == [
        ("77", "relaxed_order"),
        ("77", "relaxed_order"),
    ]


async def test_the_binary_vector_codec_finds_the_same_neighbours_as_text_literals(
    client: httpx.AsyncClient, alice: dict[str, str], memory_app: FastAPI, tenant: str
) -> None:
    # Vectors go to Postgres in pgvector's binary form now; before, they went as
    # text literals cast to vector. Both must rank the same memories the same way.
    dimensions = (await client.get("/v1/memory/semantic/model", headers=alice)).json()["dimensions"]
    rng = random.Random(5)

    def unit(values: list[float]) -> list[float]:
        norm = math.sqrt(sum(v * v for v in values)) or 1.0
        return [v / norm for v in values]

    vectors = [unit([rng.gauss(0, 1) for _ in range(dimensions)]) for _ in range(40)]
    stored = [
        await store(client, alice, f"memory {i}", embedding=vector)
        for i, vector in enumerate(vectors)
    ]
    ids = {record["memory_id"] for record in stored}
    probes = [unit([v + rng.gauss(0, 0.3) for v in vectors[i]]) for i in (0, 7, 19, 33)]

    database = get_state(memory_app).require_database()
    for probe in probes:
        hits = await query(client, alice, embedding=probe, limit=10)
        literal = "[" + ",".join(repr(v) for v in probe) + "]"
        async with database.unit_of_work(tenant, "alice") as session:
            rows = await session.execute(
                text(
                    "SELECT memory_id, 1 - (embedding <=> CAST(CAST(:v AS text) AS vector)) "
                    "AS score FROM memory.semantic_memories WHERE memory_id = ANY(:ids) "
                    "ORDER BY embedding <=> CAST(CAST(:v AS text) AS vector) LIMIT 10"
                ),
                {"v": literal, "ids": list(ids)},
            )
            expected = rows.all()
        assert [hit["record"]["memory_id"] for hit in hits] == [row[0] for row in expected]
        assert [round(hit["score"], 5) for hit in hits] == [round(row[1], 5) for row in expected]


_LEFT_ON_CONNECTION = (
    "SELECT current_setting('disco.tenant_id', true), current_setting('hnsw.ef_search')"
)


async def test_a_query_wanting_more_rows_than_ef_search_gets_them_and_leaves_no_scope(
    memory_settings: Callable[..., MemorySettings], embedder: SharedEmbedder, tenant: str
) -> None:
    # A query is one statement that scopes its own transaction (and widens the HNSW
    # candidate list when it wants more rows than ef_search): neither the tenant nor
    # the wider list may stay on the pooled connection for the next user of it.
    app = create_app(
        memory_settings(
            hnsw_ef_search=10, database_pool_size=1, database_max_overflow=0, search_pool_size=1
        ),
        embedder=embedder,
    )
    headers = bearer(tenant, "alice")
    async with LifespanManager(app, startup_timeout=60):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://memory") as client:
            dimensions = (await client.get("/v1/memory/semantic/model", headers=headers)).json()[
                "dimensions"
            ]
            rng = random.Random(9)
            for i in range(30):
                await store(
                    client,
                    headers,
                    f"fact {i}",
                    embedding=[rng.gauss(0, 1) for _ in range(dimensions)],
                )
            hits = await query(
                client, headers, embedding=[rng.gauss(0, 1) for _ in range(dimensions)], limit=25
            )
        # The one connection of each pool: the search pool's ran the query.
        engine = get_state(app).require_database().engine
        async with engine.connect() as connection:
            engine_after = (await connection.execute(text(_LEFT_ON_CONNECTION))).one()
        async with MemoryState.of(app).require_search().acquire() as connection:
            search_after = await connection.fetchrow(_LEFT_ON_CONNECTION)

    assert len(hits) == 25
    assert search_after is not None
    assert tuple(search_after) in ((None, "10"), ("", "10"))
    assert tuple(engine_after) in ((None, "10"), ("", "10"))


async def test_hnsw_indexes_built_with_other_options_than_the_settings_are_named_at_start(
    memory_app: FastAPI,
) -> None:
    database = get_state(memory_app).require_database()

    as_built = await check_hnsw_options(database, m=16, ef_construction=64)
    other = await check_hnsw_options(database, m=24, ef_construction=96)

    assert as_built == []
    assert other == ["semantic_embedding", "episodic_embedding", "procedures_embedding"]


async def test_the_search_pool_answers_what_the_engine_answers_for_every_scope_and_filter(
    client: httpx.AsyncClient, memory_app: FastAPI, tenant: str, stranger: dict[str, str]
) -> None:
    # The query runs on asyncpg connections of its own; before, it ran through the
    # engine. The same statement must answer the same rows, in the same order,
    # for each user, visibility, filter, threshold and limit.
    dimensions = (await client.get("/v1/memory/semantic/model", headers=stranger)).json()[
        "dimensions"
    ]
    rng = random.Random(17)

    def vector() -> list[float]:
        return [rng.gauss(0, 1) for _ in range(dimensions)]

    users = {user: bearer(tenant, user) for user in ("alice", "bob")}
    for i in range(24):
        user = ("alice", "bob")[i % 2]
        await store(
            client,
            users[user],
            f"{user} fact {i}",
            embedding=vector(),
            visibility="public" if i % 3 == 0 else "private",
            metadata={"kind": ("note", "mail")[i % 2 == 0 and i % 4 == 0], "n": i % 5},
        )
    await store(client, stranger, "another tenant's public fact", embedding=vector(),
                visibility="public")  # fmt: skip
    probe = vector()
    bodies: list[dict[str, object]] = [
        {"embedding": probe, "limit": 10},
        {"embedding": probe, "limit": 30},
        {"embedding": probe, "limit": 10, "include_public": False},
        {"embedding": probe, "limit": 10, "filter": {"kind": "mail"}},
        {"embedding": probe, "limit": 10, "filter": {"n": 2, "kind": "note"}},
        {"embedding": probe, "limit": 10, "threshold": 0.0},
        {"embedding": probe, "limit": 10, "filter": {"kind": "nowhere"}},
    ]

    database = get_state(memory_app).require_database()
    answered = 0
    for user, headers in users.items():
        for body in bodies:
            hits = await query(client, headers, **body)
            async with database.unit_of_work(tenant, user) as session:
                rows = (
                    await session.execute(
                        _QUERY,
                        {
                            "tenant_id": tenant,
                            "user_id": user,
                            "embedding": Vector(body["embedding"]),
                            "limit": body["limit"],
                            "threshold": body.get("threshold"),
                            "filter": json.dumps(body.get("filter", {})),
                            "include_public": body.get("include_public", True),
                            "ef_search": None,
                        },
                    )
                ).all()
            assert [(h["record"]["memory_id"], round(h["score"], 6)) for h in hits] == [
                (row.memory_id, round(row.score, 6)) for row in rows
            ], (user, body)
            assert all(
                h["record"]["user_id"] == user or h["record"]["visibility"] == "public"
                for h in hits
            )
            answered += len(hits)
    assert answered > 0


async def test_a_nul_in_the_filter_is_refused_with_the_stable_error(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    # Postgres refuses the NUL in jsonb: the search pool's error is answered as the
    # engine's would be (422 nul_character), not as a 500.
    response = await client.post(
        "/v1/memory/semantic/query",
        json={"text": "anything", "filter": {"k": "a\u0000b"}},
        headers=alice,
    )

    assert response.status_code == 422
    assert error_code(response) == "nul_character"


async def test_a_search_connection_the_server_dropped_is_replaced_and_the_query_answers(
    memory_settings: Callable[..., MemorySettings], embedder: SharedEmbedder, tenant: str
) -> None:
    app = create_app(memory_settings(search_pool_size=1), embedder=embedder)
    headers = bearer(tenant, "alice")
    async with LifespanManager(app, startup_timeout=60):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://memory") as client:
            memory = await store(client, headers, "The backup runs at midnight.")
            before = await query(client, headers, text="When does the backup run?")
            search = MemoryState.of(app).require_search()
            engine = get_state(app).require_database().engine
            afters, replaced = [], []
            # A few times: what the next statement meets depends on how far the
            # client got in reading the server's goodbye.
            for _ in range(3):
                async with search.acquire() as connection:
                    pid = connection.get_server_pid()
                async with engine.connect() as connection:
                    await connection.execute(
                        text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}
                    )
                afters.append(await query(client, headers, text="When does the backup run?"))
                async with search.acquire() as connection:
                    replaced.append(connection.get_server_pid() != pid)

    assert [hit["record"]["memory_id"] for hit in before] == [memory["memory_id"]]
    assert afters == [before] * 3
    assert replaced == [True] * 3
