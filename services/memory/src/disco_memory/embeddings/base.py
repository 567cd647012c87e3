"""The embedding provider interface."""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol, runtime_checkable

__all__ = ["EmbeddingError", "EmbeddingProvider", "EmbeddingPurpose", "check_vectors"]


class EmbeddingPurpose(StrEnum):
    """What a text is embedded for; asymmetric models (E5) embed the two differently."""

    DOCUMENT = "document"
    """Something stored and searched (a memory, a turn, a procedure)."""
    QUERY = "query"
    """What a search looks for."""


class EmbeddingError(Exception):
    """The provider could not embed (unreachable, refused, or answered nonsense)."""


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns texts into vectors of :attr:`dimensions` floats.

    Implementations keep the event loop free: CPU work runs in a thread,
    network calls are async. ``start``/``stop`` are idempotent.
    """

    @property
    def model_name(self) -> str:
        """The model's name (stored beside every vector it made)."""
        ...

    @property
    def dimensions(self) -> int:
        """The length of every vector it returns."""
        ...

    async def start(self) -> None:
        """Load the model or open the connection pool."""
        ...

    async def stop(self) -> None:
        """Release what :meth:`start` took."""
        ...

    async def embed(
        self, texts: Sequence[str], *, purpose: EmbeddingPurpose = EmbeddingPurpose.DOCUMENT
    ) -> list[list[float]]:
        """One vector per text, in order.

        Raises:
            EmbeddingError: the texts could not be embedded.
        """
        ...


def check_vectors(
    vectors: Sequence[Sequence[float]], *, count: int, dimensions: int, model: str
) -> list[list[float]]:
    """``vectors`` as lists, after checking their number, length and values.

    Raises:
        EmbeddingError: wrong count or dimension, or a NaN/infinite value.
    """
    if len(vectors) != count:
        raise EmbeddingError(f"{model} returned {len(vectors)} vectors for {count} texts")
    checked: list[list[float]] = []
    for vector in vectors:
        values = [float(x) for x in vector]
        if len(values) != dimensions:
            raise EmbeddingError(
                f"{model} returned a vector of {len(values)} dimensions; this deployment stores "
                f"{dimensions} (DISCO_MEMORY_EMBEDDING_DIMENSIONS)"
            )
        if not all(math.isfinite(x) for x in values):
            raise EmbeddingError(f"{model} returned a vector with NaN or infinite values")
        checked.append(values)
    return checked
