"""The memory service's embedding runtime: its provider and a cache of query vectors.

Held by :class:`disco_memory.state.MemoryState`, started in the lifespan, and
reached from routes through :data:`disco_memory.deps.RuntimeDep`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog
from pgvector import Vector

from disco_memory._shared import EmbeddingUnavailable, as_vector
from disco_memory.embeddings import EmbeddingError, EmbeddingProvider, EmbeddingPurpose
from disco_memory.settings import MemorySettings
from disco_service import UnprocessableEntity

__all__ = ["MemoryRuntime"]

log = structlog.get_logger("disco_memory")


@dataclass
class MemoryRuntime:
    """Embeds texts for the memory families (503 when the provider fails)."""

    settings: MemorySettings
    embedder: EmbeddingProvider
    query_cache_size: int = 1024
    _query_cache: OrderedDict[str, Vector] = field(default_factory=OrderedDict, repr=False)

    async def embed_query(self, text: str) -> Vector:
        """A search text's vector (a query parameter), from a small LRU cache when seen
        recently (agents tend to repeat their retrieval questions)."""
        cached = self._query_cache.get(text)
        if cached is not None:
            self._query_cache.move_to_end(text)
            return cached
        vector = await self.embed_one(text, purpose=EmbeddingPurpose.QUERY)
        self._query_cache[text] = vector
        if len(self._query_cache) > self.query_cache_size:
            self._query_cache.popitem(last=False)
        return vector

    async def embed(
        self, texts: Sequence[str], *, purpose: EmbeddingPurpose = EmbeddingPurpose.DOCUMENT
    ) -> list[Vector]:
        """The texts' vectors as query parameters (503 when the provider fails)."""
        try:
            vectors = await self.embedder.embed(texts, purpose=purpose)
        except EmbeddingError as exc:
            log.warning("embedding_failed", error=str(exc), model=self.embedder.model_name)
            raise EmbeddingUnavailable(
                f"the embedding model could not embed the text, nothing was written: {exc}"
            ) from exc
        return [as_vector(vector) for vector in vectors]

    async def embed_one(
        self, text: str, *, purpose: EmbeddingPurpose = EmbeddingPurpose.DOCUMENT
    ) -> Vector:
        """One text's vector as a query parameter."""
        return (await self.embed([text], purpose=purpose))[0]

    def given_vector(self, vector: Sequence[float], *, field: str) -> Vector:
        """A caller's own vector as a query parameter; 422 when its dimension is not the
        deployment's."""
        if len(vector) != self.embedder.dimensions:
            raise UnprocessableEntity(
                f"{field} has {len(vector)} dimensions; this deployment stores "
                f"{self.embedder.dimensions} ({self.embedder.model_name}); see "
                "GET /v1/memory/semantic/model",
                details={"dimensions": len(vector), "expected": self.embedder.dimensions},
            )
        return as_vector(vector)
