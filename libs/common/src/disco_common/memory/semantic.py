"""Semantic memory (``/v1/memory/semantic``): facts found by similarity of meaning."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import Field, JsonValue, StringConstraints, model_validator

from disco_common._base import Body, Metadata, Record
from disco_common.ids import Id, UtcDatetime
from disco_common.memory._shared import (
    CONTENT_MAX_CHARS,
    QUERY_TEXT_MAX_CHARS,
    MemoryVisibility,
)

__all__ = [
    "EmbeddingModelInfo",
    "MetadataFilter",
    "SemanticHit",
    "SemanticMemoryRecord",
    "SemanticMemoryUpsert",
    "SemanticQuery",
]

_MetadataKey = Annotated[
    str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
]

MetadataFilter = Annotated[
    dict[_MetadataKey, str | int | float | bool | None],
    Field(
        max_length=20,
        description=(
            "Equality on top-level metadata keys, all of which must match, e.g. "
            '`{"source": "wiki", "year": 2024}`. Values are JSON scalars; a key with value '
            "null matches records where that key is null."
        ),
    ),
]
"""A small, safe metadata filter: ``{key: scalar}`` equality, ANDed (JSONB containment)."""


class SemanticMemoryUpsert(Body):
    """Store a fact for similarity search (``PUT /v1/memory/semantic``).

    Upserts by ``external_id`` when given, else by the content's hash
    (``disco_common.canonical.text_hash``), so storing the same text twice keeps one memory.
    """

    content: str = Field(min_length=1, max_length=CONTENT_MAX_CHARS, description="The text.")
    external_id: Id | None = Field(default=None, description="Your id for it (upsert key).")
    visibility: MemoryVisibility = Field(default=MemoryVisibility.PRIVATE)
    metadata: Metadata = Field(default_factory=dict, description="Filterable attributes.")
    embedding: list[float] | None = Field(
        default=None,
        max_length=2000,
        description=(
            "Your own vector for the content (made with the deployment's model, see "
            "`GET /v1/memory/semantic/model`); the service embeds the content when absent."
        ),
    )


class SemanticMemoryRecord(Record):
    """A stored semantic memory (its vector stays in the service)."""

    memory_id: Id
    external_id: Id | None = None
    content: str
    content_hash: str = Field(description="SHA-256 of the content (UTF-8).")
    visibility: MemoryVisibility
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    user_id: Id
    created_at: UtcDatetime
    updated_at: UtcDatetime


class SemanticQuery(Body):
    """Find memories similar to a text (``POST /v1/memory/semantic/query``).

    Give ``text`` (embedded by the service) or ``embedding`` (your own vector).
    """

    text: str | None = Field(
        default=None, min_length=1, max_length=QUERY_TEXT_MAX_CHARS, description="What to look for."
    )
    embedding: list[float] | None = Field(
        default=None, max_length=2000, description="Look for this vector instead of a text."
    )
    limit: int = Field(default=10, ge=1, le=100)
    threshold: float | None = Field(
        default=None, ge=-1.0, le=1.0, description="Only hits with at least this cosine similarity."
    )
    filter: MetadataFilter = Field(default_factory=dict)
    include_public: bool = Field(
        default=True, description="Also search the tenant's public memories."
    )

    @model_validator(mode="after")
    def _text_or_embedding(self) -> Self:
        if (self.text is None) == (self.embedding is None):
            raise ValueError("give exactly one of `text` and `embedding`")
        return self


class EmbeddingModelInfo(Record):
    """The model that embeds memories in this deployment (``GET /v1/memory/semantic/model``)."""

    model: str = Field(description="The model's name.")
    dimensions: int = Field(ge=1, description="The length of its vectors.")


class SemanticHit(Record):
    """A memory and how similar it is to the query."""

    record: SemanticMemoryRecord
    score: float = Field(description="Cosine similarity, higher is closer (at most 1).")
