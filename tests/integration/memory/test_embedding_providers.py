"""Embedding providers: the OpenAI-compatible one against a local fake API; start-up checks."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from disco_memory import MemorySettings, create_app
from disco_memory.embeddings import (
    EmbeddingError,
    LocalEmbeddingProvider,
    OpenAIEmbeddingProvider,
)
from disco_memory.startup import VectorDimensionMismatch
from tests.fixtures.memory import SharedEmbedder
from tests.integration.memory.conftest import error_code, serve

DIMENSIONS = 384


def bag_of_words(text: str) -> list[float]:
    """A deterministic toy embedding: hashed words, normalised (shared words -> similar)."""
    vector = [0.0] * DIMENSIONS
    for word in text.lower().split():
        vector[int(hashlib.sha256(word.strip(".,?!").encode()).hexdigest(), 16) % DIMENSIONS] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class FakeOpenAI:
    """An app speaking ``POST /v1/embeddings`` like OpenAI, recording what it was sent."""

    def __init__(self, *, dimensions: int = DIMENSIONS, fail: bool = False) -> None:
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.dimensions = dimensions
        self.fail = fail
        self.app = FastAPI()

        @self.app.post("/v1/embeddings")
        async def embeddings(request: Request) -> JSONResponse:
            body = await request.json()
            self.requests.append(body)
            self.authorizations.append(request.headers.get("authorization"))
            if self.fail:
                return JSONResponse({"error": {"message": "overloaded"}}, status_code=503)
            data = [
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": bag_of_words(text)[: self.dimensions],
                }
                for i, text in enumerate(body["input"])
            ]
            # Answer out of order, as the API allows: the provider must use `index`.
            return JSONResponse(
                {"object": "list", "data": list(reversed(data)), "model": body["model"]}
            )

    def provider(self, **options: Any) -> OpenAIEmbeddingProvider:
        return OpenAIEmbeddingProvider(
            base_url="http://fake-openai.test/v1",
            model="text-embedding-3-small",
            dimensions=DIMENSIONS,
            api_key="sk-test",
            transport=httpx.ASGITransport(app=self.app),
            **options,
        )


async def test_the_openai_provider_batches_keeps_order_and_sends_the_key() -> None:
    fake = FakeOpenAI()
    provider = fake.provider(batch_size=2)
    await provider.start()
    try:
        vectors = await provider.embed(["a b", "c d", "e f"])
    finally:
        await provider.stop()

    assert vectors == [bag_of_words("a b"), bag_of_words("c d"), bag_of_words("e f")]
    assert [len(r["input"]) for r in fake.requests] == [2, 1]
    assert fake.requests[0]["model"] == "text-embedding-3-small"
    assert "dimensions" not in fake.requests[0]
    assert fake.authorizations == ["Bearer sk-test", "Bearer sk-test"]


async def test_the_openai_provider_refuses_vectors_of_another_dimension() -> None:
    provider = FakeOpenAI(dimensions=12).provider()
    await provider.start()
    try:
        with pytest.raises(EmbeddingError, match="12 dimensions"):
            await provider.embed(["hello"])
    finally:
        await provider.stop()


async def test_the_service_stores_and_finds_memories_with_the_openai_provider(
    memory_settings: Callable[..., MemorySettings], alice: dict[str, str]
) -> None:
    fake = FakeOpenAI()
    app = create_app(memory_settings(embedding_provider="openai"), embedder=fake.provider())
    async with serve(app) as client:
        for text in ("green apples are sour", "the train leaves at noon"):
            await client.put("/v1/memory/semantic", json={"content": text}, headers=alice)
        hits = await client.post(
            "/v1/memory/semantic/query", json={"text": "when does the train leave"}, headers=alice
        )
        model = await client.get("/v1/memory/semantic/model", headers=alice)

    assert hits.json()[0]["record"]["content"] == "the train leaves at noon"
    assert model.json() == {"model": "text-embedding-3-small", "dimensions": DIMENSIONS}


async def test_a_failing_embeddings_api_is_a_503_and_nothing_is_written(
    memory_settings: Callable[..., MemorySettings], alice: dict[str, str]
) -> None:
    fake = FakeOpenAI(fail=True)
    app = create_app(memory_settings(embedding_provider="openai"), embedder=fake.provider())
    async with serve(app) as client:
        stored = await client.put(
            "/v1/memory/semantic", json={"content": "never stored"}, headers=alice
        )
        fake.fail = False
        hits = await client.post(
            "/v1/memory/semantic/query", json={"text": "never stored"}, headers=alice
        )

    assert stored.status_code == 503
    assert error_code(stored) == "embedding_unavailable"
    assert hits.json() == []


async def test_the_service_refuses_to_start_when_the_model_dimension_differs_from_the_columns(
    memory_settings: Callable[..., MemorySettings],
) -> None:
    fake = FakeOpenAI(dimensions=12)
    provider = OpenAIEmbeddingProvider(
        base_url="http://fake-openai.test/v1",
        model="tiny",
        dimensions=12,
        transport=httpx.ASGITransport(app=fake.app),
    )
    app = create_app(memory_settings(embedding_provider="openai"), embedder=provider)

    with pytest.raises(VectorDimensionMismatch, match=r"vector\(384\).*12-dimensional"):
        async with LifespanManager(app, startup_timeout=60):
            pass


def test_the_local_model_cannot_be_configured_with_another_dimension(
    memory_settings: Callable[..., MemorySettings],
) -> None:
    with pytest.raises(ValueError, match="384-dimensional"):
        create_app(memory_settings(embedding_dimensions=768))


async def test_the_bundled_model_embeds_offline_with_normalised_384_dimension_vectors(
    embedder: SharedEmbedder,
) -> None:
    # The session's LocalEmbeddingProvider: started once, stopped when the session ends.
    assert isinstance(embedder.provider, LocalEmbeddingProvider)

    vectors = await embedder.embed(["hello world", "bonjour le monde", "x" * 10_000])

    assert [len(v) for v in vectors] == [384, 384, 384]
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1.0) < 1e-3 for v in vectors)


async def test_a_repeated_search_text_is_embedded_once(
    memory_settings: Callable[..., MemorySettings], alice: dict[str, str]
) -> None:
    fake = FakeOpenAI()
    app = create_app(memory_settings(embedding_provider="openai"), embedder=fake.provider())
    async with serve(app) as client:
        await client.put("/v1/memory/semantic", json={"content": "trains run late"}, headers=alice)
        answers = [
            await client.post(
                "/v1/memory/semantic/query", json={"text": "late trains"}, headers=alice
            )
            for _ in range(3)
        ]

    assert [a.json()[0]["record"]["content"] for a in answers] == ["trains run late"] * 3
    assert [r["input"] for r in fake.requests] == [["trains run late"], ["late trains"]]
