"""What the gateway holds while it runs: the kit's state, typed with its settings."""

from __future__ import annotations

from disco_gateway.settings import GatewaySettings
from disco_service import ServiceState

__all__ = ["GatewayState"]


class GatewayState(ServiceState[GatewaySettings]):
    """The gateway app's state (``app.state.disco``), built by :func:`disco_gateway.create_app`.

    Long-lived objects the gateway's routes need (stream hubs, the A2A task
    store) belong here.
    """
