"""What the memory service holds while it runs: the kit's state and its runtime."""

from __future__ import annotations

from disco_memory.embeddings import EmbeddingProvider, create_provider
from disco_memory.runtime import MemoryRuntime
from disco_memory.settings import MemorySettings
from disco_service import ServiceState

__all__ = ["MemoryState"]


class MemoryState(ServiceState[MemorySettings]):
    """The memory app's state (``app.state.disco``), built by :func:`disco_memory.create_app`.

    Args:
        settings: the service's settings.
        embedder: replaces the embedding provider the settings name.

    Attributes:
        runtime: the embedding provider (started in the lifespan) and the query cache.
    """

    def __init__(
        self, settings: MemorySettings, *, embedder: EmbeddingProvider | None = None
    ) -> None:
        super().__init__(settings)
        self.runtime = MemoryRuntime(
            settings=settings, embedder=embedder or create_provider(settings)
        )
