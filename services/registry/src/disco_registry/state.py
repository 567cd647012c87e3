"""What the registry holds while it runs: the kit's state and the heartbeat batcher."""

from __future__ import annotations

from disco_registry.liveness.batcher import HeartbeatBatcher
from disco_registry.settings import RegistrySettings
from disco_service import ServiceState

__all__ = ["RegistryState"]


class RegistryState(ServiceState[RegistrySettings]):
    """The registry app's state (``app.state.disco``), built by :func:`disco_registry.create_app`.

    Attributes:
        heartbeats: group-commits heartbeats; it uses the database once the
            lifespan started it.
    """

    def __init__(self, settings: RegistrySettings) -> None:
        super().__init__(settings)
        self.heartbeats = HeartbeatBatcher(self)
