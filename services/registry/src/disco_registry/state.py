"""What the registry holds while it runs: the kit's state and the heartbeat batcher."""

from __future__ import annotations

from disco_registry.asyncapi.cache import AsyncApiCache
from disco_registry.discovery.cache import DiscoveryCache
from disco_registry.discovery.metrics import DiscoveryCacheMetrics
from disco_registry.liveness.batcher import HeartbeatBatcher
from disco_registry.settings import RegistrySettings
from disco_service import ServiceState

__all__ = ["RegistryState"]


class RegistryState(ServiceState[RegistrySettings]):
    """The registry app's state (``app.state.disco``), built by :func:`disco_registry.create_app`.

    Attributes:
        heartbeats: group-commits heartbeats; it uses the database once the
            lifespan started it.
        discovery_cache: discovery answers kept until a change; kept only while the
            lifespan listens for changes (:func:`disco_registry.changes.changes_lifespan`).
        asyncapi_cache: AsyncAPI documents kept until a change, on the same terms.
    """

    def __init__(self, settings: RegistrySettings) -> None:
        super().__init__(settings)
        self.heartbeats = HeartbeatBatcher(self)
        self.discovery_cache = DiscoveryCache(
            max_bytes=settings.discovery_cache_bytes,
            max_age_seconds=settings.discovery_cache_seconds,
        )
        DiscoveryCacheMetrics(self.discovery_cache, self.metrics.registry)
        self.asyncapi_cache = AsyncApiCache(
            max_bytes=settings.asyncapi_cache_bytes,
            max_age_seconds=settings.asyncapi_cache_seconds,
        )

    def wrote(self, tenant_id: str, *, public: bool) -> None:
        """A write on this instance committed: drop the answers it may change (discovery
        answers and documents), before its response."""
        self.discovery_cache.wrote(tenant_id, public=public)
        self.asyncapi_cache.wrote(tenant_id, public=public)

    def wrote_schema(self, tenant_id: str) -> None:
        """A schema version was added on this instance: drop the tenant's documents."""
        self.asyncapi_cache.changed(tenant_id)
