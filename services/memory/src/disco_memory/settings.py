"""The memory service's settings."""

from __future__ import annotations

from typing import ClassVar, Literal, Self

from pydantic import AliasChoices, Field, SecretStr, model_validator

from disco_memory.hnsw import check_build_options
from disco_service import ServiceSettings

__all__ = ["MemorySettings"]

# The largest request: an 8 MiB full snapshot plus its 512 KiB slim one and the
# JSON around them.
_DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024


def _env(name: str) -> AliasChoices:
    return AliasChoices(f"DISCO_MEMORY_{name}")


class MemorySettings(ServiceSettings):
    """Settings of the memory service: the shared ``DISCO_*`` ones, plus its own.

    Its own variables start with ``DISCO_MEMORY_``: the port, the embedding
    provider and the TTL sweeper.

    Embeddings. ``local`` (the default) runs the bundled multilingual-e5-small
    model (4-bit, 384 dimensions) in-process: no network, no download. ``openai``
    calls an OpenAI-compatible ``POST {base_url}/embeddings``. The vector
    columns have one dimension per deployment (set when the migration created
    them from ``DISCO_MEMORY_EMBEDDING_DIMENSIONS``); the service refuses to
    start when the provider's dimension differs.
    """

    service_name: ClassVar[str] = "memory"

    port: int = Field(
        default=8082,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("DISCO_MEMORY_PORT"),
        description="HTTP port (DISCO_MEMORY_PORT).",
    )
    max_body_bytes: int = Field(
        default=_DEFAULT_MAX_BODY_BYTES,
        ge=1024,
        validation_alias=_env("MAX_BODY_BYTES"),
        description="Largest request body (DISCO_MEMORY_MAX_BODY_BYTES); snapshots need ~9 MiB.",
    )

    embedding_provider: Literal["local", "openai"] = Field(
        default="local",
        validation_alias=_env("EMBEDDING_PROVIDER"),
        description="`local` (bundled model, offline) or `openai` (an OpenAI-compatible API).",
    )
    embedding_dimensions: int = Field(
        default=384,
        ge=1,
        le=2000,
        validation_alias=_env("EMBEDDING_DIMENSIONS"),
        description="Vector dimension: the model's, and the columns' (set at migration).",
    )
    embedding_model: str = Field(
        default="text-embedding-3-small",
        min_length=1,
        validation_alias=_env("EMBEDDING_MODEL"),
        description="The model name sent to an OpenAI-compatible API.",
    )
    embedding_base_url: str = Field(
        default="https://api.openai.com/v1",
        validation_alias=_env("EMBEDDING_BASE_URL"),
        description="Base URL of the OpenAI-compatible API (`/embeddings` is appended).",
    )
    embedding_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=_env("EMBEDDING_API_KEY"),
        description="Bearer key for the OpenAI-compatible API.",
    )
    embedding_request_dimensions: bool = Field(
        default=False,
        validation_alias=_env("EMBEDDING_REQUEST_DIMENSIONS"),
        description="Send `dimensions` in the request (models that can shorten vectors).",
    )
    embedding_batch_size: int = Field(
        default=64, ge=1, le=2048, validation_alias=_env("EMBEDDING_BATCH_SIZE")
    )
    embedding_timeout_seconds: float = Field(
        default=30.0, gt=0, le=600, validation_alias=_env("EMBEDDING_TIMEOUT_SECONDS")
    )
    embedding_threads: int = Field(
        default=1,
        ge=1,
        le=64,
        validation_alias=_env("EMBEDDING_THREADS"),
        description="CPU threads of the local model (1 keeps request latency predictable).",
    )
    embedding_max_chars: int = Field(
        default=2000,
        ge=100,
        le=100_000,
        validation_alias=_env("EMBEDDING_MAX_CHARS"),
        description="Only the first this-many characters of a text are embedded.",
    )

    hnsw_ef_search: int = Field(
        default=64,
        ge=1,
        le=1000,
        validation_alias=_env("HNSW_EF_SEARCH"),
        description="HNSW candidate list size per query: recall against speed.",
    )
    hnsw_m: int = Field(
        default=16,
        ge=2,
        le=100,
        validation_alias=_env("HNSW_M"),
        description=(
            "HNSW graph degree of the vector indexes (built by `disco db upgrade`; the "
            "service warns at start when an index was built otherwise)."
        ),
    )
    hnsw_ef_construction: int = Field(
        default=64,
        ge=4,
        le=1000,
        validation_alias=_env("HNSW_EF_CONSTRUCTION"),
        description="HNSW candidate list size while building the vector indexes (>= 2 * m).",
    )
    search_pool_size: int | None = Field(
        default=None,
        ge=1,
        le=200,
        validation_alias=_env("SEARCH_POOL_SIZE"),
        description=(
            "Connections kept for similarity queries by vector or text (their own asyncpg "
            "pool, opened as needed); unset means DISCO_DATABASE_POOL_SIZE."
        ),
    )
    ttl_sweep_interval_seconds: float = Field(
        default=30.0,
        gt=0,
        validation_alias=_env("TTL_SWEEP_INTERVAL_SECONDS"),
        description=(
            "How often expired working memory, task contexts, dedup marks and step records "
            "are deleted."
        ),
    )
    ttl_sweep_batch_size: int = Field(
        default=1000,
        ge=1,
        le=100_000,
        validation_alias=_env("TTL_SWEEP_BATCH_SIZE"),
        description="The most rows of each table one sweep transaction deletes.",
    )
    ttl_sweep_max_batches: int = Field(
        default=100,
        ge=1,
        le=100_000,
        validation_alias=_env("TTL_SWEEP_MAX_BATCHES"),
        description="The most batches one sweep round deletes; the rest waits for the next.",
    )

    @model_validator(mode="after")
    def _hnsw_build_options(self) -> Self:
        check_build_options(self.hnsw_m, self.hnsw_ef_construction)
        return self

    @model_validator(mode="after")
    def _openai_needs_a_key_in_production(self) -> Self:
        if (
            self.env == "production"
            and self.embedding_provider == "openai"
            and self.embedding_api_key is None
            and self.embedding_base_url.startswith("https://api.openai.com")
        ):
            raise ValueError(
                "DISCO_MEMORY_EMBEDDING_PROVIDER=openai needs DISCO_MEMORY_EMBEDDING_API_KEY"
            )
        return self
