"""Semantic memory: upsert (by external id or content hash), similarity query."""

from __future__ import annotations

from pydantic import TypeAdapter

from disco_common.canonical import text_hash
from disco_common.ids import new_id
from disco_common.memory import (
    METADATA_MAX_BYTES,
    EmbeddingModelInfo,
    MemoryVisibility,
    SemanticHit,
    SemanticMemoryRecord,
    SemanticMemoryUpsert,
    SemanticQuery,
)
from disco_memory._shared import encoded_json, limited_json
from disco_memory.runtime import MemoryRuntime
from disco_memory.semantic.repository import SemanticRepository, SemanticSearch

__all__ = ["delete_memory", "get_memory", "model_info", "query", "upsert"]

_HITS = TypeAdapter(list[SemanticHit])


async def upsert(
    repository: SemanticRepository, runtime: MemoryRuntime, body: SemanticMemoryUpsert
) -> SemanticMemoryRecord:
    """Store a memory, or update the one with the same external id (else same content).

    The content is embedded only when it is new or changed (or the caller's own
    vector is used).

    Raises:
        UnprocessableEntity: the caller's vector has the wrong dimension.
        PayloadTooLarge: the metadata is over 64 KiB encoded.
        EmbeddingUnavailable: the model could not embed the content.
    """
    metadata_json = limited_json(body.metadata, limit=METADATA_MAX_BYTES, what="the metadata")
    content_hash = text_hash(body.content)
    given = (
        runtime.given_vector(body.embedding, field="embedding")
        if body.embedding is not None
        else None
    )
    existing = await repository.find_existing(
        external_id=body.external_id, content_hash=content_hash
    )
    is_public = body.visibility is MemoryVisibility.PUBLIC
    model = runtime.embedder.model_name
    if existing is None:
        embedding = given or await runtime.embed_one(body.content)
        row = await repository.insert(
            new_id(),
            external_id=body.external_id,
            content=body.content,
            content_hash=content_hash,
            is_public=is_public,
            metadata_json=metadata_json,
            embedding=embedding,
            model=model,
        )
    else:
        embedding_or_none = given
        if embedding_or_none is None and existing["content_hash"] != content_hash:
            embedding_or_none = await runtime.embed_one(body.content)
        row = await repository.update(
            existing["memory_id"],
            content=body.content,
            content_hash=content_hash,
            is_public=is_public,
            metadata_json=metadata_json,
            embedding=embedding_or_none,
            model=model if embedding_or_none is not None else None,
        )
    return SemanticMemoryRecord.model_validate(dict(row))


async def query(
    search: SemanticSearch, runtime: MemoryRuntime, body: SemanticQuery
) -> list[SemanticHit]:
    """The memories nearest to the query, best first, with cosine similarity as score."""
    if body.embedding is not None:
        embedding = runtime.given_vector(body.embedding, field="embedding")
    else:
        assert body.text is not None
        embedding = await runtime.embed_query(body.text)
    rows = await search.query(
        embedding=embedding,
        limit=body.limit,
        threshold=body.threshold,
        filter_json=encoded_json(body.filter),
        include_public=body.include_public,
        # A wider candidate list when the query wants more rows than the default.
        ef_search=body.limit if body.limit > runtime.settings.hnsw_ef_search else None,
    )
    # One validation call for the whole answer rather than two models per row.
    return _HITS.validate_python([{"record": row, "score": float(row["score"])} for row in rows])


async def get_memory(repository: SemanticRepository, memory_id: str) -> SemanticMemoryRecord | None:
    """A memory the caller may read (its own, or a public one of the tenant), or None."""
    row = await repository.get(memory_id)
    return SemanticMemoryRecord.model_validate(dict(row)) if row is not None else None


async def delete_memory(repository: SemanticRepository, memory_id: str) -> bool:
    """Delete one of the caller's memories; whether it was there."""
    return await repository.delete(memory_id)


def model_info(runtime: MemoryRuntime) -> EmbeddingModelInfo:
    """The model the deployment embeds with."""
    return EmbeddingModelInfo(
        model=runtime.embedder.model_name, dimensions=runtime.embedder.dimensions
    )
