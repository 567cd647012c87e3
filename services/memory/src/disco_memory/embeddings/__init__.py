"""Embedding providers: text in, vectors out.

:class:`EmbeddingProvider` is the interface; :class:`LocalEmbeddingProvider`
(the bundled multilingual-e5-small model, offline) is the default and
:class:`OpenAIEmbeddingProvider` (an OpenAI-compatible ``/embeddings`` API) the
production option. :func:`create_provider` picks one from the settings.
"""

from disco_memory.embeddings.base import (
    EmbeddingError,
    EmbeddingProvider,
    EmbeddingPurpose,
    check_vectors,
)
from disco_memory.embeddings.local import LocalEmbeddingProvider
from disco_memory.embeddings.openai import OpenAIEmbeddingProvider
from disco_memory.embeddings.provider import create_provider

__all__ = [
    "EmbeddingError",
    "EmbeddingProvider",
    "EmbeddingPurpose",
    "LocalEmbeddingProvider",
    "OpenAIEmbeddingProvider",
    "check_vectors",
    "create_provider",
]
