"""What the memory service holds while it runs: the kit's state and its runtime."""

from __future__ import annotations

from disco_memory.embeddings import EmbeddingProvider, create_provider
from disco_memory.expiry import SweepMetrics
from disco_memory.runtime import MemoryRuntime
from disco_memory.semantic.repository import SearchPool
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
        search: the similarity query's connections (opened in the lifespan).
        sweep_metrics: what the TTL sweeper deleted.
    """

    def __init__(
        self, settings: MemorySettings, *, embedder: EmbeddingProvider | None = None
    ) -> None:
        super().__init__(settings)
        self.runtime = MemoryRuntime(
            settings=settings, embedder=embedder or create_provider(settings)
        )
        self.search: SearchPool | None = None
        self.sweep_metrics = SweepMetrics(self.metrics.registry)

    def require_search(self) -> SearchPool:
        """The similarity query's connections, or an error saying the app is not running."""
        if self.search is None:
            raise RuntimeError("the memory app's search pool opens in its lifespan: run it there")
        return self.search
