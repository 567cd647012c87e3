"""The production option: any OpenAI-compatible ``POST {base_url}/embeddings`` API.

OpenAI, Azure OpenAI (through its compatible endpoint), vLLM, Ollama, LiteLLM,
text-embeddings-inference and others speak it. Texts are sent in batches of
``batch_size``; the answer's ``data[i].index`` puts vectors back in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from disco_memory.embeddings.base import EmbeddingError, EmbeddingPurpose, check_vectors

__all__ = ["OpenAIEmbeddingProvider"]


class _Item(BaseModel):
    index: int
    embedding: list[float]


class _Answer(BaseModel):
    data: list[_Item]


class OpenAIEmbeddingProvider:
    """Embeds with an OpenAI-compatible embeddings API.

    Args:
        base_url: the API's base, e.g. ``https://api.openai.com/v1``.
        model: the model name sent as ``model``.
        dimensions: the vector length this deployment stores.
        api_key: sent as ``Authorization: Bearer``; none for local servers.
        request_dimensions: send ``dimensions`` (for models that can shorten vectors).
        batch_size: texts per request.
        timeout_seconds: per request.
        max_chars: only the first this-many characters of a text are sent.
        transport: an httpx transport (tests use an in-process app).
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        dimensions: int,
        api_key: str | None = None,
        request_dimensions: bool = False,
        batch_size: int = 64,
        timeout_seconds: float = 30.0,
        max_chars: int = 8000,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._model = model
        self._dimensions = dimensions
        self._api_key = api_key
        self._request_dimensions = request_dimensions
        self._batch_size = batch_size
        self._timeout = timeout_seconds
        self._max_chars = max_chars
        self._transport = transport
        self._http: httpx.AsyncClient | None = None

    @property
    def model_name(self) -> str:
        return self._model

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def start(self) -> None:
        if self._http is None:
            headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
            self._http = httpx.AsyncClient(
                base_url=self._base_url,
                timeout=self._timeout,
                headers=headers,
                transport=self._transport,
            )

    async def stop(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    async def embed(
        self, texts: Sequence[str], *, purpose: EmbeddingPurpose = EmbeddingPurpose.DOCUMENT
    ) -> list[list[float]]:
        # OpenAI-style models are symmetric: a query is embedded like a document.
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = [text[: self._max_chars] for text in texts[start : start + self._batch_size]]
            vectors.extend(await self._embed_batch(batch))
        return vectors

    async def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        http = self._http
        if http is None:
            raise EmbeddingError("the embeddings API client is not started")
        body: dict[str, Any] = {"model": self._model, "input": texts, "encoding_format": "float"}
        if self._request_dimensions:
            body["dimensions"] = self._dimensions
        where = f"{self._base_url}/embeddings"
        try:
            response = await http.post("/embeddings", json=body)
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"{where} could not be reached: {type(exc).__name__}") from exc
        if response.status_code != 200:
            raise EmbeddingError(f"{where} answered {response.status_code}: {response.text[:300]}")
        try:
            answer = _Answer.model_validate_json(response.content)
        except ValidationError as exc:
            raise EmbeddingError(
                f"{where} answered something that is not an embeddings list"
            ) from exc
        ordered = sorted(answer.data, key=lambda item: item.index)
        if [item.index for item in ordered] != list(range(len(texts))):
            raise EmbeddingError(
                f"{where} answered indexes that do not match the {len(texts)} inputs"
            )
        return check_vectors(
            [item.embedding for item in ordered],
            count=len(texts),
            dimensions=self._dimensions,
            model=self._model,
        )
