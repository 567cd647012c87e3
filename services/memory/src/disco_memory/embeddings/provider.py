"""Building the configured provider."""

from __future__ import annotations

from disco_memory.embeddings.base import EmbeddingProvider
from disco_memory.embeddings.local import DIMENSIONS, LocalEmbeddingProvider
from disco_memory.embeddings.openai import OpenAIEmbeddingProvider
from disco_memory.settings import MemorySettings

__all__ = ["create_provider"]


def create_provider(settings: MemorySettings) -> EmbeddingProvider:
    """The provider ``settings`` name (not started).

    Raises:
        ValueError: the local model was chosen with another dimension than its 384.
    """
    if settings.embedding_provider == "local":
        if settings.embedding_dimensions != DIMENSIONS:
            raise ValueError(
                f"the bundled model makes {DIMENSIONS}-dimensional vectors but "
                f"DISCO_MEMORY_EMBEDDING_DIMENSIONS={settings.embedding_dimensions}: unset it, "
                "or choose DISCO_MEMORY_EMBEDDING_PROVIDER=openai with a model of that dimension"
            )
        return LocalEmbeddingProvider(
            threads=settings.embedding_threads, max_chars=settings.embedding_max_chars
        )
    key = settings.embedding_api_key.get_secret_value() if settings.embedding_api_key else None
    return OpenAIEmbeddingProvider(
        base_url=settings.embedding_base_url,
        model=settings.embedding_model,
        dimensions=settings.embedding_dimensions,
        api_key=key,
        request_dimensions=settings.embedding_request_dimensions,
        batch_size=settings.embedding_batch_size,
        timeout_seconds=settings.embedding_timeout_seconds,
        max_chars=max(settings.embedding_max_chars, 8000),
    )
