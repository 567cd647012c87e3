"""What the registry holds while it runs: the kit's state and the heartbeat batcher."""

from __future__ import annotations

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
            lifespan listens for changes (:func:`disco_registry.discovery.lifespan`).
    """

    def __init__(self, settings: RegistrySettings) -> None:
        super().__init__(settings)
        self.heartbeats = HeartbeatBatcher(self)
        self.discovery_cache = DiscoveryCache(
            max_bytes=settings.discovery_cache_bytes,
            max_age_seconds=settings.discovery_cache_seconds,
        )
        DiscoveryCacheMetrics(self.discovery_cache, self.metrics.registry)
